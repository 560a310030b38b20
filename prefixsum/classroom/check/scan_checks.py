"""Scan checks: a student's scan (:func:`scan`, with a user operator checked by :mod:`.operators` first) and a
tile kernel (:func:`tiled`)."""

import dataclasses

import numpy as np

from ...scans import user_ops
from ...scans.ops import check_dtype, check_op, identity as identity_of
from ...scans.testing import expected_scan, mismatches, random_input, wrong_indices
from .. import child as _child, references
from . import counting, observed
from .diagnosis import _hint_for_error, _trace_diagnosis, wrong_result_hint
from .mode import _SEED, DEFAULT_SIZES, _sizes_and_seed, limits
from .operators import diagnose_user_scan, operator
from .results import Budget, CheckResult, _is_poison, with_poisoned_allocations


def _diagnose(run, x, op, inclusive, reverse):
    """``(diagnosis, index, hint)`` for one traced run of the student's function."""
    found = _trace_diagnosis(
        run,
        cell=lambda array, index: f"{array}[{index}]",
        uninitialized_advice="fill every cell (with the identity past n) before the barrier.",
    )
    if found is not None:
        return found
    result = run.result
    if hasattr(result, "copy_to_host"):
        result = result.copy_to_host()
    if result is None or np.shape(result) != x.shape:
        return (
            "exception",
            None,
            f"the function must return the scan of x, of shape {x.shape}; it returned {type(result).__name__} "
            f"{np.shape(result)}",
        )
    result = np.asarray(result)
    unwritten = np.flatnonzero(_is_poison(result))
    if unwritten.size:
        return (
            "unwritten-output",
            int(unwritten[0]),
            "This element was never written: check the bound of the store and the last lanes and blocks.",
        )
    result = result.astype(x.dtype, copy=False)
    bad, expected = mismatches(result, x, op, inclusive=inclusive, reverse=reverse)
    if bad.size:
        return "wrong-result", int(bad[0]), _what_it_is(result, x, expected, op, inclusive, reverse)
    return "pass", None, ""


# Up to this length a wrong result shows the expected and the actual array.
_SHOWN = 16


def _values(a):
    """An array for a hint: integers as they are, floats to 3 decimals."""
    return str([round(float(v), 3) for v in a] if a.dtype.kind in "fc" else a.tolist())


def _what_it_is(result, x, expected, op, inclusive, reverse):
    """The classic mistake ``result`` (a wrong scan of ``x``) shows, and at n <= 16 both arrays; else ''.

    The exclusive scan where the inclusive one was asked (every element shifted by one) or the
    reverse, the scan in the other direction (a suffix scan for a prefix scan), and a sum that
    started from a value other than 0 (every element off by one constant).
    """
    named = ""
    other = (
        "the exclusive scan: every element shifted by one, missing its own x[i]"
        if inclusive
        else "the inclusive scan: every element includes its own x[i], where the exclusive scan stops before it"
    )
    for label, inc, rev in (
        (other, not inclusive, reverse),
        (
            "the scan in the other direction (a suffix scan where a prefix scan was asked, or the reverse)",
            inclusive,
            not reverse,
        ),
    ):
        if (len(x) > 1 or rev == reverse) and not mismatches(result, x, op, inclusive=inc, reverse=rev)[0].size:
            alone = " (or element 0 was never set)" if inclusive else " (or element 0 is not the identity)"
            named = f"This is {label}{alone if len(x) == 1 else ''}. "
            break
    if not named and op == "add" and len(x) > 2:
        off = result.astype(np.float64) - expected
        if np.isfinite(off).all() and off[0] != 0 and np.allclose(off, off[0], rtol=1e-5, atol=1e-3):
            named = (
                f"Every element is off by {round(float(off[0]), 3)}: the sum started from that value, not from "
                "the identity of add (0). "
            )
    if len(x) <= _SHOWN:
        named += f"Expected {_values(expected.astype(x.dtype))}, got {_values(result)}. "
    return named.rstrip()


def _wrong_result_hint(index, n, passed_sizes, exclusive, shown=""):
    """The hint of a wrong result: ``shown`` (what :func:`_what_it_is` recognized) first, then a guess from the sizes.

    "Powers of two pass" needs a power of two of several warps (128 or more) among the sizes
    passed: that n = 1, 2 or 64 passed says nothing about padding.
    """
    if shown.startswith(("This is", "Every element")):
        return shown
    shown = f" {shown}" if shown else ""
    if index == 0 and exclusive:
        return "Element 0 of an exclusive scan is the identity of the operator." + shown
    if (
        passed_sizes
        and index >= 32
        and index & (index - 1) == 0
        and index >= max(s for s in passed_sizes if s <= index) // 2
    ):
        return (
            f"Right below index {index}, wrong from it on: index {index} starts a new block. "
            "Is the carry (the total of the blocks before) missing?" + shown
        )
    if n & (n - 1) and any(s >= 128 and s & (s - 1) == 0 for s in passed_sizes):
        return "Powers of two pass but this size does not: pad the last tile with the identity and guard i < n." + shown
    return "Work this n through by hand and compare each step with the invariant the exercise states." + shown


@_child.simulated
def scan(
    fn,
    *,
    op="add",
    inclusive=True,
    reverse=False,
    dtype=np.float32,
    sizes=None,
    timeout=20.0,
    name=None,
    identity=None,
    budget=None,
    polls=None,
    reference=None,
):
    """Check ``fn``, a student's scan, against the reference.

    Parameters
    ----------
    fn : callable
        ``fn(x)`` takes a 1-D numpy array and returns its scan (numpy or device array),
        computed by the student's kernel(s). With a user operator on a tuple of dtypes, it takes
        and returns a tuple of arrays.
    op, inclusive, reverse :
        Which scan ``fn`` computes (see :func:`prefixsum.scan`). ``op`` may be a user operator
        (a ``cuda.jit(device=True)`` function); it is checked by :func:`operator` first, and the
        reference is :func:`prefixsum.scans.user_ops.reference`.
    dtype : numpy dtype, or a tuple of them with a user operator
        Element type of the random inputs (one per field of a tuple).
    identity : scalar or tuple, optional
        The identity of a user operator (required with one).
    sizes : sequence of int, optional
        Input lengths, smallest first (default :data:`DEFAULT_SIZES`).
    timeout : float
        The time limit of one run, counted in simulated steps (:func:`prefixsum.check.mode.limits`:
        ``timeout * STEPS_PER_SECOND`` memory accesses), the same under any load.
    polls : int, optional
        The most polls of one wait, counted apart from the steps (default
        :data:`prefixsum.check.mode.POLLS`); one more fails as ``poll-limit``, naming the tile that
        waits and the state it polls.
    name : str, optional
        Shown in the verdict (default: ``fn``'s name).
    reference : str, optional
        The registered scan the exercise writes (``"hillis_steele"``, ``"blelloch"``, ...): a failing
        run is stepped beside it by :func:`prefixsum.viz.step_failure`, in the tile the student's
        run takes. Default: the registered scan whose run is most alike the student's.
    budget : Budget, optional
        What the run may spend (barriers, accesses per step, traffic, bank conflicts, the
        look-back's order); a run with the right numbers that spends more fails as
        ``over-budget``, one that runs fewer lines of its own than ``host_lines_per_element``
        asks as ``library-call``.

    A function that changes its input fails as ``modified-input``.

    Returns
    -------
    CheckResult
        ``passed``, ``diagnosis`` (one of :data:`DIAGNOSES`), the first failing ``size`` and
        ``index``, and a ``hint``; printed, one deterministic line.
    """
    name = name or getattr(fn, "__name__", "scan")
    if name == "<lambda>":
        name = "scan"
    user = not isinstance(op, str)
    if user:
        verdict = operator(op, identity, dtype, name=name)
        if not verdict:
            return verdict
    else:
        check_op(op)
        dtype = check_dtype(dtype)
    if budget is not None and not isinstance(budget, Budget):
        raise TypeError(f"budget must be a prefixsum.check.Budget or None; got {type(budget).__name__}")
    if reference is not None:
        from ...scans.registry import ALGORITHMS

        if reference not in ALGORITHMS:
            raise ValueError(f"reference={reference!r} is no registered scan; they are {', '.join(ALGORITHMS)}")
    sizes = tuple(sorted(sizes or DEFAULT_SIZES))
    shown = sizes
    sizes, seed = _sizes_and_seed(sizes)
    additions = budget is not None and budget.additions_per_element is not None
    if additions and (user or op != "add"):
        raise ValueError("Budget.additions_per_element counts additions: it needs op='add' on one dtype")
    tally = (
        counting.new_tally()
        if additions or (budget is not None and budget.host_lines_per_element is not None)
        else None
    )
    call = fn if tally is None else counting.counting(fn, tally, additions=additions)
    passed_sizes = []
    for n in sizes:
        rng = np.random.default_rng(seed + n)
        if tally is not None:
            tally[:] = counting.new_tally()
        if user:
            fields = user_ops.random_fields(n, dtype if isinstance(dtype, tuple) else (dtype,), rng)
            x = fields if isinstance(dtype, tuple) else fields[0]
            given = tuple(f.copy() for f in fields) if isinstance(dtype, tuple) else x.copy()
            run = observed.record(with_poisoned_allocations, call, given, counter=tally, **limits(timeout, polls))
            diagnosis, index, hint = diagnose_user_scan(run, x, op, identity, inclusive, reverse)
        else:
            x = random_input(n, op, dtype, rng)
            given = x.copy()
            run = observed.record(with_poisoned_allocations, call, given, counter=tally, **limits(timeout, polls))
            diagnosis, index, hint = _diagnose(run, x, op, inclusive, reverse)
        if diagnosis in ("pass", "wrong-result"):
            changed = _changed_input(given, x)
            if changed is not None:
                diagnosis, (index, hint) = "modified-input", changed
        if diagnosis == "wrong-result":
            hint = wrong_result_hint(run) or _wrong_result_hint(index, n, passed_sizes, not inclusive, hint)
        if diagnosis == "pass" and tally is not None:
            found = _host_work(name, budget, tally, n)
            if found is not None:
                diagnosis, index, hint = found
        if diagnosis in ("pass", "wrong-result") and budget is not None:
            undone = budget.undone(run, (x,) if not user else (), run.result)
            if undone is not None:
                diagnosis, index, hint = undone
        if diagnosis == "pass" and budget is not None:
            overspent = budget.overspent(run, n)
            if overspent is not None:
                diagnosis, (index, hint) = "over-budget", overspent
        if diagnosis != "pass":
            # The stepper's call (issue 31); the grader's replayer runs no student code, so it keeps no function.
            hint += references.failure_hint(
                diagnosis,
                run,
                x,
                op,
                inclusive,
                reverse,
                fn=fn if observed.current() is None else None,
                reference=reference,
            )
            return CheckResult(False, diagnosis, name, shown, n, index, hint)
        passed_sizes.append(n)
    return CheckResult(True, "pass", name, shown)


@_child.simulated
def tiled(tile_kernel, *, block_size, threads=None, op="add", dtype=np.float32, sizes=None, **kw):
    """Check a student's tile kernel ``(x, out, totals, n)`` run on every tile, with carries.

    The kernel scans tile b (``block_size`` elements) into ``out`` and writes its total to
    ``totals[b]``; the package scans the totals and carries them, as :func:`prefixsum.scans.tiles.scan_tiles`
    does for every algorithm. Inclusive forward scans only. A ``budget`` (:class:`Budget`)
    applies to the student's tile kernel unless it names its ``kernels``.
    """
    from numba import cuda

    from ...scans.registry import lookup
    from ...scans.tiles import scan_tiles

    # The totals are scanned by the ladder, the simplest registered scan, so that the trace of a
    # student's run holds few kernels besides the student's own.
    totals_scan = lookup("ladder")

    def run_tiles(x):
        source = cuda.to_device(x)
        out = cuda.device_array(len(x), x.dtype)

        scan_tiles(
            source,
            out,
            tile_kernel,
            tile=block_size,
            threads=threads or block_size,
            op=op,
            reverse=False,
            scan_totals=lambda totals, carries: totals_scan.run(totals, carries, op, True, False, block_size=256),
        )
        return out

    name = getattr(getattr(tile_kernel, "py_func", tile_kernel), "__name__", "tile kernel")
    budget = kw.pop("budget", None)
    if budget is not None and budget.kernels is None:
        budget = dataclasses.replace(budget, kernels=(name,))
    verdict = scan(run_tiles, op=op, dtype=dtype, sizes=sizes, name=name, budget=budget, **kw)
    if not verdict:
        if verdict.diagnosis == "out-of-bounds":  # a tile or a shared array of another size than the check's
            return dataclasses.replace(
                verdict,
                hint=f"{verdict.hint} The check runs tiles of {block_size} elements on "
                f"{threads or block_size} threads, whatever the cell's constants "
                "say.",
            )
        return verdict
    return _padding_verdict(
        tile_kernel, block_size, threads or block_size, op, check_dtype(dtype), verdict, kw.get("timeout", 20.0)
    )


def _padding_probes(n, op, dtype, rng):
    """Inputs whose tile totals only the identity leaves unchanged: every other padding value shows.

    Sums and products of random values change with any other padding. For max (min) the first
    input holds the dtype's least (greatest) value everywhere, the end of the whole range: then
    every other padding, however close to the identity (``INT32_MIN + 1``, the largest finite
    float for ``-inf``), wins against it; the second lies just above (below) it.
    """
    if op in ("add", "mul"):
        return [random_input(n, op, dtype, rng)]
    least = op == "max"
    if dtype.kind == "f":
        end = np.finfo(dtype).max
        return [np.full(n, -np.inf if least else np.inf, dtype), np.full(n, -end if least else end, dtype)]
    info = np.iinfo(dtype)
    near = rng.integers(1, 100, size=n)
    return [
        np.full(n, info.min if least else info.max, dtype),
        (info.min + near if least else info.max - near).astype(dtype),
    ]


def _padding_store(run, kernel, n, block_size, op, value):
    """``" (lane L of tile T, past n, got it at line N)"``: where the tile kernel stored the wrong padding
    ``value`` of max or min (a total of max or min is one of the values); else ''."""
    if op not in ("max", "min"):
        return ""
    for r in run.records:
        if (
            r.write
            and r.space == "shared"
            and r.thread >= n - r.block * block_size
            and r.value is not None
            and run.launches[r.launch].kernel == kernel
            and np.array(r.value).astype(np.float64) == float(value)
        ):
            return f" (lane {r.thread} of tile {r.block}, past n, got it at line {r.line})"
    return ""


def _padding_verdict(tile_kernel, block_size, threads, op, dtype, verdict, timeout):
    """``verdict`` (a pass), unless a tile's total on :func:`_padding_probes` shows lanes past n padded wrong.

    The scan itself cannot show the padding: lanes past n are never stored, and the last tile's
    total is never carried. The tile kernel's contract is its total, every tile's.
    """
    from numba import cuda

    def totals_of(x):
        tiles = -(-len(x) // block_size)
        totals = cuda.device_array(tiles, x.dtype)
        tile_kernel[tiles, threads](cuda.to_device(x), cuda.device_array(len(x), x.dtype), totals, len(x))
        return totals.copy_to_host()

    rng = np.random.default_rng(_SEED)
    for n in (1, block_size + 1):
        for x in _padding_probes(n, op, dtype, rng):
            run = observed.record(with_poisoned_allocations, totals_of, x, **limits(timeout))
            if run.error is not None:
                diagnosis, hint = _hint_for_error(run.error)
                return CheckResult(False, diagnosis, verdict.name, verdict.sizes, n, None, hint)
            for b, got in enumerate(run.result):
                expected, allowed = expected_scan(x[b * block_size : (b + 1) * block_size], op)
                if wrong_indices(np.array([got]), expected[-1:], None if allowed is None else allowed[-1:]).size:
                    e = identity_of(op, dtype)
                    where = _padding_store(run, verdict.name, n, block_size, op, got)
                    return CheckResult(
                        False,
                        "wrong-identity",
                        verdict.name,
                        verdict.sizes,
                        n,
                        n,
                        (
                            f"tile {b}'s total is {got.item()}, not {expected[-1].astype(dtype).item()}{where}: the "
                            f"lanes past n must hold the identity of {op} ({e.item()} for {dtype.name}), the one value "
                            f"that no {dtype.name} beats, so that it changes no total. The outputs cannot show it "
                            "(lanes past n are not stored), the tile's total does."
                        ),
                    )
    return verdict


def _host_work(name, budget, tally, n):
    """``(diagnosis, index, hint)`` when the host function's own work (``tally``, :mod:`.counting`) is
    not the loop the exercise asks for; else None."""
    lines, most, line, total = (
        tally[counting.LINES],
        tally[counting.MOST],
        tally[counting.LINE],
        tally[counting.ADDITIONS],
    )
    if budget.host_lines_per_element is not None and lines < budget.host_lines_per_element * n:
        return (
            "library-call",
            None,
            (
                f"{name} ran {lines} lines of its own code for {n} elements: the exercise asks for the loop "
                "itself, one step per element; a library call (np.cumsum, itertools.accumulate) does the work for you."
            ),
        )
    if budget.additions_per_element is None:
        return None
    if total > budget.additions_per_element * n:
        return (
            "over-budget",
            None,
            (
                f"{name} made {total} additions for {n} elements, {most} of them in one execution of line {line}: the "
                f"scan needs n - 1 = {n - 1}, one per step of the loop. Adding up x[:i + 1] again for every i (or a "
                "product with a triangular matrix) is O(n^2) work: carry the running sum, s[i] = s[i - 1] + x[i]."
            ),
        )
    if most > counting.PER_LINE:
        return (
            "library-call",
            None,
            (
                f"line {line} of {name} made {most} additions in one execution: a library call (np.cumsum, "
                "np.add.accumulate, a sum over a slice) did the loop's work there. The exercise asks for the loop "
                "itself, one addition per step."
            ),
        )
    return None


def _changed_input(given, x):
    """``(index, hint)`` for the first element of the input ``given`` that the checked function changed, else None."""
    for got, original in zip(given if isinstance(given, tuple) else (given,), x if isinstance(x, tuple) else (x,)):
        changed = np.flatnonzero(
            ~((got == original) | (np.isnan(got) & np.isnan(original)) if got.dtype.kind == "f" else got == original)
        )
        if changed.size:
            i = int(changed[0])
            return i, (
                f"the function changed its input: x[{i}] was {original[i].item()}, is now {got[i].item()}. "
                "Leave x as it "
                "is (the caller still needs it) and build the result in a new array."
            )
    return None
