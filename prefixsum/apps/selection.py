"""Stream compaction in one pass: ``x[mask]`` and ``nonzero`` by decoupled look-back (CUB's DeviceSelect).

The readable compaction (:mod:`.compaction`) makes three passes over the data: flags, an
exclusive scan of them, a scatter; it reads the output's length back to the host between them.
Here one kernel does all three, tile by tile, with the look-back of the single-pass scan
(:mod:`prefixsum.scans.lookback`) carrying the number of kept elements instead of a running sum:

1. A block draws its tile's id from the look-back's counter, in launch order
   (:func:`~prefixsum.primitives.tile_state.draw_tile`), and loads the
   tile's flags in the *striped* arrangement (step k: thread t reads element ``k * block + t``,
   so each load of a warp is one contiguous run), with the values of the kept elements.
2. Ranks in the tile without a scan of n flags: in step k each warp takes a ballot of its 32
   flags (:func:`~prefixsum.primitives.warp.warp_rank`). A kept element's rank among its warp's kept
   elements of step k is the number of set bits of the ballot below its lane (``popc(ballot &
   lanemask_lt)``); the ballot's ``popc`` is that warp's count in step k. Warp 0 scans the
   ``items * warps`` counts, in the tile's order (step k of warp 0, of warp 1, ..., then step
   k + 1): each becomes the number of kept elements of the tile before that warp's step.
3. Warp 0 hands the tile's count to the look-back (:func:`prefixsum.primitives.tile_state.look_back`
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

As the look-back's tile states, the mapped count is made once per host thread and stream and
reused by every call of that thread on that stream (:mod:`prefixsum.core.workspace`): one GPU
per process. A call is a plan (:func:`plan_compact`, :func:`plan_compact_indices`) kept in the
package's one plan cache; ``stream=`` queues it on the caller's stream, and ``sync=True`` then
waits for that stream only.
"""

import functools

import numpy as np
from numba import cuda, from_dtype, types

from ..core.arrays import result_array, result_maker
from ..core.inputs import as_input, check_mask_dtype, same_length
from ..core.launch import Launcher
from ..core.numba_gpu import first_elements
from ..core.plans import Plan, one_line_call
from ..core.registry import Capability
from ..core.streams import as_stream, launch_stream
from ..core.workspace import one_call_at_a_time, reused
from ..primitives.ops import numba_type
from ..primitives.tile_state import caller_states, draw_tile, look_back, state_bytes, states
from ..primitives.warp import FULL_MASK, scan_shfl, warp_rank
from ..scans.lookback import argtypes as lookback_argtypes
from ._arrays import back, device_copy

BLOCK_SIZE = 128
"""Threads of a tile."""
ITEMS_PER_THREAD = 16
"""Elements per thread: tiles of 2048 elements, as the look-back scan of 4-byte types."""
INT32_COUNT_LIMIT = (1 << 31) - 1
"""Longest input whose counts the look-back carries as int32 (one 64-bit word per tile state); longer ones take
int64."""
CAPABILITIES = Capability.WARP_INTRINSICS | Capability.CALLER_TEMP
"""What the one-pass compaction can do and needs, as the registries' flags."""


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
    states (:func:`prefixsum.primitives.tile_state.states`). ``rank`` replaces :func:`warp_rank`
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

    # the look-back kernel's state arrays, n and epoch; not its last argument, the first tile of a
    # chunk (a numpy scan's chunks), since one launch selects from every tile
    return (
        array(mask_dtype if indices else value_dtype),
        array(mask_dtype),
        array(value_dtype),
        array(np.int64),
        *lookback_argtypes(counts)[2:-1],
    )


@functools.lru_cache(maxsize=None)
def launcher(value_dtype, mask_dtype, counts, indices, block_size, items):
    """The :class:`~prefixsum.core.launch.Launcher` of one :func:`select_kernel` (``indices``: x is the mask)."""
    kernel = select_kernel(value_dtype, counts, indices, block_size, items)
    return Launcher(kernel, argtypes(value_dtype, mask_dtype, counts, indices))


def mapped_count(stream=None):
    """A one-element int64 array in mapped host memory, made once per host thread and stream
    (:func:`prefixsum.core.workspace.reused`): the kernel writes the count there and the host
    reads it after the kernel, with no copy of its own."""
    return reused("selection's mapped count", lambda: cuda.mapped_array(1, np.int64), stream)


def _launch(launch, x, mask, out, count, n, counts, block_size, items, stream, temp):
    """``launch`` (a :class:`~prefixsum.core.launch.Launcher` of :func:`select_kernel`'s kernel, or a
    function of the same arguments) for device arrays ``x`` and ``mask`` into ``out`` and ``count``
    on ``stream`` (a :class:`~prefixsum.core.streams.Stream`), tiles of ``block_size`` x ``items``,
    the tile states this thread's and stream's or laid out in ``temp``."""
    tiles = -(-n // (block_size * items))
    if temp is None:
        status, values, counter, epoch = states(counts, tiles, stream)
    else:
        status, values, counter, epoch = caller_states(temp, counts, tiles, stream).next(tiles)
    launch(tiles, block_size, x, mask, out, count, status, values, counter, n, epoch, stream=stream)


class SelectPlan(Plan):
    """:func:`compact` (or :func:`compact_indices`) of ``n`` elements, worked out once: made by
    :func:`plan_compact` and :func:`plan_compact_indices` (and kept by the one-line calls).

    Call it as ``plan(x, mask, *, stream=None, temp=None)`` (for :func:`plan_compact_indices`,
    ``plan(mask, *, stream=None, temp=None)``); what it returns is what the one-line call returns
    with the plan's ``sync``. ``temp``: at least ``plan.temp_bytes`` bytes of device memory for
    the look-back's tile states (:mod:`prefixsum.core.plans`).
    """

    def __init__(self, dtype, n, mask_dtype, indices, sync):
        if not isinstance(sync, (bool, np.bool_)):
            raise ValueError(f"sync must be True or False; got {sync!r}")
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
            raise ValueError(f"n must be an integer >= 0; got {n!r}")
        self.n, self.indices, self.sync = int(n), bool(indices), bool(sync)
        self.mask_dtype = check_mask_dtype(mask_dtype)
        self.dtype = np.dtype(np.int64) if indices else np.dtype(dtype)
        self.counts = count_dtype(self.n)
        self.algorithm = "compact_indices" if indices else "compact"
        self.tile_shape = (BLOCK_SIZE, ITEMS_PER_THREAD)
        tiles = -(-self.n // (BLOCK_SIZE * ITEMS_PER_THREAD))
        self.temp_bytes = state_bytes(self.counts, max(tiles, 1))
        self._result = result_maker(self.n, self.dtype)
        self._launcher = launcher(self.dtype, self.mask_dtype, self.counts, self.indices, *self.tile_shape)

    def _list_kernels(self):
        return [(self._launcher.dispatcher, self._launcher.argtypes)]

    @one_call_at_a_time
    def __call__(self, x, mask=None, *, stream=None, temp=None):
        if self.indices:
            if mask is not None:
                raise TypeError("a plan of compact_indices takes the mask alone: plan(mask)")
            mask, on_device = _checked_mask(x, "mask")
            x = mask
        else:
            (x, on_device), (mask, _) = _checked_pair(x, mask)
        got, wanted = (mask.shape[0], np.dtype(mask.dtype), np.dtype(x.dtype)), (self.n, self.mask_dtype, self.dtype)
        if got[:2] != wanted[:2] or (not self.indices and got[2] != wanted[2]):
            what = "a mask" if self.indices else f"{self.dtype.name} values and a mask"
            raise ValueError(
                f"this plan selects by {what} of {self.n} elements of {self.mask_dtype.name}; got "
                f"{got[0]} elements" + ("" if self.indices else f" of {got[2].name}") + f" and a mask of {got[1].name}"
            )
        return self.run(x, mask, on_device, as_stream(stream), None if temp is None else self.check_temp(temp))

    def run(self, x, mask, on_device, stream, temp):
        """Select from the checked arrays ``x`` and ``mask`` (numpy or device, as ``on_device``)."""
        x_dev = device_copy(x, on_device, stream)
        mask_dev = x_dev if self.indices else device_copy(mask, on_device, stream)
        out = self._result(stream.key)
        count = mapped_count(stream) if self.sync else result_array(1, np.int64, stream)
        if self.n == 0:
            if not self.sync:
                cuda.to_device(np.zeros(1, np.int64), to=count, stream=launch_stream(stream))
                return out, count
            return back(out, on_device, stream)
        _launch(self._launcher, x_dev, mask_dev, out, count, self.n, self.counts, *self.tile_shape, stream, temp)
        if not self.sync:
            return out, count
        stream.synchronize()  # the count is in mapped host memory once the kernel has ended
        return back(first_elements(out, int(count[0])), on_device, stream)


def plan_compact(dtype, n, *, mask_dtype=np.bool_, sync=True):
    """A plan of :func:`compact` for ``n`` elements of ``dtype`` and a mask of ``mask_dtype``, to call in a loop.

    Parameters
    ----------
    dtype : numpy dtype
        The values' dtype (any numeric dtype).
    n : int
        Elements per call, n >= 0.
    mask_dtype : numpy dtype, default bool
        bool or any integer type.
    sync : bool
        As :func:`compact`'s.

    Returns
    -------
    SelectPlan
        ``plan(x, mask, *, stream=None, temp=None)``.

    Examples
    --------
    >>> import numpy as np
    >>> plan = plan_compact(np.int64, 6)
    >>> plan(np.arange(6), np.array([1, 0, 0, 1, 1, 0], bool))
    array([0, 3, 4])
    """
    return SelectPlan(dtype, n, mask_dtype, False, sync)


def plan_compact_indices(n, *, mask_dtype=np.bool_, sync=True):
    """A plan of :func:`compact_indices` for a mask of ``n`` elements of ``mask_dtype``: ``plan(mask, *, stream=None,
    temp=None)``.

    Parameters as :func:`plan_compact`'s.

    Returns
    -------
    SelectPlan
    """
    return SelectPlan(np.int64, n, mask_dtype, True, sync)


def _checked_mask(mask, name):
    return as_input(mask, name, mask=True)


def _checked_pair(x, mask):
    """``((x, on_device), (mask, on_device))`` checked: both of one kind and one length."""
    x, on_device = as_input(x, "x")
    mask, mask_on_device = _checked_mask(mask, "mask")
    if on_device != mask_on_device:
        raise ValueError("x and mask must be both numpy arrays or both device arrays")
    same_length([x, mask], ["x", "mask"])
    return (x, on_device), (mask, mask_on_device)


def _key(kind, dtype, n, mask_dtype, sync):
    """What the plan of a one-line call is kept by: the tile and the counts' type are the module's
    now (tests make small tiles)."""
    return (kind, dtype, n, mask_dtype, type(sync), sync, BLOCK_SIZE, ITEMS_PER_THREAD, count_dtype(n))


def compact(x, mask, *, sync=True, stream=None):
    """The elements of ``x`` where ``mask`` is set, in their order: ``x[mask]`` in one pass.

    Parameters
    ----------
    x : numpy.ndarray or device array, 1-D
        Any numeric dtype. Never modified.
    mask : numpy.ndarray or device array, 1-D, same length and kind
        bool or any integer type (nonzero keeps). Never modified.
    sync : bool
        True: wait for the kernel and return exactly the kept elements. False: wait for nothing
        and return ``(buffer, count)``, device arrays: the kept elements are ``buffer[:count[0]]``
        once the work queued on the stream has run.
    stream : optional
        The stream it is queued on (any form :func:`prefixsum.scan` takes); ``sync=True`` waits
        for this stream only. None: numba's default stream.

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
    (x, on_device), (mask, _) = _checked_pair(x, mask)
    dtype, mask_dtype, n = np.dtype(x.dtype), np.dtype(mask.dtype), x.shape[0]
    return one_line_call(
        _key("compact", dtype, n, mask_dtype, sync),
        SelectPlan,
        (dtype, n, mask_dtype, False, sync),
        {},
        x,
        mask,
        on_device,
        as_stream(stream),
        None,
    )


def compact_indices(mask, *, sync=True, stream=None):
    """The indices where ``mask`` is set, in increasing order: numpy's ``flatnonzero`` in one pass.

    Parameters
    ----------
    mask : numpy.ndarray or device array, 1-D
        bool or any integer type (nonzero counts). Never modified.
    sync, stream
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
    mask, on_device = _checked_mask(mask, "mask")
    mask_dtype, n = np.dtype(mask.dtype), mask.shape[0]
    return one_line_call(
        _key("compact_indices", None, n, mask_dtype, sync),
        SelectPlan,
        (np.int64, n, mask_dtype, True, sync),
        {},
        mask,
        mask,
        on_device,
        as_stream(stream),
        None,
    )


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
        ``rank(kept) -> (rank, count)``, as :func:`~prefixsum.primitives.warp.warp_rank`.

    Returns
    -------
    numpy.ndarray
    """
    (x, _), (mask, _) = _checked_pair(x, mask)
    n = x.shape[0]
    stream = as_stream(None)
    out = result_array(n, x.dtype)
    count = cuda.mapped_array(1, np.int64)
    if n:
        counts = count_dtype(n)
        kernel = select_kernel(np.dtype(x.dtype), counts, False, block_size, items_per_thread, rank)

        def launch(grid, block, *args, stream):
            kernel[grid, block, launch_stream(stream)](*args)

        _launch(
            launch,
            device_copy(x, False, stream),
            device_copy(mask, False, stream),
            out,
            count,
            n,
            counts,
            block_size,
            items_per_thread,
            stream,
            None,
        )
        stream.synchronize()
    return out.copy_to_host()[: int(count[0]) if n else 0]
