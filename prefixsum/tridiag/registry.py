"""The tridiagonal methods, in the registry shape of every family (:mod:`prefixsum.core.registry`).

Each method's own module registers it (:func:`register`): :mod:`.pcr`, :mod:`.cr`, :mod:`.thomas`,
:mod:`.hybrid`, :mod:`.pivoting` and :mod:`.auto` (``"routed"``: the hybrid where a system is
diagonally dominant, the pivoting solver where it is not); no other module names one. A
:class:`Method` says what the method can do as flags (:class:`~prefixsum.core.registry.Capability`:
``PIVOTS``, ``NEEDS_DOMINANCE``, ``BATCHED``, ``CALLER_TEMP``), the dtypes it takes, its ``run``,
its kernels and the temporary storage it can take from a caller.

``method="auto"`` (:func:`choose`) takes a method that pivots, so that the default is right on
every nonsingular system, and among those the fastest measured for the call's batch, n and dtype:
:func:`measured_times` reads the kernel rows of the committed ``benchmarks/tridiag.csv`` measured
on the H100 (``ours (kernels)``, CUPTI's kernel time summed per call), at the measured shape nearest
the call's (in ``log2 batch`` and ``log2 n``), of the call's dtype, and ranks each method by the
mean of its times on the table's two families of systems, diagonally dominant and indefinite, as
which family the caller's systems are is known only on the GPU (a method timed by several runs,
as the hybrid by the full run and by the later ``--only-pivoting --sweep`` one: its latest run's
rows, measured beside the methods that pivot). In that table ``"routed"`` wins
where the batch has many systems (it adds a dominance test and a launch of the pivoting solver
that finds nothing to do on dominant systems, but saves more on them than it loses on the
others), and ``"pivoting"`` where a few long systems make the routed indefinite systems twice the
work (1 x 2^16 to 1 x 2^20, 7 x 100000, 64 x 8192) and where the systems are short (16384 x 64,
and 4096 x 256 in float32). Without the table (a copy that
lacks it) the highest ``auto_rank`` wins: ``"routed"``.
"""

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core import tables
from ..core.registry import Capability, Entry, Registry

TABLE = "tridiag.csv"
"""The committed table whose kernel rows rank the methods for ``"auto"``."""
MEASURED_ON = "H100"
"""The GPU whose rows of :data:`TABLE` count (the H200's live in ``benchmarks/h200/``)."""
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
"""The dtypes every method takes."""


@dataclass(frozen=True)
class Method(Entry):
    """One tridiagonal method (the fields of :class:`~prefixsum.core.registry.Entry`, and these).

    Attributes
    ----------
    run : callable
        ``run(a, b, c, d, x, info, stream=None, temp=None)``: solves the (batch, n) C-contiguous
        device systems into ``x``, failures into the int32 ``info`` (one per system, zero before
        the call), on ``stream`` (a :class:`~prefixsum.core.streams.Stream`; None: numba's
        default); ``temp``: for a method with ``CALLER_TEMP``, the arrays of
        ``temp_parts(batch, n, dtype)`` (carved from the caller's memory), else None.
    kernels : callable
        ``kernels(dtype)``: every ``(dispatcher, argtypes)`` ``run`` may launch.
    dtypes : tuple of numpy.dtype
        The dtypes it takes.
    temp_parts : callable or None
        ``temp_parts(batch, n, dtype) -> [(count, dtype), ...]``: the arrays ``run`` takes from a
        caller's ``temp`` (with ``CALLER_TEMP``); None: it keeps its storage in the workspace.
    measured_as : str
        Its ``method`` column in :data:`TABLE` (its name, unless the table named it otherwise).
    """

    run: Callable = None
    kernels: Callable = None
    dtypes: tuple = DTYPES
    temp_parts: Callable = None
    measured_as: str = ""


def measured_times(names, size, dtype):
    """``{name: microseconds}`` of the methods ``names`` at the shape of :data:`TABLE` nearest
    ``size = (batch, n)``, in ``dtype``: the mean over the families of each method's kernel rows
    there, of its latest run where several measured it (module docstring); ``{}`` without rows."""
    labels = {(METHODS[name].measured_as or name): name for name in names}
    return {labels[label]: us for label, us in times_at_nearest(labels, size, dtype).items()}


def times_at_nearest(labels, size, dtype):
    """``{label: microseconds}`` of the kernel rows of :data:`TABLE` whose ``method`` is one of
    ``labels``, at the shape nearest ``size = (batch, n)`` among theirs (in ``log2 batch`` and
    ``log2 n``; a tie goes to the larger), in ``dtype``: the mean over the families of each
    label's rows there, of its latest run where several measured it; ``{}`` without rows."""
    batch, n = size
    rows = [
        row
        for row in tables.rows(TABLE)
        if row["kind"] == "ours (kernels)"
        and row["method"] in labels
        and MEASURED_ON in row.get("device", "")
        and row["dtype"] == getattr(dtype, "name", None)
        and row.get("correct") == "True"
    ]
    shapes = {(int(row["batch"]), int(row["n"])) for row in rows}
    if not shapes:
        return {}
    here = (math.log2(max(batch, 1)), math.log2(max(n, 1)))
    nearest = min(shapes, key=lambda s: (math.dist(here, (math.log2(s[0]), math.log2(s[1]))), -s[0] * s[1]))
    here_rows = [row for row in rows if (int(row["batch"]), int(row["n"])) == nearest]
    latest = {}
    for row in here_rows:  # a label measured by several runs: its latest run's rows
        latest[row["method"]] = max(latest.get(row["method"], ""), row.get("date", ""))
    times = {}
    for row in here_rows:
        if row.get("date", "") == latest[row["method"]]:
            times.setdefault(row["method"], []).append(float(row["median_us"]))
    return {label: sum(values) / len(values) for label, values in times.items()}


LONG_ROWS = 1 << 16
"""Systems of at least this many rows are set beside cuSPARSE's ``gtsv2`` (one system a call,
pivoting), shorter ones beside ``gtsvInterleavedBatch``'s LU and QR (:func:`pivoting_baselines`)."""


def pivoting_baselines(n):
    """The labels in :data:`TABLE` of the cuSPARSE routines a pivoting solve of systems of ``n``
    rows is set against (issue 44's pairing; ``benchmarks/tridiag_cusparse.py`` times these)."""
    if n >= LONG_ROWS:
        return ("cusparse gtsv2",)
    return ("cusparse gtsvInterleavedBatch (LU)", "cusparse gtsvInterleavedBatch (QR)")


def against_cusparse(method, name=TABLE):
    """The kernel time of ``method`` (a name of :data:`METHODS`) on indefinite systems beside
    cuSPARSE's pivoting routines for the same shape (:func:`pivoting_baselines`), from the H100's
    rows of ``name``: a list of dicts with ``dtype``, ``batch``, ``n``, ``ours_us`` and ``library``,
    per routine ``(routine, its us, its us / ours)`` (above 1: ours is faster), in the table's order
    of shapes."""
    label = METHODS[method].measured_as or method
    found = {}
    for row in tables.rows(name):
        if row.get("family") != "indefinite" or MEASURED_ON not in row.get("device", ""):
            continue
        if row.get("correct") != "True" or row.get("measured_by") != "cupti":
            continue
        found[(row["dtype"], int(row["batch"]), int(row["n"]), row["method"])] = float(row["median_us"])
    table = []
    for (dtype, batch, n, measured), ours in found.items():
        if measured != label:
            continue
        theirs = ((routine, found.get((dtype, batch, n, routine))) for routine in pivoting_baselines(n))
        library = [(routine.removeprefix("cusparse "), us, us / ours) for routine, us in theirs if us is not None]
        table.append({"dtype": dtype, "batch": batch, "n": n, "ours_us": ours, "library": library})
    return table


METHODS = Registry("method", measured=measured_times)
"""The tridiagonal methods by name, in the order their modules registered them."""


def register(method):
    """Add ``method`` (a :class:`Method`; its name must be new) to :data:`METHODS` and return it."""
    return METHODS.register(method)


def choose(method, batch, n, dtype):
    """The :class:`Method` for ``method=`` on (batch, n) systems of ``dtype``: a name is its
    method (or ValueError naming the allowed ones); ``"auto"`` the fastest measured method that
    pivots (module docstring)."""
    needs = Capability.PIVOTS if method == "auto" else Capability.NONE
    return METHODS.choose(method, (batch, n), np.dtype(dtype), needs)


def fastest(batch, n, dtype, pivots=True):
    """The fastest :class:`Method` measured for (batch, n) systems of ``dtype`` among those that
    pivot (``pivots``: :func:`choose`'s ``"auto"``) or among all (for systems known to be safe
    without pivoting: symmetric positive definite, :func:`prefixsum.tridiag.solve_symmetric`)."""
    return METHODS.choose("auto", (batch, n), np.dtype(dtype), Capability.PIVOTS if pivots else Capability.NONE)
