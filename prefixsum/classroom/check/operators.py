"""The check of a user operator (:func:`operator`: associative, with an identity) and the diagnosis of
one run of a scan with one (:func:`diagnose_user_scan`), which :func:`.scan_checks.scan` gives."""

import numpy as np

from ...scans import user_ops
from ...scans.ops import check_dtype
from .. import child as _child
from .diagnosis import _trace_diagnosis
from .mode import _SEED
from .results import CheckResult, _is_poison


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
        elif not abs(float(a) - float(b)) <= (1e-3 if dt.itemsize == 4 else 1e-6) * max(
            1.0, abs(float(a)), abs(float(b))
        ):
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
                    return CheckResult(
                        False,
                        "wrong-identity",
                        name,
                        (samples,),
                        hint=(
                            f"With e = {show(e)} and x = {show(a)}, {side} = {show(value)}, not x. The identity must "
                            "leave every element unchanged on both sides: the scan pads partial tiles and starts the "
                            "exclusive scan with it."
                        ),
                    )
            left, right = combine(combine(a, b), c), combine(a, combine(b, c))
            if not _same(left, right, dtypes):
                return CheckResult(
                    False,
                    "not-associative",
                    name,
                    (samples,),
                    hint=(
                        f"op(op(a, b), c) = {show(left)} but op(a, op(b, c)) = {show(right)} for a = {show(a)}, "
                        f"b = {show(b)}, c = {show(c)}. A parallel scan regroups the combines, so the operator must be "
                        "associative. Clamping, averaging and subtracting are not; carry more state in the element (a "
                        "tuple) until the combine is, as an affine map x -> a x + b carries (a, b)."
                    ),
                )
    return CheckResult(True, "pass", name, (samples,))


def diagnose_user_scan(run, x, op, identity, inclusive, reverse):
    """``(diagnosis, index, hint)`` for one traced run of a scan with a user operator."""
    found = _trace_diagnosis(
        run,
        cell=lambda array, index: f"{array}[{index}]",
        uninitialized_advice="fill every cell (with the identity past n) before the barrier.",
    )
    if found is not None:
        return found
    results = run.result if isinstance(run.result, tuple) else (run.result,)
    results = [r.copy_to_host() if hasattr(r, "copy_to_host") else r for r in results]
    fields = x if isinstance(x, tuple) else (x,)
    if len(results) != len(fields) or any(np.shape(r) != f.shape for r, f in zip(results, fields)):
        return (
            "exception",
            None,
            f"the function must return the scan of x: {len(fields)} arrays of shape {fields[0].shape}",
        )
    unwritten = np.flatnonzero(np.any([_is_poison(np.asarray(r)) for r in results], axis=0))
    if unwritten.size:
        return (
            "unwritten-output",
            int(unwritten[0]),
            "This element was never written: check the bound of the store and the last lanes and blocks.",
        )
    expected = user_ops.reference(user_ops.float64_copy(x), op, identity=identity, inclusive=inclusive, reverse=reverse)
    got = tuple(np.asarray(r) for r in results)
    bad = user_ops.wrong_indices(got if isinstance(x, tuple) else got[0], expected, reverse=reverse)
    if bad.size:
        return "wrong-result", int(bad[0]), ""
    return "pass", None, ""
