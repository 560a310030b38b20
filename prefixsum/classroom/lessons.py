"""Kernels for lessons only: wrong on purpose, or runners that show one primitive at work.

None of these is registered or launched by :func:`prefixsum.scan`; the chapters and the tests
run them, often under :mod:`prefixsum.classroom.trace`:

* :func:`scan_volatile`: Figure 1 of Lungu, Petroşanu and Pîrjan (2011) as the paper writes it, on ``volatile`` shared
  memory with no synchronisation, relying on the lanes of a warp executing each instruction
  together. That held until Volta (compute capability 7.0). numba has no ``volatile``, so the
  compiler may also keep slots in registers. Unsafe on any GPU since Volta; kept to show the
  race: the tracer flags it, and the simulator's schedule (each lane runs to the end before the
  next starts, one of the schedules Volta permits) gives wrong sums. The safe versions are the
  primitives :func:`prefixsum.primitives.warp.scan_syncwarp` and
  :func:`~prefixsum.primitives.warp.scan_shfl`.
* :func:`warp_scan` (and its kernel, :func:`warp_scan_kernel`): any of the three warp scans on a
  host array, each warp of each block scanning its own run of (at most) 32 elements: a partial
  warp (a block size that is not a multiple of 32, or the end of the array) uses the mask of the
  lanes it has.
* :func:`figure2_kernel` and :func:`figure2_block_scan`: Figure 2 of the same paper, the block scan,
  as the paper writes it (over the safe shuffle warp scan, so that its own race shows alone): lane
  31 of every warp stores the warp's total into ``ptr[warp]`` and warp 0 scans ``ptr[0..31]`` with
  no barrier between, and with 32 warps ``ptr[31]`` is both warp 31's total and the slot that
  lane 31 of warp 0 reads. ``fixed=True`` stores the total from the register and adds the barrier.
* :func:`hillis_steele_in_place_tile_kernel`: Hillis-Steele in one shared buffer, the race GPU
  Gems warns against (the registered scan, :mod:`prefixsum.scans.hillis_steele`, ping-pongs).
* :func:`scan_with`: the look-back scan with a look-back of the student's own (chapter 10).
"""

import functools
import math

import numpy as np
from numba import cuda

from ..core.hardware import MAX_THREADS_PER_BLOCK
from ..primitives.block import position
from ..primitives.ops import device_op, identity, numba_type
from ..primitives.warp import FULL_MASK, lanes_mask, scan_shfl, scan_syncwarp
from ..scans import lookback
from ..scans.tiles import lane_result

VARIANTS = ("volatile", "syncwarp", "shfl")
_TEST_BLOCK = MAX_THREADS_PER_BLOCK  # the test kernel's shared buffer: one slot per thread of the largest block


@functools.lru_cache(maxsize=None)
def scan_volatile(op, dtype, inclusive=True):
    """Figure 1 of Lungu, Petroşanu and Pîrjan (2011): ``scan(buf, index)``, racy on every GPU since Volta (see above).

    ``buf[index]`` holds the lane's value, for every lane of the warp; afterwards ``buf`` holds the
    warp's inclusive scan. Returns the lane's inclusive or exclusive result.
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)

    def scan(buf, index):
        lane = index & 31
        if lane >= 1:
            buf[index] = combine(buf[index - 1], buf[index])
        if lane >= 2:
            buf[index] = combine(buf[index - 2], buf[index])
        if lane >= 4:
            buf[index] = combine(buf[index - 4], buf[index])
        if lane >= 8:
            buf[index] = combine(buf[index - 8], buf[index])
        if lane >= 16:
            buf[index] = combine(buf[index - 16], buf[index])
        if inclusive:
            return buf[index]
        return buf[index - 1] if lane > 0 else neutral

    return cuda.jit(device=True)(scan)


@functools.lru_cache(maxsize=None)
def warp_scan_kernel(variant, op, dtype, inclusive=True):
    """Kernel ``(x, out)``: every warp scans its own run of ``x`` with the ``variant`` scan.

    Thread ``i`` of the grid holds ``x[i]``; a warp's lanes are the threads of its block from a
    multiple of 32 on that are below ``len(x)``, so the last warp of a block may be partial.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown warp scan {variant!r}; allowed: {', '.join(VARIANTS)}")
    element = numba_type(dtype)

    if variant == "shfl":
        scan = scan_shfl(op, dtype, inclusive)

        def warp_scans(x, out):
            i = cuda.grid(1)
            if i < x.shape[0]:
                out[i] = scan(x[i], lanes_mask(x.shape[0]))

        return cuda.jit(warp_scans)
    if variant == "syncwarp":
        scan = scan_syncwarp(op, dtype, inclusive)
    else:
        scan = _ignoring_mask(scan_volatile(op, dtype, inclusive))

    def warp_scans(x, out):
        buf = cuda.shared.array(_TEST_BLOCK, element)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        if i < x.shape[0]:
            buf[t] = x[i]
            out[i] = scan(buf, t, lanes_mask(x.shape[0]))

    return cuda.jit(warp_scans)


def _ignoring_mask(scan):
    """``scan(buf, index)`` as ``scan(buf, index, mask)``: the paper's scan takes no mask, since
    it assumes every lane of the warp runs each instruction together."""

    def scan_without_mask(buf, index, mask):
        return scan(buf, index)

    return cuda.jit(device=True)(scan_without_mask)


def warp_scan(x, variant="shfl", op="add", *, inclusive=True, threads=32):
    """Scan every run of 32 elements (a warp's) of the host array ``x`` with one warp scan.

    Parameters
    ----------
    x : numpy.ndarray
        1-D, any dtype of :data:`prefixsum.DTYPES`.
    variant : {"volatile", "syncwarp", "shfl"}
    op : str
    inclusive : bool
    threads : int
        Threads per block, 1 to 1024; when not a multiple of 32 the last warp of each block is
        partial, and its runs are shorter.

    Returns
    -------
    numpy.ndarray
        The per-warp scans (element i combines the elements of its warp up to i).
    """
    x = np.ascontiguousarray(x)
    if not 1 <= threads <= _TEST_BLOCK:
        raise ValueError(f"threads={threads!r} must be from 1 to {_TEST_BLOCK}")
    out = np.empty_like(x)
    if len(x):
        warp_scan_kernel(variant, op, x.dtype, inclusive)[math.ceil(len(x) / threads), threads](x, out)
    return out


@functools.lru_cache(maxsize=None)
def figure2_kernel(op, dtype, fixed=False):
    """Kernel ``(x, out)``: one block scans ``x`` (one element per thread, a multiple of 32 threads)
    by Figure 2 of Lungu, Petroşanu and Pîrjan (2011), ``SumareBloc``, step by step.

    Step 1: every warp scans its values (here by shuffles, so that no race of Figure 1 mixes in)
    and stores them in ``ptr``; barrier. Step 2: lane 31 of every warp copies its warp's total,
    ``ptr[index]``, to ``ptr[warp]``. Step 3: warp 0 scans ``ptr[0..31]`` in place. The paper puts
    no barrier between steps 2 and 3: warp 0 may read a total before its warp has stored it, and
    with 32 warps lane 31 of warp 0 reads ``ptr[31]`` (its own element, then the last total) in
    the phase in which lane 31 of warp 31 writes it. Then barrier, step 4 (every warp adds the
    total of the warps before it), barrier, step 5 (``ptr[index] = rez``). ``fixed=True``: step 2
    stores the total from the register and a barrier follows it, as
    :func:`prefixsum.primitives.block.block_scan` does.
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    warp_scan = scan_shfl(op, dtype)
    element = numba_type(dtype)

    def block_scan_figure2(x, out):
        ptr = cuda.shared.array(_TEST_BLOCK, element)
        index = cuda.threadIdx.x
        lane, warp = index & 31, index >> 5
        rez = warp_scan(x[index] if index < x.shape[0] else neutral, FULL_MASK)  # step 1
        ptr[index] = rez
        cuda.syncthreads()
        if lane == 31:  # step 2
            ptr[warp] = rez if fixed else ptr[index]
        if fixed:
            cuda.syncthreads()  # the barrier Figure 2 lacks
        if warp == 0:  # step 3
            ptr[index] = warp_scan(ptr[index], FULL_MASK)
        cuda.syncthreads()
        if warp > 0:  # step 4
            rez = combine(ptr[warp - 1], rez)
        cuda.syncthreads()
        ptr[index] = rez  # step 5
        cuda.syncthreads()
        if index < x.shape[0]:
            out[index] = rez

    return cuda.jit(block_scan_figure2)


def figure2_block_scan(x, *, fixed=False, op="add"):
    """The inclusive scan of the host array ``x`` (1 to 1024 elements) by :func:`figure2_kernel`,
    one block of ``len(x)`` threads rounded up to whole warps."""
    x = np.ascontiguousarray(x)
    if not 1 <= len(x) <= _TEST_BLOCK:
        raise ValueError(f"figure2_block_scan scans 1 to {_TEST_BLOCK} elements in one block; got {len(x)}")
    out = np.empty_like(x)
    figure2_kernel(op, x.dtype, fixed)[1, -(-len(x) // 32) * 32](x, out)
    return out


@functools.lru_cache(maxsize=None)
def hillis_steele_in_place_tile_kernel(op, dtype, inclusive, reverse, block_size):
    """Kernel ``(x, out, totals, n)``: the racy single-buffer Hillis-Steele tile scan.

    Deliberately wrong, for teaching: within one step thread t reads ``cells[t - stride]``
    while thread ``t - stride`` writes it, with no barrier between the read and the write, so
    t may combine a value that already includes this step's update. Whether the result is
    wrong depends on the order in which the threads (on a GPU, the warps) run; a tracer of
    shared-memory accesses between barriers shows the read-write race at every step. Not
    registered, never launched by the package's scans.
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    where = position(reverse)
    result = lane_result(op, dtype, inclusive)
    element = numba_type(dtype)

    def hillis_steele_in_place_tile(x, out, totals, n):
        cells = cuda.shared.array(block_size, element)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * block_size + t
        cells[t] = x[where(i, n)] if i < n else neutral
        cuda.syncthreads()
        stride = 1
        while stride < block_size:
            if t >= stride:
                cells[t] = combine(cells[t - stride], cells[t])  # the race: t - stride may be written already
            cuda.syncthreads()
            stride <<= 1
        if i < n:
            out[where(i, n)] = result(cells, t)
        if t == block_size - 1:
            totals[cuda.blockIdx.x] = cells[t]

    return cuda.jit(hillis_steele_in_place_tile)


def scan_with(x, look, *, block_size=32, items_per_thread=1):
    """The inclusive float32 sum scan of the numpy array ``x`` by the kernel with another look-back.

    Parameters
    ----------
    x : numpy.ndarray
        1-D float32.
    look : device function
        ``look(status, values, tile, aggregate, epoch) -> exclusive``, as :func:`prefixsum.scans.lookback.look_back`'s.
    block_size, items_per_thread : int
        Small tiles by default, so that a short input makes many tiles.

    Returns
    -------
    numpy.ndarray
    """
    dtype = np.dtype(np.float32)
    x = np.ascontiguousarray(x, dtype)
    out = cuda.device_array(len(x), dtype)
    if len(x):
        tiles = -(-len(x) // (block_size * items_per_thread))
        status, values, counter, epoch = lookback.states(dtype, tiles)
        kernel = lookback.lookback_kernel("add", dtype, True, False, block_size, items_per_thread, look)
        kernel[tiles, block_size](cuda.to_device(x), out, status, values, counter, len(x), epoch, 0)
    return out.copy_to_host()
