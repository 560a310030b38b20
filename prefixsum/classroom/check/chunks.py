"""The warp solver's pieces (chapter 08): the lanes' exchange of rows, and the partition step.

:func:`neighbours` checks the rows a lane fetches from the lanes ``s`` below and above it by
shuffles, and names the lane that got another lane's row, or a row from outside its group.

A thread of the partition method owns a *chunk* of ``R`` consecutive rows of a tridiagonal
system and rewrites them, in registers, so that they still hold for the system's solution but
couple only the chunk's two ends: every row ends with ``b = 1`` and

* an interior row ``k`` couples ``x_first``, ``x_k`` and ``x_last`` (``a_k`` and ``c_k`` are the
  coefficients of the chunk's first and last unknowns),
* the first row couples the previous chunk's last unknown, ``x_first`` and ``x_last``,
* the last row couples ``x_first``, ``x_last`` and the next chunk's first unknown.

:func:`partition` puts the true solution (float64, by LAPACK) into every rewritten row and
names the first row that no longer holds, and what it still couples where that is a row the
student did not eliminate (the row above, the row below).
"""

import numpy as np

from .. import child as _child
from . import observed
from .diagnosis import _trace_diagnosis
from .linalg import _tridiagonal_reference, dominant_systems
from .mode import _SEED, limits
from .results import Budget, CheckResult, with_poisoned_allocations


def _row_error(coefficients, unknowns, tolerance_scale):
    """``|a x_left + b x_mid + c x_right - d|`` over the magnitudes of its terms (0 where all are 0)."""
    (a, b, c, d), (left, mid, right) = coefficients, unknowns
    terms = (a * left, b * mid, c * right, -d)
    scale = sum(abs(t) for t in terms)
    return abs(sum(terms)) / (scale * tolerance_scale) if scale else 0.0


def _judge_chunk(rewritten, x, t, rows, tolerance):
    """``(row, hint)`` for the first row of chunk ``t`` whose invariant fails, else None.

    ``rewritten`` is ``(a, b, c, d)`` of one system after the partition, ``x`` its solution
    (with a 0 before the first row and after the last, the identity's unknowns).
    """
    a, b, c, d = rewritten
    first, last = t * rows, t * rows + rows - 1
    padded = np.concatenate([[0.0], x, [0.0]])  # padded[i + 1] is x_i; x_-1 and x_n are 0

    def holds(i, left, right):
        return (
            _row_error((a[i], b[i], c[i], d[i]), (padded[left + 1], padded[i + 1], padded[right + 1]), 1.0) <= tolerance
        )

    for i in range(first, last + 1):
        if b[i] != 1:
            return i, (
                f"b of row {i - first} of chunk {t} is {b[i]:.6g}, not 1: divide every row of the chunk "
                "by its pivot, so that each x reads off its row."
            )
    for i in range(last - 1, first, -1):  # as the sweep up leaves them: a wrong row spoils those above it
        k = i - first
        if holds(i, first, last):
            continue
        if k > 1 and (holds(i, i - 1, last) or holds(i, i - 1, i + 1)):
            return i, (
                f"interior row {k} of chunk {t} still couples x_{k - 1} (the row above): the sweep down must "
                f"replace it by the chunk's first unknown, eliminating with row {k - 1} as that sweep left it."
            )
        if holds(i, first, i + 1):
            return i, (
                f"interior row {k} of chunk {t} still couples x_{k + 1} (the row below): the sweep back up "
                f"must replace it by the chunk's last unknown, with row {k + 1} as that sweep left it."
            )
        return i, (
            f"interior row {k} of chunk {t} does not hold for the solution when it couples x_first, x_{k} and "
            "x_last: each elimination must subtract a multiple of a row that is already rewritten, and the "
            "pivot is what is left on the diagonal after it."
        )
    if not holds(last, first, last + 1):
        if holds(last, last - 1, last + 1):
            return last, (
                f"the last row of chunk {t} still couples x_{rows - 2}: the sweep down must reach the last row."
            )
        return last, (
            f"the last row of chunk {t} does not hold for the solution when it couples x_first, x_last and "
            "the next chunk's first unknown."
        )
    if not holds(first, first - 1, last):
        if holds(first, first - 1, first + 1):
            return first, (
                f"the first row of chunk {t} still couples x_1: put row 1 (which now reads off x_1 from "
                "x_first and x_last) into it, and divide by what is left on its diagonal."
            )
        return first, (
            f"the first row of chunk {t} does not hold for the solution when it couples the previous "
            "chunk's last unknown, x_first and x_last."
        )
    return None


@_child.simulated
def partition(fn, *, rows=4, chunks=(1, 2, 3, 8), batch=3, timeout=20.0, name=None, budget=None):
    """Check ``fn``, a student's partition step on every chunk, row by row.

    ``fn(a, b, c, d)`` takes four float64 numpy arrays of shape ``(batch, n)``, ``n`` a multiple
    of ``rows``, the rows ``a_i x_{i-1} + b_i x_i + c_i x_{i+1} = d_i`` of ``batch`` strictly
    diagonally dominant systems (``a[:, 0] = c[:, -1] = 0``), and returns the four arrays after
    the partition of every chunk of ``rows`` rows (numpy or device arrays). Every row must hold
    for the system's solution with ``b = 1``, coupling what the module's docstring says;
    the first row that does not is the verdict, named by chunk and row. The run is traced with
    fresh device arrays and shared memory poisoned, as :func:`tridiagonal` does.

    Parameters
    ----------
    fn : callable
        ``fn(a, b, c, d) -> (a, b, c, d)``; it gets copies.
    rows : int
        The rows of a chunk, at least 3 (a first, a last and an interior row).
    chunks : sequence of int
        Chunks per system, each at least 1: systems of ``rows * chunks`` rows.
    batch : int
        Systems per call.
    timeout : float
        Seconds before a run is stopped as hanging.
    name : str, optional
        Shown in the verdict (default: ``fn``'s name).
    budget : Budget, optional
        What the kernels may spend (:class:`Budget`).

    Returns
    -------
    CheckResult
        ``size`` is the system's n, ``index`` the first wrong row; printed, one deterministic line.
    """
    if not isinstance(rows, int) or rows < 3:
        raise ValueError(f"rows must be an int of at least 3 (a first, an interior and a last row); got {rows!r}")
    sizes = tuple(sorted(rows * k for k in chunks))
    if not sizes or sizes[0] < rows or batch < 1:
        raise ValueError(f"chunks and batch must be at least 1; got chunks={chunks}, batch={batch}")
    if budget is not None and not isinstance(budget, Budget):
        raise TypeError(f"budget must be a prefixsum.check.Budget or None; got {type(budget).__name__}")
    name = name or getattr(fn, "__name__", "partition")
    if name == "<lambda>":
        name = "partition"
    tolerance = 64 * rows * np.finfo(np.float64).eps
    for n in sizes:
        systems = dominant_systems(batch, n, np.random.default_rng(_SEED + n))
        solutions = _tridiagonal_reference(*systems)
        run = observed.record(with_poisoned_allocations, fn, *(v.copy() for v in systems), **limits(timeout))
        found = _trace_diagnosis(
            run,
            cell=lambda array, index: f"element {index} of {array} (flat index)",
            uninitialized_advice="rows outside the system are identity rows (0, 1, 0, 0).",
        )
        if found is not None:
            return CheckResult(False, found[0], name, sizes, n, found[1], found[2])
        result = run.result
        if not (isinstance(result, (tuple, list)) and len(result) == 4):
            return CheckResult(
                False,
                "exception",
                name,
                sizes,
                n,
                None,
                f"the function must return the four arrays (a, b, c, d); it returned {type(result).__name__}",
            )
        rewritten = [
            np.asarray(v.copy_to_host() if hasattr(v, "copy_to_host") else v, dtype=np.float64) for v in result
        ]
        if any(v.shape != (batch, n) for v in rewritten):
            return CheckResult(
                False,
                "exception",
                name,
                sizes,
                n,
                None,
                f"each returned array must have shape {(batch, n)}; got {[v.shape for v in rewritten]}",
            )
        for system in range(batch):
            coefficients = [v[system] for v in rewritten]
            if np.isnan(coefficients).any():
                row = int(np.argwhere(np.isnan(coefficients))[0][1])
                return CheckResult(
                    False,
                    "unwritten-output",
                    name,
                    sizes,
                    n,
                    row,
                    f"System {system}: a coefficient of row {row} is NaN (never written?).",
                )
            for t in range(n // rows):
                found = _judge_chunk(coefficients, solutions[system], t, rows, tolerance)
                if found is not None:
                    return CheckResult(False, "wrong-result", name, sizes, n, found[0], f"System {system}: {found[1]}")
        overspent = None if budget is None else budget.overspent(run, n)
        if overspent is not None:
            return CheckResult(False, "over-budget", name, sizes, n, overspent[0], overspent[1])
    return CheckResult(True, "pass", name, sizes)


_COEFFICIENTS = ("a_up", "c_up", "d_up", "a_down", "c_down", "d_down")
_CODE = 1000.0
"""Lane l holds the row (a, c, d) = (1000 + l, 2000 + l, 3000 + l): a value names its lane."""


def _lane_rows(warp):
    return np.stack([(k + 1) * _CODE + np.arange(warp, dtype=np.float64) for k in range(3)])


def _expected_neighbours(rows, lanes, s):
    """``(6, warp)``: each lane's rows ``s`` lanes up and down in its group, zeros outside it."""
    warp = rows.shape[1]
    lane = np.arange(warp) % lanes
    up, down = np.zeros_like(rows), np.zeros_like(rows)
    up[:, lane >= s] = np.roll(rows, s, axis=1)[:, lane >= s]
    down[:, lane + s < lanes] = np.roll(rows, -s, axis=1)[:, lane + s < lanes]
    return np.concatenate([up, down])


def _judge_neighbours(got, expected, lanes, s):
    """The hint for the first lane whose neighbours are wrong, else None."""
    if np.array_equal(got, expected):
        return None
    other_way = np.concatenate([expected[3:], expected[:3]])
    swapped = np.argwhere((got != expected) & (got == other_way) & (other_way != 0))
    if swapped.size:
        k, lane = map(int, swapped[0])
        return (
            f"lane {lane} (lane {lane % lanes} of its group of {lanes}, s = {s}) got lane "
            f"{int(got[k, lane] % _CODE)}'s "
            f"{'acd'[k % 3]} as {_COEFFICIENTS[k]}: up and down are swapped. The row s lanes up is lane - s's "
            "(shfl_up_sync), the row s lanes down lane + s's (shfl_down_sync)."
        )
    for lane in range(got.shape[1]):
        for k, label in enumerate(_COEFFICIENTS):
            want, have = expected[k, lane], got[k, lane]
            if want == have:
                continue
            where = f"lane {lane} (lane {lane % lanes} of its group of {lanes}, s = {s})"
            source = (
                f"lane {int(have % _CODE)}'s {'acd'[k % 3]}"
                if have >= _CODE and int(have // _CODE) == k % 3 + 1
                else repr(float(have))
            )
            if want == 0:
                return (
                    f"{where} got {source} as {label}, from outside its group: a neighbour before the group's "
                    "first lane or past its last is the identity row (0, 0, 0), all three values."
                )
            return f"{where} got {source} as {label}, where lane {int(want % _CODE)}'s is its neighbour."
    return None


@_child.simulated
def neighbours(fn, *, cases=((4, 1), (2, 1), (1, 1), (4, 2), (8, 4), (32, 1), (32, 16)), timeout=20.0, name=None):
    """Check ``fn``, a warp's exchange of rows between lanes, lane by lane.

    ``fn(rows, lanes, s)`` runs one warp of 32 lanes, lane ``l`` holding the row ``rows[:, l]``
    ``(a, c, d)``, in groups of ``lanes`` lanes, and returns the ``(6, 32)`` array of what
    every lane fetched: the rows ``s`` lanes up and ``s`` lanes down in its group,
    ``(a_up, c_up, d_up, a_down, c_down, d_down)``, the identity row ``(0, 0, 0)`` for a
    neighbour outside the group. Each lane's row codes its lane, so that a wrong value names
    the lane it came from. The run is traced: lanes that meet at different shuffles are the
    verdict, with their lines.

    Parameters
    ----------
    fn : callable
        ``fn(rows, lanes, s) -> (6, 32) array``.
    cases : sequence of (int, int)
        ``(lanes, s)``: ``lanes`` a power of two up to 32, ``s`` below it (or 1).
    timeout : float
        Seconds before a run is stopped as hanging.
    name : str, optional
        Shown in the verdict (default: ``fn``'s name).

    Returns
    -------
    CheckResult
        ``size`` is the failing case's ``lanes``; printed, one deterministic line.
    """
    cases = [tuple(case) for case in cases]
    if not cases or any(lanes not in (1, 2, 4, 8, 16, 32) or s < 1 for lanes, s in cases):
        raise ValueError(f"cases must be (lanes, s) pairs, lanes a power of two up to 32 and s >= 1; got {cases}")
    name = name or getattr(fn, "__name__", "neighbours")
    sizes = tuple(lanes for lanes, _ in cases)
    for lanes, s in cases:
        rows = _lane_rows(32)
        run = observed.record(with_poisoned_allocations, fn, rows.copy(), lanes, s, **limits(timeout))
        found = _trace_diagnosis(
            run,
            cell=lambda array, index: f"element {index} of {array} (flat index)",
            uninitialized_advice="every lane holds its row before the exchange.",
        )
        if found is not None:
            return CheckResult(False, found[0], name, sizes, lanes, found[1], found[2])
        got = run.result
        got = np.asarray(got.copy_to_host() if hasattr(got, "copy_to_host") else got, dtype=np.float64)
        expected = _expected_neighbours(rows, lanes, s)
        if got.shape != expected.shape:
            return CheckResult(
                False,
                "exception",
                name,
                sizes,
                lanes,
                None,
                f"the function must return an array of shape {expected.shape}; it returned {got.shape}",
            )
        hint = _judge_neighbours(got, expected, lanes, s)
        if hint is not None:
            return CheckResult(False, "wrong-result", name, sizes, lanes, None, hint)
    return CheckResult(True, "pass", name, sizes)


__all__ = ["neighbours", "partition"]
