"""The L-ary (k-step) partial-sum scheme, a launch or a barrier per step.

The lecture notes *Calculation of partial sums in parallel* (an online book on GPU programming;
chapter 05 and ``docs/references.md``) describe this scheme, but the copy the workbook was
built from lost every formula and symbol. The formulas below are a reconstruction, consistent
with every sentence that survives and checked against a sequential scan; they are not the
notes' own text.

Pick an integer L >= 2. The levels have sizes K_0 = n and K_{s+1} = ceil(K_s / L); the scheme
reduces until the level fits one thread, s* = min{s >= 0 : K_{s+1} <= L}.

- Reduction, steps s = 0..s*: thread i combines run i of L elements of level s into
  ``z^s[i]`` (the last run may be short), so ``z^s[i]`` covers L^(s+1) inputs.
- Correction step 0, on a single thread: scan the at most L values of ``z^{s*}`` in place into
  ``u^0``; they are final partial sums.
- Correction steps s = 1..s*+1, at most L^s threads: thread j rewrites run j of
  ``z^{s*-s}`` as ``u^{s-1}[j-1]`` combined with the prefix of the run. The last element of a
  full run equals ``u^{s-1}[j]``, which is final, so it is copied, not combined again.
  Step s*+1 corrects x itself and leaves the inclusive scan.

Everything lives in one buffer of K_0 + K_1 + ... + K_{s*+1} elements: x at offset 0, ``z^s``
at offset P_{s+1} = K_0 + ... + K_s (see :func:`levels`), and each ``u^s`` overwrites
``z^{s*-s}`` in place. A step never reads what another thread of the same step writes, so a
grid-wide barrier between steps is all the synchronisation needed: a kernel launch per step
(:func:`scan_launches`), or a block barrier when the buffer fits one block's shared memory
(:func:`scan_one_block`).

Cost: 2 s* + 3 steps plus a copy in and a copy out; at most L combines per thread per step;
depth O(L log_L n), work O(n), extra memory n + about n / (L - 1) elements. The input is never
modified: the copy in (which also mirrors a reverse scan) fills the buffer, and the copy out
writes ``out``. An exclusive scan costs nothing more than an inclusive one: the copy out, needed
anyway because the buffer is longer than ``out``, reads element i - 1 instead of i. In global
memory the launch path moves about 4n reads and 3n writes, against n and n for a copy.
"""

import functools
import itertools
import math
import numbers
from typing import NamedTuple

from numba import cuda, int64, types

from ..core.hardware import MAX_THREADS_PER_BLOCK, WARP_SIZE
from ..core.streams import launch_stream as on
from .ops import check_dtype, device_op, identity, numba_type
from .registry import Algorithm, register
from .tiles import array_type, lane_result, position, scratch

THREADS = 256
"""Most threads per block of the launch-per-step kernels."""

ONE_BLOCK_BUFFER = 4096
"""Elements of the one-block kernel's shared buffer (32 KiB in float64)."""

ONE_BLOCK_THREADS = MAX_THREADS_PER_BLOCK
"""Most threads of the one-block kernel; a thread takes several runs of a wider step."""

_ONE_BLOCK_LEVELS = 16  # a buffer that fits holds at most 11 levels (L = 2, n near 2048)


def _level_sizes(n, L, sizes):
    """Write K_0, ..., K_{s*+1} into ``sizes`` and return s*; runs on the host and on the device."""
    sizes[0] = n
    sizes[1] = (n + L - 1) // L
    top = 0
    while sizes[top + 1] > L:
        top += 1
        sizes[top + 1] = (sizes[top] + L - 1) // L
    return top


_level_sizes_device = cuda.jit(device=True)(_level_sizes)


class Levels(NamedTuple):
    """Where the levels of the scheme live in its buffer (see :func:`levels`)."""

    sizes: tuple
    """K_0, ..., K_{s*+1}: the length of x and of each ``z^s``."""
    offsets: tuple
    """P_0, ..., P_{s*+1}: where x and each ``z^s`` start in the buffer."""

    @property
    def top(self):
        """s*, the last reduction step."""
        return len(self.sizes) - 2

    @property
    def length(self):
        """The buffer's length, K_0 + ... + K_{s*+1}."""
        return self.offsets[-1] + self.sizes[-1]


def levels(n, L):
    """Level sizes and buffer offsets of the scheme for ``n`` inputs and arity ``L``.

    Parameters
    ----------
    n : int
        Number of inputs, n >= 1.
    L : int
        The arity, L >= 2.

    Returns
    -------
    Levels
        A pair ``(sizes, offsets)`` of tuples: ``sizes[s]`` is K_s and ``offsets[s]`` is P_s, so
        x is at ``offsets[0] = 0`` and ``z^s`` at ``offsets[s + 1]``; ``.top`` is s* and
        ``.length`` the buffer length.

    Examples
    --------
    >>> lv = levels(35, 3)
    >>> lv.sizes, lv.offsets, lv.top, lv.length
    ((35, 12, 4, 2), (0, 35, 47, 51), 2, 53)
    """
    check_L(L)
    if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n={n!r} must be an integer >= 1")
    sizes = [0] * 64  # enough for any int64 n, since L >= 2
    top = _level_sizes(int(n), int(L), sizes)
    sizes = tuple(sizes[: top + 2])
    return Levels(sizes, (0, *itertools.accumulate(sizes[:-1])))


def check_L(L):
    """Raise ValueError unless ``L`` is an integer >= 2."""
    if not isinstance(L, numbers.Integral) or isinstance(L, bool) or L < 2:
        raise ValueError(f"option L={L!r} must be an integer >= 2")


def check_options(L, one_block):
    """Raise ValueError naming a bad ``L`` or ``one_block`` and the allowed values."""
    check_L(L)
    if not (isinstance(one_block, bool) or (isinstance(one_block, str) and one_block == "auto")):
        raise ValueError(f"option one_block={one_block!r} must be 'auto', True or False")


# One thread's share of each step, shared by the launch-per-step kernels and the one-block
# kernel so that both run the same formulas; ``buf`` is a global or a shared array.


@functools.lru_cache(maxsize=None)
def _reduce_run(op, dtype, L):
    """Device function ``(buf, source, target, size, i)``: z^s[i] from run i of level s."""
    combine = device_op(op, dtype)

    def reduce_run(buf, source, target, size, i):
        start = source + L * i
        stop = source + min(L * (i + 1), size)
        acc = buf[start]
        for k in range(start + 1, stop):
            acc = combine(acc, buf[k])
        buf[target + i] = acc

    return cuda.jit(device=True)(reduce_run)


@functools.lru_cache(maxsize=None)
def _scan_top(op, dtype):
    """Device function ``(buf, offset, size)``: correction step 0, u^0 over z^{s*}, serially."""
    combine = device_op(op, dtype)

    def scan_top(buf, offset, size):
        for k in range(offset + 1, offset + size):
            buf[k] = combine(buf[k - 1], buf[k])

    return cuda.jit(device=True)(scan_top)


@functools.lru_cache(maxsize=None)
def _correct_run(op, dtype, L):
    """Device function ``(buf, upper, lower, size, j)``: run j of u^s from u^{s-1} and z^{s*-s}.

    ``upper`` is the offset of u^{s-1}, ``lower`` that of z^{s*-s} (``size`` elements), which
    the run overwrites.
    """
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)

    def correct_run(buf, upper, lower, size, j):
        start = L * j
        acc = buf[upper + j - 1] if j > 0 else neutral  # the convention u^{s-1}[-1] = identity
        for k in range(start, min(start + L - 1, size)):
            acc = combine(acc, buf[lower + k])
            buf[lower + k] = acc
        if start + L <= size:  # a full run ends on u^{s-1}[j], already final
            buf[lower + start + L - 1] = buf[upper + j]

    return cuda.jit(device=True)(correct_run)


# The launch-per-step path: one kernel launch per step, the launch boundary is the barrier.


@functools.lru_cache(maxsize=None)
def load_kernel(reverse):
    """Kernel ``(x, buf, n)``: copy x into the buffer, mirrored for a reverse scan."""
    where = position(reverse)

    def kstep_load(x, buf, n):
        i = cuda.grid(1)
        if i < n:
            buf[i] = x[where(i, n)]

    return cuda.jit(kstep_load)


@functools.lru_cache(maxsize=None)
def reduce_kernel(op, dtype, L):
    """Kernel ``(buf, source, target, size)``: reduction step, one thread per ``z^s[i]``."""
    reduce_run = _reduce_run(op, dtype, L)

    def kstep_reduce(buf, source, target, size):
        i = cuda.grid(1)
        if L * i < size:
            reduce_run(buf, source, target, size, i)

    return cuda.jit(kstep_reduce)


@functools.lru_cache(maxsize=None)
def top_kernel(op, dtype):
    """Kernel ``(buf, offset, size)``: correction step 0, launched on a single thread."""
    scan_top = _scan_top(op, dtype)

    def kstep_top(buf, offset, size):
        scan_top(buf, offset, size)

    return cuda.jit(kstep_top)


@functools.lru_cache(maxsize=None)
def correct_kernel(op, dtype, L):
    """Kernel ``(buf, upper, lower, size)``: correction step s >= 1, one thread per run."""
    correct_run = _correct_run(op, dtype, L)

    def kstep_correct(buf, upper, lower, size):
        j = cuda.grid(1)
        if L * j < size:
            correct_run(buf, upper, lower, size, j)

    return cuda.jit(kstep_correct)


@functools.lru_cache(maxsize=None)
def store_kernel(op, dtype, inclusive, reverse):
    """Kernel ``(buf, out, n)``: copy the scan out, shifted by one if exclusive, mirrored if reverse."""
    where = position(reverse)
    result = lane_result(op, dtype, inclusive)

    def kstep_store(buf, out, n):
        i = cuda.grid(1)
        if i < n:
            out[where(i, n)] = result(buf, i)

    return cuda.jit(kstep_store)


def _launch(kernel, threads_needed, stream, *args):
    # Round up to whole warps only: the late steps need a handful of threads.
    threads = min(THREADS, WARP_SIZE * math.ceil(threads_needed / WARP_SIZE))
    kernel[math.ceil(threads_needed / threads), threads, on(stream)](*args)


def scan_launches(x, out, op, inclusive, reverse, L, stream=None):
    """Scan device array ``x`` into ``out`` with one kernel launch per step (any n >= 1), on ``stream``."""
    n = x.shape[0]
    dtype = check_dtype(x.dtype)
    sizes, offsets = lv = levels(n, L)
    buf = scratch("kstep buffer", lv.length, dtype, stream)
    _launch(load_kernel(reverse), n, stream, x, buf, n)
    for s in range(lv.top + 1):
        _launch(reduce_kernel(op, dtype, L), sizes[s + 1], stream, buf, offsets[s], offsets[s + 1], sizes[s])
    top_kernel(op, dtype)[1, 1, on(stream)](buf, offsets[-1], sizes[-1])
    for level in range(lv.top, -1, -1):  # correction step s = s* + 1 - level corrects this level
        _launch(
            correct_kernel(op, dtype, L),
            sizes[level + 1],
            stream,
            buf,
            offsets[level + 1],
            offsets[level],
            sizes[level],
        )
    _launch(store_kernel(op, dtype, inclusive, reverse), n, stream, buf, out, n)


# The one-block path: the same steps in shared memory, a block barrier per step.


@functools.lru_cache(maxsize=None)
def one_block_kernel(op, dtype, inclusive, reverse, L):
    """Kernel ``(x, out, n)``: the whole scheme in one block, for ``levels(n, L).length <= ONE_BLOCK_BUFFER``."""
    reduce_run, scan_top, correct_run = _reduce_run(op, dtype, L), _scan_top(op, dtype), _correct_run(op, dtype, L)
    where = position(reverse)
    result = lane_result(op, dtype, inclusive)
    element = numba_type(dtype)

    def kstep_one_block(x, out, n):
        buf = cuda.shared.array(ONE_BLOCK_BUFFER, element)
        sizes = cuda.local.array(_ONE_BLOCK_LEVELS, int64)
        top = _level_sizes_device(n, L, sizes)
        t, threads = cuda.threadIdx.x, cuda.blockDim.x
        for i in range(t, n, threads):
            buf[i] = x[where(i, n)]
        offset = 0
        for s in range(top + 1):
            cuda.syncthreads()
            for i in range(t, sizes[s + 1], threads):
                reduce_run(buf, offset, offset + sizes[s], sizes[s], i)
            offset += sizes[s]
        cuda.syncthreads()
        if t == 0:
            scan_top(buf, offset, sizes[top + 1])
        for level in range(top, -1, -1):
            cuda.syncthreads()
            for j in range(t, sizes[level + 1], threads):
                correct_run(buf, offset, offset - sizes[level], sizes[level], j)
            offset -= sizes[level]
        cuda.syncthreads()
        for i in range(t, n, threads):
            out[where(i, n)] = result(buf, i)

    return cuda.jit(kstep_one_block)


def fits_one_block(n, L):
    """True when the buffer of ``n`` inputs at arity ``L`` fits the one-block kernel."""
    return levels(n, L).length <= ONE_BLOCK_BUFFER


def scan_one_block(x, out, op, inclusive, reverse, L, stream=None):
    """Scan device array ``x`` into ``out`` in one block, a barrier per step, on ``stream``.

    Raises
    ------
    ValueError
        If the buffer, ``levels(n, L).length``, exceeds :data:`ONE_BLOCK_BUFFER` elements.
    """
    n = x.shape[0]
    lv = levels(n, L)
    if lv.length > ONE_BLOCK_BUFFER:
        raise ValueError(
            f"one_block=True: n={n} with L={L} needs a buffer of {lv.length} elements; "
            f"one block holds at most {ONE_BLOCK_BUFFER}"
        )
    # The widest step, the first reduction and the last correction, has K_1 threads.
    threads = min(ONE_BLOCK_THREADS, WARP_SIZE * math.ceil(lv.sizes[1] / WARP_SIZE))
    one_block_kernel(op, check_dtype(x.dtype), inclusive, reverse, L)[1, threads, on(stream)](x, out, n)


def run(x, out, op, inclusive, reverse, L, one_block, *, stream=None):
    """k-step scan of device array ``x`` into ``out`` on ``stream`` (see :class:`prefixsum.scans.registry.Algorithm`).

    ``one_block="auto"`` takes the one-block path whenever the buffer fits it, True always
    (a ValueError if it does not fit), False never.
    """
    L = int(L)
    if one_block is True or (one_block == "auto" and fits_one_block(x.shape[0], L)):
        scan_one_block(x, out, op, inclusive, reverse, L, stream)
    else:
        scan_launches(x, out, op, inclusive, reverse, L, stream)


def kernels(op, dtype, inclusive, reverse, L, one_block):
    """Every kernel :func:`run` may launch, with its argument types."""
    L = int(L)
    dtype = check_dtype(dtype)
    arr, index = array_type(dtype), types.int64
    if one_block is not False:
        yield one_block_kernel(op, dtype, inclusive, reverse, L), (arr, arr, index)
    if one_block is not True:
        yield load_kernel(reverse), (arr, arr, index)
        yield reduce_kernel(op, dtype, L), (arr, index, index, index)
        yield top_kernel(op, dtype), (arr, index, index)
        yield correct_kernel(op, dtype, L), (arr, index, index, index)
        yield store_kernel(op, dtype, inclusive, reverse), (arr, arr, index)


ALGORITHM = register(
    Algorithm(
        name="kstep",
        run=run,
        kernels=kernels,
        options={"L": 32, "one_block": "auto"},
        check_options=check_options,
        summary="the L-ary scheme of the partial-sum lecture notes (reconstructed): reduce by L, correct back down; "
        "2s*+3 steps, work O(n), depth O(L log_L n)",
        source="lecture notes 'Calculation of partial sums in parallel' (an online book on GPU programming); formulas "
        "reconstructed",
        simulator_us_per_element=(45, 180),
    )
)
