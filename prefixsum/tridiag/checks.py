"""The checks of a tridiagonal solve's arguments, one wording for every caller: the four arrays
(:func:`check_systems`), ``out=`` as x (:func:`check_solution_out`) and a plan's dtype and shape
(:func:`check_plan_shape`).

:mod:`.api`'s calls and plans, :mod:`.householder` and :mod:`prefixsum.apps.stone` check with
these, on :func:`prefixsum.core.inputs.as_input` and :func:`prefixsum.core.plans.check_out`.
"""

import numpy as np

from ..core.inputs import as_input
from ..core.plans import check_out
from .registry import DTYPES

_NAMES = "abcd"


def check_float_dtype(dtype, name):
    """``dtype`` if a tridiagonal solve takes it (float32, float64), else a TypeError naming ``name``."""
    if dtype not in DTYPES:
        raise TypeError(f"{name}: unsupported dtype {dtype.name!r}; the allowed dtypes are float32 and float64")
    return dtype


_DTYPE_CHECKS = {name: (lambda dtype, name=name: check_float_dtype(dtype, name)) for name in _NAMES}


def check_systems(a, b, c, d):
    """``(arrays, on_device)``: the four arrays checked (:func:`prefixsum.core.inputs.as_input`,
    one wording for every call; device arrays as numba's) and which are on the device, or an error
    naming the value: a dtype other than float32 or float64 or mixed dtypes (TypeError), ndim
    other than 1 or 2, a non-contiguous device array, different shapes or n = 0 (ValueError)."""
    checked = [as_input(v, name, check=_DTYPE_CHECKS[name], ndim=(1, 2)) for v, name in zip((a, b, c, d), _NAMES)]
    arrays = [array for array, _ in checked]
    on_device = [dev for _, dev in checked]
    dtype, shape = arrays[3].dtype, tuple(arrays[3].shape)
    if any(v.dtype != dtype for v in arrays):
        raise TypeError(f"a, b, c, d must have one dtype; got {', '.join(np.dtype(v.dtype).name for v in arrays)}")
    if any(tuple(v.shape) != shape for v in arrays):
        raise ValueError(f"a, b, c, d must have one shape; got {', '.join(str(tuple(v.shape)) for v in arrays)}")
    if shape[-1] < 1:
        raise ValueError(f"the systems need n >= 1 unknowns; got shape {shape}")
    return arrays, on_device


def check_solution_out(out, arrays, on_device, shape, dtype):
    """``out`` checked as x (:func:`prefixsum.core.plans.check_out`): ``d``'s kind, shape and
    dtype, contiguous, sharing no memory with an input of its kind."""
    out = check_out(out, shape, dtype, on_device[3], arrays[3])
    for v, dev in zip(arrays[:3], on_device[:3]):
        if dev == on_device[3]:
            check_out(out, shape, dtype, dev, v)
    return out


def check_plan_shape(dtype, shape):
    """``(dtype, shape)`` of a :class:`.api.SolvePlan`: the numpy dtype, float32 or float64
    (else TypeError), and the shape as a tuple of ints, ``(n,)`` or ``(batch, n)`` from n, (n,) or
    (batch, n), with batch >= 0 and n >= 1 (else ValueError)."""
    dtype = check_float_dtype(np.dtype(dtype), "dtype")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if len(shape) not in (1, 2) or not all(
        isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 0 for k in shape
    ):
        raise ValueError(f"shape must be n, (n,) or (batch, n) of integers >= 0; got {shape!r}")
    shape = tuple(map(int, shape))
    if shape[-1] < 1:
        raise ValueError(f"the systems need n >= 1 unknowns; got shape {shape}")
    return dtype, shape
