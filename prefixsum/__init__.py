"""prefixsum: parallel prefix sums (scans) and tridiagonal solvers with numba.cuda, for teaching.

Importing the package picks the device: a usable CUDA GPU, otherwise numba's CUDA simulator
(with the package's stricter, faster classroom simulator :mod:`prefixsum.sim` on top). A
``NUMBA_ENABLE_CUDASIM`` of 0 or 1 set by the user is obeyed.

The layers (ARCHITECTURE.md): :mod:`prefixsum.core` (device choice, limits, poison),
:mod:`prefixsum.primitives` (warp and block device functions), :mod:`prefixsum.scans` and
:mod:`prefixsum.tridiag` (the algorithms), :mod:`prefixsum.classroom`
(simulator, tracer, checker, pictures, mutants, students' versions) and :mod:`prefixsum.cli`
(the command line and the benchmark harness). This module only re-exports their public names.
"""

import importlib
import os
import sys

from .core import device as _device

_SIMULATOR, _REASON = _device.pick()

from numba import cuda  # noqa: E402,F401  (the device must be chosen before this import)

from .classroom import sim  # noqa: E402

# PREFIXSUM_SIMULATOR=stock keeps numba's own simulator for the whole process (to compare).
if _SIMULATOR and os.environ.get("PREFIXSUM_SIMULATOR", "classroom") != "stock":
    sim.install()

from . import scans  # noqa: E402,F401  (re-exported: ps.scans)
from .classroom import check, trace  # noqa: E402,F401  (re-exported: ps.check, ps.trace)
from .classroom.hints import hint  # noqa: E402
from .core.device import device_info, size_for_device  # noqa: E402
from .scans import reference  # noqa: E402
from .scans.api import ScanPlan, exclusive_scan, plan_scan, scan  # noqa: E402
from .scans.ops import DTYPES, OPS, identity  # noqa: E402
from .scans.registry import ALGORITHMS, Algorithm, register  # noqa: E402

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "DTYPES",
    "OPS",
    "ScanPlan",
    "device_info",
    "exclusive_scan",
    "hint",
    "identity",
    "plan_scan",
    "reference",
    "register",
    "scan",
    "size_for_device",
]
__version__ = "0.3.0"

if _SIMULATOR:
    # A notice, not an error: in a notebook's kernel stderr shows red in every chapter's first cell.
    _NOTEBOOK = type(sys.stdout).__module__.startswith("ipykernel")
    print(f"prefixsum: running on the CUDA simulator ({_REASON}).", file=sys.stdout if _NOTEBOOK else sys.stderr)

# Submodules that notebooks use now and then are imported on first use (viz imports matplotlib,
# which is slow): ``ps.viz.dataflow(...)`` works without ``import prefixsum.viz``.
_ON_DEMAND = {
    "basics": ".classroom.basics",
    "mutants": ".classroom.mutants",
    "mutation": ".classroom.mutation",
    "student": ".classroom.student",
    "viz": ".classroom.viz",
    "tridiag": ".tridiag",
    "apps": ".apps",
    "bench": ".cli.bench",
    "ptx": ".cli.ptx",
    "lessons": ".classroom.lessons",
    "primitives": ".primitives",
}


def __getattr__(name):
    if name in _ON_DEMAND:
        return importlib.import_module(_ON_DEMAND[name], __name__)
    raise AttributeError(f"module 'prefixsum' has no attribute {name!r}")
