"""The operators and element types every scan supports, and their identities.

A scan needs an associative operator with an identity element e (``e op x == x``). The
exclusive scan starts from e, and the padding of a partial tile is e, so that padded lanes
never change a result.
"""

import functools
import sys

import numba
import numpy as np
from numba import cuda

from .fields import FieldTypes, Operator, is_fields, user_combine

OPS = ("add", "mul", "max", "min")
DTYPES = tuple(np.dtype(t) for t in ("int32", "uint32", "int64", "uint64", "float32", "float64"))
_ALLOWED = frozenset(DTYPES)

_HOST_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def check_op(op):
    """Raise ValueError unless ``op`` is one of :data:`OPS`."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; allowed ops: {', '.join(OPS)}")


def check_dtype(dtype):
    """Return ``dtype`` as a numpy dtype, or raise TypeError unless it is one of :data:`DTYPES`.

    A dtype of :data:`DTYPES` in the other byte order is refused with a message that says so:
    kernels work in the machine's byte order. Host arrays are converted first (:func:`native`).
    """
    if isinstance(dtype, np.dtype) and dtype in _ALLOWED:  # the common case, answered by one hash
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is not None and not dt.isnative and dt.newbyteorder("=") in DTYPES:
        order = "big" if dt.byteorder == ">" else "little"
        raise TypeError(
            f"unsupported byte order: dtype {dt.str!r} is {order}-endian ({dt.name}), but kernels "
            f"work in this machine's {sys.byteorder}-endian order; convert it first, e.g. "
            f"x.astype(x.dtype.newbyteorder('='))"
        )
    if dt not in DTYPES:
        raise TypeError(
            f"unsupported dtype {dtype if dt is None else str(dt)!r}; "
            f"allowed dtypes: {', '.join(d.name for d in DTYPES)}"
        )
    return dt


def native(x):
    """``x`` (a numpy array) in this machine's byte order: ``x`` itself, or a converted copy.

    numpy computes on either byte order; a kernel reads raw bytes, so a big-endian array on a
    little-endian machine is converted (the values, and hence the dtype's kind and width, stay
    the same). The caller's array is never modified.
    """
    return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))


def identity(op, dtype):
    """The identity element of ``op`` as a numpy scalar of ``dtype``.

    0 for add, 1 for mul, the lowest value (or -inf) for max, the highest value (or +inf) for min;
    a user operator's own (:class:`~prefixsum.primitives.fields.Operator`), one scalar per field.
    """
    if isinstance(op, Operator):
        return op.identity
    check_op(op)
    dt = check_dtype(dtype)
    if op == "add":
        return dt.type(0)
    if op == "mul":
        return dt.type(1)
    if dt.kind == "f":
        return dt.type(-np.inf if op == "max" else np.inf)
    info = np.iinfo(dt)
    return dt.type(info.min if op == "max" else info.max)


def host_ufunc(op):
    """The numpy ufunc that computes ``op`` elementwise (np.add, np.multiply, ...)."""
    check_op(op)
    return _HOST_UFUNCS[op]


def numba_type(dtype):
    """The numba scalar type of a numpy dtype (for shared-memory arrays and signatures); for a
    tuple of dtypes, their types as :class:`~prefixsum.primitives.fields.FieldTypes`."""
    if is_fields(dtype):
        return FieldTypes(numba.from_dtype(np.dtype(d)) for d in dtype)
    return numba.from_dtype(np.dtype(dtype))


_COMBINERS = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "max": lambda a, b: a if a >= b else b,
    "min": lambda a, b: a if a <= b else b,
}
# numpy's maximum and minimum propagate NaN: once a NaN is combined, the result stays NaN. A bare
# comparison does not (NaN >= b is False, so max(NaN, 2) would be 2), and every algorithm would
# then drop NaN at another place. ``a != a`` holds only for NaN; integers keep the bare
# comparison, so they pay nothing for it (on the simulator each comparison costs Python time).
_FLOAT_COMBINERS = {
    **_COMBINERS,
    "max": lambda a, b: a if a >= b or a != a else b,
    "min": lambda a, b: a if a <= b or a != a else b,
}


@functools.lru_cache(maxsize=None)
def device_op(op, dtype):
    """The ``cuda.jit(device=True)`` function ``combine(a, b)`` of ``op`` in ``dtype``.

    Kernels take it as a closure constant, so one kernel source serves every operator and type.
    The result is cast back to ``dtype`` because numba widens int32 and uint32 arithmetic to 64
    bits: without the cast a value kept in a register would not wrap around as numpy's does.
    For floats, max and min propagate NaN as ``np.maximum`` and ``np.minimum`` do, whichever
    operand it is, so every algorithm gives numpy's result whatever order it combines in.
    A user operator (:class:`~prefixsum.primitives.fields.Operator`) gives its combine on tuples.
    """
    if isinstance(op, Operator):
        return user_combine(op)
    check_op(op)
    dt = check_dtype(dtype)
    cast = dt.type
    combine = cuda.jit(device=True)((_FLOAT_COMBINERS if dt.kind == "f" else _COMBINERS)[op])

    @cuda.jit(device=True)
    def combine_in_dtype(a, b):
        return cast(combine(a, b))

    return combine_in_dtype
