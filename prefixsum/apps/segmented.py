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
from ..core.inputs import as_input, check_mask_dtype, same_length
from ..core.launch import Launcher
from ..core.plans import Plan, check_out, one_line_call
from ..core.registry import Capability
from ..core.streams import as_stream
from ..core.workspace import one_call_at_a_time, scratch
from ..primitives.fields import Operator
from ..scans.api import ScanPlan
from ..scans.ops import check_dtype, check_op, device_op, identity
from ..scans.tiles import array_type
from ._arrays import grid

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


@cuda.jit
def nonzero_as_int32(mask, flags):
    """``flags[i] = 1`` where ``mask[i]`` is nonzero, else 0: flags of any integer type or bool as
    the int32 0/1 field the operators read."""
    i = cuda.grid(1)
    if i < flags.shape[0]:
        flags[i] = 1 if mask[i] else 0


@functools.lru_cache(maxsize=None)
def _flag_launcher(mask_dtype):
    """The :class:`~prefixsum.core.launch.Launcher` of :func:`nonzero_as_int32` for flags of ``mask_dtype``."""
    return Launcher(nonzero_as_int32, (array_type(mask_dtype), array_type(np.dtype(np.int32))))


class SegmentedPlan(Plan):
    """:func:`segmented_scan` of ``n`` elements of ``dtype`` with flags of ``flags_dtype``, worked
    out once: made by :func:`plan_segmented_scan` (and kept by :func:`segmented_scan`).

    Call it as ``plan(x, flags, *, out=None, stream=None, temp=None)`` (see
    :mod:`prefixsum.core.plans`). Device flags of int32 are read as they are (0 or 1); device flags
    of any other integer type or bool are first turned into int32 0/1 by one element-wise launch;
    numpy flags by numpy.
    """

    def __init__(
        self, dtype, n, op="add", *, flags_dtype=np.int32, inclusive=True, reverse=False, algorithm="auto", **options
    ):
        check_op(op)
        for name, value in (("inclusive", inclusive), ("reverse", reverse)):
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False; got {value!r}")
        self.dtype, self.flags_dtype = check_dtype(dtype), check_mask_dtype(flags_dtype, "flags")
        self.n, self.shape = int(n), (int(n),)
        operator_, self.field, scan_inclusive = operator(op, self.dtype, bool(inclusive), bool(reverse))
        self.arity = operator_.arity
        self.scan = ScanPlan(
            operator_.dtypes,
            self.n,
            operator_.op,
            inclusive=scan_inclusive,
            reverse=bool(reverse),
            algorithm=algorithm,
            identity=operator_.identity,
            needs=Capability.COMBINES_EVERY_RESULT,
            **options,
        )
        self.algorithm, self.temp_bytes = self.scan.algorithm, self.scan.temp_bytes
        self._convert = None if self.flags_dtype == np.int32 else _flag_launcher(self.flags_dtype)

    def _list_kernels(self):
        converts = [] if self._convert is None else [(nonzero_as_int32, self._convert.argtypes)]
        return list(self.scan.kernels) + converts

    @one_call_at_a_time
    def __call__(self, x, flags, *, out=None, stream=None, temp=None):
        (x, on_device), (flags, _) = _checked(x, flags)
        got = (np.dtype(x.dtype), np.dtype(flags.dtype), x.shape[0])
        if got != (self.dtype, self.flags_dtype, self.n):
            raise ValueError(
                f"this plan scans {self.n} elements of {self.dtype.name} with flags of "
                f"{self.flags_dtype.name}; got {got[2]} of {got[0].name} with {got[1].name}"
            )
        return self.run(x, flags, on_device, out, as_stream(stream), None if temp is None else self.check_temp(temp))

    def run(self, x, flags, on_device, out, stream, temp):
        """The segmented scan of the checked ``x`` and ``flags`` (numpy or device, as ``on_device``) on ``stream``."""
        if not on_device:
            flags = (flags != 0).astype(np.int32)
        elif self._convert is not None and self.n:
            flags = self._int32_flags(flags, stream)
        outs = [None] * self.arity
        outs[self.field] = None if out is None else check_out(out, self.n, self.dtype, on_device, x)
        with quiet_arithmetic():
            results = self.scan.run([flags] + [x] * (self.arity - 1), False, on_device, tuple(outs), stream, temp)
        return results[self.field]

    def _int32_flags(self, flags, stream):
        """Device flags of another type as int32 0/1, by one launch into this thread's and stream's scratch."""
        converted = scratch("segmented flags", self.n, np.int32, stream)
        self._convert(*grid(self.n), flags, converted, stream=stream)
        return converted


def _checked(x, flags):
    """``((x, on_device), (flags, on_device))`` checked (:func:`prefixsum.core.inputs.as_input`): one kind, one
    length."""
    x = as_input(x, "x", check=check_dtype)
    flags = as_input(flags, "flags", mask=True)
    if x[1] != flags[1]:
        raise ValueError("x and flags must be both numpy arrays or both device arrays")
    same_length([x[0], flags[0]], ["x", "flags"])
    return x, flags


def plan_segmented_scan(
    dtype, n, op="add", *, flags_dtype=np.int32, inclusive=True, reverse=False, algorithm="auto", **options
):
    """A plan of :func:`segmented_scan` for ``n`` elements of ``dtype`` and flags of ``flags_dtype``, to call in a loop.

    Parameters
    ----------
    dtype : numpy dtype
        One of :data:`prefixsum.DTYPES`.
    n : int
        Elements per call, n >= 0.
    op, inclusive, reverse, algorithm, **options
        As :func:`segmented_scan`'s.
    flags_dtype : numpy dtype, default int32
        bool or any integer type.

    Returns
    -------
    SegmentedPlan
        ``plan(x, flags, *, out=None, stream=None, temp=None)``.
    """
    return SegmentedPlan(
        dtype, n, op, flags_dtype=flags_dtype, inclusive=inclusive, reverse=reverse, algorithm=algorithm, **options
    )


def segmented_scan(
    x, flags, op="add", *, inclusive=True, reverse=False, algorithm="auto", out=None, stream=None, **options
):
    """Scan of ``x`` restarted at every flagged element, in one pass (the look-back scan).

    Parameters
    ----------
    x : numpy.ndarray or device array, 1-D, a dtype of :data:`prefixsum.DTYPES`
        Never modified.
    flags : numpy.ndarray or device array, 1-D, same length and kind
        Where a segment starts (element 0 always starts one, flagged or not): bool or any integer
        type, nonzero starts a segment (device flags of int32 must be 0 or 1: they are read as
        they are). Never modified.
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
    out : array, optional
        Where the result goes: of ``x``'s kind, length and dtype.
    stream : optional
        The stream the scan is queued on (any form :func:`prefixsum.scan` takes). None: numba's
        default stream.
    **options
        The algorithm's options (``block_size``, ...).

    Returns
    -------
    numpy.ndarray or numba device array
        The kind of ``x``, its length and dtype.

    Raises
    ------
    TypeError
        ``x`` of an unsupported dtype, or flags neither bool nor integers.
    ValueError
        Unknown op, algorithm or option, ``x`` or flags not 1-D, or of different lengths or kinds.

    Examples
    --------
    >>> import numpy as np
    >>> segmented_scan(np.arange(1, 7), np.array([1, 0, 0, 1, 0, 0]))
    array([ 1,  3,  6,  4,  9, 15])
    >>> segmented_scan(np.arange(1, 7), np.array([1, 0, 0, 1, 0, 0]), inclusive=False, reverse=True)
    array([ 5,  3,  0, 11,  6,  0])
    """
    (x, on_device), (flags, _) = _checked(x, flags)
    dtype, flags_dtype, n = np.dtype(x.dtype), np.dtype(flags.dtype), x.shape[0]
    key = (
        "segmented_scan",
        dtype,
        n,
        flags_dtype,
        op,
        type(inclusive),
        inclusive,
        type(reverse),
        reverse,
        algorithm,
        tuple((name, type(value), value) for name, value in options.items()),
    )
    return one_line_call(
        key,
        SegmentedPlan,
        (dtype, n, op),
        dict(flags_dtype=flags_dtype, inclusive=inclusive, reverse=reverse, algorithm=algorithm, **options),
        x,
        flags,
        on_device,
        out,
        as_stream(stream),
        None,
    )


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
