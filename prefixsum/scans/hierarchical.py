"""The hierarchical scan of Lungu, Petroşanu and Pîrjan (2011): thread, warp, block and grid levels, reduce-then-scan.

Levels, inside out (the first three are the block primitives of :mod:`prefixsum.primitives.block`;
this module adds the grid level):

1. Thread: a tile of ``block_size * items_per_thread`` elements is loaded so that thread t owns
   the ``items_per_thread`` consecutive elements from ``t * items_per_thread`` on (a *blocked*
   arrangement) and combines them sequentially in registers; the paper does this with 8 elements
   per thread. The loads are coalesced: step k has thread t read element ``k * block_size + t``
   of the tile into shared memory; after a barrier each thread reads its own run from there
   (the classic transpose through shared memory), and the results go out the same way. The
   shared index skips one slot every 32 (``j + j // 32``), so that the 32 lanes of a warp reading
   runs of 2, 4, 8 or 16 words hit 32 different banks.
2. Warp: the per-thread totals are scanned with ``shfl_up_sync``
   (:func:`prefixsum.primitives.warp.scan_shfl`, the paper's Figure 1 in registers).
3. Block (Figure 2): lane 31 of every warp writes its warp's total to shared memory, warp 0
   scans those totals, and every thread combines the totals of the warps before its own. Two
   barriers.
4. Grid, reduce-then-scan: a first kernel only *reduces* each tile to its total (reads n);
   one block scans the totals (the spine), a tile of up to 4096 totals at a time (twice for
   2^24 elements in tiles of 2048); a second kernel scans each tile again, seeded with the
   combined total of the tiles before it, and writes the result (reads n, writes n). 3n
   element transfers in global memory, against 4n for scan-then-propagate
   (:func:`prefixsum.scans.tiles.scan_tiles`: scan the tiles and write them, then read and rewrite
   them to add the carry); a device copy moves 2n. An input of one tile takes one launch,
   otherwise three.

The reduction combines a thread's elements strided across the tile, and warps by a butterfly:
another order than the scan's, which the four operators allow (they are commutative); for floats
the carries then round differently from a sequential sum, within the reference tolerance.

**A user operator** (:mod:`prefixsum.scans.user_ops`) runs through the same kernels, compiled
for its tuples by :mod:`prefixsum.primitives.fields`. It need not commute, so its reduction
combines each thread's consecutive run (loaded through shared memory as the rescan does) rather
than the strided elements; a tuple's tile shrinks with its bytes to fit shared memory.

Work: about 3n combines (n in the reduction; in the rescan, n for the threads' totals and n for
their results) plus 5 shuffle steps per thread; depth: 3 items_per_thread + O(log n).
Directions are handled by indexing (:func:`prefixsum.primitives.block.position`); an exclusive scan
writes each element's prefix before combining it in.
"""

import functools
import math

import numpy as np
from numba import cuda, types

from ..core.hardware import MAX_SHARED_BYTES_PER_BLOCK
from ..core.registry import Capability
from ..core.streams import launch_stream as on
from ..primitives.block import MAX_TILE, block_reduce, block_scan, position, staged_size, tile_loader, tile_writer
from ..primitives.fields import Operator, device_function, element_bytes, kernel
from .ops import device_op, identity, numba_type
from .registry import Algorithm, check_block_size, register
from .tiles import array_type, carry_argtypes, scratch, tile_kernel_argtypes

MAX_ITEMS_PER_THREAD = 16


def check_options(block_size, items_per_thread):
    """Raise ValueError unless the options make a tile that fits shared memory."""
    check_block_size("block_size", block_size)
    if (
        not isinstance(items_per_thread, int)
        or isinstance(items_per_thread, bool)
        or not 1 <= items_per_thread <= MAX_ITEMS_PER_THREAD
    ):
        raise ValueError(
            f"option items_per_thread={items_per_thread!r} must be an integer from 1 to {MAX_ITEMS_PER_THREAD}"
        )
    if block_size * items_per_thread > MAX_TILE:
        raise ValueError(
            f"block_size * items_per_thread = {block_size * items_per_thread} elements per tile, but a tile "
            f"holds at most {MAX_TILE} (its float64 copy must fit {MAX_SHARED_BYTES_PER_BLOCK // 1024} KiB of "
            "shared memory)"
        )


@functools.lru_cache(maxsize=None)
def tile_scanner(op, dtype, inclusive, reverse, block_size, items):
    """Device function ``scan_tile(src, dst, n, start, seed) -> seed + tile``.

    Scans logical elements ``start .. start + block_size * items - 1`` of ``src`` (those below
    ``n``) into ``dst``, every result combined after ``seed``, and returns ``seed`` combined with
    the whole tile, in every thread. ``src`` may be ``dst``.
    """
    combine = device_op(op, dtype)
    element = numba_type(dtype)
    load = tile_loader(op, dtype, reverse, block_size, items)
    write = tile_writer(op, dtype, inclusive, reverse, block_size, items)
    scan_block = block_scan(op, dtype, block_size)
    size = staged_size(block_size, items)

    def scan_tile(src, dst, n, start, seed):
        staged = cuda.shared.array(size, element)
        run = cuda.local.array(items, element)
        exclusive, block_total = scan_block(load(src, n, start, staged, run))
        write(dst, n, start, staged, run, combine(seed, exclusive))
        return combine(seed, block_total)

    return device_function(scan_tile, dtype, arrays=("src", "dst"))


@functools.lru_cache(maxsize=None)
def thread_total(op, dtype, reverse, block_size, items):
    """Device function ``thread_total(x, n, start) -> acc``: what thread t of the tile from ``start`` reduces.

    The built-in operators commute, so thread t combines the elements ``t``, ``t + block_size``,
    ... straight from global memory (coalesced, no shared memory). A user operator need not
    commute: thread t combines its consecutive run, loaded through shared memory as the rescan
    loads it, so that the block's reduction meets the elements in order.
    """
    if isinstance(op, Operator):
        load = tile_loader(op, dtype, reverse, block_size, items)
        element = numba_type(dtype)
        size = staged_size(block_size, items)

        def ordered_total(x, n, start):
            staged = cuda.shared.array(size, element)
            run = cuda.local.array(items, element)
            return load(x, n, start, staged, run)

        return device_function(ordered_total, dtype, arrays=("x",))
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    where = position(reverse)
    tile = block_size * items

    def strided_total(x, n, start):
        t = cuda.threadIdx.x
        acc = neutral
        if start + tile <= n:  # no bounds checks: all of a thread's loads in flight at once
            for k in range(items):
                acc = combine(acc, x[where(start + k * block_size + t, n)])
        else:
            for k in range(items):
                i = start + k * block_size + t
                if i < n:
                    acc = combine(acc, x[where(i, n)])
        return acc

    return cuda.jit(device=True)(strided_total)


@functools.lru_cache(maxsize=None)
def reduce_kernel(op, dtype, reverse, block_size, items):
    """Kernel ``(x, totals, n)``: block b writes the total of tile b to ``totals[b]``."""
    reduce_thread = thread_total(op, dtype, reverse, block_size, items)
    reduce_block = block_reduce(op, dtype, block_size)
    tile = block_size * items

    def reduce_tiles(x, totals, n):
        total = reduce_block(reduce_thread(x, n, cuda.blockIdx.x * tile))
        if cuda.threadIdx.x == 0:
            totals[cuda.blockIdx.x] = total

    return kernel(reduce_tiles, dtype, arrays=("x", "totals"))


def fitted_items(dtype, block_size, items):
    """``items`` per thread, fewer for a tuple of more than 8 bytes, so that its tile fits shared memory
    as a float64 tile of :data:`MAX_TILE` does."""
    return max(1, min(items, MAX_TILE * 8 // max(8, element_bytes(dtype)) // block_size))


def spine_items(block_size, dtype=np.float64):
    """Elements per thread of the spine: its tiles are as large as shared memory allows (for
    ``dtype``, a dtype or a tuple of them), so that its one block loops as few times as possible."""
    return fitted_items(dtype, block_size, min(MAX_ITEMS_PER_THREAD, MAX_TILE // block_size))


@functools.lru_cache(maxsize=None)
def spine_kernel(op, dtype, block_size):
    """Kernel ``(totals, count)``: one block scans ``totals`` in place (inclusive, forward)."""
    neutral = identity(op, dtype)
    items = spine_items(block_size, dtype)
    scan_tile = tile_scanner(op, dtype, True, False, block_size, items)
    tile = block_size * items

    def scan_totals(totals, count):
        carry = neutral
        for start in range(0, count, tile):
            carry = scan_tile(totals, totals, count, start, carry)
            cuda.syncthreads()  # the next tile reuses the shared buffers

    return kernel(scan_totals, dtype, arrays=("totals",))


@functools.lru_cache(maxsize=None)
def scan_kernel(op, dtype, inclusive, reverse, block_size, items):
    """Kernel ``(x, out, carries, n)``: block b scans tile b seeded with ``carries[b - 1]``.

    ``carries`` is the inclusive scan of the tile totals; block 0 never reads it.
    """
    neutral = identity(op, dtype)
    scan_tile = tile_scanner(op, dtype, inclusive, reverse, block_size, items)
    tile = block_size * items

    def rescan_tiles(x, out, carries, n):
        b = cuda.blockIdx.x
        scan_tile(x, out, n, b * tile, carries[b - 1] if b > 0 else neutral)

    return kernel(rescan_tiles, dtype, arrays=("x", "out", "carries"))


def run(x, out, op, inclusive, reverse, block_size, items_per_thread, *, stream=None):
    """Scan device array ``x`` into ``out`` on ``stream`` (see :class:`prefixsum.scans.registry.Algorithm`);
    with a user operator, ``x`` and ``out`` are tuples of arrays, one per field."""
    fields = isinstance(x, tuple)
    xs, outs = (x, out) if fields else ((x,), (out,))
    dtype = op.dtypes if fields else x.dtype
    items = fitted_items(dtype, block_size, items_per_thread) if fields else items_per_thread
    n = xs[0].shape[0]
    tiles = math.ceil(n / (block_size * items))
    scan = scan_kernel(op, dtype, inclusive, reverse, block_size, items)
    if tiles == 1:
        scan[1, block_size, on(stream)](*xs, *outs, *xs, n)  # one tile reads no carries: any arrays of the dtypes
        return
    totals = tuple(
        scratch(f"hierarchical totals {k}", tiles, d, stream) for k, d in enumerate(dtype if fields else [dtype])
    )
    reduce_kernel(op, dtype, reverse, block_size, items)[tiles, block_size, on(stream)](*xs, *totals, n)
    spine_kernel(op, dtype, block_size)[1, block_size, on(stream)](*totals, tiles)
    scan[tiles, block_size, on(stream)](*xs, *outs, *totals, n)


def kernels(op, dtype, inclusive, reverse, block_size, items_per_thread):
    """Every kernel :func:`run` may launch, with its argument types."""
    if isinstance(op, Operator):
        items = fitted_items(dtype, block_size, items_per_thread)
        arrays = tuple(array_type(d) for d in dtype)
        yield scan_kernel(op, dtype, inclusive, reverse, block_size, items), arrays * 3 + (types.int64,)
        yield reduce_kernel(op, dtype, reverse, block_size, items), arrays * 2 + (types.int64,)
        yield spine_kernel(op, dtype, block_size), arrays + (types.int64,)
        return
    yield scan_kernel(op, dtype, inclusive, reverse, block_size, items_per_thread), tile_kernel_argtypes(dtype)
    yield reduce_kernel(op, dtype, reverse, block_size, items_per_thread), carry_argtypes(dtype)
    yield spine_kernel(op, dtype, block_size), (array_type(dtype), types.int64)


ALGORITHM = register(
    Algorithm(
        name="hierarchical",
        run=run,
        kernels=kernels,
        options={"block_size": 256, "items_per_thread": 8},
        check_options=check_options,
        summary=(
            "Lungu, Petrosanu, Pirjan 2011: 8 elements per thread in registers, warp scans by shuffle, block scan of "
            "warp totals, "
            "reduce-then-scan across tiles (3n transfers); work ~3n combines plus O(log) warp steps per thread, "
            "depth O(log n)"
        ),
        source="Lungu, Petrosanu, Pirjan 2011 (Figures 1 and 2, 8 elements per thread)",
        simulator_us_per_element=(40, None),
        auto_rank=2,
        capabilities=Capability.WARP_INTRINSICS | Capability.USER_OPERATOR | Capability.COMBINES_EVERY_RESULT,
    )
)
