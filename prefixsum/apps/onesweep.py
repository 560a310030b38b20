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

The kernels and their steps are in :mod:`.onesweep_kernels`; this module is the host side: the
plan of a sort (:func:`plan_radix_sort`, kept by :func:`radix_sort`), its launches and its memory.
"""

import functools
from typing import NamedTuple

import numpy as np
from numba import cuda

from ..core.arrays import result_maker
from ..core.device import simulating
from ..core.inputs import as_input, same_length
from ..core.plans import Plan, carve, carved_bytes, check_out, one_line_call
from ..core.streams import as_stream, launch_stream
from ..core.workspace import one_call_at_a_time, scratch
from ..primitives.tile_state import caller_states, state_bytes, states
from ._arrays import back, device_copy
from .onesweep_kernels import (  # noqa: F401  (the kernels and their steps, by the names chapter 11 and the tests read)
    BLOCK_SIZE,
    HISTOGRAM_BLOCKS_PER_SM,
    HISTOGRAM_ITEMS,
    LOOKBACK_WINDOW,
    MAX_ITEMS_PER_THREAD,
    RANK,
    TILE_BITS,
    TILE_BYTES,
    _array,
    ballot_digit_rank,
    clear,
    digit_counter,
    digit_pass_kernel,
    digit_placer,
    histogram_argtypes,
    histogram_kernel,
    key_loader,
    key_ranker,
    key_scatterer,
    launchers,
    pass_argtypes,
    passes,
    tile_items,
    value_mover,
    warp_digit_rank,
)
from .ordered_keys import RADIX, RADIX_BITS, unsigned_of
from .selection import count_dtype

KEY_DTYPES = tuple(
    np.dtype(t)
    for t in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64")
)
VALUE_SIZES = (1, 2, 4, 8)
"""Bytes of a value the sort moves (any dtype of these widths: its bits are moved)."""


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
        raise TypeError(
            f"values of dtype {dtype.name!r} ({dtype.itemsize} bytes) cannot be moved; allowed: any "
            f"dtype of {VALUE_SIZES} bytes"
        )
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
    custom = (
        block_size is not None
        or items_per_thread is not None
        or rank is not RANK
        or window is not None
        or registers is not None
    )
    block_size = block_size or BLOCK_SIZE
    items = items_per_thread or tile_items(dtype, value_bits, block_size)
    clear_launch, histogram_launch, pass_launch = launchers(dtype, value_bits, counts)
    if custom:
        kernel = digit_pass_kernel(
            dtype, value_bits, counts, block_size, items, rank, window or LOOKBACK_WINDOW, registers
        )

        def pass_launch(grid, block, *args, stream=None):
            kernel[grid, block, launch_stream(stream)](*args)

    histogram_blocks = min(-(-n // (BLOCK_SIZE * HISTOGRAM_ITEMS)), HISTOGRAM_BLOCKS_PER_SM * _multiprocessors())
    return _Passes(
        n,
        unsigned,
        moved,
        counts,
        passes(dtype),
        block_size,
        -(-n // (block_size * items)),
        max(histogram_blocks, 1),
        clear_launch,
        histogram_launch,
        pass_launch,
    )


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
        spare = (
            scratch("onesweep keys", n, unsigned, stream),
            None if values is None else scratch("onesweep values", n, moved, stream),
        )
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
        status, state_values, counter, epoch = (
            states(setup.counts, tiles * RADIX, stream) if kept_states is None else kept_states.next(tiles * RADIX)
        )
        setup.digit_pass(
            tiles,
            setup.block_size,
            src,
            dst,
            src_values,
            dst_values,
            hist,
            status,
            state_values,
            counter,
            n,
            epoch,
            p * RADIX_BITS,
            p,
            stream=stream,
        )
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
            raise ValueError(
                f"this plan sorts {self.n} keys of {self.dtype.name}"
                + ("" if self.value_dtype is None else f" with values of {self.value_dtype.name}")
                + f"; got {got[2]} of {got[0].name}"
                + ("" if got[1] is None else f" with {got[1].name}")
            )
        return self.run(
            keys, values, on_device, out, as_stream(stream), None if temp is None else self.check_temp(temp)
        )

    def run(self, keys, values, on_device, out, stream, temp):
        """Sort the checked ``keys`` and ``values`` (numpy or device, as ``on_device``) on ``stream``."""
        outs = (None, None)
        if out is not None:
            given = (out,) if values is None else out
            if values is not None and not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"out must be a pair (keys, values) when values are sorted; got {type(out).__name__}")
            outs = tuple(
                check_out(o, self.n, a.dtype, on_device, a, name)
                for o, a, name in zip(given, (keys, values), ("out[0]", "out[1]") if values is not None else ("out",))
            ) + (None,)
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
    return one_line_call(
        ("radix_sort", dtype, n, value_dtype),
        SortPlan,
        (dtype, n, value_dtype),
        {},
        keys,
        values,
        on_device,
        out,
        as_stream(stream),
        None,
    )


def sort_device(
    keys, values=None, *, block_size=None, items_per_thread=None, rank=RANK, window=None, registers=None, stream=None
):
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
        setup = _passes(
            dtype, None if values is None else values.dtype, n, block_size, items_per_thread, rank, window, registers
        )
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
    _, moved = sort_device(
        cuda.to_device(keys), cuda.to_device(order), block_size=block_size, items_per_thread=items_per_thread, rank=rank
    )
    return moved.copy_to_host()
