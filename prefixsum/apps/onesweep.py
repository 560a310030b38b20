"""The radix sort at library speed: onesweep (Adinets and Merrill 2022), a pass per 8-bit digit.

The readable sort (:mod:`.radix`) splits by one bit per pass, a scan of n flags each time: 32
passes over the data for 32-bit keys. Onesweep sorts by 8 bits per pass, least significant
digit first, and each pass is one kernel with the look-back of the single-pass scan
(:mod:`prefixsum.primitives.tile_state`) carrying 256 digit counts per tile instead of one sum:

0. One pass over the keys builds the histograms of all digits at once (:func:`histogram_kernel`):
   ``hist[p * 256 + d]``, the keys whose digit p is d. Their exclusive scan over d is where the
   keys of digit d start in the output of pass p.
1. Pass p: a block draws its tile's id from the look-back's counter and loads the tile *warp
   by warp*: warp w holds elements ``w * 32 * items ..`` of the tile, step k of lane l element
   ``k * 32 + l`` of those, so the tile's order is (warp, step, lane).
2. The stable rank of a key within its tile (:data:`RANK`): in step k, the lanes of a warp
   holding the same digit find each other, by 8 ballots, one per bit of the digit, as CUB's
   ``MatchAny`` does (:func:`ballot_digit_rank`; the lesson's :func:`warp_digit_rank` asks one
   ``match_any_sync``, a slower instruction, the same answer); the highest of them
   adds their number to the warp's count of that digit in shared memory, and each learns the count
   before it by a shuffle, plus the peers on lower lanes (``popc(peers & lanemask_lt)``). Steps
   run in order, so a key's rank counts exactly the keys of its warp before it with its digit.
3. Per digit (one thread each): the warps' counts become each warp's start within the digit, and
   the tile's count of the digit goes to the look-back (:func:`prefixsum.primitives.tile_state.look_back_lane`):
   published at once, then the counts of the tiles before are gathered tile by tile until one
   has published its prefix. The digit's global start plus the count of earlier tiles is where the
   tile's keys of that digit go.
4. The scatter: every key goes to shared memory at its place in the tile sorted by digit, then
   thread t writes elements t, t + block, ... of that: keys of one digit lie side by side, so a
   warp's 32 stores fall in a few runs. Values follow the same places.

Stable by construction. Per pass: n keys read and written once (and the values), one launch,
no reset (the look-back's epochs). 32-bit keys take 4 passes: with the clearing of the histograms
and the histogram pass, 6 launches in all.

Keys of every integer and float dtype: the kernels see the keys' bits as unsigned integers and
sort by the order-preserving map of chapter 10, with numpy's rules for NaN and -0.0
(:mod:`.ordered_keys`). The map only decides places: the keys are moved with their own bits.
"""
import functools
from typing import NamedTuple

import numpy as np
from numba import cuda, from_dtype, types

from ..core.arrays import result_maker
from ..core.device import simulating
from ..core.inputs import as_input, same_length
from ..core.launch import Launcher
from ..core.plans import Plan, carve, carved_bytes, check_out, one_line_call
from ..core.streams import as_stream, launch_stream
from ..core.workspace import one_call_at_a_time, scratch
from ..primitives.block import block_scan
from ..primitives.ops import numba_type
from ..primitives.tile_state import caller_states, draw_tile, look_back_lane, state_bytes, states
from ..primitives.warp import FULL_MASK
from ._arrays import back, device_copy
from .ordered_keys import RADIX, RADIX_BITS, unsigned_of, digit_of, padding_bits
from .selection import count_dtype

BLOCK_SIZE = 256
"""Threads of a tile of a digit pass: one per digit."""
TILE_BYTES = 38 * 1024
"""Shared memory for the tile's keys and values in a digit pass (beside 8 KiB of warp counts)."""
MAX_ITEMS_PER_THREAD = 16
TILE_BITS = 20
"""Bits of a tile's count of keys below a digit (at most 2^12 keys a tile) in the 64-bit word whose
upper bits count the keys of all tiles below the digit (fewer than 2^43): one block scan adds both."""
LOOKBACK_WINDOW = 1
"""Tiles whose digit counts a thread asks for at once when it looks back (:func:`~prefixsum.primitives.tile_state.look_back_lane`):
one, the fastest on the H100 (``benchmarks/onesweep_tiles.csv``: windows of 2 and 4 took 2% and 12%
longer at 2^24), as the predecessor has mostly published its prefix by the time it is read."""
HISTOGRAM_ITEMS = 8
"""Keys per thread and step of the histogram pass."""
HISTOGRAM_BLOCKS_PER_SM = 8
"""Blocks of the histogram pass per multiprocessor: each walks many tiles and adds its counts to
the global histograms once, so that few global atomics meet; 8 fill an H100's multiprocessor
(Nsight Compute at 2^24, ``benchmarks/onesweep_profile.txt``: 88% of the threads resident, 52 us;
a first run with 4 had 48% resident and took 66 us)."""
KEY_DTYPES = tuple(np.dtype(t) for t in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                                         "float16", "float32", "float64"))
VALUE_SIZES = (1, 2, 4, 8)
"""Bytes of a value the sort moves (any dtype of these widths: its bits are moved)."""


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
                    bits = keys[i]
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

    ``match_any_sync`` is one instruction but a slow one: with it a digit pass took 197 us at
    2^24 uint32 keys on an H100, with the ballots 161 us (Nsight Compute, ``benchmarks/cub_ncu.txt``),
    though they issue more instructions; whole sorts 1.11-1.17x faster (``cub_tuning.csv``). The
    lesson's :func:`warp_digit_rank` keeps the one call.
    """
    peers = np.uint32(0xFFFFFFFF)
    for b in range(RADIX_BITS):
        set_here = (digit >> b) & 1
        votes = np.uint32(cuda.ballot_sync(FULL_MASK, set_here))
        peers = np.uint32(peers & (votes if set_here else np.uint32(votes ^ np.uint32(0xFFFFFFFF))))
    lane = cuda.laneid
    leader = 31 - cuda.clz(peers)
    before = np.int32(0)
    if lane == leader:
        before = counts[digit]
        counts[digit] = before + cuda.popc(peers)
    before = cuda.shfl_sync(FULL_MASK, before, leader)
    cuda.syncwarp()  # the next step's leader may be another lane: it reads this step's count
    return before + cuda.popc(peers & cuda.lanemask_lt())


RANK = ballot_digit_rank
"""The in-warp rank of the sort's digit passes: by ballots, faster than ``match_any_sync`` on an
H100 (whole sorts of uint32 keys 1.11-1.14x at 2^20..2^26, uint64 keys 1.17x and uint32 keys with
values 1.12x at 2^24; CUPTI, ``benchmarks/cub_tuning.csv``)."""


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
                keys[k] = src[first + 32 * k]
        else:
            for k in range(items):
                i = first + 32 * k
                keys[k] = src[i] if i < n else pad

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
    """Device function ``place_digits(hist, digit_pass, status, values, tile, mine, total, tile_start, base, epoch, t)``:
    step 3 of a digit pass, second half.

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
    """Device function ``scatter_keys(dst, exchange, keys, places, digits, tile_start, warp_counts, base, valid, warp, t, shift)``:
    step 4 of a digit pass.

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
            i = k * block_size + t
            if i < valid:
                key = exchange[i]
                digits[k] = digit(key, shift)
                dst[base[digits[k]] + i] = key

    return cuda.jit(device=True)(scatter_keys)


@functools.lru_cache(maxsize=None)
def value_mover(key_dtype, value_dtype, block_size, items):
    """Device function ``move_values(src_values, dst_values, exchange, exchange_values, places, digits, base, first, n, valid, t)``:
    step 5 of a digit pass with values.

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
                moved[k] = src_values[i]
        if share:
            cuda.syncthreads()  # every key has left the shared buffer the values now take
        for k in range(items):
            if first + 32 * k < n:
                stash(exchange, exchange_values, places[k], moved[k])
        cuda.syncthreads()
        for k in range(items):
            i = k * block_size + t
            if i < valid:
                dst_values[base[digits[k]] + i] = fetch(exchange, exchange_values, i)

    return cuda.jit(device=True)(move_values)


@functools.lru_cache(maxsize=None)
def digit_pass_kernel(key_dtype, value_dtype, counts, block_size=BLOCK_SIZE, items=None, rank=RANK,
                      window=LOOKBACK_WINDOW, registers=None):
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
        places = cuda.local.array(items, types.int32)
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
        rank_keys(keys, digits, places, warp_counts[warp * RADIX:(warp + 1) * RADIX], shift)
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
    return (keys, keys, values, values, _array(counts), _array(np.uint64), _array(np.uint64),
            _array(np.uint32), types.int64, types.int64, types.int64, types.int64)


@functools.lru_cache(maxsize=None)
def launchers(key_dtype, value_dtype, counts):
    """The :class:`~prefixsum.core.launch.Launcher` of the clearing, the histogram and the digit pass."""
    return (Launcher(clear, (_array(counts),)),
            Launcher(histogram_kernel(key_dtype, counts), histogram_argtypes(key_dtype, counts)),
            Launcher(digit_pass_kernel(key_dtype, value_dtype, counts), pass_argtypes(key_dtype, value_dtype, counts)))


@functools.lru_cache(maxsize=None)
def _multiprocessors():
    return 2 if simulating() else cuda.get_current_device().MULTIPROCESSOR_COUNT


def check_key_dtype(dtype):
    """``dtype`` if the sort takes keys of it, else TypeError naming the allowed ones."""
    dtype = np.dtype(dtype)
    if dtype not in KEY_DTYPES:
        raise TypeError(f"unsupported key dtype {dtype.name!r}; allowed: {', '.join(d.name for d in KEY_DTYPES)}")
    return dtype


def check_value_dtype(dtype):
    """``dtype`` if the sort can move values of it (any dtype of :data:`VALUE_SIZES` bytes), else TypeError."""
    dtype = np.dtype(dtype)
    if dtype.itemsize not in VALUE_SIZES:
        raise TypeError(f"values of dtype {dtype.name!r} ({dtype.itemsize} bytes) cannot be moved; allowed: any "
                        f"dtype of {VALUE_SIZES} bytes")
    return dtype


def check_keys_and_values(keys, values):
    """``((keys, on_device), (values or None, on_device))`` checked
    (:func:`prefixsum.core.inputs.as_input`), before anything is copied or launched."""
    keys = as_input(keys, "keys", check=check_key_dtype)
    if values is None:
        return keys, (None, keys[1])
    values = as_input(values, "values", check=check_value_dtype)
    same_length([keys[0], values[0]], ["keys", "values"])
    if keys[1] != values[1]:
        raise ValueError("keys and values must be both numpy arrays or both device arrays")
    return keys, values


class _Passes(NamedTuple):
    """What the launches of one sort are, worked out once (:func:`_passes`)."""

    n: int
    unsigned: np.dtype  # the keys' bits
    moved: object  # the values' bits (None: no values)
    counts: np.dtype
    passes: int
    block_size: int
    tiles: int
    histogram_blocks: int
    clear: object  # launch(grid, block, *args, stream=...)
    histogram: object
    digit_pass: object


def _passes(dtype, value_dtype, n, block_size=None, items_per_thread=None, rank=RANK, window=None, registers=None):
    """The :class:`_Passes` of a sort of ``n`` keys of ``dtype`` (values of ``value_dtype`` or None):
    the default tile and kernels' Launchers, or, with any option given, that tile and those
    kernels launched through numba's dispatcher."""
    dtype = np.dtype(dtype)
    unsigned = unsigned_of(dtype.itemsize)
    value_bits = None if value_dtype is None else unsigned_of(np.dtype(value_dtype).itemsize)
    moved = unsigned if value_bits is not None and value_bits.itemsize == dtype.itemsize else value_bits
    counts = count_dtype(n)
    custom = (block_size is not None or items_per_thread is not None or rank is not RANK
              or window is not None or registers is not None)
    block_size = block_size or BLOCK_SIZE
    items = items_per_thread or tile_items(dtype, value_bits, block_size)
    clear_launch, histogram_launch, pass_launch = launchers(dtype, value_bits, counts)
    if custom:
        kernel = digit_pass_kernel(dtype, value_bits, counts, block_size, items, rank, window or LOOKBACK_WINDOW, registers)

        def pass_launch(grid, block, *args, stream=None):
            kernel[grid, block, launch_stream(stream)](*args)

    histogram_blocks = min(-(-n // (BLOCK_SIZE * HISTOGRAM_ITEMS)), HISTOGRAM_BLOCKS_PER_SM * _multiprocessors())
    return _Passes(n, unsigned, moved, counts, passes(dtype), block_size, -(-n // (block_size * items)),
                   max(histogram_blocks, 1), clear_launch, histogram_launch, pass_launch)


def _temp_parts(setup, values):
    """``[(count, dtype), ...]`` of a caller's temporary storage: the histograms, the keys' and
    values' second buffers (with more than one pass) and the look-back's tile states (bytes)."""
    parts = [(setup.passes * RADIX, setup.counts)]
    if setup.passes > 1:
        parts.append((setup.n, setup.unsigned))
        if values:
            parts.append((setup.n, setup.moved))
    return parts + [(state_bytes(setup.counts, setup.tiles * RADIX), np.uint8)]


def _sort(setup, keys, values, out, out_values, stream, temp):
    """Sort the device arrays ``keys`` (and ``values``) into ``out`` (and ``out_values``) by
    ``setup``'s launches on ``stream``; the temporary storage this thread's and stream's, or carved
    from ``temp``."""
    n, unsigned, moved, tiles = setup.n, setup.unsigned, setup.moved, setup.tiles
    if temp is None:
        hist = scratch("onesweep histograms", setup.passes * RADIX, setup.counts, stream)
        spare = (scratch("onesweep keys", n, unsigned, stream),
                 None if values is None else scratch("onesweep values", n, moved, stream))
        kept_states = None
    else:
        hist, *rest = carve(temp, _temp_parts(setup, values is not None))
        spare = (rest[0], None if values is None else rest[1]) if setup.passes > 1 else (None, None)
        kept_states = caller_states(rest[-1], setup.counts, tiles * RADIX, stream)
    setup.clear(1, 256, hist, stream=stream)
    bits = keys.view(unsigned)
    setup.histogram(setup.histogram_blocks, BLOCK_SIZE, bits, hist, n, stream=stream)
    no_values = scratch("onesweep: no values", 0, unsigned, stream) if values is None else None
    src, src_values = bits, (no_values if values is None else values.view(moved))
    for p in range(setup.passes):
        last = (setup.passes - 1 - p) % 2 == 0
        dst = out.view(unsigned) if last else spare[0]
        dst_values = no_values if values is None else (out_values.view(moved) if last else spare[1])
        status, state_values, counter, epoch = (states(setup.counts, tiles * RADIX, stream) if kept_states is None
                                                else kept_states.next(tiles * RADIX))
        setup.digit_pass(tiles, setup.block_size, src, dst, src_values, dst_values, hist, status, state_values,
                         counter, n, epoch, p * RADIX_BITS, p, stream=stream)
        src, src_values = dst, dst_values


class SortPlan(Plan):
    """:func:`radix_sort` of ``n`` keys (and values), worked out once: made by :func:`plan_radix_sort`
    (and kept by :func:`radix_sort`).

    Call it as ``plan(keys, values=None, *, out=None, stream=None, temp=None)`` (see
    :mod:`prefixsum.core.plans`): ``out`` is the sorted keys' array, or a pair ``(keys, values)``
    with values; ``temp`` at least ``plan.temp_bytes`` bytes of device memory (the histograms,
    a second buffer of keys and values, the look-back's tile states).
    """

    algorithm = "onesweep"

    def __init__(self, key_dtype, n, value_dtype=None):
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
            raise ValueError(f"n must be an integer >= 0; got {n!r}")
        self.dtype, self.n = check_key_dtype(key_dtype), int(n)
        self.value_dtype = None if value_dtype is None else check_value_dtype(value_dtype)
        self.setup = _passes(self.dtype, self.value_dtype, self.n)
        self.temp_bytes = carved_bytes(_temp_parts(self.setup, self.value_dtype is not None))
        self._keys = result_maker(self.n, self.dtype)
        self._values = None if value_dtype is None else result_maker(self.n, self.value_dtype)

    def _list_kernels(self):
        value_bits = None if self.value_dtype is None else unsigned_of(self.value_dtype.itemsize)
        return [(launch.dispatcher, launch.argtypes) for launch in launchers(self.dtype, value_bits, self.setup.counts)]

    @one_call_at_a_time
    def __call__(self, keys, values=None, *, out=None, stream=None, temp=None):
        (keys, on_device), (values, _) = check_keys_and_values(keys, values)
        got = (np.dtype(keys.dtype), None if values is None else np.dtype(values.dtype), keys.shape[0])
        if got != (self.dtype, self.value_dtype, self.n):
            raise ValueError(f"this plan sorts {self.n} keys of {self.dtype.name}"
                             + ("" if self.value_dtype is None else f" with values of {self.value_dtype.name}")
                             + f"; got {got[2]} of {got[0].name}" + ("" if got[1] is None else f" with {got[1].name}"))
        return self.run(keys, values, on_device, out, as_stream(stream), None if temp is None else self.check_temp(temp))

    def run(self, keys, values, on_device, out, stream, temp):
        """Sort the checked ``keys`` and ``values`` (numpy or device, as ``on_device``) on ``stream``."""
        outs = (None, None)
        if out is not None:
            given = (out,) if values is None else out
            if values is not None and not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"out must be a pair (keys, values) when values are sorted; got {type(out).__name__}")
            outs = tuple(check_out(o, self.n, a.dtype, on_device, a, name)
                         for o, a, name in zip(given, (keys, values), ("out[0]", "out[1]") if values is not None
                                               else ("out",))) + (None,)
        keys_dev, values_dev = device_copy(keys, on_device, stream), None
        if values is not None:
            values_dev = device_copy(values, on_device, stream)
        direct = on_device and out is not None
        sorted_keys = outs[0] if direct else self._keys(stream.key)
        sorted_values = None if values is None else (outs[1] if direct else self._values(stream.key))
        if self.n:
            _sort(self.setup, keys_dev, values_dev, sorted_keys, sorted_values, stream, temp)
        if on_device:
            return sorted_keys if values is None else (sorted_keys, sorted_values)
        host = [_to_host(sorted_keys, outs[0], stream)]
        if values is not None:
            host.append(_to_host(sorted_values, outs[1], stream))
        return host[0] if values is None else tuple(host)


def _to_host(device, out, stream):
    """``device`` copied into the numpy array ``out`` (or a new one), waiting for ``stream``."""
    if out is None:
        return back(device, False, stream)
    device.copy_to_host(out, stream=launch_stream(stream))
    stream.synchronize()
    return out


def plan_radix_sort(key_dtype, n, *, value_dtype=None):
    """A plan of :func:`radix_sort` for ``n`` keys of ``key_dtype`` (and values of ``value_dtype``), to call in a loop.

    Parameters
    ----------
    key_dtype : numpy dtype
        Any of :data:`KEY_DTYPES`.
    n : int
        Keys per call, n >= 0.
    value_dtype : numpy dtype, optional
        Values moved with the keys: any dtype of 1, 2, 4 or 8 bytes.

    Returns
    -------
    SortPlan
        ``plan(keys, values=None, *, out=None, stream=None, temp=None)``.

    Examples
    --------
    >>> import numpy as np
    >>> plan = plan_radix_sort(np.int32, 4)
    >>> plan(np.array([3, -1, 2, -7], np.int32))
    array([-7, -1,  2,  3], dtype=int32)
    """
    return SortPlan(key_dtype, n, value_dtype)


@one_call_at_a_time
def radix_sort(keys, values=None, *, out=None, stream=None):
    """Sort ``keys`` (and ``values`` with them) stably by onesweep: a histogram pass, then one pass per byte.

    Parameters
    ----------
    keys : numpy.ndarray or device array, 1-D
        Any integer or float dtype (int8 .. uint64, float16, float32, float64). Never modified.
    values : numpy.ndarray or device array, 1-D, optional
        Same length and kind, any dtype of 1, 2, 4 or 8 bytes; reordered as the keys are. Never modified.
    out : array or pair of arrays, optional
        Where the sorted keys (and values: a pair) go, of the input's kind, length and dtype.
    stream : optional
        The stream the sort is queued on (any form :func:`prefixsum.scan` takes); a numpy result
        waits for it only. None: numba's default stream.

    Returns
    -------
    keys or (keys, values)
        Sorted as ``np.sort(keys, kind="stable")`` and ``values[np.argsort(keys, kind="stable")]``
        (NaNs last, -0.0 and 0.0 in their order), numpy arrays for numpy ``keys`` (device arrays otherwise).

    Examples
    --------
    >>> import numpy as np
    >>> radix_sort(np.array([3, -1, 2, -7], np.int32))
    array([-7, -1,  2,  3], dtype=int32)
    """
    (keys, on_device), (values, _) = check_keys_and_values(keys, values)
    dtype, value_dtype, n = np.dtype(keys.dtype), None if values is None else np.dtype(values.dtype), keys.shape[0]
    return one_line_call(("radix_sort", dtype, n, value_dtype), SortPlan, (dtype, n, value_dtype), {},
                         keys, values, on_device, out, as_stream(stream), None)


def sort_device(keys, values=None, *, block_size=None, items_per_thread=None, rank=RANK, window=None,
                registers=None, stream=None):
    """The sorted keys and values (or None) of device arrays ``keys`` and ``values``, as device arrays.

    ``block_size``, ``items_per_thread``, ``rank``, ``window`` and ``registers`` change the tiles of
    the digit passes, the in-warp rank, the look-back's window and the cap on registers (tests and
    chapter 10's exercise make many small tiles; benchmarks try shapes); the kernel is then
    launched through numba's dispatcher. ``stream``: as :func:`radix_sort`'s.
    """
    dtype = np.dtype(keys.dtype)
    n = keys.shape[0]
    where = as_stream(stream)
    out = result_maker(n, dtype)(where.key)
    out_values = None if values is None else result_maker(n, values.dtype)(where.key)
    if n:
        setup = _passes(dtype, None if values is None else values.dtype, n, block_size, items_per_thread, rank, window,
                        registers)
        _sort(setup, keys, values, out, out_values, where, None)
    return out, out_values


def sort_with(keys, *, block_size=32, items_per_thread=2, rank=RANK):
    """Where each of the host ``keys`` goes in a stable sort (``np.argsort(keys, kind="stable")``), by
    onesweep with small tiles and, optionally, another in-warp rank.

    Parameters
    ----------
    keys : numpy.ndarray
        Of a dtype :func:`radix_sort` takes.
    block_size, items_per_thread : int
        The tile of a digit pass: one warp x 2 keys by default, so that a short input makes many
        tiles and a warp ranks in two steps.
    rank : device function
        ``rank(digit, counts) -> rank``, as :func:`warp_digit_rank`.

    Returns
    -------
    numpy.ndarray of int32
    """
    keys = np.asarray(keys)
    check_keys_and_values(keys, None)
    order = np.arange(len(keys), dtype=np.int32)
    _, moved = sort_device(cuda.to_device(keys), cuda.to_device(order), block_size=block_size,
                           items_per_thread=items_per_thread, rank=rank)
    return moved.copy_to_host()
