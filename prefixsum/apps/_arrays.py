"""Host or device: what every application does with its inputs and results."""
import numpy as np
from numba import cuda

from ..core.arrays import as_numba, is_device_array

THREADS = 256
"""Most threads per block of the applications' element-wise kernels."""


def to_device(x, name):
    """``(device array, was_on_device)`` for a 1-D host or device array ``x``; host data is copied."""
    if is_device_array(x):
        x = as_numba(x)
        if not x.is_c_contiguous():
            raise ValueError(f"device array {name} must be contiguous")
        on_device = True
    else:
        x = cuda.to_device(np.ascontiguousarray(x))
        on_device = False
    if len(x.shape) != 1:
        raise ValueError(f"{name} must be 1-D; got shape {tuple(x.shape)}")
    return x, on_device


def values_and_mask(x, mask):
    """``(x, mask, x_was_on_device)`` on the device, for the compactions; raises if their lengths differ."""
    x, on_device = to_device(x, "x")
    mask, _ = to_device(mask, "mask")
    if mask.shape[0] != x.shape[0]:
        raise ValueError(f"x and mask must have one length; got {x.shape[0]} and {mask.shape[0]}")
    return x, mask, on_device


def grid(n):
    """``(blocks, threads)`` of an element-wise launch over ``n`` elements.

    :data:`THREADS` per block, fewer (whole warps) when ``n`` is smaller: the simulator runs
    every thread of a block, idle or not.
    """
    threads = min(THREADS, max(32, -(-n // 32) * 32))
    return max(1, -(-n // threads)), threads


def back(x, on_device):
    """``x`` as the caller gave its input: the device array, or a numpy copy."""
    return x if on_device else x.copy_to_host()
