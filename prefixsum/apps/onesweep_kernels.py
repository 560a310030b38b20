"""The onesweep sort's kernels: the clearing, the histogram pass and the digit pass, whose steps
are device functions of their own (:func:`key_loader`, :func:`key_ranker`, :func:`digit_counter`,
:func:`digit_placer`, :func:`key_scatterer`, :func:`value_mover`), and their argument types.

What they do, and why: :mod:`prefixsum.apps.onesweep`, whose host side launches them.

Two habits of numba cost instructions on every key, and the kernels avoid both: an array indexed
by a signed integer checks it for a negative value to wrap around (six instructions for a global
address), so a global index is made ``np.uint64`` and a place in shared memory ``np.uint32``;
and arithmetic on small integers is done in 64 bits unless its result is cast back, so the
rank's bit tests cast each step to ``np.uint32``. Together they take almost a third of the
instructions out of the digit pass of uint32 keys (ptxas for sm_90, read with nvdisasm).
"""

import functools

import numpy as np
from numba import cuda, from_dtype, types

from ..core.device import simulating
from ..core.launch import Launcher
from ..primitives.block import block_scan
from ..primitives.ops import numba_type
from ..primitives.tile_state import draw_tile, look_back_lane
from ..primitives.warp import FULL_MASK
from .ordered_keys import RADIX, RADIX_BITS, digit_of, padding_bits, unsigned_of

BLOCK_SIZE = 256
"""Threads of a tile of a digit pass: one per digit."""
TILE_BYTES = 38 * 1024
"""Shared memory for the tile's keys and values in a digit pass (beside 8 KiB of warp counts)."""
MAX_ITEMS_PER_THREAD = 16
TILE_BITS = 20
"""Bits of a tile's count of keys below a digit (at most 2^12 keys a tile) in the 64-bit word whose
upper bits count the keys of all tiles below the digit (fewer than 2^43): one block scan adds both."""
LOOKBACK_WINDOW = 1
"""Tiles whose digit counts a thread asks for at once when it looks back
(:func:`~prefixsum.primitives.tile_state.look_back_lane`): one, the fastest measured (``benchmarks/onesweep_tiles.csv``:
windows of 2 and 4 took longer), as the predecessor has mostly published its prefix by the time it is read."""
HISTOGRAM_ITEMS = 8
"""Keys per thread and step of the histogram pass."""
HISTOGRAM_BLOCKS_PER_SM = 8
"""Blocks of the histogram pass per multiprocessor: each walks many tiles and adds its counts to
the global histograms once, so that few global atomics meet; 8 fill a multiprocessor where 4
left much of it idle and took longer (Nsight Compute, ``benchmarks/onesweep_profile.txt``)."""


def passes(dtype):
    """Digit passes for keys of ``dtype``: one per byte."""
    return np.dtype(dtype).itemsize * 8 // RADIX_BITS


@functools.lru_cache(maxsize=None)
def histogram_kernel(key_dtype, counts, block_size=BLOCK_SIZE, items=HISTOGRAM_ITEMS):
    """Kernel ``(keys, hist, n)``: adds to ``hist[p * 256 + d]`` the keys whose digit p is d, every p.

    ``keys`` are the bits of keys of ``key_dtype`` (unsigned); ``hist`` must hold zeros (or counts
    to add to). Block b takes tiles b, b + blocks, ... of ``block_size * items`` keys, counts
    them in shared memory and adds its counts to ``hist`` once.
    """
    digit = digit_of(key_dtype)
    count_type = numba_type(counts)
    bins = passes(key_dtype) * RADIX
    tile_size = block_size * items

    def histogram(keys, hist, n):
        local = cuda.shared.array(bins, types.int32)
        t = cuda.threadIdx.x
        for j in range(t, bins, block_size):
            local[j] = 0
        cuda.syncthreads()
        start = np.int64(cuda.blockIdx.x) * tile_size
        while start < n:
            for k in range(items):
                i = start + k * block_size + t
                if i < n:
                    bits = keys[np.uint64(i)]  # an unsigned index: no wraparound of negative ones
                    for p in range(bins // RADIX):
                        cuda.atomic.add(local, p * RADIX + digit(bits, p * RADIX_BITS), 1)
            start += np.int64(cuda.gridDim.x) * tile_size
        cuda.syncthreads()
        for j in range(t, bins, block_size):
            if local[j]:
                cuda.atomic.add(hist, j, count_type(local[j]))

    return cuda.jit(histogram)


@cuda.jit
def clear(counts):
    """``counts[:] = 0``, by one block."""
    for j in range(cuda.threadIdx.x, counts.shape[0], cuda.blockDim.x):
        counts[j] = 0


@cuda.jit(device=True)
def warp_digit_rank(digit, counts):
    """The rank of the caller's key among its warp's keys of the same ``digit`` so far.

    ``counts`` is the warp's own 256 counts in shared memory (the keys of each digit ranked by
    earlier calls). Every lane of the warp must call it, once per step, steps in order. One
    ``match_any_sync`` finds the lanes holding ``digit``; the highest of them adds their number
    to ``counts[digit]``; each learns the count before by a shuffle and adds its peers on lower lanes.
    """
    lane = cuda.laneid
    peers = np.uint32(cuda.match_any_sync(FULL_MASK, digit))
    leader = 31 - cuda.clz(peers)
    before = 0
    if lane == leader:
        before = counts[digit]
        counts[digit] = before + cuda.popc(peers)
    before = cuda.shfl_sync(FULL_MASK, before, leader)
    cuda.syncwarp()  # the next step's leader may be another lane: it reads this step's count
    return before + cuda.popc(peers & cuda.lanemask_lt())


@cuda.jit(device=True)
def ballot_digit_rank(digit, counts):
    """:func:`warp_digit_rank` with the lanes holding ``digit`` found by 8 ballots, one per bit of
    the digit, as CUB's ``MatchAny`` finds them, and the count before shuffled as 32 bits: the
    sort's rank (:data:`RANK`).

    ``match_any_sync`` is one instruction but a slow one: a digit pass took longer with it than
    with the ballots (Nsight Compute, ``benchmarks/cub_ncu.txt``), though they issue more
    instructions, and whole sorts were faster with the ballots (``cub_tuning.csv``). The
    lesson's :func:`warp_digit_rank` keeps the one call.
    """
    bits = np.uint32(digit)
    peers = np.uint32(0xFFFFFFFF)
    for b in range(RADIX_BITS):
        set_here = np.uint32(np.uint32(bits >> np.uint32(b)) & np.uint32(1))
        votes = np.uint32(cuda.ballot_sync(FULL_MASK, set_here))
        peers = np.uint32(peers & (votes ^ np.uint32(set_here - np.uint32(1))))
    lane = np.uint32(cuda.laneid)
    leader = np.uint32(31 - cuda.clz(peers))
    before = np.int32(0)
    if lane == leader:
        before = counts[bits]
        counts[bits] = before + cuda.popc(peers)
    before = cuda.shfl_sync(FULL_MASK, before, leader)
    cuda.syncwarp()  # the next step's leader may be another lane: it reads this step's count
    return before + cuda.popc(peers & cuda.lanemask_lt())


RANK = ballot_digit_rank
"""The in-warp rank of the sort's digit passes: by ballots, faster than ``match_any_sync`` for
whole sorts of uint32 and uint64 keys, with and without values (CUPTI, ``benchmarks/cub_tuning.csv``)."""


def tile_items(key_dtype, value_dtype, block_size):
    """Keys per thread of a digit pass: as many as :data:`TILE_BYTES` holds, up to :data:`MAX_ITEMS_PER_THREAD`."""
    width = np.dtype(key_dtype).itemsize
    if value_dtype is not None and np.dtype(value_dtype).itemsize != width:
        width += np.dtype(value_dtype).itemsize  # values of another width have a buffer of their own
    return max(1, min(MAX_ITEMS_PER_THREAD, TILE_BYTES // (width * block_size)))


@functools.lru_cache(maxsize=None)
def _exchange(share):
    """Device functions ``(stash, fetch)`` of a tile's values in shared memory: in the keys' buffer
    when ``share`` (values of the keys' width, moved as the keys' unsigned type), else in their own."""
    if share:

        def stash(keys, values, i, v):
            keys[i] = v

        return cuda.jit(device=True)(stash), cuda.jit(device=True)(lambda keys, values, i: keys[i])

    def stash_apart(keys, values, i, v):
        values[i] = v

    return cuda.jit(device=True)(stash_apart), cuda.jit(device=True)(lambda keys, values, i: values[i])


@functools.lru_cache(maxsize=None)
def key_loader(key_dtype, block_size, items):
    """Device function ``load_keys(src, keys, n, first, valid)``: step 1 of a digit pass.

    A warp's ``items`` keys of its part of the tile into the local array ``keys``, warp by warp:
    step k of lane l reads ``src[first + 32 * k]``, ``first`` the lane's first element. In the
    last tile (``valid`` keys, fewer than the tile's) the missing keys are padding that sorts
    after every key, never written.
    """
    pad = from_dtype(unsigned_of(np.dtype(key_dtype).itemsize))(padding_bits(np.dtype(key_dtype)))
    tile_size = block_size * items

    def load_keys(src, keys, n, first, valid):
        if valid == tile_size:
            for k in range(items):
                keys[k] = src[np.uint64(first + 32 * k)]
        else:
            for k in range(items):
                i = first + 32 * k
                keys[k] = src[np.uint64(i)] if i < n else pad

    return cuda.jit(device=True)(load_keys)


@functools.lru_cache(maxsize=None)
def key_ranker(key_dtype, items, rank):
    """Device function ``rank_keys(keys, digits, places, counts, shift)``: step 2 of a digit pass.

    Each of the caller's keys' digit from bit ``shift`` into ``digits``, and its stable rank among
    its warp's keys of that digit (``rank``, the warp's own 256 ``counts``) into ``places``, steps
    in order. Every lane of the warp calls it.
    """
    digit = digit_of(np.dtype(key_dtype))

    def rank_keys(keys, digits, places, counts, shift):
        for k in range(items):
            digits[k] = digit(keys[k], shift)
            places[k] = rank(digits[k], counts)

    return cuda.jit(device=True)(rank_keys)


@functools.lru_cache(maxsize=None)
def digit_counter(block_size):
    """Device function ``count_digits(warp_counts, mine, t) -> total``: step 3 of a digit pass, first half.

    For each of thread ``t``'s digits (``t * per_thread ..``): the warps' counts of the digit
    become each warp's start within the digit's keys of the tile, and ``mine[r]`` the tile's
    count of the thread's r-th digit; returns the thread's keys in all its digits.
    """
    warps = block_size // 32
    per_thread = RADIX // block_size

    def count_digits(warp_counts, mine, t):
        total = 0
        for r in range(per_thread):
            d = t * per_thread + r
            running = 0
            for w in range(warps):
                c = warp_counts[w * RADIX + d]
                warp_counts[w * RADIX + d] = running
                running += c
            mine[r] = running
            total += running
        return total

    return cuda.jit(device=True)(count_digits)


@functools.lru_cache(maxsize=None)
def digit_placer(counts, block_size, window):
    """Device function ``place_digits(hist, digit_pass, status, values, tile, mine, total, tile_start, base, epoch,
    t)``: step 3 of a digit pass, second half.

    Where the tile's keys of each of thread ``t``'s digits go: ``tile_start[d]``, the keys of
    smaller digits in the tile, and ``base[d]``, the digit's start in the pass's output (the keys
    of all smaller digits, from the histogram) plus the digit's keys in the tiles before (the
    look-back, :func:`~prefixsum.primitives.tile_state.look_back_lane`) minus ``tile_start[d]``.
    One block scan finds both sums of smaller digits: the histogram's in the upper bits of a
    64-bit word, the tile's in the lower :data:`TILE_BITS`. Every thread of the block calls it.
    """
    count_type = numba_type(counts)
    look = look_back_lane("add", np.dtype(counts), window)
    scan_both = block_scan("add", np.dtype(np.int64), block_size)
    per_thread = RADIX // block_size

    def place_digits(hist, digit_pass, status, values, tile, mine, total, tile_start, base, epoch, t):
        in_hist = np.int64(0)
        for r in range(per_thread):
            in_hist += np.int64(hist[digit_pass * RADIX + t * per_thread + r])
        both, _ = scan_both((in_hist << TILE_BITS) | np.int64(total))
        before_digits = np.int32(both & ((1 << TILE_BITS) - 1))
        global_before = both >> TILE_BITS
        for r in range(per_thread):
            d = t * per_thread + r
            tile_start[d] = before_digits
            before_tile = look(status, values, tile, RADIX, d, count_type(mine[r]), epoch)
            base[d] = global_before + np.int64(before_tile) - before_digits
            before_digits += mine[r]
            global_before += np.int64(hist[digit_pass * RADIX + d])

    return cuda.jit(device=True)(place_digits)


@functools.lru_cache(maxsize=None)
def key_scatterer(key_dtype, block_size, items):
    """Device function ``scatter_keys(dst, exchange, keys, places, digits, tile_start, warp_counts, base, valid, warp,
    t, shift)``: step 4 of a digit pass.

    Every key goes to shared memory (``exchange``) at its place in the tile sorted by digit, then
    thread t writes elements t, t + block, ... of that to the output at ``base`` of their digit:
    keys of one digit lie side by side, so a warp's stores fall in a few runs. ``places`` becomes
    each key's place in the tile, ``digits`` the digit of each element the thread wrote.
    """
    digit = digit_of(np.dtype(key_dtype))

    def scatter_keys(dst, exchange, keys, places, digits, tile_start, warp_counts, base, valid, warp, t, shift):
        for k in range(items):
            places[k] += tile_start[digits[k]] + warp_counts[warp * RADIX + digits[k]]
            exchange[places[k]] = keys[k]
        cuda.syncthreads()
        for k in range(items):
            i = np.uint32(k * block_size + t)
            if i < valid:
                key = exchange[i]
                digits[k] = digit(key, shift)
                dst[np.uint64(base[digits[k]] + i)] = key

    return cuda.jit(device=True)(scatter_keys)


@functools.lru_cache(maxsize=None)
def value_mover(key_dtype, value_dtype, block_size, items):
    """Device function ``move_values(src_values, dst_values, exchange, exchange_values, places, digits, base, first, n,
    valid, t)``: step 5 of a digit pass with values.

    The values, loaded in the arrangement the keys were, go through shared memory to the places
    their keys went (in the keys' buffer when they have the keys' width, after every key has left
    it; else in their own).
    """
    key_t = from_dtype(unsigned_of(np.dtype(key_dtype).itemsize))
    share = np.dtype(value_dtype).itemsize == np.dtype(key_dtype).itemsize
    value_t = key_t if share else from_dtype(unsigned_of(np.dtype(value_dtype).itemsize))
    stash, fetch = _exchange(share)

    def move_values(src_values, dst_values, exchange, exchange_values, places, digits, base, first, n, valid, t):
        moved = cuda.local.array(items, value_t)
        for k in range(items):  # the values, in the arrangement the keys were loaded in
            i = first + 32 * k
            if i < n:
                moved[k] = src_values[np.uint64(i)]
        if share:
            cuda.syncthreads()  # every key has left the shared buffer the values now take
        for k in range(items):
            if first + 32 * k < n:
                stash(exchange, exchange_values, places[k], moved[k])
        cuda.syncthreads()
        for k in range(items):
            i = np.uint32(k * block_size + t)
            if i < valid:
                dst_values[np.uint64(base[digits[k]] + i)] = fetch(exchange, exchange_values, i)

    return cuda.jit(device=True)(move_values)


@functools.lru_cache(maxsize=None)
def digit_pass_kernel(
    key_dtype, value_dtype, counts, block_size=BLOCK_SIZE, items=None, rank=RANK, window=LOOKBACK_WINDOW, registers=None
):
    """Kernel ``(src, dst, src_values, dst_values, hist, status, values, counter, n, epoch, shift, digit_pass)``.

    One pass of the sort: moves the keys (bits of ``key_dtype``, unsigned) of ``src`` to ``dst``
    stably by their digit from bit ``shift`` on, and the values with them (``value_dtype`` None:
    none). ``hist`` is :func:`histogram_kernel`'s, ``digit_pass`` the pass's row of it;
    ``counts`` is the dtype the look-back carries (:func:`~.selection.count_dtype`);
    ``status, values, counter, epoch`` are the look-back's tile states, 256 per tile.
    ``rank`` replaces :data:`RANK` (chapter 10's exercise writes one); ``window`` is the
    look-back's (:data:`LOOKBACK_WINDOW`); ``registers``, if given, caps the registers per thread.
    The steps are device functions of their own (:func:`key_loader`, :func:`key_ranker`,
    :func:`digit_counter`, :func:`digit_placer`, :func:`key_scatterer`, :func:`value_mover`).
    """
    if RADIX % block_size or block_size % 32:
        raise ValueError(f"block_size must be a multiple of 32 that divides {RADIX}; got {block_size}")
    key_dtype = np.dtype(key_dtype)
    items = items or tile_items(key_dtype, value_dtype, block_size)
    key_t = from_dtype(unsigned_of(key_dtype.itemsize))
    has_values = value_dtype is not None
    share = not has_values or np.dtype(value_dtype).itemsize == key_dtype.itemsize
    value_t = key_t if share else from_dtype(unsigned_of(np.dtype(value_dtype).itemsize))
    load_keys = key_loader(key_dtype, block_size, items)
    rank_keys = key_ranker(key_dtype, items, rank)
    count_digits = digit_counter(block_size)
    place_digits = digit_placer(np.dtype(counts), block_size, window)
    scatter_keys = key_scatterer(key_dtype, block_size, items)
    move_values = value_mover(key_dtype, value_dtype, block_size, items) if has_values else None
    warps = block_size // 32
    per_thread = RADIX // block_size  # digits of each thread: t * per_thread ..
    tile_size = block_size * items
    value_tile = 1 if share else tile_size
    all_counts = warps * RADIX  # a shared array's size must be a constant, not an expression

    def digit_pass(src, dst, src_values, dst_values, hist, status, values, counter, n, epoch, shift, digit_pass):
        exchange = cuda.shared.array(tile_size, key_t)
        exchange_values = cuda.shared.array(value_tile, value_t)
        warp_counts = cuda.shared.array(all_counts, types.int32)
        tile_start = cuda.shared.array(RADIX, types.int32)
        base = cuda.shared.array(RADIX, types.int64)
        drawn = cuda.shared.array(1, types.int32)
        keys = cuda.local.array(items, key_t)
        places = cuda.local.array(items, types.uint32)
        digits = cuda.local.array(items, types.int32)
        mine = cuda.local.array(per_thread, types.int32)
        t = cuda.threadIdx.x
        lane = t & 31
        warp = t >> 5
        tile = draw_tile(counter, drawn)
        start = np.int64(tile) * tile_size
        valid = min(np.int64(tile_size), n - start)
        first = start + warp * 32 * items + lane
        for j in range(RADIX // 32):
            warp_counts[warp * RADIX + j * 32 + lane] = 0
        load_keys(src, keys, n, first, valid)
        cuda.syncwarp()
        rank_keys(keys, digits, places, warp_counts[warp * RADIX : (warp + 1) * RADIX], shift)
        cuda.syncthreads()
        total = count_digits(warp_counts, mine, t)
        place_digits(hist, digit_pass, status, values, tile, mine, total, tile_start, base, epoch, t)
        cuda.syncthreads()
        scatter_keys(dst, exchange, keys, places, digits, tile_start, warp_counts, base, valid, warp, t, shift)
        if has_values:
            move_values(src_values, dst_values, exchange, exchange_values, places, digits, base, first, n, valid, t)

    if registers and not simulating():  # the simulator has no registers to cap
        return cuda.jit(digit_pass, max_registers=registers)
    return cuda.jit(digit_pass)


def _array(dtype):
    return types.Array(from_dtype(np.dtype(dtype)), 1, "C")


def histogram_argtypes(key_dtype, counts):
    """Argument types of :func:`histogram_kernel`'s kernel."""
    return _array(unsigned_of(np.dtype(key_dtype).itemsize)), _array(counts), types.int64


def pass_argtypes(key_dtype, value_dtype, counts):
    """Argument types of :func:`digit_pass_kernel`'s kernel, for compiling it to PTX and launching it."""
    keys = _array(unsigned_of(np.dtype(key_dtype).itemsize))
    share = value_dtype is None or np.dtype(value_dtype).itemsize == np.dtype(key_dtype).itemsize
    values = keys if share else _array(unsigned_of(np.dtype(value_dtype).itemsize))
    return (
        keys,
        keys,
        values,
        values,
        _array(counts),
        _array(np.uint64),
        _array(np.uint64),
        _array(np.uint32),
        types.int64,
        types.int64,
        types.int64,
        types.int64,
    )


@functools.lru_cache(maxsize=None)
def launchers(key_dtype, value_dtype, counts):
    """The :class:`~prefixsum.core.launch.Launcher` of the clearing, the histogram and the digit pass."""
    return (
        Launcher(clear, (_array(counts),)),
        Launcher(histogram_kernel(key_dtype, counts), histogram_argtypes(key_dtype, counts)),
        Launcher(digit_pass_kernel(key_dtype, value_dtype, counts), pass_argtypes(key_dtype, value_dtype, counts)),
    )
