"""Tridiagonal systems that need pivoting: LU with partial pivoting, one thread per system.

The method is LAPACK's ``?gtsv`` (``?gttrf`` and ``?gttrs`` in one pass). Elimination step ``i``
compares the current row's pivot ``p`` (column ``i``) with the next row's sub-diagonal entry
``a_{i+1}`` and takes the larger in magnitude as the pivot:

* ``|p| >= |a_{i+1}|``: no interchange. ``l = a_{i+1} / p``; row ``i`` of U is ``(p, q, 0)`` and
  the next row loses ``l`` times it.
* otherwise the two rows change places. Row ``i`` of U is the next row ``(a_{i+1}, b_{i+1},
  c_{i+1})``, and ``l = p / a_{i+1}``; the old row, less ``l`` times the new one, gains an entry
  two places right of its diagonal: ``U`` is banded with one extra super-diagonal of fill.

The right-hand side is eliminated alongside, so back substitution
``x_i = (y_i - U[i, i+1] x_{i+1} - U[i, i+2] x_{i+2}) / U[i, i]`` finishes the solve. Only when
both candidates are 0 does the elimination stop: column ``i`` of the partly eliminated matrix is
zero on and below the diagonal, so the matrix is singular (the failure :data:`SINGULAR`).

Why this method and not diagonal pivoting (Erway, Marcia and Tyson 2011; Chang and Hwu's SPIKE
with Bunch-Kaufman 1x1/2x2 pivots, as cuSPARSE's ``gtsv2`` does):

* **Stability is proved and simple.** Partial pivoting on a tridiagonal matrix keeps every
  entry of U within twice the largest entry of the matrix (growth factor at most 2; Higham,
  *Accuracy and Stability of Numerical Algorithms*, 2nd ed., ch. 9, after Bothe 1975), so the solve is backward stable
  for *any* nonsingular tridiagonal system, symmetric or not. Diagonal pivoting needs its
  Bunch-Kaufman threshold to bound growth, and SPIKE's partitions are only as stable as the
  reduced system their pivots leave behind.
* **It matches the reference.** It is the algorithm that ``scipy.linalg.solve_banded`` and
  LAPACK's ``?gtsv`` run, so the tests compare like with like.
* **Where it is used, the batch supplies the parallelism.** :func:`.householder.solve_symmetric`
  solves one tridiagonal system per matrix, with n at most a few hundred (the reduction costs
  ``n^3``): a thread per system fills the GPU once the batch has thousands of systems.

The price: no parallelism inside a system, as for Thomas. ``benchmarks/tridiag.csv`` (an H200,
``--only-pivoting``): on batches, 1.4 to 1.8 times the kernel time of cuSPARSE's
``gtsvInterleavedBatch`` with ``algo=1`` (the same algorithm on an interleaved layout, whose reads
coalesce); on one system of 2^20 rows, 364 ms (float32) against ``gtsv2``'s 0.11 ms, whose SPIKE
partitions split the system over the GPU. Use it where the batch is large and the systems
short, as in :func:`.householder.solve_symmetric`.

Memory layout: the inputs are (batch, n), each thread walking its own row, ``n`` elements from
its neighbours (uncoalesced, as Thomas). U's three bands and the eliminated right-hand side go
to a scratch array of our own, laid out ``(4, n, batch)`` so that neighbouring threads write and
read back neighbouring addresses.
"""
import functools

import numpy as np
from numba import cuda, types

from ..core.hardware import WARP_SIZE
from . import _common, spike
from ._common import SINGULAR, fail, launchers, reused, store
from .lu import carry, pivot

THREADS = 128
DIAGONAL, SUPER, FILL, RHS = 0, 1, 2, 3  # gtsv's scratch rows: U[i, i], U[i, i+1], U[i, i+2], y_i
BLOCK_SOLVE = True
"""Whether systems of at most a block's threads of chunks are solved whole in one block
(:func:`.spike.spike_block`; the benchmark turns it off to time the levels alone)."""
TILE_BYTES = 128
"""The one-thread path reads tiles of ``TILE_BYTES / itemsize`` rows of each system (32 in
float32, 16 in float64): a warp reads whole 128-byte lines."""
TILE_THREADS = 64
SPIKE_ROWS = {4: 8, 8: 8}
"""``S``, the chunk of the partitioned path (``S - 1`` rows of a block and a separator), by item size."""
ALL_SPIKE_ROWS = (4, 8, 16, 32)
"""The chunks with kernels (the benchmark tries each)."""
ONE_THREAD_ROWS = 32
"""Systems of at most this many rows take the one-thread path: too short to split."""
GROWTH_LIMIT = 1024
"""The largest growth a chunk of the partitioned path may show (:mod:`.spike`): beyond it the
system is solved again by the one-thread LU."""


@cuda.jit
def gtsv(a, b, c, d, x, info, u):
    """Solve system ``cuda.grid(1)`` by LU with partial pivoting; ``u`` (4, n, batch) holds U and y."""
    system = cuda.grid(1)
    batch, n = x.shape
    if system >= batch:
        return
    zero = b.dtype.type(0)
    # The current row, after the eliminations so far: p x_i + q x_{i+1} = r (its entry at
    # i+2 is 0 until it is stored, since only a row moved down by an interchange gains one).
    p, q, r = b[system, 0], c[system, 0] if n > 1 else zero, d[system, 0]
    for i in range(n - 1):
        below = a[system, i + 1]
        diagonal, right, rhs = b[system, i + 1], c[system, i + 1] if i + 2 < n else zero, d[system, i + 1]
        if abs(p) >= abs(below):
            if p == zero:  # and below == 0: column i is zero on and below the diagonal
                fail(info, system, SINGULAR)
                return
            factor = below / p
            u[DIAGONAL, i, system], u[SUPER, i, system], u[FILL, i, system], u[RHS, i, system] = p, q, zero, r
            p, q, r = diagonal - factor * q, right, rhs - factor * r
        else:
            factor = p / below
            u[DIAGONAL, i, system], u[SUPER, i, system], u[FILL, i, system], u[RHS, i, system] = below, diagonal, right, rhs
            p, q, r = q - factor * diagonal, -factor * right, r - factor * rhs
    if p == zero:
        fail(info, system, SINGULAR)
        return
    after = r / p  # x_{i+1} and, below, x_{i+2} of the back substitution
    store(x, info, system, n - 1, after)
    beyond = zero
    for i in range(n - 2, -1, -1):
        xi = (u[RHS, i, system] - u[SUPER, i, system] * after - u[FILL, i, system] * beyond) / u[DIAGONAL, i, system]
        store(x, info, system, i, xi)
        after, beyond = xi, after


@functools.lru_cache(maxsize=None)
def tiled_kernel(rows):
    """The one-thread-per-system LU reading tiles of ``rows`` rows (a power of two) coalesced."""
    shift = rows.bit_length() - 1

    @cuda.jit
    def gtsv_tiled(a, b, c, d, x, info, u):
        """Solve system ``blockIdx.x * blockDim.x + threadIdx.x`` by LU with partial pivoting.

        The block's systems come in tiles of ``rows`` rows through shared memory, neighbouring
        threads reading neighbouring addresses; U (divided by its pivots) goes to ``u`` (3, n,
        batch), whose rows neighbouring threads write and read back side by side; x leaves by
        tiles as the rows came in.
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
                if k < here:
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

    :func:`plan` picks the path. The partitioned one ends with the flags copied back: systems
    flagged ``UNSTABLE`` (a singular or growing chunk), or failed in any other way, are solved
    again, the whole batch by :func:`gtsv`, whose verdict is the one reported. ``rows``
    overrides :func:`plan`'s ``S`` at every level (0: the one-thread path; for the benchmark and
    the tests).
    """
    batch, n = x.shape
    if not plan(batch, n, x.dtype, rows):
        one_thread(a, b, c, d, x, info)
        return
    levels(a, b, c, d, x, info, rows)
    flags = reused(("pivoting flags", batch), lambda: cuda.pinned_array(batch, np.int32))
    info.copy_to_host(flags)
    if flags.any():
        flags[:] = 0
        info.copy_to_device(flags)
        u = reused(("pivoting gtsv", batch, n, x.dtype), lambda: cuda.device_array((4, n, batch), x.dtype))
        launchers(kernels, x.dtype)[gtsv](-(-batch // THREADS), THREADS, a, b, c, d, x, info, u)


def plan(batch, n, dtype, rows=None):
    """``S`` of a partitioned level for (batch, n) systems of ``dtype``, or 0 for the one-thread
    path: systems of at most :data:`ONE_THREAD_ROWS` (or ``2 S``) rows. ``rows`` overrides :data:`SPIKE_ROWS` (0: always one thread)."""
    if rows == 0:
        return 0
    spike_rows = rows or SPIKE_ROWS[np.dtype(dtype).itemsize]
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


def one_thread(a, b, c, d, x, info):
    """The one-thread path: :func:`tiled_kernel`, a block of :data:`TILE_THREADS` systems."""
    batch, n = x.shape
    itemsize = x.dtype.itemsize
    rows = TILE_BYTES // itemsize
    threads = TILE_THREADS
    while threads > WARP_SIZE and 4 * threads * (rows + 1) * itemsize > _common.SHARED_BYTES:
        threads //= 2
    u = reused(("pivoting", batch, n, x.dtype), lambda: cuda.device_array((3, n, batch), x.dtype))
    launchers(kernels, x.dtype)[tiled_kernel(rows)](-(-batch // threads), threads, a, b, c, d, x, info, u,
                                                    shared=4 * threads * (rows + 1) * itemsize)


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
    yield gtsv, (matrix, matrix, matrix, matrix, matrix, info, t[:, :, ::1])
    yield tiled_kernel(TILE_BYTES // np.dtype(dtype).itemsize), (matrix,) * 5 + (info, t[:, :, ::1])
    for rows in ALL_SPIKE_ROWS:
        yield from zip(spike.kernels_for(rows), spike.argtypes(dtype))
    yield positive_definite, (matrix, matrix, info)
