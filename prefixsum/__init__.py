"""prefixsum: parallel prefix sums (scans) and tridiagonal solvers with numba.cuda, for teaching.

Importing the package picks the device: a usable CUDA GPU, otherwise numba's CUDA simulator
(with the package's stricter, faster classroom simulator :mod:`prefixsum.sim` on top). A
``NUMBA_ENABLE_CUDASIM`` of 0 or 1 set by the user is obeyed.
"""
import os
import sys

from . import _device

_SIMULATOR, _REASON = _device.choose()

from numba import cuda  # noqa: E402  (the device must be chosen before this import)

from . import sim  # noqa: E402

# PREFIXSUM_SIMULATOR=stock keeps numba's own simulator for the whole process (to compare).
if _SIMULATOR and os.environ.get("PREFIXSUM_SIMULATOR", "classroom") != "stock":
    sim.install()

from . import reference  # noqa: E402
from .api import exclusive_scan, scan  # noqa: E402
from .ops import DTYPES, OPS, identity  # noqa: E402
from .registry import ALGORITHMS, Algorithm, register  # noqa: E402

from . import ladder  # noqa: E402,F401  (registers itself)
from . import folding, hillis_steele, blelloch, kstep, hierarchical  # noqa: E402,F401  (register themselves)
from . import check, trace  # noqa: E402

__all__ = [
    "ALGORITHMS", "Algorithm", "DTYPES", "OPS", "device_info", "exclusive_scan", "identity",
    "reference", "register", "scan", "size_for_device",
]
__version__ = "0.1.0"

if _SIMULATOR:
    print(f"prefixsum: running on the CUDA simulator ({_REASON}).", file=sys.stderr)


_ON_DEMAND = ("basics", "bench", "mutants", "ptx", "student", "tridiag", "viz")


def __getattr__(name):
    # Submodules that notebooks use now and then (viz imports matplotlib, which is slow) are
    # imported on first use: ``ps.viz.dataflow(...)`` works without ``import prefixsum.viz``.
    if name in _ON_DEMAND:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'prefixsum' has no attribute {name!r}")


def device_info():
    """A short description of the device the package runs on.

    Returns
    -------
    dict
        ``simulator`` (bool), ``name`` (str), ``reason`` (why this device was chosen), and on
        a GPU ``compute_capability`` (tuple) and ``memory_gb`` (float).
    """
    info = {"simulator": _SIMULATOR, "reason": _REASON}
    if _SIMULATOR:
        info["name"] = "CUDA simulator (numba)"
        return info
    device = cuda.get_current_device()
    name = device.name
    info["name"] = name.decode() if isinstance(name, bytes) else name
    info["compute_capability"] = tuple(device.compute_capability)
    info["memory_gb"] = round(cuda.current_context().get_memory_info().total / 2**30, 1)
    return info


def size_for_device(simulator, gpu):
    """Pick a problem size for the current device: ``simulator`` on the simulator, else ``gpu``.

    Notebooks call this instead of hard-coding sizes, so they run in seconds on a laptop and
    at full size on a GPU.
    """
    return simulator if _SIMULATOR else gpu
