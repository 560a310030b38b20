"""Block primitives: a block's scan and reduction, and a tile's coalesced load and store.

As CUB's BlockLoad / BlockScan / BlockStore sit under its agents, these device functions sit
under the scans (and :func:`block_sum` under the Householder reduction); none is a kernel.

* :func:`tile_loader` and :func:`tile_writer`: a tile of ``block_size * items`` elements is
  loaded so that thread t owns the ``items`` consecutive elements from ``t * items`` on (a
  *blocked* arrangement). The loads are coalesced: step k has thread t read element
  ``k * block_size + t`` of the tile into shared memory; after a barrier each thread reads its
  own run from there (the transpose through shared memory), and the results go out the same way.
  The shared index skips one slot every 32 (``j + j // 32``, :func:`staged_size`), so that the 32
  lanes of a warp reading runs of 2, 4, 8 or 16 words hit 32 different banks.
* :func:`block_scan` (seed 001's Figure 2 over shuffles) and :func:`block_reduce`: every warp
  scans or reduces with :mod:`.warp`'s shuffles, lane 31 (or 0) writes the warp's total to
  shared memory, warp 0 combines those totals.
* :func:`block_sum`: a float sum over a block of any power-of-two size known only at run time,
  returned to every thread, by a tree in a shared scratch array (no shuffles, no operator).
* :func:`position`: where logical element i of a forward or reverse (suffix) scan lives.
"""
import functools

import numpy as np
from numba import cuda

from ..core.hardware import MAX_SHARED_BYTES_PER_BLOCK
from .fields import device_function
from .ops import device_op, identity, numba_type
from .warp import FULL_MASK, carrier, reduce_shfl, scan_shfl

_PADDED_FLOAT64_BYTES = 8 * 33 / 32  # a staged float64 element: one slot skipped every 32 (staged_size)
MAX_TILE = 1 << (int(MAX_SHARED_BYTES_PER_BLOCK / _PADDED_FLOAT64_BYTES).bit_length() - 1)
"""Most elements per tile: the largest power of two whose padded float64 tile fits the shared
memory of a block (4096: 33 KiB of the 48 KiB)."""


@functools.lru_cache(maxsize=None)
def position(reverse):
    """Device function ``position(i, n)``: the array index of logical element ``i``."""
    if reverse:
        return cuda.jit(device=True)(lambda i, n: n - 1 - i)
    return cuda.jit(device=True)(lambda i, n: i)


@functools.lru_cache(maxsize=None)
def unsigned_position(reverse):
    """Device function ``at(i, d, n)``: the array index of logical element ``i + d``, unsigned.

    numba guards every signed index against a negative value (``x[-1]`` is the last element): a
    shift, an ``and`` and an add in 64 bits on every access. An unsigned index needs no guard.
    In a loop that reads ``x[at(i, d, n)]`` with ``i`` the same on every step and ``d`` a
    constant of the unrolled loop, the compiler works out the index of ``i`` once and puts each
    ``d`` into the address. Requires ``0 <= i + d < n`` (so that the reverse index is not negative).
    """
    if reverse:
        return cuda.jit(device=True)(lambda i, d, n: np.uint64(n - 1 - i) - np.uint64(d))
    return cuda.jit(device=True)(lambda i, d, n: np.uint64(i) + np.uint64(d))


@functools.lru_cache(maxsize=None)
def block_scan(op, dtype, block_size):
    """Device function ``block_scan(value) -> (exclusive, total)``: Figure 2 over shuffles.

    Every thread of the block must call it (it has two barriers); ``exclusive`` combines the
    values of the threads before the caller, ``total`` those of the whole block.
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    element = numba_type(dtype)
    warp_scan = scan_shfl(op, dtype)
    to, back = carrier(dtype)
    warps = block_size // 32

    def scan(value):
        warp_totals = cuda.shared.array(32, element)
        lane = cuda.threadIdx.x & 31
        warp = cuda.threadIdx.x >> 5
        inclusive = warp_scan(value, FULL_MASK)
        if lane == 31:
            warp_totals[warp] = inclusive
        cuda.syncthreads()
        if warp == 0:
            warp_totals[lane] = warp_scan(warp_totals[lane] if lane < warps else neutral, FULL_MASK)
        cuda.syncthreads()
        before = warp_totals[warp - 1] if warp > 0 else neutral
        previous = back(cuda.shfl_up_sync(FULL_MASK, to(inclusive), 1))
        exclusive = combine(before, previous) if lane > 0 else before
        return exclusive, warp_totals[warps - 1]

    return device_function(scan, dtype)


@functools.lru_cache(maxsize=None)
def block_reduce(op, dtype, block_size):
    """Device function ``block_reduce(value) -> total`` (every thread calls it; thread 0's result
    is the block's total)."""
    neutral = identity(op, dtype)
    element = numba_type(dtype)
    warp_reduce = reduce_shfl(op, dtype)
    warps = block_size // 32

    def reduce(value):
        warp_totals = cuda.shared.array(32, element)
        lane = cuda.threadIdx.x & 31
        total = warp_reduce(value)
        if lane == 0:
            warp_totals[cuda.threadIdx.x >> 5] = total
        cuda.syncthreads()
        if cuda.threadIdx.x < 32:
            total = warp_reduce(warp_totals[lane] if lane < warps else neutral)
        return total

    return device_function(reduce, dtype)


def staged_size(block_size, items):
    """Elements of the shared buffer a tile goes through: the tile, one slot skipped every 32."""
    return block_size * items * 33 // 32


@functools.lru_cache(maxsize=None)
def staged_slots(block_size, items):
    """Device functions ``(strided, blocked)``: where an element of the tile lies in the shared buffer.

    ``strided(t, k)`` is the slot of element ``k * block_size + t`` (thread t's k-th coalesced
    access), ``blocked(t, k)`` that of element ``t * items + k`` (the k-th of thread t's run):
    element j lies at ``j + j // 32`` (:func:`staged_size`). Both are unsigned (no negative-index
    guard), and each is a part that depends on the thread plus a constant of the unrolled loop
    over k, which the compiler puts into the address: ``block_size`` is a multiple of 32, so
    ``(k * block_size + t) // 32 == k * block_size // 32 + t // 32``; a run of ``items`` dividing
    32 never crosses a multiple of 32, so ``(t * items + k) // 32 == t * items // 32``. Other
    ``items`` work the slot out per element.
    """
    stride = block_size * 33 // 32

    def strided(t, k):
        return np.uint64(t + (t >> 5)) + np.uint64(k * stride)

    if 32 % items == 0:
        def blocked(t, k):
            q = t * items
            return np.uint64(q + (q >> 5)) + np.uint64(k)
    else:
        def blocked(t, k):
            j = t * items + k
            return np.uint64(j + (j >> 5))

    return cuda.jit(device=True)(strided), cuda.jit(device=True)(blocked)


@functools.lru_cache(maxsize=None)
def tile_loader(op, dtype, reverse, block_size, items):
    """Device function ``load(src, n, start, staged, run) -> total``.

    Reads logical elements ``start .. start + block_size * items - 1`` of ``src`` (the identity
    past ``n``) coalesced, through the shared buffer ``staged`` (:func:`staged_size` elements),
    into the caller's ``run`` in the blocked arrangement, and returns the combination of the
    caller's ``items`` elements. Every thread of the block must call it (one barrier).
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    at = unsigned_position(reverse)
    strided, blocked = staged_slots(block_size, items)
    tile = block_size * items

    def load(src, n, start, staged, run):
        t = cuda.threadIdx.x
        first = start + t
        # Step k: the warps read consecutive elements. In a whole tile no bounds check stands
        # between the loads, so that all of a thread's loads are in flight at once.
        if start + tile <= n:
            for k in range(items):
                run[k] = src[at(first, k * block_size, n)]
        else:
            for k in range(items):
                run[k] = src[at(first, k * block_size, n)] if first + k * block_size < n else neutral
        for k in range(items):
            staged[strided(t, k)] = run[k]
        cuda.syncthreads()
        total = neutral
        for k in range(items):
            run[k] = staged[blocked(t, k)]
            total = combine(total, run[k])
        return total

    return device_function(load, dtype, arrays=("src", "staged", "run"))


@functools.lru_cache(maxsize=None)
def tile_writer(op, dtype, inclusive, reverse, block_size, items):
    """Device function ``write(dst, n, start, staged, run, acc)``: the other half of :func:`tile_loader`.

    Scans the caller's blocked ``run`` sequentially from ``acc`` (everything before the
    caller's first element) and writes the results to logical elements ``start ..`` of ``dst``
    (those below ``n``), coalesced through ``staged``. Every thread must call it (one barrier).
    """
    combine = device_op(op, dtype)
    at = unsigned_position(reverse)
    strided, blocked = staged_slots(block_size, items)
    tile = block_size * items

    def write(dst, n, start, staged, run, acc):
        t = cuda.threadIdx.x
        for k in range(items):
            if not inclusive:
                staged[blocked(t, k)] = acc
            acc = combine(acc, run[k])
            if inclusive:
                staged[blocked(t, k)] = acc
        cuda.syncthreads()
        for k in range(items):
            run[k] = staged[strided(t, k)]
        first = start + t
        if start + tile <= n:
            for k in range(items):
                dst[at(first, k * block_size, n)] = run[k]
        else:
            for k in range(items):
                if first + k * block_size < n:
                    dst[at(first, k * block_size, n)] = run[k]

    return device_function(write, dtype, arrays=("dst", "staged", "run"))


@cuda.jit(device=True)
def block_sum(value, scratch):
    """The sum of ``value`` over the block's threads, returned to every thread.

    ``scratch`` is a shared array of ``blockDim.x`` (a power of two) elements; a tree of
    ``log2(blockDim.x)`` halvings, each behind a barrier, and one more barrier so that the
    next call cannot overwrite ``scratch[0]`` before every thread has read it.
    """
    tid = cuda.threadIdx.x
    scratch[tid] = value
    half = cuda.blockDim.x // 2
    while half > 0:
        cuda.syncthreads()
        if tid < half:
            scratch[tid] += scratch[tid + half]
        half //= 2
    cuda.syncthreads()
    total = scratch[0]
    cuda.syncthreads()
    return total
