"""Tridiagonal systems that need pivoting: Gaussian elimination with partial pivoting, in parallel.

``method="pivoting"`` solves any nonsingular system, backward stably, as LAPACK's ``?gtsv`` does,
and reports a singular one per system (``SINGULAR`` in ``info``) without losing the others.
Two paths (:func:`plan` picks one by shape):

* **One thread per system** (:func:`tiled_kernel`), for systems of at most
  :data:`ONE_THREAD_ROWS` rows (too short to split): LAPACK's ``?gtsv`` step (:mod:`.lu`), the
  block's systems coming through shared memory in tiles, neighbouring threads reading
  neighbouring addresses, and U going to a scratch laid out ``(3, n, batch)``, so that the
  thread-per-system loop, which reads ``n`` apart in the (batch, n) layout, coalesces as
  cuSPARSE's ``gtsvInterleavedBatch`` does with interleaved data.
* **Chunks and levels** (:mod:`.chunked`, on :mod:`.elimination`), for longer systems: each thread
  eliminates the interior unknowns of a chunk of ``2R`` rows with partial pivoting over every
  row of the chunk, which leaves a pair of rows coupling the chunk's two end unknowns and its
  neighbours' (a *reduced system* of ``n / R`` unknowns in the same pair form); the reduced
  system is solved the same way, level by level, until a block holds a whole system, whose
  reduced pairs one thread eliminates (:func:`.chunked.row_kernels`' ``block_rows``, or
  ``block_pairs`` at the top of the levels); then every chunk, its ends known, is eliminated
  again and back-substituted. Each level reads its input twice and writes its solution once.

Why this and not SPIKE with diagonal pivoting. Chang, Stratton, Kim and Hwu ("A scalable,
numerically stable, high-performance tridiagonal solver using GPUs", SC 2012, the method behind
cuSPARSE's ``gtsv2``) factor each partition on its own, with the 1x1 and 2x2 pivots of Erway and
Marcia's diagonal pivoting (after Bunch and Kaufman), and couple the partitions by their spikes;
Venetis, Kouris, Sobczyk, Gallopoulos and Sameh's g-Spike (2015) factor the partitions by Givens
rotations instead and treat a singular partition specially. Both pivot *inside* a partition
only, so a partition that is singular or nearly so, although the matrix is not (a
``tridiag(1, 1e-10, 1)`` cut into partitions of odd size, or a random indefinite matrix cut into
some hundred thousand partitions, one of which will be nearly singular), makes the spikes large,
and the answer inaccurate; the earlier version of this module flagged such systems and solved
them again by one thread over all rows, which made random indefinite systems of 2^20 rows 4000
times slower than ``gtsv2``. Here a chunk's first and last rows take part in its pivoting too
(:mod:`.elimination`): every column is eliminated with the largest entry among all the rows
that hold it, so the whole solve is Gaussian elimination with partial pivoting on ``A`` with
its columns reordered, backward stable (Wilkinson), with no partition to fail and nothing to
fall back on. The price is a little more arithmetic per row than a partition's LU (two rows
carried instead of one, four candidates a column instead of two), which the memory traffic
hides: the bands are read twice and x written once, as by SPIKE.

Guarantee: for a nonsingular system, float32 or float64, any n and batch, x is backward stable:
the exact solution of ``(A + E) x = d`` with ``||E|| <= c n eps rho ||A||``, ``rho`` the growth of
the elimination (at most 2 for the one-thread path, LAPACK's own; for the chunks, that of partial
pivoting on ``A`` with its columns reordered, :mod:`.elimination`: small in practice, as partial
pivoting's always is, and in the tests and benchmarks a backward error of at most 0.43 eps); so
its error is at most about ``n eps kappa(A)``. It may fail only where Gaussian elimination with
partial pivoting fails: an exactly singular matrix (``SINGULAR``, x NaN), a matrix singular to
working precision (a huge or non-finite x: ``NOT_FINITE`` where it overflows; ``condition=True``
of :func:`.api.solve_ex` estimates ``1 / kappa`` to tell), or a growth factor that the
elimination's worst cases reach and the matrices met in practice do not.

Measured (``benchmarks/tridiag.csv``, CUPTI kernel time): see :func:`plan`.
"""

import functools

import numpy as np
from numba import cuda, types

from ..core.hardware import WARP_SIZE
from ..core.registry import Capability
from . import _common, chunked
from ._common import SINGULAR, launchers, no_route, reused, store
from .chunked import routed
from .lu import carry, pivot
from .registry import Method, register, times_at_nearest

METHOD_NAME = "pivoting"
"""This method's name in the registry, and in the ``method`` column of its rows in the tables."""
THREADS = 128
"""Threads of a chunk kernel (fewer where the shared memory does not hold them)."""
TILE_BYTES = 128
"""The one-thread path reads tiles of ``TILE_BYTES / itemsize`` rows of each system (32 in
float32, 16 in float64): a warp reads whole 128-byte lines."""
TILE_THREADS = 64
ONE_THREAD_ROWS = 32
"""Systems of at most this many rows take the one-thread path: too short to split."""
ROW_PAIRS = {4: 8, 8: 8}
"""``R``, the pairs of a chunk of the system (``2R`` rows), by item size, for systems that a block
holds whole, where no sweep measured the chunks (:func:`plan`)."""
LEVEL_ROW_PAIRS = {4: 8, 8: 4}
"""``R`` by item size for systems that take levels, where no sweep measured the chunks."""
PAIR_PAIRS = 8
"""The pairs of a chunk of a reduced system."""
ALL_ROW_PAIRS = (4, 8, 16)
ALL_PAIR_PAIRS = (4, 8, 16)
"""The chunk lengths with kernels (the benchmark tries each). Chunks of 2 pairs, tried too (the
table of :func:`plan`), were slower at every shape but one, where they tied, and are left out."""


@functools.lru_cache(maxsize=None)
def tiled_kernel(rows):
    """The one-thread-per-system LU reading tiles of ``rows`` rows (a power of two) coalesced."""
    shift = rows.bit_length() - 1

    @cuda.jit
    def gtsv_tiled(a, b, c, d, x, info, u, route, call):
        """Solve system ``blockIdx.x * blockDim.x + threadIdx.x`` by LU with partial pivoting.

        The block's systems come in tiles of ``rows`` rows through shared memory, neighbouring
        threads reading neighbouring addresses; U (divided by its pivots) goes to ``u`` (3, n,
        batch), whose rows neighbouring threads write and read back side by side; x leaves by
        tiles as the rows came in. The system's thread writes its ``info`` (0 or ``SINGULAR``;
        a singular system's x is NaN). With ``call`` not 0 only the systems whose ``route``
        entry is ``call`` are solved (:func:`.chunked.routed`), and a block with none returns at once.
        """
        batch, n = x.shape
        zero, one, nan = b.dtype.type(0), b.dtype.type(1), b.dtype.type(np.nan)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        first = cuda.blockIdx.x * threads
        system = first + tid
        count = min(threads, batch - first) * rows
        span = rows + 1
        slots = threads * span
        shared = cuda.shared.array(0, b.dtype)
        sa, sb = shared[:slots], shared[slots : 2 * slots]
        sc, sd = shared[2 * slots : 3 * slots], shared[3 * slots : 4 * slots]
        base = tid * span
        mine = routed(system, batch, route, call)
        if not cuda.syncthreads_or(np.int32(mine)):  # the same for every thread of the block
            return
        ok = mine
        sd[base + rows] = one if mine else zero  # the padding slot: whether this system's x is written
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
                    p, q, sa[base + k], sb[base + k], sc[base + k], zero, one
                )
                y, r = carry(swap, factor, r, sd[base + k])
                u[0, i - 1, system], u[1, i - 1, system], u[2, i - 1, system] = upper, fill, y * inverse
                if not good:
                    ok = False
                    break
        ok = ok and p != zero
        if mine:
            info[system] = 0 if ok else SINGULAR
        after, beyond = zero, zero
        if ok:
            after = r / p  # x_{n-1}, then x_{i+1} and x_{i+2} of the back substitution
        for start in range((n - 1) >> shift << shift, -1, -rows):
            here = min(rows, n - start)
            # The tile's U rows into shared memory first: loads issued together, not one
            # dependent wait per row (a fixed trip count, so that the loop can be unrolled).
            for k in range(rows):
                if ok and start + k < n - 1:
                    row = start + k
                    sa[base + k], sb[base + k], sc[base + k] = u[0, row, system], u[1, row, system], u[2, row, system]
            for k in range(here - 1, -1, -1):
                i = start + k
                xi = nan  # a failed system's x is all NaN, never memory left unwritten
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


def is_positive_definite(d, sub, stream=None):
    """Whether every symmetric tridiagonal ``tridiag(sub, d, sub)`` of the batch is positive definite.

    ``d``, ``sub``: (batch, n) device arrays, ``sub[m, i] = T_m[i, i-1]``. One launch and one
    integer copied back, on ``stream`` (a :class:`~prefixsum.core.streams.Stream`; None: numba's
    default), which it waits for.
    """
    on = 0 if stream is None else stream.numba
    verdict = cuda.to_device(np.zeros(1, np.int32), stream=on)
    batch = d.shape[0]
    launchers(kernels, d.dtype)[positive_definite](-(-batch // THREADS), THREADS, d, sub, verdict, stream=stream)
    answer = verdict.copy_to_host(stream=on)
    if stream is not None:
        stream.synchronize()
    return not answer[0]


def run(a, b, c, d, x, info, route=None, call=0, pairs=None, stream=None):
    """Solve the (batch, n) device systems into ``x``; each system's verdict into ``info``.

    Every system solved gets ``info`` 0 or ``SINGULAR`` (its x NaN) written over whatever was
    there (:mod:`.auto` runs this after the hybrid, for the systems it routes: ``route``, a
    device array of ``batch`` int32, and ``call``, not 0: only the systems whose ``route``
    entry is ``call``); a non-finite value stored adds ``NOT_FINITE``. ``pairs`` overrides
    :func:`plan`'s ``R`` (0: the one-thread path; for the benchmark and the tests). What the
    paths keep between calls (the one-thread kernel's scratch of ``3 n batch`` values, the
    levels' reduced systems, the chunks' flags) is made on a shape's first call
    (:func:`._common.reused`).
    """
    batch, n = x.shape
    route = no_route() if route is None else route
    if plan(batch, n, x.dtype, pairs):
        levels(a, b, c, d, x, info, route, call, pairs, stream)
    else:
        one_thread(a, b, c, d, x, info, route, call, stream)


def plan(batch, n, dtype, pairs=None):
    """``R``, the pairs of a chunk, for (batch, n) systems of ``dtype``, or 0 for the one-thread
    path (systems of at most :data:`ONE_THREAD_ROWS` rows): :func:`fastest_row_pairs`. ``pairs``
    overrides the choice (0: always one thread).
    """
    if pairs and pairs not in ALL_ROW_PAIRS:
        raise ValueError(f"pairs={pairs}: the chunks have kernels for {', '.join(map(str, ALL_ROW_PAIRS))} pairs")
    if pairs == 0 or n <= ONE_THREAD_ROWS:
        return 0
    if pairs:
        return pairs
    return fastest_row_pairs(batch, n, np.dtype(dtype).name)


@functools.lru_cache(maxsize=256)
def fastest_row_pairs(batch, n, dtype):
    """``R`` of the fastest chunks measured at the shape nearest (batch, n) in ``dtype`` (a name).

    The sweep of the committed ``benchmarks/tridiag.csv`` (``tridiag.py --only-pivoting
    --sweep``, CUPTI kernel time, random indefinite systems, each call timed right after an untimed
    one of its own) times the solver with each ``R`` of :data:`ALL_ROW_PAIRS` forced, rows
    ``pivoting:pairs=R``; the nearest shape is chosen as ``"auto"`` chooses its method
    (:func:`.registry.times_at_nearest`). No single ``R`` was the fastest everywhere: 16 where a
    block holds systems of about 1000 rows, 4 for the longest systems, 8 between, and the
    differences reach a fifth of the time. Without the table (a copy that lacks it):
    :data:`ROW_PAIRS`, or :data:`LEVEL_ROW_PAIRS` where a block does not hold a system.
    A pure function of the committed table, kept per shape (a solve asks on every call).
    """
    labels = {f"{METHOD_NAME}:pairs={r}": r for r in ALL_ROW_PAIRS}
    times = times_at_nearest(labels, (batch, n), np.dtype(dtype))
    if times:
        return labels[min(times, key=times.get)]
    itemsize = np.dtype(dtype).itemsize
    return LEVEL_ROW_PAIRS[itemsize] if _in_levels(n, dtype, ROW_PAIRS[itemsize]) else ROW_PAIRS[itemsize]


def takes_levels(batch, n, dtype, pairs=None):
    """Whether the chunked path takes levels for (batch, n) systems (:func:`levels`)."""
    row_pairs = plan(batch, n, dtype, pairs)
    return bool(row_pairs) and _in_levels(n, dtype, row_pairs)


def _in_levels(n, dtype, row_pairs):
    """Whether a system of ``n`` rows in chunks of ``row_pairs`` pairs has more chunks than the
    block kernel's threads."""
    return -(-n // (2 * row_pairs)) > threads_for(chunked.row_shared_bytes, row_pairs, dtype, True)


def threads_for(shared_bytes, pairs, dtype, block=False):
    """The threads of a chunk kernel: :data:`THREADS`, halved while their shared memory
    (``shared_bytes(threads, pairs, dtype, block)``) passes the budget, at least a warp."""
    threads = THREADS
    while threads > WARP_SIZE and shared_bytes(threads, pairs, dtype, block) > _common.SHARED_BYTES:
        threads //= 2
    return threads


def levels(a, b, c, d, x, info, route, call, pairs=None, stream=None):
    """The chunked path: whole systems in a block where they fit, else a level
    (:func:`.chunked.row_kernels`' reduce and substitute around :func:`solve_pairs`)."""
    batch, n = x.shape
    dtype = x.dtype
    row_pairs = plan(batch, n, dtype, pairs)
    chunks = -(-n // (2 * row_pairs))
    reduce_rows, substitute_rows, block_rows = chunked.row_kernels(row_pairs)
    launch = launchers(kernels, dtype)
    pinfo = _flags(batch, stream)
    fits = threads_for(chunked.row_shared_bytes, row_pairs, dtype, block=True)
    if chunks <= fits:
        threads = fits // chunks * chunks
        launch[block_rows](
            -(-batch // (fits // chunks)),
            threads,
            a,
            b,
            c,
            d,
            x,
            info,
            pinfo,
            route,
            call,
            chunks,
            shared=chunked.row_shared_bytes(threads, row_pairs, dtype, block=True),
            stream=stream,
        )
        return
    out, sol = _level(batch, chunks, dtype, stream)
    threads = threads_for(chunked.row_shared_bytes, row_pairs, dtype)
    blocks, shared = -(-batch * chunks // threads), chunked.row_shared_bytes(threads, row_pairs, dtype)
    launch[reduce_rows](blocks, threads, a, b, c, d, out, pinfo, route, call, shared=shared, stream=stream)
    solve_pairs(out, sol, info, pinfo, route, call, stream)
    launch[substitute_rows](blocks, threads, a, b, c, d, sol, x, info, route, call, shared=shared, stream=stream)


def solve_pairs(p, sol, info, pinfo, route, call, stream=None):
    """A reduced system (``p``: (10, batch, count) pairs) into ``sol`` (batch, 2 count): in one
    block a system where it fits (``block_pairs``), else another level."""
    batch, count = p.shape[1], p.shape[2]
    dtype = p.dtype
    chunks = -(-count // PAIR_PAIRS)
    reduce_pairs, substitute_pairs, block_pairs = chunked.pair_kernels(PAIR_PAIRS)
    launch = launchers(kernels, dtype)
    fits = threads_for(chunked.pair_shared_bytes, PAIR_PAIRS, dtype, block=True)
    if chunks <= fits:
        threads = fits // chunks * chunks
        launch[block_pairs](
            -(-batch // (fits // chunks)),
            threads,
            p,
            sol,
            info,
            pinfo,
            route,
            call,
            chunks,
            shared=chunked.pair_shared_bytes(threads, PAIR_PAIRS, dtype, block=True),
            stream=stream,
        )
        return
    out, next_sol = _level(batch, chunks, dtype, stream)
    threads = threads_for(chunked.pair_shared_bytes, PAIR_PAIRS, dtype)
    blocks, shared = -(-batch * chunks // threads), chunked.pair_shared_bytes(threads, PAIR_PAIRS, dtype)
    launch[reduce_pairs](blocks, threads, p, out, pinfo, route, call, shared=shared, stream=stream)
    solve_pairs(out, next_sol, info, pinfo, route, call, stream)
    launch[substitute_pairs](blocks, threads, p, next_sol, sol, route, call, shared=shared, stream=stream)


def _level(batch, chunks, dtype, stream=None):
    """A level's reduced pairs (10, batch, chunks) and their solution (batch, 2 chunks), kept."""
    return reused(
        ("pivoting level", batch, chunks, np.dtype(dtype)),
        lambda: (
            cuda.device_array((chunked.FIELDS, batch, chunks), dtype),
            cuda.device_array((batch, 2 * chunks), dtype),
        ),
        stream,
    )


def _flags(batch, stream=None):
    """The chunks' singular flags, one per system, zero between calls (:mod:`.chunked`)."""
    return reused(("pivoting flags", batch), lambda: cuda.to_device(np.zeros(batch, np.int32)), stream)


def one_thread(a, b, c, d, x, info, route, call, stream=None):
    """The one-thread path: :func:`tiled_kernel`, a block of :data:`TILE_THREADS` systems."""
    batch, n = x.shape
    itemsize = x.dtype.itemsize
    rows = TILE_BYTES // itemsize
    threads = TILE_THREADS
    while threads > WARP_SIZE and 4 * threads * (rows + 1) * itemsize > _common.SHARED_BYTES:
        threads //= 2
    u = reused(("pivoting", batch, n, x.dtype), lambda: cuda.device_array((3, n, batch), x.dtype), stream)
    launchers(kernels, x.dtype)[tiled_kernel(rows)](
        -(-batch // threads),
        threads,
        a,
        b,
        c,
        d,
        x,
        info,
        u,
        route,
        call,
        shared=4 * threads * (rows + 1) * itemsize,
        stream=stream,
    )


def kernels(dtype):
    """Every kernel of this module and of :mod:`.chunked` for ``dtype``, with numba argument types."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix, flags = t[:, ::1], types.int32[::1]
    tiled = tiled_kernel(TILE_BYTES // np.dtype(dtype).itemsize)
    yield tiled, (matrix,) * 5 + (flags, t[:, :, ::1], flags, types.int64)
    yield from chunked.kernels(dtype, ALL_ROW_PAIRS, ALL_PAIR_PAIRS)
    yield positive_definite, (matrix, matrix, flags)


METHOD = register(
    Method(
        name=METHOD_NAME,
        run=run,
        kernels=kernels,
        auto_rank=1,
        capabilities=Capability.PIVOTS | Capability.BATCHED,
        summary="Gaussian elimination with partial pivoting, as LAPACK's ?gtsv: a thread per short system, "
        "chunks and levels of reduced systems for longer ones",
        source="LAPACK ?gtsv; chunked elimination across the chunks' edges (this package)",
    )
)
