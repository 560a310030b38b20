"""The operators and element types every scan supports, and their identities.

A scan needs an associative operator with an identity element e (``e op x == x``). The
exclusive scan starts from e, and the padding of a partial tile is e, so that padded lanes
never change a result.
"""
import functools

import numba
import numpy as np
from numba import cuda

OPS = ("add", "mul", "max", "min")
DTYPES = tuple(np.dtype(t) for t in ("int32", "uint32", "int64", "uint64", "float32", "float64"))

_HOST_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def check_op(op):
    """Raise ValueError unless ``op`` is one of :data:`OPS`."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; allowed ops: {', '.join(OPS)}")


def check_dtype(dtype):
    """Return ``dtype`` as a numpy dtype, or raise TypeError unless it is one of :data:`DTYPES`."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt not in DTYPES:
        raise TypeError(
            f"unsupported dtype {dtype if dt is None else dt.name!r}; "
            f"allowed dtypes: {', '.join(d.name for d in DTYPES)}"
        )
    return dt


def identity(op, dtype):
    """The identity element of ``op`` as a numpy scalar of ``dtype``.

    0 for add, 1 for mul, the lowest value (or -inf) for max, the highest value (or +inf) for min.
    """
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
    """The numba scalar type of a numpy dtype (for shared-memory arrays and signatures)."""
    return numba.from_dtype(np.dtype(dtype))


_COMBINERS = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "max": lambda a, b: a if a >= b else b,
    "min": lambda a, b: a if a <= b else b,
}


@functools.lru_cache(maxsize=None)
def device_op(op, dtype):
    """The ``cuda.jit(device=True)`` function ``combine(a, b)`` of ``op`` in ``dtype``.

    Kernels take it as a closure constant, so one kernel source serves every operator and type.
    The result is cast back to ``dtype`` because numba widens int32 and uint32 arithmetic to 64
    bits: without the cast a value kept in a register would not wrap around as numpy's does.
    """
    check_op(op)
    cast = check_dtype(dtype).type
    combine = cuda.jit(device=True)(_COMBINERS[op])

    @cuda.jit(device=True)
    def combine_in_dtype(a, b):
        return cast(combine(a, b))

    return combine_in_dtype
