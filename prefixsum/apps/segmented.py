"""Segmented scans in one pass: a (flag, value) operator carried by the look-back scan.

A segmented scan restarts at every flagged element (a *head*): ``flags = [1, 0, 0, 1, 0]`` cuts
``x`` into ``x[0:3]`` and ``x[3:5]``, and each is scanned on its own. One scan of the pairs
``(flag, value)`` does it, with the operator

    ``(f, u) + (g, v) = (f | g, v if g else u + v)``

associative whenever + is (check the three cases of where the last flag falls), with identity
``(0, e)``. It is a user operator on two fields (:mod:`prefixsum.scans.user_ops`), so it rides
on the single-pass look-back scan: one launch, each tile's state a (flag, value) pair.

The three other variants need one more fact about a partial result than the pair holds, and
each gets it from the bits of the flag field (the caller's flags are 0 or 1, so bits 1 and 2
are free: bit 1 marks an *interior* result, bit 2 the identity) and, where a third field is
needed, from the values array passed twice (its raw copy is never read: an element becomes an
interior result, by its first combine, before any result is written):

* **exclusive**: element i gets ``x[s..i-1]`` (s its segment's head; the identity at a head).
  An inclusive scan of ``(flags, x, x)`` carries ``w``, the value *before the last element*:
  ``w(p + q) = w(q) if q holds a head else v(p) + w(q)``, where a single element's w is the
  identity. The answer is the w field.
* **reverse** (suffix): element i gets ``x[i..t]``, t the last element of its segment. Scanning
  from the end, a segment boundary lies between two partial results exactly when the earlier
  one (higher indices) starts with a head, so the flag field carries the head flag of a result's
  *lowest* element (bit 0) and whether a boundary lies inside it (bit 1).
* **reverse exclusive**: ``x[i+1..t]``: the exclusive reverse scan of the same pairs, plus a
  field ``u``, the value as the next element sees it (the identity if a boundary follows).

Every op of :data:`prefixsum.scans.ops.OPS` combines the values as :func:`prefixsum.scan`
does (integers wrap as numpy's, max and min propagate NaN as numpy's ``maximum`` and
``minimum``).
"""
import functools

import numpy as np
from numba import cuda

from ..core.arithmetic import quiet_arithmetic
from ..core.arrays import is_device_array, result_array
from ..primitives.fields import Operator
from ..scans import user_ops
from ..scans.ops import check_dtype, check_op, device_op, identity
from ._arrays import back, to_device

HEAD, INTERIOR, EMPTY = 1, 2, 4
"""Bits of the flag field: a head (forward) or the lowest element's head (reverse); an interior
result (its other fields are final); the identity."""


def _forward_inclusive(combine, neutral):
    def segmented(p, q):
        return (p[0] | q[0], q[1] if q[0] else combine(p[1], q[1]))
    return segmented


def _forward_exclusive(combine, neutral):
    @cuda.jit(device=True)
    def seal(e):  # an element as an interior result: w is the identity for a single element
        if e[0] & EMPTY:
            return (np.int32(e[0]), e[1], e[2])
        return (np.int32(e[0] & HEAD | INTERIOR), e[1], e[2] if e[0] & INTERIOR else neutral)

    def segmented(p, q):
        if q[0] & EMPTY:
            return seal(p)
        if p[0] & EMPTY:
            return seal(q)
        w = q[2] if q[0] & INTERIOR else neutral
        if q[0] & HEAD:
            return (np.int32(INTERIOR | HEAD), q[1], w)
        return (np.int32(p[0] & HEAD | INTERIOR), combine(p[1], q[1]), combine(p[1], w))
    return segmented


def _reverse_inclusive(combine, neutral):
    def segmented(p, q):  # p: the higher indices, scanned first
        if q[0] & EMPTY:
            return p
        if p[0] & EMPTY:
            return q
        cut = (p[0] & HEAD) != 0 or (q[0] & INTERIOR) != 0  # a boundary between them, or inside q
        interior = INTERIOR if cut or (p[0] & INTERIOR) != 0 else 0
        return (np.int32(q[0] & HEAD | interior), q[1] if cut else combine(p[1], q[1]))
    return segmented


def _reverse_exclusive(combine, neutral):
    inclusive = cuda.jit(device=True)(_reverse_inclusive(combine, neutral))

    @cuda.jit(device=True)
    def seal(e):  # u: what the element before (lower index) receives
        return (np.int32(e[0]), e[1], neutral if e[0] & HEAD else e[1])

    def segmented(p, q):
        if q[0] & EMPTY:
            return seal(p)
        if p[0] & EMPTY:
            return seal(q)
        return seal(inclusive((p[0], p[1]), (q[0], q[1])))
    return segmented


_VARIANTS = {  # (inclusive, reverse): (operator, fields, result field, scan inclusive)
    (True, False): (_forward_inclusive, 2, 1, True),
    (False, False): (_forward_exclusive, 3, 2, True),
    (True, True): (_reverse_inclusive, 2, 1, True),
    (False, True): (_reverse_exclusive, 3, 2, False),
}


@functools.lru_cache(maxsize=None)
def operator(op, dtype, inclusive, reverse):
    """``(Operator, result field, scan inclusive)``: the user operator of a segmented scan of ``op`` on ``dtype``."""
    make, fields, result, scan_inclusive = _VARIANTS[inclusive, reverse]
    neutral = identity(op, dtype)
    fn = cuda.jit(device=True)(make(device_op(op, dtype), neutral))
    flag = np.int32(0 if make is _forward_inclusive else EMPTY)
    dtypes = (np.dtype(np.int32),) + (dtype,) * (fields - 1)
    return Operator(fn, dtypes, (flag,) + (neutral,) * (fields - 1), False), result, scan_inclusive


def _flags(flags, n):
    """The flags on the device as int32 0/1 (a host array of bool or integers is converted, nonzero as 1)."""
    if is_device_array(flags):
        dev, _ = to_device(flags, "flags")
        if np.dtype(dev.dtype) != np.int32:
            raise TypeError(f"device flags must be int32 (0 or 1); got {np.dtype(dev.dtype).name}")
    else:
        host = np.asarray(flags)
        if host.dtype != np.bool_ and host.dtype.kind not in "iu":
            raise TypeError(f"flags must be bool or integers; got dtype {host.dtype.name}")
        if host.ndim != 1:
            raise ValueError(f"flags must be 1-D; got shape {host.shape}")
        dev = cuda.to_device((host != 0).astype(np.int32))
    if dev.shape[0] != n:
        raise ValueError(f"x and flags must have one length; got {n} and {dev.shape[0]}")
    return dev


def segmented_scan(x, flags, op="add", *, inclusive=True, reverse=False, algorithm="auto", **options):
    """Scan of ``x`` restarted at every flagged element, in one pass (the look-back scan).

    Parameters
    ----------
    x : numpy.ndarray or device array, 1-D, a dtype of :data:`prefixsum.DTYPES`
        Never modified.
    flags : numpy.ndarray or device array, 1-D, same length
        Where a segment starts (element 0 always starts one, flagged or not). A numpy array of
        bool or integers (nonzero starts a segment); a device array must be int32 of 0 and 1.
        Never modified.
    op : {"add", "mul", "max", "min"}
    inclusive : bool, default True
        Element i combines its segment's elements up to i; if False, up to i - 1 (the identity
        at the segment's first element).
    reverse : bool, default False
        Suffix scan within each segment: element i combines ``x[i..t]`` (``x[i+1..t]`` if
        exclusive), t the segment's last element.
    algorithm : str, default "auto"
        A scan that carries a user operator and combines every element before writing it
        (``"lookback"``, which "auto" picks, or ``"hierarchical"``).
    **options
        The algorithm's options (``block_size``, ...).

    Returns
    -------
    numpy.ndarray or numba device array
        The kind of ``x``, its length and dtype.

    Raises
    ------
    TypeError
        ``x`` of an unsupported dtype, flags neither bool nor integers, or device flags not int32.
    ValueError
        Unknown op, algorithm or option, ``x`` or flags not 1-D, or of different lengths.

    Examples
    --------
    >>> import numpy as np
    >>> segmented_scan(np.arange(1, 7), np.array([1, 0, 0, 1, 0, 0]))
    array([ 1,  3,  6,  4,  9, 15])
    >>> segmented_scan(np.arange(1, 7), np.array([1, 0, 0, 1, 0, 0]), inclusive=False, reverse=True)
    array([ 5,  3,  0, 11,  6,  0])
    """
    check_op(op)
    for name, value in (("inclusive", inclusive), ("reverse", reverse)):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False; got {value!r}")
    x_dev, on_device = to_device(x, "x")
    dtype = check_dtype(x_dev.dtype)
    n = x_dev.shape[0]
    flags_dev = _flags(flags, n)
    chosen = user_ops.choose(algorithm)
    if not chosen.combines_every_result:
        raise ValueError(f"algorithm {chosen.name!r} may write an element it never combined; a segmented scan "
                         f"runs on {', '.join(a.name for a in user_ops.carriers() if a.combines_every_result)} or auto")
    resolved = chosen.resolve_options(options)
    operator_, result, scan_inclusive = operator(op, dtype, bool(inclusive), bool(reverse))
    outs = [result_array(n, dt) for dt in operator_.dtypes]  # the fields not returned are recycled
    if n:
        with quiet_arithmetic():
            user_ops.run([flags_dev] + [x_dev] * (operator_.arity - 1), outs, operator_, scan_inclusive,
                         bool(reverse), chosen, **resolved)
    return back(outs[result], on_device)


def reference(x, flags, op="add", *, inclusive=True, reverse=False):
    """The segmented scan by numpy, segment by segment: the truth for tests (slow for many segments)."""
    x = np.asarray(x)
    heads = np.flatnonzero(np.asarray(flags) != 0)
    out = np.empty_like(x)
    ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    neutral = identity(op, x.dtype)
    with quiet_arithmetic():
        for part in np.split(np.arange(x.size), heads[heads > 0]):
            if not part.size:
                continue
            values = x[part][::-1] if reverse else x[part]
            scanned = ufunc.accumulate(values, dtype=x.dtype)
            if not inclusive:
                scanned = np.concatenate(([neutral], scanned[:-1])).astype(x.dtype)
            out[part] = scanned[::-1] if reverse else scanned
    return out
