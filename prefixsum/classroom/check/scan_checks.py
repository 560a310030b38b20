"""Scan checks: a student's scan (:func:`scan`), a user operator (:func:`operator`), a tile kernel (:func:`tiled`)."""
import dataclasses

import numpy as np

from .. import child as _child, stepping, trace as tracing
from ...scans.ops import check_dtype, check_op
from ...scans import user_ops
from ...scans.testing import mismatches, random_input
from .diagnosis import _trace_diagnosis
from .mode import DEFAULT_SIZES, _SEED, _mode, _sizes_and_seed
from .results import Budget, CheckResult, _is_poison, with_poisoned_allocations


def _diagnose(run, x, op, inclusive, reverse):
    """``(diagnosis, index, hint)`` for one traced run of the student's function."""
    found = _trace_diagnosis(
        run, cell=lambda array, index: f"{array}[{index}]",
        race_advice="A cuda.syncthreads() is missing between a read and a write (or use two buffers).",
        uninitialized_advice="fill every cell (with the identity past n) before the barrier.")
    if found is not None:
        return found
    result = run.result
    if hasattr(result, "copy_to_host"):
        result = result.copy_to_host()
    if result is None or np.shape(result) != x.shape:
        return "exception", None, f"the function must return the scan of x, of shape {x.shape}; it returned {type(result).__name__} {np.shape(result)}"
    result = np.asarray(result)
    unwritten = np.flatnonzero(_is_poison(result))
    if unwritten.size:
        return "unwritten-output", int(unwritten[0]), "This element was never written: check the bound of the store and the last lanes and blocks."
    bad, _ = mismatches(result.astype(x.dtype, copy=False), x, op, inclusive=inclusive, reverse=reverse)
    if bad.size:
        return "wrong-result", int(bad[0]), ""
    return "pass", None, ""


def _wrong_result_hint(index, n, passed_sizes, exclusive):
    if index == 0 and exclusive:
        return "Element 0 of an exclusive scan is the identity of the operator."
    if passed_sizes and index >= 32 and index & (index - 1) == 0 and index >= max(s for s in passed_sizes if s <= index) // 2:
        return (f"Right below index {index}, wrong from it on: index {index} starts a new block. "
                "Is the carry (the total of the blocks before) missing?")
    if n & (n - 1) and any(s & (s - 1) == 0 for s in passed_sizes):
        return "Powers of two pass but this size does not: pad the last tile with the identity and guard i < n."
    return "Compare one phase of your update with the loop invariant on a small n."


def _element(fields, i):
    return tuple(f[i] for f in fields)


def _small_integers(n, dtypes, rng):
    """Random fields of small integers in each dtype ([-4, 4], [0, 8] unsigned): exact sums and products."""
    return [rng.integers(0 if dt.kind == "u" else -4, 9 if dt.kind == "u" else 5, size=n).astype(dt) for dt in dtypes]


def _combine_on_host(fn, bare, dtypes):
    """``combine(p, q)`` on tuples: the user's op by its Python function, each field cast to its dtype."""
    def combine(p, q):
        r = fn(p[0], q[0]) if bare else fn(p, q)
        return tuple(dt.type(v) for dt, v in zip(dtypes, (r,) if bare else r))
    return combine


def _same(u, v, dtypes):
    """Whether elements ``u`` and ``v`` agree: integers exactly, floats to a relative 1e-6 (1e-3 for float32)."""
    for a, b, dt in zip(u, v, dtypes):
        if dt.kind != "f":
            if a != b:
                return False
        elif not abs(float(a) - float(b)) <= (1e-3 if dt.itemsize == 4 else 1e-6) * max(1.0, abs(float(a)), abs(float(b))):
            return False
    return True


@_child.simulated
def operator(op, identity, dtypes=np.float64, *, samples=200, name=None):
    """Check a user operator on its own: associative, and ``identity`` an identity of it.

    A scan regroups the combines (a tree inside a tile, then the tiles' totals), so it gives the
    sequential answer only when ``(a op b) op c == a op (b op c)`` for all elements, and pads
    with the identity, so ``e op x == x == x op e`` must hold too. Both are tried on ``samples``
    random elements of small integers (exact in every dtype, so that rounding cannot hide or
    fake a failure), by ``op``'s Python function on the host.

    Parameters
    ----------
    op : numba CUDA device function
        ``op(p, q)``: scalars when ``dtypes`` is one dtype, else tuples of one value per dtype.
    identity : scalar or tuple
    dtypes : numpy dtype or tuple of them
        The field dtypes; one dtype means elements are scalars (a scan of one array).
    samples : int
    name : str, optional
        Shown in the verdict (default: ``op``'s name).

    Returns
    -------
    CheckResult
        ``not-associative`` or ``wrong-identity`` with the elements that show it in the hint,
        or ``pass``.
    """
    bare = not isinstance(dtypes, tuple)
    dtypes = tuple(check_dtype(d) for d in ((dtypes,) if bare else dtypes))
    checked = user_ops.operator_for(op, identity, dtypes, bare)
    name = name or getattr(user_ops.python_function(op), "__name__", "op")
    combine = _combine_on_host(user_ops.python_function(op), bare, dtypes)
    def show(element):
        values = tuple(v.item() for v in element)
        return repr(values[0] if bare else values)

    fields = _small_integers(3 * samples, dtypes, np.random.default_rng(_SEED))
    e = checked.identity
    try:
        return _judge_operator(combine, e, fields, samples, dtypes, name, show)
    except Exception as error:  # noqa: BLE001  (a student's operator may raise anything)
        return CheckResult(False, "exception", name, (samples,), hint=f"{type(error).__name__}: {error}")


def _judge_operator(combine, e, fields, samples, dtypes, name, show):
    """The verdict of :func:`operator` on ``samples`` triples of ``fields``."""
    with np.errstate(all="ignore"):
        for k in range(samples):
            a, b, c = (_element(fields, 3 * k + j) for j in range(3))
            for side, value in (("op(e, x)", combine(e, a)), ("op(x, e)", combine(a, e))):
                if not _same(value, a, dtypes):
                    return CheckResult(False, "wrong-identity", name, (samples,), hint=(
                        f"With e = {show(e)} and x = {show(a)}, {side} = {show(value)}, not x. The identity must leave "
                        "every element unchanged on both sides: the scan pads partial tiles and starts the exclusive "
                        "scan with it."))
            left, right = combine(combine(a, b), c), combine(a, combine(b, c))
            if not _same(left, right, dtypes):
                return CheckResult(False, "not-associative", name, (samples,), hint=(
                    f"op(op(a, b), c) = {show(left)} but op(a, op(b, c)) = {show(right)} for a = {show(a)}, "
                    f"b = {show(b)}, c = {show(c)}. A parallel scan regroups the combines, so the operator must be "
                    "associative. Clamping, averaging and subtracting are not; carry more state in the element (a "
                    "tuple) until the combine is, as an affine map x -> a x + b carries (a, b)."))
    return CheckResult(True, "pass", name, (samples,))


def _diagnose_user(run, x, op, identity, inclusive, reverse):
    """``(diagnosis, index, hint)`` for one traced run of a scan with a user operator."""
    found = _trace_diagnosis(
        run, cell=lambda array, index: f"{array}[{index}]",
        race_advice="A cuda.syncthreads() is missing between a read and a write (or use two buffers).",
        uninitialized_advice="fill every cell (with the identity past n) before the barrier.")
    if found is not None:
        return found
    results = run.result if isinstance(run.result, tuple) else (run.result,)
    results = [r.copy_to_host() if hasattr(r, "copy_to_host") else r for r in results]
    fields = x if isinstance(x, tuple) else (x,)
    if len(results) != len(fields) or any(np.shape(r) != f.shape for r, f in zip(results, fields)):
        return "exception", None, f"the function must return the scan of x: {len(fields)} arrays of shape {fields[0].shape}"
    unwritten = np.flatnonzero(np.any([_is_poison(np.asarray(r)) for r in results], axis=0))
    if unwritten.size:
        return "unwritten-output", int(unwritten[0]), "This element was never written: check the bound of the store and the last lanes and blocks."
    expected = user_ops.reference(user_ops.float64_copy(x), op, identity=identity, inclusive=inclusive, reverse=reverse)
    got = tuple(np.asarray(r) for r in results)
    bad = user_ops.wrong_indices(got if isinstance(x, tuple) else got[0], expected, reverse=reverse)
    if bad.size:
        return "wrong-result", int(bad[0]), ""
    return "pass", None, ""


@_child.simulated
def scan(fn, *, op="add", inclusive=True, reverse=False, dtype=np.float32, sizes=None, timeout=20.0, name=None,
         identity=None, budget=None):
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
        Seconds before a run is stopped as hanging.
    name : str, optional
        Shown in the verdict (default: ``fn``'s name).
    budget : Budget, optional
        What the run may spend (barriers, accesses per step, traffic, bank conflicts); a run
        with the right numbers that spends more fails as ``over-budget``.

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
    sizes = tuple(sorted(sizes or DEFAULT_SIZES))
    shown = sizes
    sizes, seed = _sizes_and_seed(sizes)
    if _mode["timeout"] is not None:
        timeout = min(timeout, _mode["timeout"])
    passed_sizes = []
    for n in sizes:
        rng = np.random.default_rng(seed + n)
        if user:
            fields = user_ops.random_fields(n, dtype if isinstance(dtype, tuple) else (dtype,), rng)
            x = fields if isinstance(dtype, tuple) else fields[0]
            copy = tuple(f.copy() for f in fields) if isinstance(dtype, tuple) else x.copy()
            run = tracing.record(with_poisoned_allocations, fn, copy, timeout=timeout)
            diagnosis, index, hint = _diagnose_user(run, x, op, identity, inclusive, reverse)
        else:
            x = random_input(n, op, dtype, rng)
            run = tracing.record(with_poisoned_allocations, fn, x.copy(), timeout=timeout)
            diagnosis, index, hint = _diagnose(run, x, op, inclusive, reverse)
        if diagnosis == "wrong-result":
            hint = _wrong_result_hint(index, n, passed_sizes, not inclusive)
        if diagnosis == "pass" and budget is not None:
            overspent = budget.overspent(run, n)
            if overspent is not None:
                diagnosis, (index, hint) = "over-budget", overspent
        if diagnosis != "pass":
            hint += stepping.failure_hint(diagnosis, run, x, op, inclusive, reverse)  # the stepper's call (issue 31)
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

        scan_tiles(source, out, tile_kernel, tile=block_size, threads=threads or block_size, op=op, reverse=False,
                   scan_totals=lambda totals, carries: totals_scan.run(totals, carries, op, True, False, block_size=256))
        return out

    name = getattr(getattr(tile_kernel, "py_func", tile_kernel), "__name__", "tile kernel")
    budget = kw.pop("budget", None)
    if budget is not None and budget.kernels is None:
        budget = dataclasses.replace(budget, kernels=(name,))
    return scan(run_tiles, op=op, dtype=dtype, sizes=sizes, name=name, budget=budget, **kw)
