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

**The state of a tile.** A reader must never see a flag whose value is not yet there, nor a
value of another flag. So flag and value travel together, in one word written and read whole:
for 4-byte types one 64-bit word (flag in the high half, the value's bits in the low half), for
8-byte types a 16-byte pair of words (flag, value), written by one 16-byte store and read by one
16-byte load, as CUB's ``ScanTileState`` does for a primitive type of 8 bytes. On a GPU these are
relaxed loads and stores at gpu scope (:func:`prefixsum.core.numba_gpu.relaxed_words`): they go
to the L2 cache that every SM shares (a plain load could hit a stale line in the SM's own L1), and
cost a load or a store, not an atomic's read-modify-write. No fence is needed: nothing but the
word itself is read on its word. (A user operator's tuple does not fit one word: it takes a flag
word and value slots written before a fence, :mod:`prefixsum.primitives.tile_state`.)

**No reset between scans.** A flag is ``2 * epoch + kind`` (kind 0 AGGREGATE, 1 PREFIX), and
``epoch`` counts the calls that used these states: a state written by an earlier call has a
smaller flag and reads as "not yet published". States are never cleared, except once every
2^30 calls when the epoch wraps.

The states, the counter and the epoch are kept per host thread, stream and element width and
reused by the thread's every call on that stream (:mod:`prefixsum.core.workspace`): a thread's
calls on one stream queue in order, so two of its scans on one stream never run at the same
time, and two threads or two streams never share a state. (They belong to the GPU of the first
call, as the launchers do: one GPU per process.) A plan's caller may hold them instead (``temp=``,
:func:`~prefixsum.primitives.tile_state.caller_states`): then they are zeroed at the start of each call.

**A user operator** (:mod:`prefixsum.scans.user_ops`) runs through the same kernel: its tuples
of fields are compiled from this source by :mod:`prefixsum.primitives.fields` (one array per
field in shared and local memory, one shuffle per field, the two-word tile state with one value
array per field), and the look-back's combines keep the tiles in order, as an operator that
does not commute needs. A tuple's tile shrinks with its bytes to fit shared memory.

Work: about 2n combines plus O(log) warp steps per thread and a look-back of a few 32-tile windows
per tile; 2n element transfers in global memory, one launch.
"""

import functools

from numba import cuda, types

from ..core.launch import Launcher
from ..core.moved import moved
from ..core.plans import kept
from ..core.registry import Capability
from ..primitives.block import MAX_TILE, block_scan, staged_size, tile_loader, tile_writer
from ..primitives.fields import element_bytes, is_fields, kernel
from ..primitives.tile_state import (  # noqa: F401
    AGGREGATE,
    MAX_EPOCH,
    PREFIX,
    bit_carrier,
    caller_states,
    draw_tile,
    kept_states,
    look_back,
    packed,
    paired,
    state_access,
    state_arrays,
    state_bytes,
    states,
)
from . import tile_choice
from .ops import check_dtype, device_op, numba_type
from .registry import Algorithm, Chunks, Prepared, check_block_size, register
from .tile_choice import fastest_shape
from .tiles import array_type

DEFAULT_BLOCK_SIZE = 128
"""Threads of a tile when only ``items_per_thread`` is given, and for a user operator's tuple."""
ITEMS_PER_THREAD = {4: 32, 8: 32}
"""Elements per thread by element size when only ``block_size`` is given (with 128 threads the
fastest shape from 2^20 on for both sizes, ``benchmarks/cub_tuning.csv``). With 32 items a
thread's elements lie 33 slots apart in the padded shared tile: its reads of them are free of
bank conflicts, which 16, 20 and 24 are not. With neither option the tile is chosen per length
(:mod:`.tile_choice`)."""
MAX_ITEMS_PER_THREAD = 32


def check_options(block_size, items_per_thread):
    """Raise ValueError unless the options make a tile that fits shared memory (None: by dtype and length)."""
    if block_size is None:
        block_size = DEFAULT_BLOCK_SIZE
    else:
        check_block_size("block_size", block_size)
    if items_per_thread is None:
        return
    if (
        not isinstance(items_per_thread, int)
        or isinstance(items_per_thread, bool)
        or not 1 <= items_per_thread <= MAX_ITEMS_PER_THREAD
    ):
        raise ValueError(
            f"option items_per_thread={items_per_thread!r} must be None (by dtype) or an integer "
            f"from 1 to {MAX_ITEMS_PER_THREAD}"
        )
    if block_size * items_per_thread > 2 * MAX_TILE:
        raise ValueError(
            f"block_size * items_per_thread = {block_size * items_per_thread} elements per tile, but a tile "
            f"holds at most {2 * MAX_TILE} of a 4-byte type and {MAX_TILE} of an 8-byte one (it must fit shared memory)"
        )


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
        raise ValueError(
            f"block_size * items_per_thread = {block_size * items} elements per tile, but a tile of "
            f"{dtype} holds at most {max_tile(dtype)}"
        )
    return items


def tile_shape(dtype, n, block_size, items_per_thread):
    """``(block_size, items_per_thread)`` of a scan of ``n`` elements of ``dtype``: with neither
    option given, the fastest measured for the element size and length (:mod:`.tile_choice`);
    else the options, ``block_size`` :data:`DEFAULT_BLOCK_SIZE` and the items by :func:`tile_items`
    where not given. A tuple of dtypes (a user operator) always takes the latter."""
    if block_size is None and items_per_thread is None and not is_fields(dtype):
        block_size, items = fastest_shape(check_dtype(dtype).itemsize, n)
        if block_size * items <= max_tile(dtype):
            return block_size, items
    block_size = block_size or DEFAULT_BLOCK_SIZE
    return block_size, tile_items(dtype, block_size, items_per_thread)


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
        tile = first + draw_tile(counter, shared_tile)
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


def run(x, out, op, inclusive, reverse, block_size, items_per_thread, *, stream=None):
    """Scan device array ``x`` into ``out`` on ``stream`` (see :class:`prefixsum.scans.registry.Algorithm`);
    with a user operator, ``x`` and ``out`` are tuples of arrays, one per field. What :func:`prepare`
    works out is kept in the package's one plan cache (:data:`prefixsum.core.plans.PLANS`)."""
    dtype = op.dtypes if isinstance(x, tuple) else x.dtype
    n = (x[0] if isinstance(x, tuple) else x).shape[0]
    key = ("lookback.run", op, dtype, n, inclusive, reverse, block_size, items_per_thread)
    kept(key, lambda: prepare(*key[1:])).launch(x, out, stream, None)


def prepare(op, dtype, n, inclusive, reverse, block_size, items_per_thread):
    """The :class:`~prefixsum.scans.registry.Prepared` of a plan: the tile for ``n`` elements
    (:func:`tile_shape`), its launcher and the tile count, worked out once, so that a call reads
    no more than its arrays, takes the tile states (this thread's and stream's,
    :func:`~prefixsum.primitives.tile_state.kept_states`, or laid out in the caller's ``temp``)
    and launches: a small scan's host time is the GPU's wait.

    With a user operator (``op`` an :class:`~prefixsum.primitives.fields.Operator`, ``dtype`` its
    dtypes) the arrays are tuples, one per field. Its ``chunks`` launch a range of tiles, for a
    numpy call's overlapped copies (:mod:`.transfers`).
    """
    fields = is_fields(dtype)
    threads, items = tile_shape(dtype, n, block_size, items_per_thread)
    tile = threads * items
    tiles = -(-n // tile)
    launch = launcher(op, dtype, inclusive, reverse, threads, items)
    width = (0, len(dtype)) if fields else (check_dtype(dtype).itemsize, 0)  # kept_states by width or fields

    def begin(stream, temp=None):
        """The tile states of one call: this thread's and stream's, or laid out in ``temp``."""
        return (kept_states(*width, stream) if temp is None else caller_states(temp, dtype, tiles, stream)).next(tiles)

    if fields:

        def scan_into(x, out, stream, temp):
            status, values, counter, epoch = begin(stream, temp)
            launch(tiles, threads, *x, *out, status, *values, counter, n, epoch, 0, stream=stream)
    else:

        def scan_into(x, out, stream, temp):
            states = kept_states(*width, stream) if temp is None else caller_states(temp, dtype, tiles, stream)
            status, values, counter, epoch = states.next(tiles)
            launch(tiles, threads, x, out, status, values, counter, n, epoch, 0, stream=stream)

    def launch_tiles(x, out, state, first, count, stream):
        status, values, counter, epoch = state
        launch(count, threads, x, out, status, values, counter, n, epoch, first, stream=stream)

    return Prepared(
        scan_into,
        lambda: [(launch.dispatcher, launch.argtypes)],
        state_bytes(dtype, tiles),
        None if fields else Chunks(tile, begin, launch_tiles, reverse),
    )


def argtypes(dtype):
    """Argument types of :func:`lookback_kernel`'s kernel, for compiling it to PTX."""
    if is_fields(dtype):
        arrays = tuple(array_type(d) for d in dtype)
        return (
            arrays
            + arrays
            + (types.Array(types.uint32, 1, "C"),)
            + (types.Array(types.uint64, 1, "C"),) * len(dtype)
            + (types.Array(types.uint32, 1, "C"), types.int64, types.int64, types.int64)
        )
    return (
        array_type(dtype),
        array_type(dtype),
        types.Array(types.uint64, 1, "C"),
        types.Array(types.uint64, 1, "C"),
        types.Array(types.uint32, 1, "C"),
        types.int64,
        types.int64,
        types.int64,
    )


def kernels(op, dtype, inclusive, reverse, block_size, items_per_thread):
    """The kernels :func:`run` launches, with their argument types, for the compile checks.

    With neither option: the tile for the longest arrays (the table's last row) in every
    configuration, and the table's other tiles for an inclusive forward add of float32 and
    float64 (they differ from it in constants only), so that every shape is compiled without
    tripling the checks.
    """
    dtype = dtype if is_fields(dtype) else check_dtype(dtype)
    if block_size is None and items_per_thread is None and not is_fields(dtype):
        chosen = [shape for shape in tile_choice.shapes(dtype.itemsize) if shape[0] * shape[1] <= max_tile(dtype)]
        if not (op == "add" and inclusive and not reverse and dtype.kind == "f"):
            chosen = [tile_shape(dtype, 1 << 62, None, None)]
    else:
        chosen = [tile_shape(dtype, 0, block_size, items_per_thread)]
    for threads, items in chosen:
        yield lookback_kernel(op, dtype, inclusive, reverse, threads, items), argtypes(dtype)


ALGORITHM = register(
    Algorithm(
        name="lookback",
        run=run,
        kernels=kernels,
        options={"block_size": None, "items_per_thread": None},
        check_options=check_options,
        summary=(
            "single pass with decoupled look-back (Merrill and Garland 2016): tiles of 128-256 threads x 8-32 "
            "elements, the fastest measured per element size and length, "
            "ids from an atomic counter, aggregates and prefixes published, a warp looks back 32 tiles at a time; "
            "one launch, 2n transfers; work ~2n combines, depth O(log n) plus the look-back"
        ),
        source="Merrill and Garland, Single-pass Parallel Prefix Scan with Decoupled Look-back (NVIDIA, 2016)",
        simulator_us_per_element=(25, None),
        auto_rank=3,
        capabilities=(
            Capability.WARP_INTRINSICS
            | Capability.USER_OPERATOR
            | Capability.COMBINES_EVERY_RESULT
            | Capability.CHUNKED
            | Capability.CALLER_TEMP
        ),
        prepare=prepare,
    )
)

__getattr__ = moved(__name__, {"scan_with": "prefixsum.classroom.lessons:scan_with"})
