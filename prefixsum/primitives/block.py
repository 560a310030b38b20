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
* :func:`block_scan` (Figure 2 of Lungu, Petroşanu and Pîrjan 2011, over shuffles, with the barrier
  it lacks) and :func:`block_reduce`: every warp scans or reduces with :mod:`.warp`'s shuffles,
  lane 31 (or 0) writes the warp's total to shared memory, warp 0 combines those totals.
* :func:`block_sum`: a float sum over a block of any power-of-two size known only at run time,
  returned to every thread, by a tree in a shared scratch array (no shuffles, no operator).
* :func:`position`: where logical element i of a forward or reverse (suffix) scan lives;
  :func:`unsigned_position` and :func:`staged_bases`, the tile's indices in global and shared
  memory, unsigned (:func:`index_type`: numba guards a signed index against a negative value on
  every access) and each a base per thread plus a constant of the unrolled loop, which the
  compiler puts into the address (``benchmarks/ptx_counts.py``: 3.4 times fewer instructions in
  the look-back kernel than with signed indices worked out per element).
"""

import functools

import numpy as np
from numba import cuda

from ..core.device import simulating
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


def index_type():
    """``numpy.uint64`` on a GPU, ``int`` on the simulator: the type of a tile's indices.

    numba guards every signed index against a negative value (``x[-1]`` is the last element): a
    shift, an ``and`` and an add in 64 bits on every access. An unsigned index needs no guard.
    The simulator's memory refuses a negative index itself, and a Python int costs it less than a
    numpy scalar (a large part of a whole-tile scan's time: ``benchmarks/sim_speed.py``).
    """
    return int if simulating() else np.uint64


@functools.lru_cache(maxsize=None)
def unsigned_position(reverse):
    """Device function ``at(i, n)``: :func:`position`'s index of logical element ``i`` (``0 <= i < n``), unsigned
    (:func:`index_type`)."""
    unsigned = index_type()
    if reverse:
        return cuda.jit(device=True)(lambda i, n: unsigned(n - 1 - i))
    return cuda.jit(device=True)(lambda i, n: unsigned(i))


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
def staged_bases(block_size, items):
    """Device function ``bases(t) -> (spread, own, lag)``: where thread t's elements lie in the shared buffer.

    Element j of the tile lies at slot ``j + j // 32`` (:func:`staged_size`). Thread t's k-th
    coalesced access, element ``k * block_size + t``, lies at ``spread + k * stride`` (``stride
    = block_size * 33 // 32``: ``block_size`` is a multiple of 32, so the 32-runs before it are
    ``k * block_size // 32 + t // 32``); the k-th of its own run, element ``t * items + k``, at
    ``own + k + (lag + k) // 32``. A run of ``items`` dividing 32 never crosses a multiple of 32,
    so ``lag`` is then 0 and the slot ``own + k``. The callers' loops over k are unrolled: each
    slot is a base per thread plus a constant, which the compiler puts into the address; the
    bases are unsigned, free of numba's negative-index guard (:func:`index_type`).
    """
    ragged = 32 % items != 0
    unsigned = index_type()

    def bases(t):
        q = t * items
        return unsigned(t + (t >> 5)), unsigned(q + (q >> 5)), (q & 31) if ragged else 0

    return cuda.jit(device=True)(bases)


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
    bases = staged_bases(block_size, items)
    unsigned = index_type()
    tile = block_size * items
    stride = block_size * 33 // 32

    def load(src, n, start, staged, run):
        t = cuda.threadIdx.x
        first = start + t
        # Step k: the warps read consecutive elements. In a whole tile no bounds check stands
        # between the loads, so that all of a thread's loads are in flight at once; their
        # indices are one unsigned origin plus or minus constants (no device call per element:
        # the simulator pays for each call).
        if start + tile <= n:
            origin = at(first, n)
            for k in range(items):
                run[k] = src[origin - unsigned(k * block_size) if reverse else origin + unsigned(k * block_size)]
        else:
            for k in range(items):
                i = first + k * block_size
                run[k] = src[at(i, n)] if i < n else neutral
        spread, own, lag = bases(t)
        for k in range(items):
            staged[spread + unsigned(k * stride)] = run[k]
        cuda.syncthreads()
        total = neutral
        for k in range(items):
            run[k] = staged[own + unsigned(k + ((lag + k) >> 5))]
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
    bases = staged_bases(block_size, items)
    unsigned = index_type()
    tile = block_size * items
    stride = block_size * 33 // 32

    def write(dst, n, start, staged, run, acc):
        t = cuda.threadIdx.x
        spread, own, lag = bases(t)
        for k in range(items):
            if not inclusive:
                staged[own + unsigned(k + ((lag + k) >> 5))] = acc
            acc = combine(acc, run[k])
            if inclusive:
                staged[own + unsigned(k + ((lag + k) >> 5))] = acc
        cuda.syncthreads()
        for k in range(items):
            run[k] = staged[spread + unsigned(k * stride)]
        first = start + t
        if start + tile <= n:
            origin = at(first, n)
            for k in range(items):
                dst[origin - unsigned(k * block_size) if reverse else origin + unsigned(k * block_size)] = run[k]
        else:
            for k in range(items):
                i = first + k * block_size
                if i < n:
                    dst[at(i, n)] = run[k]

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
