"""Tridiagonal systems that need pivoting: chunks factored with partial pivoting, their separators reduced.

Every path rests on LAPACK's ``?gtsv`` step (:mod:`.lu`): LU with partial pivoting, each step
taking the larger of the current pivot and the entry below it, the rows interchanged when that
is the lower one (U gains one band of fill). On a tridiagonal matrix partial pivoting keeps
every entry of U within twice the largest of the matrix (growth factor at most 2; Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., ch. 9, after Bothe 1975): the solve
is backward stable for any nonsingular system. It is what ``scipy.linalg.solve_banded`` runs,
so the tests compare like with like. Three paths (:func:`plan` picks one by shape):

* **One thread per system** (:func:`tiled_kernel`), for systems of at most
  :data:`ONE_THREAD_ROWS` rows (too short to split): the block's systems come through shared
  memory in tiles, neighbouring threads reading neighbouring addresses, and U goes to a scratch
  laid out ``(3, n, batch)``, so that the thread-per-system loop, which reads ``n`` apart in the
  (batch, n) layout, coalesces as cuSPARSE's ``gtsvInterleavedBatch`` does with interleaved data.
* **The partitioned solver** (:mod:`.spike`), for longer systems: each system is cut into
  chunks of ``S`` rows, ``S - 1`` of a *block* and one *separator*; each thread factors its block
  by LU with partial pivoting and writes its separator's row of the *reduced system* (the Schur
  complement of the blocks: the separators' unknowns, tridiagonal again, a row per chunk), which
  is solved by this same route, and then back-substitutes its block. Where a system's chunks fit
  one block (at most :data:`THREADS` of them), :func:`.spike.spike_block` does all of it in one
  launch with one read of the inputs, the reduced system solved by one thread in shared memory;
  longer systems take levels of :func:`.spike.spike_reduce` and :func:`.spike.spike_substitute`.
* **Solved again** (the one-thread kernel's ``redo`` mode): the systems the partitioned solver
  flagged, see below.

Why this partition and not SPIKE with diagonal pivoting (Chang, Stratton, Kim and Hwu, "A
scalable, numerically stable, high-performance tridiagonal solver using GPUs", SC 2012, which
cuSPARSE's ``gtsv2`` follows; its 1x1/2x2 pivots are those of Erway, Marcia and Tyson's
"generalized diagonal pivoting methods for tridiagonal systems without interchanges", after
Bunch and Kaufman):

* The partition is SPIKE's (Sameh and Kuck 1978; Polizzi and Sameh 2006): blocks solved
  independently, a small reduced system couples them. Single-row separators make the reduced
  system tridiagonal (SPIKE's reduced system of spike tips is 2x2-block tridiagonal), so the
  same solver takes it, recursively, with no second kind of kernel.
* Inside a block, partial pivoting has the proved growth bound of 2 and is the reference's own
  algorithm; diagonal pivoting needs the Bunch-Kaufman threshold and 2x2 pivots to bound growth,
  for the same one comparison a row. Neither pivots *across* partitions.

What stability it keeps: SPIKE with diagonal pivoting is not backward stable in every case (a
partition can be singular, or nearly so, where the matrix is not, and no pivot crosses a
partition's edge), and neither is this: the blocks are solved stably, but the reduced system is a Schur complement
formed without pivoting between blocks, and its entries grow with ``||A_k^{-1}||``. For
diagonally dominant matrices the blocks inherit the dominance and the spikes are at most 1; for
symmetric positive definite ones the blocks are principal submatrices, definite, and the Schur
complement is definite with entries within the diagonal's: no growth (the check below may
still flag a block with a tiny pivot, conservatively). For the rest,
:func:`.spike.spike_reduce` measures each block's growth (its spikes' and its solution's ends,
relative to the chunk's coefficients; every term at most ``sigma ||A_k^{-1}||``) and flags the
system when a block is singular or its growth passes :data:`GROWTH_LIMIT`; :func:`run` then
solves the flagged systems again by one thread over the whole system, backward stable, slower
(``n`` sequential steps: milliseconds at ``n = 2^20``). The bound can still fail where growth
below the limit compounds over several levels; the tests (``tests/test_pivoting_paths.py``:
random, symmetric indefinite, nearly singular and dominant systems, every path forced) find every
system within ``100 n eps kappa`` of LAPACK's solution. A singular matrix makes a block singular or
the reduced system singular (``det A`` is the product of the blocks' determinants and the
reduced system's), so the system is solved again, and the one-thread LU names it: ``SINGULAR``.

Measured (``benchmarks/tridiag.csv``, ``python benchmarks/tridiag.py --only-pivoting``, CUPTI
kernel time): see :data:`SPIKE_ROWS` and :func:`plan`.
"""
import functools

import numpy as np
from numba import cuda, types

from ..core.hardware import WARP_SIZE
from . import _common, spike
from ._common import SINGULAR, fail, launchers, reused, store
from .lu import carry, pivot

THREADS = 128
BLOCK_SOLVE = True
"""Whether systems of at most a block's threads of chunks are solved whole in one block
(:func:`.spike.spike_block`; the benchmark turns it off to time the levels alone)."""
TILE_BYTES = 128
"""The one-thread path reads tiles of ``TILE_BYTES / itemsize`` rows of each system (32 in
float32, 16 in float64): a warp reads whole 128-byte lines."""
TILE_THREADS = 64
SPIKE_ROWS = 8
"""``S``, the chunk of the partitioned path (``S - 1`` rows of a block and a separator), for
few systems (:func:`plan`)."""
BATCH_SPIKE_ROWS = 16
"""``S`` for batches of at least :data:`BATCH` systems (float64: of at least
:data:`FLOAT64_BATCH_ROWS` rows)."""
BATCH = 64
FLOAT64_BATCH_ROWS = 256
ALL_SPIKE_ROWS = (4, 8, 16, 32)
"""The chunks with kernels (the benchmark tries each)."""
ONE_THREAD_ROWS = 32
"""Systems of at most this many rows take the one-thread path: too short to split."""
GROWTH_LIMIT = 1024
"""The largest growth a chunk of the partitioned path may show (:mod:`.spike`): beyond it the
system is solved again by the one-thread LU."""


@functools.lru_cache(maxsize=None)
def tiled_kernel(rows):
    """The one-thread-per-system LU reading tiles of ``rows`` rows (a power of two) coalesced."""
    shift = rows.bit_length() - 1

    @cuda.jit
    def gtsv_tiled(a, b, c, d, x, info, u, redo):
        """Solve system ``blockIdx.x * blockDim.x + threadIdx.x`` by LU with partial pivoting.

        The block's systems come in tiles of ``rows`` rows through shared memory, neighbouring
        threads reading neighbouring addresses; U (divided by its pivots) goes to ``u`` (3, n,
        batch), whose rows neighbouring threads write and read back side by side; x leaves by
        tiles as the rows came in. With ``redo`` (not 0) only the systems whose ``info`` is set
        are solved, their flags cleared first, and a block with none returns at once.
        """
        batch, n = x.shape
        zero, one = b.dtype.type(0), b.dtype.type(1)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        first = cuda.blockIdx.x * threads
        system = first + tid
        count = min(threads, batch - first) * rows
        span = rows + 1
        slots = threads * span
        shared = cuda.shared.array(0, b.dtype)
        sa, sb = shared[:slots], shared[slots:2 * slots]
        sc, sd = shared[2 * slots:3 * slots], shared[3 * slots:4 * slots]
        base = tid * span
        ok = system < batch
        if redo != 0:
            ok = ok and info[system] != 0
            if not cuda.syncthreads_or(np.int32(ok)):  # the same for every thread of the block
                return
            if ok:
                info[system] = 0
        sd[base + rows] = one if ok else zero  # the padding slot: whether this system's x is written
        p, q, r = zero, zero, zero
        for start in range(0, n, rows):
            here = min(rows, n - start)
            cuda.syncthreads()
            for j in range(tid, count, threads):
                s, k = j >> shift, j & (rows - 1)
                i = start + k
                if k < here:
                    slot = s * span + k
                    sa[slot] = a[first + s, i] if i > 0 else zero
                    sb[slot] = b[first + s, i]
                    sc[slot] = c[first + s, i] if i + 1 < n else zero
                    sd[slot] = d[first + s, i]
            cuda.syncthreads()
            for k in range(here if ok else 0):
                i = start + k
                if i == 0:
                    p, q, r = sb[base], sc[base], sd[base]
                    continue
                inverse, upper, fill, factor, swap, p, q, good = pivot(
                    p, q, sa[base + k], sb[base + k], sc[base + k], zero, one)
                y, r = carry(swap, factor, r, sd[base + k])
                u[0, i - 1, system], u[1, i - 1, system], u[2, i - 1, system] = upper, fill, y * inverse
                if not good:
                    fail(info, system, SINGULAR)
                    ok = False
                    break
        if ok and p == zero:
            fail(info, system, SINGULAR)
            ok = False
        after, beyond = zero, zero
        if ok:
            after = r / p  # x_{n-1}, then x_{i+1} and x_{i+2} of the back substitution
        for start in range((n - 1) >> shift << shift, -1, -rows):
            here = min(rows, n - start)
            # The tile's U rows into shared memory first: loads issued together, not one
            # dependent wait per row (a fixed trip count, so that the loop can be unrolled).
            for k in range(rows):
                if ok and start + k < n - 1:
                    sa[base + k], sb[base + k], sc[base + k] = u[0, start + k, system], u[1, start + k, system], u[2, start + k, system]
            for k in range(here - 1, -1, -1):
                i = start + k
                xi = zero  # a failed system's x is all zero, never memory left unwritten
                if ok:
                    xi = after
                    if i < n - 1:
                        xi = sc[base + k] - sa[base + k] * after - sb[base + k] * beyond
                        after, beyond = xi, after
                sd[base + k] = xi
            cuda.syncthreads()
            for j in range(tid, count, threads):
                s, k = j >> shift, j & (rows - 1)
                if k < here and sd[s * span + rows] != zero:
                    store(x, info, first + s, start + k, sd[s * span + k])
            cuda.syncthreads()

    return gtsv_tiled


@cuda.jit
def positive_definite(d, sub, verdict):
    """``verdict[0]`` becomes 1 if some system ``m`` of ``tridiag(sub, d, sub)`` is not positive definite.

    One thread per system runs the pivots of ``T = L D L^T`` (Cholesky's, squared):
    ``p_0 = d_0``, ``p_i = d_i - sub_i^2 / p_{i-1}``. T is positive definite exactly when every
    pivot is positive; NaN fails the test as well. ``sub[m, i] = T[i, i-1]``, ``sub[m, 0]`` unused.
    """
    system = cuda.grid(1)
    batch, n = d.shape
    if system >= batch:
        return
    zero = d.dtype.type(0)
    pivot = d[system, 0]
    for i in range(1, n):
        if not pivot > zero:
            break
        pivot = d[system, i] - sub[system, i] * sub[system, i] / pivot
    if not pivot > zero:
        cuda.atomic.max(verdict, 0, 1)


def run(a, b, c, d, x, info, rows=None):
    """Solve the (batch, n) device systems into ``x``; failures go to ``info`` (see :mod:`.api`).

    :func:`plan` picks the path. The partitioned one ends with the one-thread kernel in its
    ``redo`` mode: systems flagged ``UNSTABLE`` (a singular or growing chunk), or failed in any
    other way, are solved again by LU with partial pivoting over the whole system, whose verdict
    is the one reported; blocks of the batch with no such system return at once (no copy to
    the host, no wait). ``rows`` overrides :func:`plan`'s ``S`` at every level (0: the one-thread
    path; for the benchmark and the tests). The one-thread kernel's scratch, ``3 n batch``
    values, is made on a shape's first call and kept for the next (:func:`._common.reused`).
    """
    batch, n = x.shape
    if not plan(batch, n, x.dtype, rows):
        one_thread(a, b, c, d, x, info)
        return
    levels(a, b, c, d, x, info, rows)
    one_thread(a, b, c, d, x, info, redo=True)


def plan(batch, n, dtype, rows=None):
    """``S`` of a partitioned level for (batch, n) systems of ``dtype``, or 0 for the one-thread
    path: systems of at most :data:`ONE_THREAD_ROWS` (or ``2 S``) rows. ``rows`` overrides the
    choice (0: always one thread). Called at every level, with the reduced systems' shape.

    From ``benchmarks/tridiag.csv`` (an H100, CUPTI kernel time, each path forced at every level,
    ``pivoting:spike_rows=S``; us, float32 / float64):

    ==========  =========  =========  =========  =============  ===========================
    batch x n   S = 4      S = 8      S = 16     one thread     cuSPARSE (gtsv2 / LU batch)
    ==========  =========  =========  =========  =============  ===========================
    1 x 2^20    109 / 127  100 / 117  106 / 141  --             103 / 156 (gtsv2)
    1 x 2^16    62 / 66    77 / 86    66 / 68    28180 / 34686  66 / 65 (gtsv2)
    7 x 100000  91 / 103   76 / 81    81 / 88    --             1365 / 1511 (gtsv2)
    64 x 8192   82 / 69    76 / 61    52 / 52    7484 / 10066   3005 / 3685 (LU batch)
    512 x 512   32 / 38    22 / 26    20 / 23    470 / 514      190 / 225 (LU batch)
    4096 x 256  73 / 105   43 / 58    27 / 55    293 / 385      103 / 182 (LU batch)
    16384 x 64  43 / 55    27 / 39    23 / 48    74 / 103       25 / 55 (LU batch)
    ==========  =========  =========  =========  =============  ===========================

    Hence :data:`SPIKE_ROWS` (8) for fewer than :data:`BATCH` systems, :data:`BATCH_SPIKE_ROWS`
    (16) for batches, except float64 systems shorter than :data:`FLOAT64_BATCH_ROWS` (16384 x
    64: 48 us at 16 against 39 at 8; its blocks of 16-row chunks fit 64 threads only). One system
    of 2^16 rows is the slow case at S = 8: its last level leaves 128 chunks, which
    :func:`.spike.spike_block` reduces with one thread walking 128 rows.
    """
    if rows == 0:
        return 0
    if rows is None:
        wide = batch >= BATCH and (np.dtype(dtype).itemsize == 4 or n >= FLOAT64_BATCH_ROWS)
        rows = BATCH_SPIKE_ROWS if wide else SPIKE_ROWS
    spike_rows = rows
    if n <= max(ONE_THREAD_ROWS, 2 * spike_rows):
        return 0
    return spike_rows


def levels(a, b, c, d, x, info, rows=None):
    """The partitioned path: :func:`.spike.spike_reduce`, the reduced systems by this route
    (another level while :func:`plan` says so), :func:`.spike.spike_substitute`; no fallback."""
    batch, n = x.shape
    spike_rows = plan(batch, n, x.dtype, rows)
    if not spike_rows:
        one_thread(a, b, c, d, x, info)
        return
    chunks = -(-n // spike_rows)
    threads = THREADS
    while threads > WARP_SIZE and spike.shared_bytes(threads, spike_rows, x.dtype) > _common.SHARED_BYTES:
        threads //= 2
    reduce_kernel, substitute_kernel, block_kernel = spike.kernels_for(spike_rows)
    launch = launchers(kernels, x.dtype)
    if BLOCK_SOLVE and chunks <= threads:
        per_block = threads // chunks
        threads = per_block * chunks
        launch[block_kernel](-(-batch // per_block), threads, a, b, c, d, x, info, chunks, GROWTH_LIMIT,
                             shared=spike.shared_bytes(threads, spike_rows, x.dtype))
        return
    ra, rb, rc, rd, xr = reused(("spike", batch, chunks, x.dtype),
                                lambda: [cuda.device_array((batch, chunks), x.dtype) for _ in range(5)])
    shared = spike.shared_bytes(threads, spike_rows, x.dtype)
    total = batch * chunks
    launch[reduce_kernel](-(-total // (threads - 1)), threads, a, b, c, d, ra, rb, rc, rd, info, GROWTH_LIMIT,
                          shared=shared)
    levels(ra, rb, rc, rd, xr, info, rows)
    launch[substitute_kernel](-(-total // threads), threads, a, b, c, d, xr, x, info, shared=shared)


def one_thread(a, b, c, d, x, info, redo=False):
    """The one-thread path: :func:`tiled_kernel`, a block of :data:`TILE_THREADS` systems
    (``redo``: only the systems whose ``info`` is set)."""
    batch, n = x.shape
    itemsize = x.dtype.itemsize
    rows = TILE_BYTES // itemsize
    threads = TILE_THREADS
    while threads > WARP_SIZE and 4 * threads * (rows + 1) * itemsize > _common.SHARED_BYTES:
        threads //= 2
    u = reused(("pivoting", batch, n, x.dtype), lambda: cuda.device_array((3, n, batch), x.dtype))
    launchers(kernels, x.dtype)[tiled_kernel(rows)](-(-batch // threads), threads, a, b, c, d, x, info, u,
                                                    int(redo), shared=4 * threads * (rows + 1) * itemsize)


def is_positive_definite(d, sub):
    """Whether every symmetric tridiagonal ``tridiag(sub, d, sub)`` of the batch is positive definite.

    ``d``, ``sub``: (batch, n) device arrays, ``sub[m, i] = T_m[i, i-1]``. One launch and one
    integer copied back.
    """
    verdict = cuda.to_device(np.zeros(1, np.int32))
    batch = d.shape[0]
    launchers(kernels, d.dtype)[positive_definite](-(-batch // THREADS), THREADS, d, sub, verdict)
    return not verdict.copy_to_host()[0]


def kernels(dtype):
    """Every kernel of this module and of :mod:`.spike` for ``dtype``, with numba argument types."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix, info = t[:, ::1], types.int32[::1]
    yield tiled_kernel(TILE_BYTES // np.dtype(dtype).itemsize), (matrix,) * 5 + (info, t[:, :, ::1], types.int64)
    for rows in ALL_SPIKE_ROWS:
        yield from zip(spike.kernels_for(rows), spike.argtypes(dtype))
    yield positive_definite, (matrix, matrix, info)
