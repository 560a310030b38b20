"""Stream compaction in one pass: ``x[mask]`` and ``nonzero`` by decoupled look-back (CUB's DeviceSelect).

The readable compaction (:mod:`.compaction`) makes three passes over the data: flags, an
exclusive scan of them, a scatter; it reads the output's length back to the host between them.
Here one kernel does all three, tile by tile, with the look-back of the single-pass scan
(:mod:`prefixsum.scans.lookback`) carrying the number of kept elements instead of a running sum:

1. A block draws its tile's id from the look-back's counter, in launch order, and loads the
   tile's flags in the *striped* arrangement (step k: thread t reads element ``k * block + t``,
   so each load of a warp is one contiguous run), with the values of the kept elements.
2. Ranks in the tile without a scan of n flags: in step k each warp takes a ballot of its 32
   flags (:func:`warp_rank`). A kept element's rank among its warp's kept elements of step k is
   the number of set bits of the ballot below its lane (``popc(ballot & lanemask_lt)``); the
   ballot's ``popc`` is that warp's count in step k. Warp 0 scans the ``items * warps`` counts, in the tile's order
   (step k of warp 0, of warp 1, ..., then step k + 1): each becomes the number of kept
   elements of the tile before that warp's step.
3. Warp 0 hands the tile's count to the look-back (:func:`prefixsum.scans.tile_state.look_back`
   with ``add`` on the count's integer type), which publishes it and returns the kept elements
   of all tiles before; the last tile writes the total to ``count``.
4. Every kept element goes to ``out[before + count before its warp's step + rank in the step]``.
   The kept elements of one warp's step land side by side, so the stores are contiguous too.

Stable by construction: places follow the order of the elements. One launch, n flags and n
values read (a value only where kept), the kept elements written once; no reset between calls
(the look-back's epochs), nothing read back to the host but the count.

The count: the output's length is known only when the last tile has finished. With ``sync=True``
the kernel writes it to mapped host memory and the call waits for the kernel (as ``x[mask]``
waits in numpy, torch and CuPy); the result is the first ``count`` elements of a buffer of n.
With ``sync=False`` nothing waits: the call returns the buffer of n and a one-element device
array holding the count, as CUB's ``DeviceSelect::Flagged`` does. Either way the kept elements
live in a buffer of n (from :func:`prefixsum.core.arrays.result_array`'s cache), held as long as
the result is.

As the look-back's tile states, the mapped count is made once per host thread and reused by
every call of that thread on numba's default stream (:mod:`prefixsum.core.workspace`): one GPU
per process.
"""
import functools

import numpy as np
from numba import cuda, from_dtype, types

from ..core.arrays import result_array
from ..core.device import simulating
from ..core.launch import Launcher
from ..core.workspace import reused
from ..primitives.ops import numba_type
from ..primitives.warp import FULL_MASK, scan_shfl
from ..scans.lookback import argtypes as lookback_argtypes
from ..scans.tile_state import look_back, states
from ._arrays import back, to_device, values_and_mask

BLOCK_SIZE = 128
"""Threads of a tile."""
ITEMS_PER_THREAD = 16
"""Elements per thread: tiles of 2048 elements, as the look-back scan of 4-byte types."""
INT32_COUNT_LIMIT = (1 << 31) - 1
"""Longest input whose counts the look-back carries as int32 (one 64-bit word per tile state); longer ones take int64."""


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


@cuda.jit(device=True)
def warp_rank(kept):
    """``(rank, count)``: the lanes of the caller's warp below it whose ``kept`` is True, and all such lanes.

    Every lane of the warp must call it. One ballot: bit l is lane l's ``kept``; the bits below
    the caller's lane (``lanemask_lt``) counted are its rank, all of them the warp's count.
    """
    ballot = np.uint32(cuda.ballot_sync(FULL_MASK, kept))
    return cuda.popc(ballot & cuda.lanemask_lt()), cuda.popc(ballot)


@cuda.jit(device=True)
def _element(x, i):
    return x[i]


@cuda.jit(device=True)
def _index(x, i):
    return np.int64(i)


def count_dtype(n):
    """The integer type the look-back carries counts of ``n`` flags in."""
    return np.dtype(np.int32 if n <= INT32_COUNT_LIMIT else np.int64)


@functools.lru_cache(maxsize=None)
def select_kernel(value_dtype, counts, indices, block_size=BLOCK_SIZE, items=ITEMS_PER_THREAD, rank=warp_rank):
    """Kernel ``(x, mask, out, count, status, values, counter, n, epoch)``: one block per tile.

    Writes the kept elements of ``x`` (``indices``: their indices, int64; ``x`` is then not
    read) to ``out`` in order, and their number to ``count[0]``. ``counts`` is the dtype the
    look-back carries (:func:`count_dtype`); ``status, values, counter, epoch`` are its tile
    states (:func:`prefixsum.scans.tile_state.states`). ``rank`` replaces :func:`warp_rank`
    (chapter 11's exercise writes one).
    """
    value = from_dtype(np.dtype(value_dtype))
    count_type = numba_type(counts)
    fetch = _index if indices else _element
    look = look_back("add", np.dtype(counts))
    warp_scan = scan_shfl("add", np.dtype(np.int32))
    warps = block_size // 32
    steps = items * warps  # one count per (step, warp), in the tile's order
    tile_size = block_size * items

    def select(x, mask, out, count, status, values, counter, n, epoch):
        before_step = cuda.shared.array(steps, types.int32)
        drawn = cuda.shared.array(1, types.int32)
        before_tile = cuda.shared.array(1, count_type)
        below = cuda.local.array(items, types.int32)
        kept_values = cuda.local.array(items, value)
        t = cuda.threadIdx.x
        lane = t & 31
        warp = t >> 5
        tile = draw_tile(counter, drawn)
        start = np.int64(tile) * tile_size
        kept = 0  # bit k: this thread's element of step k is kept
        # In a whole tile no bounds check stands between the flag loads: all in flight at once.
        if start + tile_size <= n:
            for k in range(items):
                if mask[start + k * block_size + t]:
                    kept |= 1 << k
        else:
            for k in range(items):
                i = start + k * block_size + t
                if i < n and mask[i]:
                    kept |= 1 << k
        for k in range(items):
            flag = (kept >> k) & 1
            below[k], in_warp = rank(flag != 0)
            if lane == 0:
                before_step[k * warps + warp] = in_warp
            if flag:
                kept_values[k] = fetch(x, start + k * block_size + t)
        cuda.syncthreads()
        if warp == 0:
            total = 0
            for first in range(0, steps, 32):
                s = first + lane
                c = before_step[s] if s < steps else 0
                inclusive = warp_scan(np.int32(c), FULL_MASK)
                if s < steps:
                    before_step[s] = total + inclusive - c
                total += cuda.shfl_sync(FULL_MASK, inclusive, 31)
            before = look(status, values, tile, count_type(total), epoch)
            if lane == 0:
                before_tile[0] = before
                if tile == cuda.gridDim.x - 1:
                    count[0] = before + total
        cuda.syncthreads()
        base = np.int64(before_tile[0])
        for k in range(items):
            if (kept >> k) & 1:
                out[base + before_step[k * warps + warp] + below[k]] = kept_values[k]

    return cuda.jit(select)


def argtypes(value_dtype, mask_dtype, counts, indices):
    """Argument types of :func:`select_kernel`'s kernel, for compiling it to PTX and launching it.

    ``value_dtype`` is the output's (int64 for ``indices``, where ``x`` is the mask).
    """
    def array(dtype):
        return types.Array(from_dtype(np.dtype(dtype)), 1, "C")

    return (array(mask_dtype if indices else value_dtype), array(mask_dtype), array(value_dtype), array(np.int64),
            *lookback_argtypes(counts)[2:])


@functools.lru_cache(maxsize=None)
def launcher(value_dtype, mask_dtype, counts, indices, block_size, items):
    """The :class:`~prefixsum.core.launch.Launcher` of one :func:`select_kernel` (``indices``: x is the mask)."""
    kernel = select_kernel(value_dtype, counts, indices, block_size, items)
    return Launcher(kernel, argtypes(value_dtype, mask_dtype, counts, indices))


def mapped_count():
    """A one-element int64 array in mapped host memory, made once per host thread
    (:func:`prefixsum.core.workspace.reused`): the kernel writes the count there and the host
    reads it after the kernel, with no copy of its own."""
    return reused("selection's mapped count", lambda: cuda.mapped_array(1, np.int64))


def head(buffer, k):
    """The first ``k`` elements of the device array ``buffer``, sharing its memory (no copy)."""
    if simulating():
        return buffer[:k]
    return cuda.devicearray.DeviceNDArray((k,), (buffer.dtype.itemsize,), buffer.dtype, gpu_data=buffer.gpu_data)


def _select(x, mask, dtype, on_device, sync, indices, block_size=None, items=None, rank=warp_rank):
    """Launch the kernel for device arrays ``x`` and ``mask``; see :func:`compact`.

    The tile shape is :data:`BLOCK_SIZE` x :data:`ITEMS_PER_THREAD` unless given; another
    ``rank`` compiles its own kernel and launches it through numba's dispatcher.
    """
    if not isinstance(sync, (bool, np.bool_)):
        raise ValueError(f"sync must be True or False; got {sync!r}")
    block_size, items = block_size or BLOCK_SIZE, items or ITEMS_PER_THREAD
    n = mask.shape[0]
    counts = count_dtype(n)
    out = result_array(n, dtype)
    count = mapped_count() if sync else result_array(1, np.int64)
    if n == 0:
        if not sync:
            cuda.to_device(np.zeros(1, np.int64), to=count)
            return out, count
        return back(out, on_device)
    tiles = -(-n // (block_size * items))
    status, values, counter, epoch = states(counts, tiles)
    if rank is warp_rank:
        launcher(np.dtype(dtype), mask.dtype, counts, indices, block_size, items)(
            tiles, block_size, x, mask, out, count, status, values, counter, n, epoch)
    else:
        select_kernel(np.dtype(dtype), counts, indices, block_size, items, rank)[tiles, block_size](
            x, mask, out, count, status, values, counter, n, epoch)
    if not sync:
        return out, count
    cuda.synchronize()  # the count is in mapped host memory once the kernel has ended
    return back(head(out, int(count[0])), on_device)


def compact(x, mask, *, sync=True):
    """The elements of ``x`` where ``mask`` is set, in their order: ``x[mask]`` in one pass.

    Parameters
    ----------
    x : numpy.ndarray or device array, 1-D
        Any numeric dtype. Never modified.
    mask : numpy.ndarray or device array, 1-D, same length
        Truth values (bool, or numbers: nonzero keeps).
    sync : bool
        True: wait for the kernel and return exactly the kept elements. False: wait for nothing
        and return ``(buffer, count)``, device arrays: the kept elements are ``buffer[:count[0]]``
        once the work queued on the default stream has run.

    Returns
    -------
    numpy.ndarray or numba device array, or a pair of device arrays
        The kept elements, numpy for numpy ``x`` (``sync=True``); ``(buffer, count)``, a device
        array of ``len(x)`` elements and a one-element int64 device array (``sync=False``).

    Examples
    --------
    >>> import numpy as np
    >>> compact(np.arange(6), np.array([1, 0, 0, 1, 1, 0], bool))
    array([0, 3, 4])
    """
    x, mask, on_device = values_and_mask(x, mask)
    return _select(x, mask, x.dtype, on_device, sync, indices=False)


def compact_indices(mask, *, sync=True):
    """The indices where ``mask`` is set, in increasing order: numpy's ``flatnonzero`` in one pass.

    Parameters
    ----------
    mask : numpy.ndarray or device array, 1-D
        Truth values (bool, or numbers: nonzero counts).
    sync : bool
        As in :func:`compact`.

    Returns
    -------
    numpy.ndarray or numba device array of int64, or a pair of device arrays
        As :func:`compact` returns them.

    Examples
    --------
    >>> import numpy as np
    >>> compact_indices(np.array([0, 2, 0, 1]))
    array([1, 3])
    """
    mask, on_device = to_device(mask, "mask")
    return _select(mask, mask, np.dtype(np.int64), on_device, sync, indices=True)


def compact_with(x, mask, *, block_size=32, items_per_thread=1, rank=warp_rank):
    """:func:`compact` of host arrays with small tiles and, optionally, another in-warp rank.

    Parameters
    ----------
    x, mask : numpy.ndarray
        As :func:`compact`'s.
    block_size, items_per_thread : int
        The tile: small by default, so that a short input makes many tiles (block_size a
        multiple of 32).
    rank : device function
        ``rank(kept) -> (rank, count)``, as :func:`warp_rank`.

    Returns
    -------
    numpy.ndarray
    """
    x, _ = to_device(x, "x")
    mask, _ = to_device(mask, "mask")
    if mask.shape[0] != x.shape[0]:
        raise ValueError(f"x and mask must have one length; got {x.shape[0]} and {mask.shape[0]}")
    return _select(x, mask, x.dtype, False, True, False, block_size, items_per_thread, rank)
