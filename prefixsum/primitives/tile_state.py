"""The look-back tile state: what a tile publishes, how it is read, and the look-back itself.

The protocol is :mod:`prefixsum.scans.lookback`'s (its docstring explains the order of the words,
the fence and the epochs); this module holds its parts, as CUB keeps its ``ScanTileState`` and
``TilePrefixCallbackOp`` apart from the agents that use them: the look-back scan, the one-pass
compaction (:mod:`prefixsum.apps.selection`) and the onesweep sort (:mod:`prefixsum.apps.onesweep`)
all build on it.

* :func:`draw_tile`: a block's tile id in the order blocks start, from a counter the last block
  sets back to 0 (why that order matters: :mod:`prefixsum.scans.lookback`, "Tile ids in launch order");

* :func:`state_access`: ``publish`` and ``peek`` of a tile's flag and value, always together:
  one 64-bit word for 4-byte types (:func:`packed`), one 16-byte pair of words for 8-byte ones
  (:func:`paired`), as CUB's ``ScanTileState`` holds status and value in one word of twice the
  value's width;
* :func:`look_back`: warp 0 of a tile publishes its aggregate and combines the states of the
  tiles before it, 32 at a time, until it meets a prefix; :func:`look_back_lane`, the same for
  one thread and one of many quantities per tile (a digit's count in the onesweep radix sort);
* :func:`states`: the device arrays of the states, the tile counter and the epoch, kept per
  host thread, stream and element width (:mod:`prefixsum.core.workspace`) and reused by the
  thread's every call on that stream: two threads, or two streams, never share a state, a counter
  or an epoch; :func:`caller_states`: the same in temporary storage the caller owns (``temp=`` of
  a plan), zeroed at the start of each call, :func:`state_bytes` of it.

**How a word is read and written.** A packed word of the scan's warp-wide look-back by atomics (an exchange, an ``or``
of 0): the 4-byte scans took longer with relaxed loads polling in their place (``benchmarks/cub_tuning.csv``, the rows
marked as reverted), loads that hit the L2 cache as fast as it answers while the scan's data streams through it. A pair,
and the packed words of the onesweep sort's per-thread look-back, by :func:`word_access`: on a GPU, relaxed loads and
stores at gpu scope (``ld.relaxed.gpu``, ``st.relaxed.gpu``; a pair as one 16-byte access), each reading or writing the
whole word in the L2 cache, as an atomic would, without an atomic's read-modify-write. On the simulator, with its
atomics: a word by one, a pair as a flag, value, flag sequence that reads what one indivisible 16-byte access would.

An element of several fields (a user operator's tuple, :mod:`prefixsum.primitives.fields`)
takes the two-word protocol: a flag word, and per field its own array of value slots, each
field's bits widened to 64, all written before the fence and the flag.
"""

import functools

import numpy as np
from numba import cuda, types
from numba.cuda import libdevice

from ..core import numba_gpu
from ..core.device import device_specific, simulating
from ..core.numba_gpu import relaxed_words
from ..core.workspace import reused
from .fields import Fieldwise, device_function, is_fields
from .ops import check_dtype, device_op, identity, numba_type
from .warp import FULL_MASK, reduce_shfl

AGGREGATE, PREFIX = 0, 1
"""The kinds of a tile's state: its own total, or the inclusive prefix of tiles 0..b."""
MAX_EPOCH = 1 << 30
"""Calls between two clearings of the tile states (a flag 2 * epoch + 1 must fit 32 bits)."""


@cuda.jit(device=True)
def draw_tile(counter, drawn):
    """The block's tile id, in the order blocks start (see :mod:`prefixsum.scans.lookback`).

    Thread 0 takes the next value of ``counter``; the block that takes the last id sets it back
    to 0 for the next launch. ``drawn`` is a one-element shared int32 array; one barrier.
    """
    if cuda.threadIdx.x == 0:
        tile = cuda.atomic.add(counter, 0, np.uint32(1))
        if tile == cuda.gridDim.x - 1:
            cuda.atomic.exch(counter, 0, np.uint32(0))
        drawn[0] = tile
    cuda.syncthreads()
    return drawn[0]


@functools.lru_cache(maxsize=None)
@device_specific
def bit_carrier(dtype):
    """Device functions ``(to_bits, from_bits)`` between ``dtype`` and the unsigned integer of its width.

    The GPU reinterprets the bits with libdevice; the simulator, whose libdevice is a stub, with
    numpy views.
    """
    dt = check_dtype(dtype)
    unsigned = np.dtype(f"u{dt.itemsize}").type
    if simulating():
        return (
            cuda.jit(device=True)(lambda v: np.array(v, dt).view(unsigned)[()]),
            cuda.jit(device=True)(lambda bits: np.array(bits, unsigned).view(dt)[()]),
        )
    if dt.kind == "f":
        if dt.itemsize == 4:
            return (
                cuda.jit(device=True)(lambda v: unsigned(libdevice.float_as_int(v))),
                cuda.jit(device=True)(lambda bits: libdevice.int_as_float(np.int32(bits))),
            )
        return (
            cuda.jit(device=True)(lambda v: unsigned(libdevice.double_as_longlong(v))),
            cuda.jit(device=True)(lambda bits: libdevice.longlong_as_double(np.int64(bits))),
        )
    return cuda.jit(device=True)(lambda v: unsigned(v)), cuda.jit(device=True)(lambda bits: dt.type(bits))


@functools.lru_cache(maxsize=None)
@device_specific
def wide_bit_carrier(dtype):
    """:func:`bit_carrier` into and out of uint64 whatever the width: a field's value slot."""
    to_bits, from_bits = bit_carrier(dtype)
    if check_dtype(dtype).itemsize == 8:
        return to_bits, from_bits
    return (
        cuda.jit(device=True)(lambda v: np.uint64(to_bits(v))),
        cuda.jit(device=True)(lambda bits: from_bits(np.uint32(bits))),
    )


def packed(dtype):
    """Whether a tile's state is one 64-bit word (4-byte types): flag in the high half, value in the low."""
    return not is_fields(dtype) and check_dtype(dtype).itemsize == 4


def paired(dtype):
    """Whether a tile's state is a pair of 64-bit words read and written as one (8-byte types): flag, value."""
    return not is_fields(dtype) and check_dtype(dtype).itemsize == 8


def state_arrays(itemsize, fields, tiles):
    """Zeroed host arrays ``(status, values)`` of the states of ``tiles`` tiles: elements of
    ``itemsize`` bytes (``fields`` = 0) or of ``fields`` fields (``values`` then a tuple, one array per field).

    4-byte: ``status`` one uint64 word per tile, ``values`` unused (one slot); 8-byte: ``status``
    two uint64 words per tile (flag, value), ``values`` unused; fields: ``status`` one uint32
    flag per tile, per field two uint64 value slots per tile (aggregate, prefix).
    """
    unused = np.zeros(1, np.uint64)
    if fields:
        return np.zeros(tiles, np.uint32), tuple(np.zeros(2 * tiles, np.uint64) for _ in range(fields))
    return np.zeros(tiles if itemsize == 4 else 2 * tiles, np.uint64), unused


@functools.lru_cache(maxsize=None)
@device_specific
def word_access():
    """Device functions ``(load, store, load_pair, store_pair)`` of the 64-bit words of a tile
    state (a uint64 array): a word, and a pair from an even index, each read or written whole.

    On a GPU: :func:`prefixsum.core.numba_gpu.relaxed_words`, relaxed loads and stores at gpu
    scope, a pair in one 16-byte access. On the simulator, which has no 16-byte access, with its
    atomics: a word by one; a pair stored as flag 0 (not yet published, in any epoch), value,
    flag, and loaded as flag, value and flag again until the two flags agree. A publish always
    changes the flag and never brings back an earlier one, so the value read between two equal
    flags is the one stored with them: what one indivisible 16-byte read returns.
    """
    if not simulating():
        return tuple(cuda.jit(device=True)(intrinsic_call) for intrinsic_call in _relaxed_calls(*relaxed_words()))

    def load(words, i):
        return cuda.atomic.or_(words, i, np.uint64(0))

    def store(words, i, word):
        cuda.atomic.exch(words, i, word)

    def load_pair(words, i):
        first = cuda.atomic.or_(words, i, np.uint64(0))
        second = cuda.atomic.or_(words, i + 1, np.uint64(0))
        again = cuda.atomic.or_(words, i, np.uint64(0))
        while again != first:
            first = again
            second = cuda.atomic.or_(words, i + 1, np.uint64(0))
            again = cuda.atomic.or_(words, i, np.uint64(0))
        return first, second

    def store_pair(words, i, first, second):
        cuda.atomic.exch(words, i, np.uint64(0))  # while the pair changes, it reads as not yet published
        cuda.atomic.exch(words, i + 1, second)
        cuda.atomic.exch(words, i, first)

    return tuple(cuda.jit(device=True)(f) for f in (load, store, load_pair, store_pair))


def _relaxed_calls(load, store, load_pair, store_pair):
    """Python functions calling the four intrinsics, for ``cuda.jit(device=True)``."""

    def load_word(words, i):
        return load(words, i)

    def store_word(words, i, word):
        store(words, i, word)

    def load_two(words, i):
        return load_pair(words, i)

    def store_two(words, i, first, second):
        store_pair(words, i, first, second)

    return load_word, store_word, load_two, store_two


def _bits(dtype):
    """``(to_bits, from_bits)`` of a state's value: :func:`bit_carrier`, or per field :func:`wide_bit_carrier`."""
    if not is_fields(dtype):
        return bit_carrier(dtype)
    pairs = [wide_bit_carrier(d) for d in dtype]
    return Fieldwise(p[0] for p in pairs), Fieldwise(p[1] for p in pairs)


@functools.lru_cache(maxsize=None)
def state_access(dtype, relaxed=False):
    """Device functions ``publish(status, values, tile, flag, value)`` and
    ``peek(status, values, tile) -> (flag, value)``.

    Packed (4-byte types): ``status`` is uint64, flag in the high half, value bits in the low
    half, one word each way: by an atomic exchange and an atomic ``or`` of 0, or with
    ``relaxed`` by :func:`word_access`'s relaxed store and load (on a GPU; atomics on the
    simulator); ``values`` is unused. Paired (8-byte types): ``status`` is uint64,
    words ``2 * tile`` (flag) and ``2 * tile + 1`` (value bits) written and read as one 16-byte
    pair (:func:`word_access`); ``values`` is unused. Fields (a tuple of dtypes): ``status`` is
    uint32 flags, ``values`` one array per field of two slots per tile (aggregate, prefix),
    value first and a fence before the flag.
    """
    to_bits, from_bits = _bits(dtype)
    load, store, load_pair, store_pair = word_access()
    if packed(dtype) and relaxed:

        def publish(status, values, tile, flag, value):
            store(status, tile, (np.uint64(flag) << np.uint64(32)) | np.uint64(to_bits(value)))

        def peek(status, values, tile):
            word = load(status, tile)
            return np.uint32(word >> np.uint64(32)), from_bits(np.uint32(word & np.uint64(0xFFFFFFFF)))
    elif packed(dtype):

        def publish(status, values, tile, flag, value):
            cuda.atomic.exch(status, tile, (np.uint64(flag) << np.uint64(32)) | np.uint64(to_bits(value)))

        def peek(status, values, tile):
            word = cuda.atomic.or_(status, tile, np.uint64(0))
            return np.uint32(word >> np.uint64(32)), from_bits(np.uint32(word & np.uint64(0xFFFFFFFF)))
    elif paired(dtype):

        def publish(status, values, tile, flag, value):
            store_pair(status, 2 * tile, np.uint64(flag), to_bits(value))

        def peek(status, values, tile):
            flag, bits = load_pair(status, 2 * tile)
            return np.uint32(flag), from_bits(bits)
    else:

        def publish(status, values, tile, flag, value):
            cuda.atomic.exch(values, 2 * tile + (flag & 1), to_bits(value))
            cuda.threadfence()  # the value is visible everywhere before the flag that announces it
            cuda.atomic.exch(status, tile, flag)

        def peek(status, values, tile):
            flag = cuda.atomic.or_(status, tile, np.uint32(0))
            cuda.threadfence()  # the value is read after the flag
            return flag, from_bits(cuda.atomic.or_(values, 2 * tile + (flag & 1), np.uint64(0)))

    return device_function(publish, dtype, arrays=("values",)), device_function(peek, dtype, arrays=("values",))


@functools.lru_cache(maxsize=None)
def look_back(op, dtype, publish=None):
    """Device function ``look_back(status, values, tile, aggregate, epoch) -> exclusive``, for warp 0.

    Publishes ``aggregate`` (tile 0: as its prefix), combines the states of the tiles before
    ``tile`` 32 at a time until a prefix is found, publishes the tile's inclusive prefix and
    returns everything before the tile (in every lane). All 32 lanes of one warp must call it.
    ``publish`` replaces :func:`state_access`'s (chapter 10's exercise writes one).
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    warp_reduce = reduce_shfl(op, dtype)
    own_publish, peek = state_access(dtype)
    publish = publish or own_publish

    def look(status, values, tile, aggregate, epoch):
        lane = cuda.laneid
        published = np.uint32(2 * epoch)  # flags below it are from earlier calls
        if lane == 0:
            publish(status, values, tile, published + (PREFIX if tile == 0 else AGGREGATE), aggregate)
        exclusive = neutral
        end = tile  # the window: tiles end - 32 .. end - 1, lane 31 the closest
        while end > 0:
            p = end - 32 + lane
            flag, value = published + PREFIX, neutral  # before tile 0: nothing, as a prefix
            if p >= 0:
                flag, value = peek(status, values, p)
                while flag < published:
                    flag, value = peek(status, values, p)
            prefixes = cuda.ballot_sync(FULL_MASK, flag == published + PREFIX)
            closest = 31 - cuda.clz(prefixes)  # -1 if none: every lane's aggregate counts
            exclusive = combine(warp_reduce(value if lane >= closest else neutral), exclusive)
            if prefixes:
                break
            end -= 32
        if lane == 0 and tile > 0:
            publish(status, values, tile, published + PREFIX, combine(exclusive, aggregate))
        return exclusive

    return device_function(look, dtype, arrays=("values",))


@functools.lru_cache(maxsize=None)
def look_back_lane(op, dtype, window=1):
    """Device function ``look_back_lane(status, values, tile, stride, slot, aggregate, epoch) -> exclusive``, for one
    thread.

    The look-back of :func:`look_back` for many quantities per tile at once, one thread each, as
    CUB's onesweep radix sort carries a count per digit: the state of quantity ``slot`` of tile
    t is at index ``t * stride + slot``. The thread publishes ``aggregate`` (tile 0: as its
    prefix), then walks back ``window`` tiles at a time: it asks for their states all at once
    (the reads are in flight together), then, closest first, waits for each until it has
    published and combines its value, until it meets a prefix. It publishes the tile's inclusive
    prefix and returns everything before the tile. The states, flags and epochs are
    :func:`state_access`'s, a packed word read and written relaxed: each thread polls its own
    quantity's word, and the warp's 32 loads of neighbouring words are one coalesced load, where
    32 atomics are 32 operations in the L2 cache (a digit pass with these and a 32-bit shuffle of
    the rank, ``benchmarks/cub_ncu.txt``, against an earlier run with atomics and a 64-bit
    shuffle, ``onesweep_profile.txt``).
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    element = numba_type(dtype)
    publish, peek = state_access(dtype, relaxed=True)

    def look(status, values, tile, stride, slot, aggregate, epoch):
        published = np.uint32(2 * epoch)  # flags below it are from earlier calls
        publish(status, values, tile * stride + slot, published + (PREFIX if tile == 0 else AGGREGATE), aggregate)
        flags = cuda.local.array(window, types.uint32)
        seen = cuda.local.array(window, element)
        exclusive = neutral
        end = tile  # the window: tiles end - 1 .. end - window, closest first
        while end > 0:
            for j in range(window):
                if end - 1 - j >= 0:
                    flags[j], seen[j] = peek(status, values, (end - 1 - j) * stride + slot)
            found = False
            for j in range(window):
                if not found and end - 1 - j >= 0:
                    while flags[j] < published:
                        flags[j], seen[j] = peek(status, values, (end - 1 - j) * stride + slot)
                    exclusive = combine(seen[j], exclusive)
                    found = flags[j] == published + PREFIX
            if found:
                break
            end -= window
        if tile > 0:
            publish(status, values, tile * stride + slot, published + PREFIX, combine(exclusive, aggregate))
        return exclusive

    return cuda.jit(device=True)(look)


class _States:
    """The tile states, counter and epoch of one element width, reused by every call of one thread
    on one stream, or laid out in a caller's ``memory`` (:func:`caller_states`).

    ``fields`` > 0: elements of that many fields, ``values`` a tuple of one array per field.
    """

    fixed = False  # laid out in a caller's memory: never reallocated

    def __init__(self, itemsize, fields=0):
        self.itemsize = itemsize
        self.fields = fields
        self.capacity = 0
        self.epoch = 0

    def next(self, tiles):
        """``(status, values, counter, epoch)`` for a scan of ``tiles`` tiles."""
        self.epoch += 1
        if tiles > self.capacity or self.epoch >= MAX_EPOCH:
            if self.capacity and self.fixed:
                raise ValueError(f"temp holds the tile states of {self.capacity} tiles; this call needs {tiles}")
            self.capacity = max(tiles, 2 * self.capacity)
            status, values = state_arrays(self.itemsize, self.fields, self.capacity)
            self.status = cuda.to_device(status)
            self.values = tuple(map(cuda.to_device, values)) if self.fields else cuda.to_device(values)
            self.counter = cuda.to_device(np.zeros(1, np.uint32))
            self.epoch = 1
        return self.status, self.values, self.counter, self.epoch


def kept_states(itemsize, fields=0, stream=None):
    """This thread's :class:`_States` on ``stream`` for elements of ``itemsize`` bytes, or of
    ``fields`` fields (made on first use)."""
    return reused(("look-back tile states", itemsize, fields), lambda: _States(itemsize, fields), stream)


def states(dtype, tiles, stream=None):
    """The tile states for a scan of ``tiles`` tiles of ``dtype`` (or a tuple of dtypes; see
    :class:`_States`), this thread's on ``stream``."""
    if is_fields(dtype):
        return kept_states(0, len(dtype), stream).next(tiles)
    return kept_states(check_dtype(dtype).itemsize, 0, stream).next(tiles)


def _layout(dtype, tiles):
    """``(itemsize, fields, [(offset, bytes, numpy dtype), ...])``: where a caller's memory holds
    the counter, the status words and the value arrays of ``tiles`` tiles, each 16-byte aligned."""
    fields = len(dtype) if is_fields(dtype) else 0
    itemsize = 0 if fields else check_dtype(dtype).itemsize
    status, values = state_arrays(itemsize, fields, 0)
    status_count = tiles if fields or itemsize == 4 else 2 * tiles
    parts = [(np.dtype(np.uint32), 1), (status.dtype, status_count)]
    parts += [(np.dtype(np.uint64), 2 * tiles)] * fields if fields else [(values.dtype, 1)]
    layout, offset = [], 0
    for part_dtype, count in parts:
        layout.append((offset, count * part_dtype.itemsize, part_dtype))
        offset += -(-count * part_dtype.itemsize // 16) * 16
    return itemsize, fields, layout


def state_bytes(dtype, tiles):
    """Bytes of a caller's memory that :func:`caller_states` takes for ``tiles`` tiles of ``dtype``."""
    offset, nbytes, _ = _layout(dtype, tiles)[2][-1]
    return offset + -(-nbytes // 16) * 16


def caller_states(memory, dtype, tiles, stream):
    """A :class:`_States` of ``tiles`` tiles of ``dtype`` laid out in ``memory`` (numba's uint8
    device array of at least :func:`state_bytes`), zeroed first on ``stream`` (a
    :class:`~prefixsum.core.streams.Stream`): the caller's temporary storage holds nothing from one
    call to the next, and a call's ``next`` gives epochs 1, 2, ..."""
    itemsize, fields, layout = _layout(dtype, tiles)
    used = state_bytes(dtype, tiles)
    if simulating():
        memory[:used].copy_to_device(np.zeros(used, np.uint8))
    else:
        numba_gpu.zero_bytes(memory, used, stream.pointer)
    arrays = [memory[offset : offset + nbytes].view(part_dtype) for offset, nbytes, part_dtype in layout]
    found = _States(itemsize, fields)
    found.fixed, found.capacity = True, tiles
    found.counter, found.status = arrays[0], arrays[1]
    found.values = tuple(arrays[2:]) if fields else arrays[2]
    return found
