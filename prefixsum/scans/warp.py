"""Warp-level scans, the first level of seed 001's hierarchical scan, written three ways.

A warp is 32 consecutive threads of a block that the GPU schedules together. Seed 001's
Figure 1 scans the 32 values of a warp in 5 steps (d = 1, 2, 4, 8, 16: lane l combines the value
of lane l - d into its own) on ``volatile`` shared memory, with no synchronisation at all,
relying on the lanes of a warp executing each instruction together. That held until Volta
(compute capability 7.0): since then the lanes of a warp are scheduled independently, so a lane
may read its neighbour's slot before or after the neighbour updated it. Three versions:

:func:`scan_volatile`
    Figure 1 as the seed writes it. numba has no ``volatile``, so the compiler may also keep
    slots in registers. Unsafe on any GPU since Volta; kept to show the race: :mod:`prefixsum.trace`
    flags it, and the simulator's schedule (each lane runs to the end before the next starts,
    one of the schedules Volta permits) gives wrong sums.
:func:`scan_syncwarp`
    The same steps, with ``cuda.syncwarp`` between the read of the neighbour's slot and the write
    of one's own, and after the write: correct on every GPU, and clean for the tracer.
:func:`scan_shfl`
    No shared memory: ``cuda.shfl_up_sync`` hands each lane the register of lane l - d. The
    fastest, and the one :mod:`prefixsum.scans.hierarchical` builds on.

and :func:`reduce_shfl`, a butterfly reduction (``shfl_xor_sync``) that leaves the warp's total
in every lane. Each factory returns a ``cuda.jit(device=True)`` function for one operator and
dtype (cached), to be called from a kernel. Work per warp: 5 steps, at most 31 + 30 + 28 + 24 + 16
= 129 combines.

numba's shuffles move int32, int64, float32 and float64 only; uint32 and uint64 values travel as
the signed integer of their width (same bits) and are converted back.

:func:`warp_scan` runs any of the three on a host array, each warp of each block scanning its own
run of (at most) 32 elements: a partial warp (a block size that is not a multiple of 32, or the
end of the array) uses the mask of the lanes it has.
"""
import functools
import math

import numpy as np
from numba import cuda

from ..core.hardware import MAX_THREADS_PER_BLOCK
from .ops import check_dtype, device_op, identity, numba_type

FULL_MASK = 0xFFFFFFFF
"""Member mask of a whole warp."""

VARIANTS = ("volatile", "syncwarp", "shfl")
_TEST_BLOCK = MAX_THREADS_PER_BLOCK  # the test kernel's shared buffer: one slot per thread of the largest block


@functools.lru_cache(maxsize=None)
def carrier(dtype):
    """Device functions ``(to, back)`` between ``dtype`` and a type numba can shuffle.

    uint32 and uint64 travel as int32 and int64 (a conversion between integers of one width keeps
    the bits); the other dtypes are shuffled as they are.
    """
    dt = check_dtype(dtype)
    if dt.kind != "u":
        same = cuda.jit(device=True)(lambda v: v)
        return same, same
    signed, unsigned = np.dtype(f"i{dt.itemsize}").type, dt.type
    return cuda.jit(device=True)(lambda v: signed(v)), cuda.jit(device=True)(lambda v: unsigned(v))


@functools.lru_cache(maxsize=None)
def scan_volatile(op, dtype, inclusive=True):
    """Seed 001's Figure 1: ``scan(buf, index)``, racy on every GPU since Volta (see above).

    ``buf[index]`` holds the lane's value, for every lane of the warp; afterwards ``buf`` holds the
    warp's inclusive scan. Returns the lane's inclusive or exclusive result.
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)

    def scan(buf, index):
        lane = index & 31
        if lane >= 1:
            buf[index] = combine(buf[index - 1], buf[index])
        if lane >= 2:
            buf[index] = combine(buf[index - 2], buf[index])
        if lane >= 4:
            buf[index] = combine(buf[index - 4], buf[index])
        if lane >= 8:
            buf[index] = combine(buf[index - 8], buf[index])
        if lane >= 16:
            buf[index] = combine(buf[index - 16], buf[index])
        if inclusive:
            return buf[index]
        return buf[index - 1] if lane > 0 else neutral

    return cuda.jit(device=True)(scan)


@functools.lru_cache(maxsize=None)
def scan_syncwarp(op, dtype, inclusive=True):
    """Figure 1 made safe: ``scan(buf, index, mask)``, ``syncwarp`` around every write.

    As :func:`scan_volatile`; ``mask`` names the lanes taking part, which must be lanes 0..k-1 of
    the warp (a partial warp keeps its first lanes). A lane first waits for the others' stores to
    ``buf``; in each step it reads its neighbour's slot, waits until every lane has read, writes
    its own slot and waits again, so that no read meets a write.
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)

    def scan(buf, index, mask):
        lane = index & 31
        cuda.syncwarp(mask)
        d = 1
        while d < 32:
            other = buf[index - d] if lane >= d else neutral
            cuda.syncwarp(mask)
            if lane >= d:
                buf[index] = combine(other, buf[index])
            cuda.syncwarp(mask)
            d *= 2
        if inclusive:
            return buf[index]
        return buf[index - 1] if lane > 0 else neutral

    return cuda.jit(device=True)(scan)


@functools.lru_cache(maxsize=None)
def scan_shfl(op, dtype, inclusive=True):
    """Figure 1 in registers: ``scan(value, mask)`` returns the lane's result.

    ``mask`` names the lanes taking part, lanes 0..k-1 of the warp, so that lane l - d is always
    one of them.
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    to, back = carrier(dtype)

    def scan(value, mask):
        lane = cuda.laneid
        d = 1
        while d < 32:
            other = back(cuda.shfl_up_sync(mask, to(value), d))
            if lane >= d:
                value = combine(other, value)
            d *= 2
        if inclusive:
            return value
        previous = back(cuda.shfl_up_sync(mask, to(value), 1))
        return previous if lane > 0 else neutral

    return cuda.jit(device=True)(scan)


@functools.lru_cache(maxsize=None)
def reduce_shfl(op, dtype):
    """``reduce(value)``: the combination of the values of a whole warp, in every lane.

    A butterfly: after the step with ``shfl_xor_sync(..., d)`` each lane holds the total of its
    aligned group of 2d lanes. The operands meet in another order than a scan's, which is exact
    for the four operators (they are commutative) up to float rounding.
    """
    combine = device_op(op, dtype)
    to, back = carrier(dtype)

    def reduce(value):
        d = 16
        while d > 0:
            value = combine(value, back(cuda.shfl_xor_sync(FULL_MASK, to(value), d)))
            d >>= 1
        return value

    return cuda.jit(device=True)(reduce)


@cuda.jit(device=True)
def lanes_mask(n):
    """The mask of the lanes of the calling thread's warp that exist and hold an element below n.

    Thread i of the grid holds element i; a warp's lanes are 32 consecutive threads of a block.
    """
    t = cuda.threadIdx.x
    first = cuda.blockIdx.x * cuda.blockDim.x + t - (t & 31)
    lanes = min(32, min(n, (cuda.blockIdx.x + 1) * cuda.blockDim.x) - first)
    return FULL_MASK >> (32 - lanes)


@functools.lru_cache(maxsize=None)
def warp_scan_kernel(variant, op, dtype, inclusive=True):
    """Kernel ``(x, out)``: every warp scans its own run of ``x`` with the ``variant`` scan.

    Thread ``i`` of the grid holds ``x[i]``; a warp's lanes are the threads of its block from a
    multiple of 32 on that are below ``len(x)``, so the last warp of a block may be partial.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown warp scan {variant!r}; allowed: {', '.join(VARIANTS)}")
    element = numba_type(dtype)

    if variant == "shfl":
        scan = scan_shfl(op, dtype, inclusive)

        def warp_scans(x, out):
            i = cuda.grid(1)
            if i < x.shape[0]:
                out[i] = scan(x[i], lanes_mask(x.shape[0]))

    elif variant == "syncwarp":
        scan = scan_syncwarp(op, dtype, inclusive)

        def warp_scans(x, out):
            buf = cuda.shared.array(_TEST_BLOCK, element)
            t = cuda.threadIdx.x
            i = cuda.grid(1)
            if i < x.shape[0]:
                buf[t] = x[i]
                out[i] = scan(buf, t, lanes_mask(x.shape[0]))

    else:
        scan = scan_volatile(op, dtype, inclusive)

        def warp_scans(x, out):
            buf = cuda.shared.array(_TEST_BLOCK, element)
            t = cuda.threadIdx.x
            i = cuda.grid(1)
            if i < x.shape[0]:
                buf[t] = x[i]
                out[i] = scan(buf, t)

    return cuda.jit(warp_scans)


def warp_scan(x, variant="shfl", op="add", *, inclusive=True, threads=32):
    """Scan every run of 32 elements (a warp's) of the host array ``x`` with one warp scan.

    Parameters
    ----------
    x : numpy.ndarray
        1-D, any dtype of :data:`prefixsum.DTYPES`.
    variant : {"volatile", "syncwarp", "shfl"}
    op : str
    inclusive : bool
    threads : int
        Threads per block, 1 to 1024; when not a multiple of 32 the last warp of each block is
        partial, and its runs are shorter.

    Returns
    -------
    numpy.ndarray
        The per-warp scans (element i combines the elements of its warp up to i).
    """
    x = np.ascontiguousarray(x)
    if not 1 <= threads <= _TEST_BLOCK:
        raise ValueError(f"threads={threads!r} must be from 1 to {_TEST_BLOCK}")
    out = np.empty_like(x)
    if len(x):
        warp_scan_kernel(variant, op, x.dtype, inclusive)[math.ceil(len(x) / threads), threads](x, out)
    return out
