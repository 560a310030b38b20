"""Register-resident solver for one system per thread block: the warp solver grown to a block.

For systems too long for a warp's registers (:mod:`.warp`: up to 512 rows) but short enough
for a block's (:func:`max_rows`), after Laszlo, Giles and Appleyard (2016), "Manycore algorithms
for batch scalar and block tridiagonal solvers", ACM Transactions on Mathematical Software
42(4), 31, whose first step is Wang's (1981) partition method. Block ``s`` solves system ``s``
with ``G`` threads (*lanes*: a power of two, at least a warp, ``G R >= n``); lane ``t`` owns
the ``R`` consecutive rows ``t R, ..., t R + R - 1`` (its *chunk*; rows past ``n`` are identity
rows ``(0, 1, 0, 0)``, ``x = 0``). Each row is ``a_k x_{k-1} + b_k x_k + c_k x_{k+1} = d_k``.

1. **Coalesced load** (:func:`prefixsum.primitives.chunk.chunk_loaders`, as the partition
   method loads): the block copies its system into four shared buffers, neighbouring threads
   reading neighbouring rows, one slot of padding every ``R`` rows (each lane's chunk starts at
   an odd stride: no bank conflicts), then each lane reads its chunk into registers.
2. **Partition step** (:func:`prefixsum.primitives.chunk.chunk_partition`), in registers: every
   interior row ends as ``x_k = d_k - a_k x_first - c_k x_last``, and the chunk's first and
   last rows couple only the ends of neighbouring chunks: a reduced system of ``2 G`` rows.
3. **Reduced system across the block.** Each lane writes its chunk's two end rows to shared
   memory. From here lane ``l`` of warp ``w`` (``W = G / 32`` warps) takes row ``i = l W + w``
   of the ``G`` rows of last unknowns: the rows a warp holds lie ``W`` apart, so that after
   ``log2 W`` PCR steps at strides ``1, 2, ..., W / 2`` a row's neighbours are the rows ``W``
   away, lanes ``l - 1`` and ``l + 1`` of its own warp.

   * The odd-even step (:func:`prefixsum.primitives.chunk.pcr_row`) makes row ``i`` from
     chunk ``i``'s two end rows and chunk ``i + 1``'s first row, read from shared memory.
   * The PCR steps at strides ``s < W`` (:func:`prefixsum.primitives.chunk.pcr_row`) exchange
     rows through shared memory, a barrier each, two buffers in turn (the coefficient buffers,
     free once every lane holds its chunk); rows are indexed ``i + i / 32`` so that a warp's
     rows, ``W`` apart, fall in different banks.
   * The ``5`` steps at strides ``W, 2 W, ..., 16 W`` are the warp solver's shuffles
     (:func:`prefixsum.primitives.chunk.pcr_lanes` on lanes ``l +- 1, 2, ..., 16``): no shared
     memory, no barrier.
4. **Back substitution**: each row's unknown goes to shared memory; lane ``t`` reads its chunk's
   last unknown and the previous chunk's, then its first and interior unknowns.
5. **Coalesced store** (:func:`prefixsum.primitives.chunk.chunk_storer`): each lane writes its
   ``R`` results into its own shared slots, the block copies them out coalesced, reporting
   NaN or infinity (:func:`._common.store`).

Against a level of :mod:`.partition` (which this replaces for ``512 < n <=`` :func:`max_rows`):
one launch instead of three (a reduce, a warp solve of the reduced systems, a substitute), the
bands read once instead of twice, no reduced system through global memory, and one block per
system keeps a batch of 100 systems on 100 SMs instead of 98 blocks of 128 threads three times.
``benchmarks/tridiag.csv`` (``tridiag.py --only-hybrid``, CUPTI, kernels summed per call) holds
what that buys: on 100 x 1000 and 1000 x 1000, in both dtypes, the block solver takes less kernel
time than a partition level with a warp solve, and than cuSPARSE's ``gtsv2StridedBatch``.
Per system: ``R + 1`` divisions and about ``12 R`` multiplications and additions per lane, plus
``1 + log2 G`` divisions for the reduced system, and ``5 + log2 W`` barriers.

One kernel per ``R`` in :data:`ROWS_PER_THREAD` (the register arrays' length is a compile-time
constant), made by :func:`_make`; :func:`plan` picks ``R`` and ``G``. Zero pivots anywhere (a
chunk, the odd-even step, a PCR step) are reported as ``ZERO_PIVOT`` for the system,
non-finite results as ``NOT_FINITE``; no pivoting: for diagonally dominant or symmetric
positive definite systems (on others a chunk's pivots can vanish where Thomas's would not).
"""

import functools

import numpy as np
from numba import cuda, types

from ..core.hardware import MAX_THREADS_PER_BLOCK, WARP_SIZE
from ..primitives.chunk import chunk_kernel_parts, chunk_test, pcr_lanes, pcr_row
from . import _common
from ._common import ZERO_PIVOT, dominant_row, fail, launchers, no_route, store

ROWS_PER_THREAD = (4, 8, 16)
"""The chunk lengths ``R`` with a kernel each (at least 4: the reduced system's two buffers of
three coefficients reuse the coefficient buffers, ``R + 1`` slots a lane)."""
TARGET_ROWS = {4: (4, 16), 8: (8, 8)}
"""``R`` by item size that :func:`plan` starts from, for a batch of fewer than :data:`LARGE`
rows in all and for a larger one; a longer chunk where ``n`` needs one (more lanes than the
shared memory holds). ``benchmarks/tridiag.csv`` (CUPTI, the rows ``block:rows=R``) holds why:
a batch under the SM count is fastest at short chunks (more lanes, shorter sweeps), a batch that
fills the GPU at long ones (less work per row); float64 at R = 8 (R = 4 holds at most 512 rows
in float64)."""
LARGE = 1 << 19
"""Rows (all systems together) from which a batch is large for :data:`TARGET_ROWS`."""
ENDS = 6
"""Shared slots per lane (and per 32 lanes, one more: the skew) beyond the four coefficient
buffers: the chunks' first and last rows ``(a, c, d)``."""


@cuda.jit(device=True)
def skewed(i):
    """Row ``i``'s slot in a buffer of the reduced system: a slot skipped every 32 rows, so that
    the 32 rows of a warp, ``W`` apart (``W`` a power of two), fall in 32 banks."""
    return i + (i >> 5)


@functools.lru_cache(maxsize=None)
def _make(rows):
    """The kernel for chunks of ``rows`` rows (a power of two >= 4)."""
    partitioned, quarters, load_block, solution, store_chunks = chunk_kernel_parts(rows, store)
    dominant = chunk_test(rows, dominant_row)

    @cuda.jit
    def block_solve(a, b, c, d, x, info, route, call):
        """Solve system ``blockIdx.x`` with ``blockDim.x`` lanes (a power of two >= 32) of
        ``rows`` rows each; with ``call`` not 0, set ``route[system]`` to ``call`` if a row is
        not diagonally dominant (:mod:`.auto`)."""
        zero, one = b.dtype.type(0), b.dtype.type(1)
        tid, lanes = cuda.threadIdx.x, cuda.blockDim.x
        system = cuda.blockIdx.x
        slots = lanes * (rows + 1)
        span = lanes + (lanes >> 5)
        shared = cuda.shared.array(0, b.dtype)
        sa, sb, sc, sd = quarters(shared)
        ends = shared[4 * slots :]

        # 1. Coalesced load (the system padded to the block's lanes * rows rows), 2. partition.
        load_block(a, b, c, d, sa, sb, sc, sd, lanes * rows)
        if call != 0 and not dominant(sa, sb, sc, tid * (rows + 1)):
            route[system] = call
        la = cuda.local.array(rows, b.dtype)
        lb = cuda.local.array(rows, b.dtype)
        lc = cuda.local.array(rows, b.dtype)
        ld = cuda.local.array(rows, b.dtype)
        ok = partitioned(sa, sb, sc, sd, la, lb, lc, ld, one)

        # 3. The chunks' end rows into shared memory; from here this thread holds row
        # i = lane * warps + warp of the reduced system.
        k = skewed(tid)
        ends[k], ends[span + k], ends[2 * span + k] = la[0], lc[0], ld[0]
        last = rows - 1
        ends[3 * span + k], ends[4 * span + k], ends[5 * span + k] = la[last], lc[last], ld[last]
        cuda.syncthreads()
        warps = lanes >> 5
        lane = tid & (WARP_SIZE - 1)
        i = lane * warps + (tid >> 5)
        k = skewed(i)
        following = (zero, zero, zero)
        if i + 1 < lanes:
            n1 = skewed(i + 1)
            following = (ends[n1], ends[span + n1], ends[2 * span + n1])
        ra, rc, rd, good = pcr_row(
            (ends[3 * span + k], ends[4 * span + k], ends[5 * span + k]),
            (ends[k], ends[span + k], ends[2 * span + k]),
            following,
            one,
        )
        ok = ok and good
        # PCR steps at strides below `warps` through shared memory, in sa and sb by turns (every
        # lane has read its chunk: the barrier above), one barrier a step.
        s = 1
        turn = 0
        while s < warps:
            buf = shared[turn * slots : turn * slots + 3 * span]
            buf[k], buf[span + k], buf[2 * span + k] = ra, rc, rd
            cuda.syncthreads()
            up, down = (zero, zero, zero), (zero, zero, zero)
            if i >= s:
                j = skewed(i - s)
                up = (buf[j], buf[span + j], buf[2 * span + j])
            if i + s < lanes:
                j = skewed(i + s)
                down = (buf[j], buf[span + j], buf[2 * span + j])
            ra, rc, rd, good = pcr_row((ra, rc, rd), up, down, one)
            ok = ok and good
            turn = 1 - turn
            s *= 2
        # Rows W apart now: the neighbours at strides W .. 16 W are lanes of this warp.
        x_row, good = pcr_lanes(ra, rc, rd, lane, WARP_SIZE, zero, one)
        ok = ok and good
        if not ok:
            fail(info, system, ZERO_PIVOT)

        # 4. Back substitution: the last unknowns through sc (free since the first barrier).
        sc[k] = x_row
        cuda.syncthreads()
        x_last = sc[skewed(tid)]
        x_before = sc[skewed(tid - 1)] if tid > 0 else zero
        x_first = ld[0] - la[0] * x_before - lc[0] * x_last

        # 5. Coalesced store: each lane's results into its own slots of sd, then out by rows as
        # they came in.
        solution(sd, tid * (rows + 1), la, lc, ld, x_first, x_last)
        cuda.syncthreads()
        store_chunks(x, info, sd, lanes * rows, system * lanes)

    return block_solve


def shared_bytes(rows, lanes, dtype):
    """Shared memory of a block of ``lanes`` lanes and chunks of ``rows`` rows: four coefficient
    buffers of ``R + 1`` slots a lane, and the chunks' ends (:data:`ENDS`)."""
    return (4 * lanes * (rows + 1) + ENDS * (lanes + lanes // WARP_SIZE)) * np.dtype(dtype).itemsize


def lanes_for(n, rows):
    """``G``: the least power of two, at least a warp, with ``G R >= n``."""
    return max(WARP_SIZE, 1 << (-(-n // rows) - 1).bit_length())


def _candidates(dtype, rows, total=None):
    """The chunk lengths :func:`plan` may take, shortest first: ``rows`` alone if given, else
    those from :data:`TARGET_ROWS` (``total``, the batch's rows in all, decides small or large;
    None: from the least start, for :func:`max_rows`)."""
    if rows:
        return (rows,)
    small, large = TARGET_ROWS[np.dtype(dtype).itemsize]
    start = min(small, large) if total is None else large if total >= LARGE else small
    return tuple(r for r in ROWS_PER_THREAD if r >= start)


def capacity(rows, dtype):
    """The largest ``n`` a block holds with chunks of ``rows`` rows: ``R`` times the most lanes
    (a power of two, at most :data:`~prefixsum.core.hardware.MAX_THREADS_PER_BLOCK`) whose shared
    memory fits ``_common.SHARED_BYTES``; 0 if not even a warp's does."""
    lanes = MAX_THREADS_PER_BLOCK
    while lanes >= WARP_SIZE and shared_bytes(rows, lanes, dtype) > _common.SHARED_BYTES:
        lanes //= 2
    return rows * lanes if lanes >= WARP_SIZE else 0


def max_rows(dtype, rows=None):
    """The largest ``n`` :func:`run` takes (with chunks of ``rows`` rows, or any that :func:`plan`
    may choose): 2048 in float32 and 1024 in float64 in 48 KiB of shared memory."""
    dtype = np.dtype(dtype)
    return _max_rows(dtype, rows, *_settings(dtype))


def plan(n, dtype, rows=None, batch=1):
    """``(rows, lanes, shared bytes)`` of the launch for ``batch`` systems of ``n`` rows.

    ``rows`` (R, default :data:`TARGET_ROWS` by item size and ``batch * n``, raised to the next
    chunk length in :data:`ROWS_PER_THREAD` while a block cannot hold ``n``); ``lanes`` from
    :func:`lanes_for`.
    """
    dtype = np.dtype(dtype)
    found = _plan(n, dtype, rows, batch * n >= LARGE, *_settings(dtype))
    if found is None:
        raise ValueError(
            f"the block solver takes n <= {max_rows(dtype, rows)} in {dtype.name}"
            f"{f' with rows={rows}' if rows else ''}; got {n}"
        )
    return found


def _settings(dtype):
    """What :func:`max_rows` and :func:`plan` read besides their arguments: the shared memory
    budget and :data:`TARGET_ROWS` (tests shrink the one, ``benchmarks/tridiag.py`` sweeps the other)."""
    return _common.SHARED_BYTES, TARGET_ROWS[dtype.itemsize]


# Every level of the partition method asks for the block solver's capacity, and each answer
# takes dozens of Python calls (a tenth of a millisecond of a 2^20-row solve's host time, more
# than its kernels): computed once per question and settings (:func:`_settings`, part of the key
# so that a changed setting is a new question).
@functools.lru_cache(maxsize=None)
def _max_rows(dtype, rows, *settings):
    return max(capacity(r, dtype) for r in _candidates(dtype, rows))


@functools.lru_cache(maxsize=None)
def _plan(n, dtype, rows, large, *settings):
    for r in _candidates(dtype, rows, LARGE if large else 0):
        if n <= capacity(r, dtype):
            lanes = lanes_for(n, r)
            return r, lanes, shared_bytes(r, lanes, dtype)
    return None


def run(a, b, c, d, x, info, rows=None, route=None, call=0, stream=None):
    """Solve the (batch, n) device systems (n <= :func:`max_rows`) into ``x``, one block each;
    failures go to ``info`` (see :mod:`.api`). ``rows`` overrides :func:`plan`'s choice of R;
    ``route`` and ``call``: the dominance test of :mod:`.auto` (:func:`._common.no_route`: none)."""
    batch, n = x.shape
    rows, lanes, shared = plan(n, x.dtype, rows, batch)
    launchers(kernels, x.dtype)[_make(rows)](
        batch, lanes, a, b, c, d, x, info, no_route() if route is None else route, call, shared=shared, stream=stream
    )


def kernels(dtype):
    """Every kernel :func:`run` launches for ``dtype`` (one per ``R``), with numba argument types."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix = t[:, ::1]
    for rows in ROWS_PER_THREAD:
        yield _make(rows), (matrix,) * 5 + (types.int32[::1], types.int32[::1], types.int64)
