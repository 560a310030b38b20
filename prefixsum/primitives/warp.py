"""Warp primitives: a warp's scan and reduction, in registers or in shared memory.

A warp is 32 consecutive threads of a block that the GPU schedules together. Figure 1 of Lungu, Petroşanu and Pîrjan
(2011) scans the 32 values of a warp in 5 steps (d = 1, 2, 4, 8, 16: lane l combines the value of lane l - d into its
own). Since Volta (compute capability 7.0) the lanes of a warp are scheduled independently, so the steps need the warp's
own synchronisation:

:func:`scan_syncwarp`
    The steps on shared memory, with ``cuda.syncwarp`` between the read of the neighbour's slot
    and the write of one's own, and after the write: correct on every GPU, and clean for the tracer.
:func:`scan_shfl`
    No shared memory: ``cuda.shfl_up_sync`` hands each lane the register of lane l - d. The
    fastest, and the one the block scan (:mod:`.block`) builds on.

and :func:`reduce_shfl`, a butterfly reduction (``shfl_xor_sync``) that leaves the warp's total in every lane, and
:func:`warp_rank`, a lane's rank among its warp's lanes that keep something (one ballot: the one-pass compaction's, and
the sort's count of kept keys). Each factory returns a ``cuda.jit(device=True)`` function for one operator and dtype
(cached), to be called from a kernel. Work per warp: 5 steps, at most 31 + 30 + 28 + 24 + 16 = 129 combines. (Figure 1
as the paper writes it, on ``volatile`` memory and racy since Volta, is a lesson:
:func:`prefixsum.classroom.lessons.scan_volatile`.)

numba's shuffles move int32, int64, float32 and float64 only; uint32 and uint64 values travel as
the signed integer of their width (same bits) and are converted back (:func:`carrier`).
"""

import functools

import numpy as np
from numba import cuda

from .fields import Fieldwise, device_function, is_fields
from .ops import check_dtype, device_op, identity

FULL_MASK = 0xFFFFFFFF
"""Member mask of a whole warp."""


@functools.lru_cache(maxsize=None)
def carrier(dtype):
    """Device functions ``(to, back)`` between ``dtype`` and a type numba can shuffle.

    uint32 and uint64 travel as int32 and int64 (a conversion between integers of one width keeps
    the bits); the other dtypes are shuffled as they are. For a tuple of dtypes, one pair per
    field (:class:`~prefixsum.primitives.fields.Fieldwise`): a tuple is shuffled field by field.
    """
    if is_fields(dtype):
        pairs = [carrier(d) for d in dtype]
        return Fieldwise(p[0] for p in pairs), Fieldwise(p[1] for p in pairs)
    dt = check_dtype(dtype)
    if dt.kind != "u":
        same = cuda.jit(device=True)(lambda v: v)
        return same, same
    signed, unsigned = np.dtype(f"i{dt.itemsize}").type, dt.type
    return cuda.jit(device=True)(lambda v: signed(v)), cuda.jit(device=True)(lambda v: unsigned(v))


@functools.lru_cache(maxsize=None)
def scan_syncwarp(op, dtype, inclusive=True):
    """Figure 1 made safe: ``scan(buf, index, mask)``, ``syncwarp`` around every write.

    ``buf[index]`` holds the lane's value, for every lane of the warp; afterwards ``buf`` holds the
    warp's inclusive scan, and the lane's inclusive or exclusive result is returned. ``mask``
    names the lanes taking part, which must be lanes 0..k-1 of the warp (a partial warp keeps
    its first lanes). A lane first waits for the others' stores to
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

    return device_function(scan, dtype)


@functools.lru_cache(maxsize=None)
def reduce_shfl(op, dtype):
    """``reduce(value)``: the combination of the values of a whole warp, in every lane.

    A butterfly: after the step with ``shfl_xor_sync(..., d)``, d = 1, 2, 4, 8, 16, each lane
    holds the total of its aligned group of 2d lanes. Lane 0 always combines its own group with
    the next one, so its total is in lane order, as an operator that does not commute (a user
    operator) needs; other lanes may hold the operands in another order, which only the four
    built-in operators (commutative) allow, up to float rounding.
    """
    combine = device_op(op, dtype)
    to, back = carrier(dtype)

    def reduce(value):
        d = 1
        while d < 32:
            value = combine(value, back(cuda.shfl_xor_sync(FULL_MASK, to(value), d)))
            d <<= 1
        return value

    return device_function(reduce, dtype)


@cuda.jit(device=True)
def lanes_mask(n):
    """The mask of the lanes of the calling thread's warp that exist and hold an element below n.

    Thread i of the grid holds element i; a warp's lanes are 32 consecutive threads of a block.
    """
    t = cuda.threadIdx.x
    first = cuda.blockIdx.x * cuda.blockDim.x + t - (t & 31)
    lanes = min(32, min(n, (cuda.blockIdx.x + 1) * cuda.blockDim.x) - first)
    return FULL_MASK >> (32 - lanes)


@cuda.jit(device=True)
def warp_rank(kept):
    """``(rank, count)``: the lanes of the caller's warp below it whose ``kept`` is True, and all such lanes.

    Every lane of the warp must call it. One ballot: bit l is lane l's ``kept``; the bits below
    the caller's lane (``lanemask_lt``) counted are its rank, all of them the warp's count.
    """
    ballot = np.uint32(cuda.ballot_sync(FULL_MASK, kept))
    return cuda.popc(ballot & cuda.lanemask_lt()), cuda.popc(ballot)
