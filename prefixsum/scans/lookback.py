"""The single-pass scan: decoupled look-back (Merrill and Garland, 2016), one launch per scan.

The hierarchical scan (:mod:`prefixsum.scans.hierarchical`) reads the input twice: once to reduce
every tile, once to rescan it with the carry. A *chained* scan reads it once: block b scans its
tile, waits until block b - 1 has published the inclusive prefix of tiles 0..b-1, combines it in
and publishes its own: 2n transfers, as a copy, but the blocks wait for each other in a chain,
each as long as the whole chain before it. *Decoupled look-back* breaks the chain:

1. Block b loads its tile (many elements per thread, :func:`prefixsum.primitives.block.tile_loader`)
   and scans it (:func:`~prefixsum.primitives.block.block_scan`): it knows its tile's total,
   the *aggregate*.
2. It publishes the aggregate at once, flagged AGGREGATE (tile 0 publishes it as its inclusive
   PREFIX: nothing comes before it).
3. Warp 0 *looks back*: its 32 lanes read the states of tiles b-32 .. b-1 at once, each lane
   waiting until its tile has published something. If some lanes see a PREFIX, the closest one
   ends the look-back: the prefix there combined with the aggregates after it is everything
   before tile b. Otherwise the 32 aggregates are combined and the window moves 32 tiles back.
4. Lane 0 publishes the inclusive prefix of tile b (flag PREFIX), so that later tiles stop
   there; the block combines the exclusive prefix into its results and writes them
   (:func:`~prefixsum.primitives.block.tile_writer`).

A block waits only for blocks that have published their aggregate, which each does right after
loading its own tile, so the wait is about one tile's load, not the chain.

**Tile ids in launch order.** A tile's id is not ``blockIdx.x``: thread 0 of each block takes the
next value of a global counter (``cuda.atomic.add``) when the block starts. CUDA promises nothing
about the order in which blocks become resident; with ``blockIdx.x``, block 1000 could be running
and spinning on block 999 while block 999 waits for an SM that the spinning blocks occupy: a
deadlock. With ids drawn from the counter, tile b waits only for tiles with smaller ids; each of
those drew its id earlier, so it is already running, and it waits in turn only for tiles with
smaller ids still: by induction on the id, every tile that is waited for finishes, whatever order
the hardware starts blocks in. The block that draws the last id sets the counter back to 0: every
other block has drawn its id by then (the atomic orders the draws), and the next launch on the
stream starts after this one ends, so the next scan finds it at 0 without a launch of its own.

**The state of a tile, and the fence.** A reader must never see a flag whose value is not yet
there. For 4-byte types, value and flag share one 64-bit word (flag in the high half, the value's
bits in the low half), written with one atomic exchange and read with one atomic ``or`` of 0:
the reader sees both or neither. 8-byte values do not fit beside a flag, so they take two words:
the writer stores the value, executes ``cuda.threadfence()`` and only then the flag; the reader
reads the flag, fences, then the value. Without the writer's fence the GPU may make the flag
visible to another SM before the value (stores to different addresses are not ordered); without
the reader's, its value load may be satisfied before its flag load. A tile's aggregate and its
prefix go to two different value slots, so a reader that saw AGGREGATE can never read a prefix
written later into the same slot. All state accesses are atomics, which go to the L2 cache that
every SM shares: a plain load could hit a stale line in the SM's own L1.

**No reset between scans.** A flag is ``2 * epoch + kind`` (kind 0 AGGREGATE, 1 PREFIX), and
``epoch`` counts the calls that used these states: a state written by an earlier call has a
smaller flag and reads as "not yet published". States are never cleared, except once every
2^30 calls when the epoch wraps.

The states, the counter and the epoch are kept per host thread and element width and reused by
the thread's every call (:mod:`prefixsum.core.workspace`): a thread's calls queue on numba's
default stream, so two of its scans never run at the same time, and two threads never share a
state. (They belong to the GPU of the first call, as the launchers do: one GPU per process.)

**A user operator** (:mod:`prefixsum.scans.user_ops`) runs through the same kernel: its tuples
of fields are compiled from this source by :mod:`prefixsum.primitives.fields` (one array per
field in shared and local memory, one shuffle per field, the two-word tile state with one value
array per field), and the look-back's combines keep the tiles in order, as an operator that
does not commute needs. A tuple's tile shrinks with its bytes to fit shared memory.

Work: about 2n combines plus O(log) warp steps per thread and a look-back of a few 32-tile windows
per tile; 2n element transfers in global memory, one launch.
"""
import functools

import numpy as np
from numba import cuda, types

from ..core.launch import Launcher
from ..core.moved import moved
from ..primitives.block import MAX_TILE, block_scan, staged_size, tile_loader, tile_writer
from ..primitives.fields import element_bytes, is_fields, kernel
from .ops import check_dtype, device_op, numba_type
from .registry import Algorithm, check_block_size, register
from .tile_state import (AGGREGATE, MAX_EPOCH, PREFIX, bit_carrier, kept_states, look_back, packed,  # noqa: F401
                         state_access, states)
from .tiles import array_type

ITEMS_PER_THREAD = {4: 32, 8: 32}
"""Elements per thread by element size in bytes, with the default 128 threads a tile: the fastest
of the tile shapes in ``benchmarks/lookback_tiles.csv`` at every n of 2^24, 2^26 and 2^28, for
float32 and float64, by the worst ratio to torch.cumsum over the sizes (H200, CUPTI, with the
tile's unsigned indices of issue 29: 128 x 32 1.28 / 1.43 / 1.45 x torch for float32,
1.07 / 1.15 / 1.16 for float64; the next best, 256 x 32 for float32 and 256 x 16 for float64,
1.22 and 1.00 at 2^24). With 32 items a thread's elements lie 33 slots apart in the padded
shared tile: its reads of them are free of bank conflicts, which 16, 20 and 24 are not."""
MAX_ITEMS_PER_THREAD = 32


def check_options(block_size, items_per_thread):
    """Raise ValueError unless the options make a tile that fits shared memory (None: by dtype)."""
    check_block_size("block_size", block_size)
    if items_per_thread is None:
        return
    if (not isinstance(items_per_thread, int) or isinstance(items_per_thread, bool)
            or not 1 <= items_per_thread <= MAX_ITEMS_PER_THREAD):
        raise ValueError(f"option items_per_thread={items_per_thread!r} must be None (by dtype) or an integer "
                         f"from 1 to {MAX_ITEMS_PER_THREAD}")
    if block_size * items_per_thread > 2 * MAX_TILE:
        raise ValueError(
            f"block_size * items_per_thread = {block_size * items_per_thread} elements per tile, but a tile "
            f"holds at most {2 * MAX_TILE} of a 4-byte type and {MAX_TILE} of an 8-byte one (it must fit shared memory)")


def max_tile(dtype):
    """Most elements in a tile of ``dtype``: :data:`MAX_TILE` (4096) for 8-byte types, twice as
    many for 4-byte ones (the same bytes of shared memory); for a tuple of dtypes, by the bytes
    of all its fields."""
    return MAX_TILE * 8 // element_bytes(dtype if is_fields(dtype) else check_dtype(dtype))


def tile_items(dtype, block_size, items_per_thread):
    """Elements per thread: ``items_per_thread``, or by element size (:data:`ITEMS_PER_THREAD`),
    within the largest tile (:func:`max_tile`); ValueError if the tile is too large for ``dtype``."""
    by_size = MAX_ITEMS_PER_THREAD if is_fields(dtype) else ITEMS_PER_THREAD[dtype.itemsize]
    items = items_per_thread or max(1, min(by_size, max_tile(dtype) // block_size))
    if block_size * items > max_tile(dtype):
        raise ValueError(f"block_size * items_per_thread = {block_size * items} elements per tile, but a tile of "
                         f"{dtype} holds at most {max_tile(dtype)}")
    return items


@functools.lru_cache(maxsize=None)
def lookback_kernel(op, dtype, inclusive, reverse, block_size, items, look=None):
    """Kernel ``(x, out, status, values, counter, n, epoch, first)``: one block per tile.

    The launch scans tiles ``first .. first + gridDim.x - 1`` of ``x``: one launch scans the whole
    array with ``first`` = 0; a numpy call (:mod:`prefixsum.scans.transfers`) launches once per
    chunk of the array as its copy arrives, and each chunk's first tiles find the carry of every
    chunk before in the look-back states (same epoch), as any tile finds its predecessors'.
    ``look`` replaces :func:`look_back`'s device function (chapter 10's exercise writes one).
    With a user operator (``op`` an :class:`~prefixsum.primitives.fields.Operator`, ``dtype``
    its dtypes) ``x``, ``out`` and ``values`` are one array per field, in that order.
    """
    combine = device_op(op, dtype)
    element = numba_type(dtype)
    load = tile_loader(op, dtype, reverse, block_size, items)
    write = tile_writer(op, dtype, inclusive, reverse, block_size, items)
    scan_block = block_scan(op, dtype, block_size)
    look = look or look_back(op, dtype)
    size = staged_size(block_size, items)
    tile_size = block_size * items

    def scan(x, out, status, values, counter, n, epoch, first):
        staged = cuda.shared.array(size, element)
        run = cuda.local.array(items, element)
        shared_tile = cuda.shared.array(1, types.int32)
        shared_exclusive = cuda.shared.array(1, element)
        t = cuda.threadIdx.x
        if t == 0:
            drawn = cuda.atomic.add(counter, 0, np.uint32(1))
            if drawn == cuda.gridDim.x - 1:  # the last id: every block has drawn, reset for the next call
                cuda.atomic.exch(counter, 0, np.uint32(0))
            shared_tile[0] = drawn
        cuda.syncthreads()
        tile = first + shared_tile[0]
        start = tile * tile_size
        exclusive, aggregate = scan_block(load(x, n, start, staged, run))
        if t < 32:
            before = look(status, values, tile, aggregate, epoch)
            if t == 0:
                shared_exclusive[0] = before
        cuda.syncthreads()
        write(out, n, start, staged, run, combine(shared_exclusive[0], exclusive))

    return kernel(scan, dtype, arrays=("x", "out", "values"))


@functools.lru_cache(maxsize=None)
def launcher(op, dtype, inclusive, reverse, block_size, items):
    """The :class:`~prefixsum.core.launch.Launcher` of :func:`lookback_kernel`'s kernel."""
    return Launcher(lookback_kernel(op, dtype, inclusive, reverse, block_size, items), argtypes(dtype))


_PREPARED = {}  # (op, dtype, inclusive, reverse, block_size, items_per_thread) -> prepare's function


def run(x, out, op, inclusive, reverse, block_size, items_per_thread):
    """Scan device array ``x`` into ``out`` (see :class:`prefixsum.scans.registry.Algorithm`)."""
    if isinstance(x, tuple):
        return run_fields(x, out, op, inclusive, reverse, block_size, items_per_thread)
    key = (op, x.dtype, inclusive, reverse, block_size, items_per_thread)
    scan_into = _PREPARED.get(key) or prepare(*key)
    scan_into(x, out)


def prepare(op, dtype, inclusive, reverse, block_size, items_per_thread):
    """``scan_into(x, out)``: :func:`run` for 1-D device arrays of ``dtype`` and these settings,
    with everything that does not depend on ``x`` worked out once (kept for the next call of the
    same settings): a small scan's host time is the GPU's wait.

    Per call it reads the length, takes this thread's tile states (:func:`~.tile_state.kept_states`)
    and launches.
    """
    key = (op, dtype, inclusive, reverse, block_size, items_per_thread)
    items = tile_items(dtype, block_size, items_per_thread)
    tile, itemsize = block_size * items, check_dtype(dtype).itemsize
    launch = launcher(op, dtype, inclusive, reverse, block_size, items)

    def scan_into(x, out):
        n = x.shape[0]
        tiles = -(-n // tile)
        status, values, counter, epoch = kept_states(itemsize).next(tiles)
        launch(tiles, block_size, x, out, status, values, counter, n, epoch, 0)

    if len(_PREPARED) >= 1024:
        _PREPARED.clear()
    _PREPARED[key] = scan_into
    return scan_into


def run_fields(xs, outs, operator, inclusive, reverse, block_size, items_per_thread):
    """Scan the tuple of device arrays ``xs`` into ``outs`` with a user operator (one launch)."""
    n = xs[0].shape[0]
    items = tile_items(operator.dtypes, block_size, items_per_thread)
    tiles = -(-n // (block_size * items))
    status, values, counter, epoch = states(operator.dtypes, tiles)
    launch = launcher(operator, operator.dtypes, inclusive, reverse, block_size, items)
    launch(tiles, block_size, *xs, *outs, status, *values, counter, n, epoch, 0)


def argtypes(dtype):
    """Argument types of :func:`lookback_kernel`'s kernel, for compiling it to PTX."""
    if is_fields(dtype):
        arrays = tuple(array_type(d) for d in dtype)
        return arrays + arrays + (types.Array(types.uint32, 1, "C"),) + (types.Array(types.uint64, 1, "C"),) * len(dtype) \
            + (types.Array(types.uint32, 1, "C"), types.int64, types.int64, types.int64)
    status = types.uint64 if packed(dtype) else types.uint32
    return (array_type(dtype), array_type(dtype), types.Array(status, 1, "C"), types.Array(types.uint64, 1, "C"),
            types.Array(types.uint32, 1, "C"), types.int64, types.int64, types.int64)


def kernels(op, dtype, inclusive, reverse, block_size, items_per_thread):
    """The one kernel :func:`run` launches, with its argument types."""
    dtype = dtype if is_fields(dtype) else check_dtype(dtype)
    yield lookback_kernel(op, dtype, inclusive, reverse, block_size, tile_items(dtype, block_size, items_per_thread)), \
        argtypes(dtype)


ALGORITHM = register(Algorithm(
    name="lookback",
    run=run,
    kernels=kernels,
    options={"block_size": 128, "items_per_thread": None},
    check_options=check_options,
    summary=("single pass with decoupled look-back (Merrill and Garland 2016): tiles of 128 threads x 32 elements, "
             "ids from an atomic counter, aggregates and prefixes published, a warp looks back 32 tiles at a time; "
             "one launch, 2n transfers; work ~2n combines, depth O(log n) plus the look-back"),
    source="Merrill and Garland, Single-pass Parallel Prefix Scan with Decoupled Look-back (NVIDIA, 2016)",
    simulator_us_per_element=(25, None),
    auto_rank=3,
    warp_level=True,
    fields=True,
    combines_every_result=True,
    prepare=prepare,
))

__getattr__ = moved(__name__, {"scan_with": "prefixsum.classroom.lessons:scan_with"})
