"""The look-back tile state: what a tile publishes, how it is read, and the look-back itself.

The protocol is :mod:`.lookback`'s (its docstring explains the order of the words, the fence
and the epochs); this module holds its parts, as CUB keeps its ``ScanTileState`` and
``TilePrefixCallbackOp`` apart from the agent that uses them:

* :func:`state_access`: ``publish`` and ``peek`` of a tile's flag and value: one 64-bit word for
  4-byte types (:func:`packed`), a flag word and two value slots with fences for 8-byte ones;
* :func:`look_back`: warp 0 of a tile publishes its aggregate and combines the states of the
  tiles before it, 32 at a time, until it meets a prefix; :func:`look_back_lane`, the same for
  one thread and one of many quantities per tile (a digit's count in the onesweep radix sort);
* :func:`states`: the device arrays of the states, the tile counter and the epoch, kept per
  host thread and element width (:mod:`prefixsum.core.workspace`) and reused by the thread's
  every call: two threads never share a state, a counter or an epoch.

An element of several fields (a user operator's tuple, :mod:`prefixsum.primitives.fields`)
takes the two-word protocol: a flag word, and per field its own array of value slots, each
field's bits widened to 64, all written before the fence and the flag.
"""
import functools

import numpy as np
from numba import cuda, types
from numba.cuda import libdevice

from ..core.device import device_specific, simulating
from ..core.workspace import reused
from ..primitives.fields import Fieldwise, device_function, is_fields
from ..primitives.warp import FULL_MASK, reduce_shfl
from .ops import check_dtype, device_op, identity, numba_type

AGGREGATE, PREFIX = 0, 1
"""The kinds of a tile's state: its own total, or the inclusive prefix of tiles 0..b."""
MAX_EPOCH = 1 << 30
"""Calls between two clearings of the tile states (a flag 2 * epoch + 1 must fit 32 bits)."""


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
        return (cuda.jit(device=True)(lambda v: np.array(v, dt).view(unsigned)[()]),
                cuda.jit(device=True)(lambda bits: np.array(bits, unsigned).view(dt)[()]))
    if dt.kind == "f":
        if dt.itemsize == 4:
            return (cuda.jit(device=True)(lambda v: unsigned(libdevice.float_as_int(v))),
                    cuda.jit(device=True)(lambda bits: libdevice.int_as_float(np.int32(bits))))
        return (cuda.jit(device=True)(lambda v: unsigned(libdevice.double_as_longlong(v))),
                cuda.jit(device=True)(lambda bits: libdevice.longlong_as_double(np.int64(bits))))
    return cuda.jit(device=True)(lambda v: unsigned(v)), cuda.jit(device=True)(lambda bits: dt.type(bits))


@functools.lru_cache(maxsize=None)
@device_specific
def wide_bit_carrier(dtype):
    """:func:`bit_carrier` into and out of uint64 whatever the width: a field's value slot."""
    to_bits, from_bits = bit_carrier(dtype)
    if check_dtype(dtype).itemsize == 8:
        return to_bits, from_bits
    return (cuda.jit(device=True)(lambda v: np.uint64(to_bits(v))),
            cuda.jit(device=True)(lambda bits: from_bits(np.uint32(bits))))


def packed(dtype):
    """Whether a tile's state is one 64-bit word (4-byte types) rather than flag and value apart."""
    return not is_fields(dtype) and check_dtype(dtype).itemsize == 4


def _bits(dtype):
    """``(to_bits, from_bits)`` of a state's value: :func:`bit_carrier`, or per field :func:`wide_bit_carrier`."""
    if not is_fields(dtype):
        return bit_carrier(dtype)
    pairs = [wide_bit_carrier(d) for d in dtype]
    return Fieldwise(p[0] for p in pairs), Fieldwise(p[1] for p in pairs)


@functools.lru_cache(maxsize=None)
def state_access(dtype):
    """Device functions ``publish(status, values, tile, flag, value)`` and ``peek(status, values, tile) -> (flag, value)``.

    Packed (4-byte types): ``status`` is uint64, flag in the high half, value bits in the low
    half, one atomic each way; ``values`` is unused. Two words (8-byte types): ``status`` is
    uint32 flags, ``values`` uint64 bits, two slots per tile (aggregate, prefix), value first and
    a fence before the flag; for a tuple of dtypes, ``values`` is one such array per field.
    """
    to_bits, from_bits = _bits(dtype)
    if packed(dtype):
        def publish(status, values, tile, flag, value):
            cuda.atomic.exch(status, tile, (np.uint64(flag) << np.uint64(32)) | np.uint64(to_bits(value)))

        def peek(status, values, tile):
            word = cuda.atomic.or_(status, tile, np.uint64(0))
            return np.uint32(word >> np.uint64(32)), from_bits(np.uint32(word & np.uint64(0xFFFFFFFF)))
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
    """Device function ``look_back_lane(status, values, tile, stride, slot, aggregate, epoch) -> exclusive``, for one thread.

    The look-back of :func:`look_back` for many quantities per tile at once, one thread each, as
    CUB's onesweep radix sort carries a count per digit: the state of quantity ``slot`` of tile
    t is at index ``t * stride + slot``. The thread publishes ``aggregate`` (tile 0: as its
    prefix), then walks back ``window`` tiles at a time: it asks for their states all at once
    (the reads are in flight together), then, closest first, waits for each until it has
    published and combines its value, until it meets a prefix. It publishes the tile's inclusive
    prefix and returns everything before the tile. The states, flags and epochs are
    :func:`state_access`'s.
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    element = numba_type(dtype)
    publish, peek = state_access(dtype)

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
    """The tile states, counter and epoch of one element width, reused by every call of one thread.

    ``fields`` > 0: elements of that many fields, ``values`` a tuple of one array per field.
    """

    def __init__(self, itemsize, fields=0):
        self.itemsize = itemsize
        self.fields = fields
        self.capacity = 0
        self.epoch = 0

    def next(self, tiles):
        """``(status, values, counter, epoch)`` for a scan of ``tiles`` tiles."""
        self.epoch += 1
        if tiles > self.capacity or self.epoch >= MAX_EPOCH:
            self.capacity = max(tiles, 2 * self.capacity)
            one_word = self.itemsize == 4 and not self.fields
            self.status = cuda.to_device(np.zeros(self.capacity, np.uint64 if one_word else np.uint32))
            slots = 1 if one_word else 2 * self.capacity
            self.values = cuda.to_device(np.zeros(slots, np.uint64)) if not self.fields else \
                tuple(cuda.to_device(np.zeros(slots, np.uint64)) for _ in range(self.fields))
            self.counter = cuda.to_device(np.zeros(1, np.uint32))
            self.epoch = 1
        return self.status, self.values, self.counter, self.epoch


def kept_states(itemsize, fields=0):
    """This thread's :class:`_States` for elements of ``itemsize`` bytes, or of ``fields`` fields (made on first use)."""
    return reused(("look-back tile states", itemsize, fields), lambda: _States(itemsize, fields))


def states(dtype, tiles):
    """The tile states for a scan of ``tiles`` tiles of ``dtype`` (or a tuple of dtypes; see :class:`_States`), this thread's."""
    if is_fields(dtype):
        return kept_states(0, len(dtype)).next(tiles)
    return kept_states(check_dtype(dtype).itemsize).next(tiles)
