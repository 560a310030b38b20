"""The partition method for systems too long for a warp: reduce to the chunks' ends, recurse.

Wang's (1981) partition method, the first step of :mod:`.warp`'s solver, applied across a whole
grid instead of a warp, as Laszlo, Giles and Appleyard (2016) do for long systems. Thread ``g``
owns chunk ``g``: ``R`` consecutive rows of the systems laid end to end (a system's first row
has ``a = 0`` and its last ``c = 0``, so chunks of different systems never couple). A system
whose ``n`` is not a multiple of ``R`` is padded, in the indexing only, to the next multiple
with identity rows ``(0, 1, 0, 0)`` (``x = 0``, coupled to nothing): its last chunk is ragged,
no chunk spans two systems, and nothing is copied. (Issue 29: 100 systems of 1000 rows went to
:func:`.hybrid.hybrid_shared` before, at 0.48 (float32) and 0.28 (float64) of cuSPARSE's speed
on the H200.)

1. :func:`partition_reduce`: each thread loads its chunk (coalesced, through shared memory, as
   :mod:`.warp` does) and runs the partition step in registers
   (:func:`prefixsum.primitives.chunk.chunk_partition`), which
   leaves every interior row as ``x_k = d_k - a_k x_first - c_k x_last`` and the chunk's first
   and last rows coupling only the ends of neighbouring chunks. Those two rows of every chunk,
   in order, are a tridiagonal system of ``2 n / R`` rows with unit diagonal: the *reduced
   system*, written to global memory.
2. The reduced system is solved by the same route (:func:`.hybrid.run`): another level of this
   method while it is too long for a block (:func:`.block.max_rows`), then :mod:`.block`'s
   solver, or :mod:`.warp`'s for at most 512 rows. For ``n = 2^20`` and ``R = 16`` in float32:
   ``2^20 -> 2^17 -> 2^14 -> 2^11`` rows, three levels and a block solve of 2048 rows.
3. :func:`partition_substitute`: each thread loads its chunk again and redoes the partition
   (cheaper than writing the eliminated coefficients and reading them back: registers are free,
   bandwidth is not), reads its chunk's two end values from the reduced solution and writes
   every ``x_k``, coalesced through shared memory.

A level moves the four bands twice and ``x`` once, plus ``2 / R`` of that for the reduced
system: about ``9 n`` values, against PCR's global path that reads three rows and writes one at
every one of its ``log2 n - 10`` steps. Zero pivots are reported in step 1 for the system the chunk
belongs to; non-finite results by the stores. No pivoting: for diagonally dominant or
symmetric positive definite systems (on others a chunk's pivots can vanish where Thomas's over
the whole system would not).
"""

import functools

import numpy as np
from numba import cuda, types

from ..core.hardware import WARP_SIZE
from ..primitives.chunk import chunk_kernel_parts, chunk_test
from . import _common, block
from ._common import ZERO_PIVOT, dominant_row, fail, launchers, no_route, reused, store
from .warp import MAX_ROWS

ROWS_PER_THREAD = {4: 16, 8: 8}
"""``R`` by item size for a level that no chunk length in :data:`ONE_LEVEL_ROWS` brings down to a
block's worth (:func:`.block.max_rows`). ``benchmarks/tridiag.csv`` (CUPTI, every level at one
R; the H100's and the H200's runs) holds why: float64 is fastest at R = 8 on every shape, float32
at R = 16 on the largest. Device time is the measure: R = 8 takes more levels (a level divides n
by R / 2), each two launches of host time in a whole call."""
ONE_LEVEL_ROWS = (8, 16)
"""The chunk lengths that :func:`rows_per_thread` tries first, shortest first: the least whose
level leaves a block's worth of rows takes the system in one level and a block solve: one level
and a block beat two levels on the shapes where both apply (``benchmarks/tridiag.csv``, CUPTI)."""
THREADS = 128


@functools.lru_cache(maxsize=None)
def _make(rows):
    """The two kernels for chunks of ``rows`` rows (a power of two >= 4)."""
    partitioned, quarters, load_block, solution, store_chunks = chunk_kernel_parts(rows, store)
    dominant = chunk_test(rows, dominant_row)

    @cuda.jit
    def partition_reduce(a, b, c, d, ra, rb, rc, rd, info, route, call):
        """Step 1: the partition of every chunk; its first and last rows into rows ``2t`` and
        ``2t + 1`` of the reduced (batch, 2T) system (``T`` chunks a system). With ``call`` not
        0, ``route[system]`` becomes ``call`` where a row of the chunk is not diagonally
        dominant (:mod:`.auto`)."""
        batch = b.shape[0]
        one = b.dtype.type(1)
        sa, sb, sc, sd = quarters(cuda.shared.array(0, b.dtype))
        load_block(a, b, c, d, sa, sb, sc, sd, ra.shape[1] // 2 * rows)
        g = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        chunks = ra.shape[1] // 2
        system, t = g // chunks, g % chunks
        if call != 0 and system < batch and not dominant(sa, sb, sc, cuda.threadIdx.x * (rows + 1)):
            route[system] = call
        la = cuda.local.array(rows, b.dtype)
        lb = cuda.local.array(rows, b.dtype)
        lc = cuda.local.array(rows, b.dtype)
        ld = cuda.local.array(rows, b.dtype)
        ok = partitioned(sa, sb, sc, sd, la, lb, lc, ld, one)
        if system < batch:
            ra[system, 2 * t], rb[system, 2 * t], rc[system, 2 * t], rd[system, 2 * t] = la[0], one, lc[0], ld[0]
            last = rows - 1
            ra[system, 2 * t + 1], rb[system, 2 * t + 1] = la[last], one
            rc[system, 2 * t + 1], rd[system, 2 * t + 1] = lc[last], ld[last]
            if not ok:
                fail(info, system, ZERO_PIVOT)

    @cuda.jit
    def partition_substitute(a, b, c, d, xr, x, info):
        """Step 3: every chunk's partition again, its ends from the reduced solution ``xr``,
        its interior from them; ``x`` written coalesced through shared memory."""
        batch = x.shape[0]
        zero, one = b.dtype.type(0), b.dtype.type(1)
        padded = xr.shape[1] // 2 * rows
        sa, sb, sc, sd = quarters(cuda.shared.array(0, b.dtype))
        load_block(a, b, c, d, sa, sb, sc, sd, padded)
        la = cuda.local.array(rows, b.dtype)
        lb = cuda.local.array(rows, b.dtype)
        lc = cuda.local.array(rows, b.dtype)
        ld = cuda.local.array(rows, b.dtype)
        partitioned(sa, sb, sc, sd, la, lb, lc, ld, one)  # its zero pivots were reported by partition_reduce
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        g = cuda.blockIdx.x * threads + tid
        chunks = xr.shape[1] // 2
        system, t = g // chunks, g % chunks
        x_first, x_last = zero, zero
        if system < batch:
            x_first, x_last = xr[system, 2 * t], xr[system, 2 * t + 1]
        solution(sd, tid * (rows + 1), la, lc, ld, x_first, x_last)
        cuda.syncthreads()
        store_chunks(x, info, sd, padded, cuda.blockIdx.x * threads)

    return partition_reduce, partition_substitute


def rows_per_thread(dtype, n):
    """``R`` for a level on systems of ``n`` rows of ``dtype``: the least in :data:`ONE_LEVEL_ROWS`
    whose reduced systems (``2 n / R`` rows) a block solves (:func:`.block.max_rows`), else
    :data:`ROWS_PER_THREAD` by item size."""
    fits = [r for r in ONE_LEVEL_ROWS if 2 * -(-n // r) <= block.max_rows(dtype)]
    return fits[0] if fits else ROWS_PER_THREAD[np.dtype(dtype).itemsize]


def takes(batch, n, dtype):
    """Whether a level of this method applies: ``n`` longer than a warp's solver takes
    (:data:`.warp.MAX_ROWS`). Any n: each system is padded to whole chunks."""
    return n > MAX_ROWS


def run(a, b, c, d, x, info, solve_reduced, rows=None, route=None, call=0, stream=None):
    """One level: reduce the (batch, n) device systems, ``solve_reduced(ra, rb, rc, rd, xr,
    info)`` on the reduced ones (:func:`.hybrid.run`, which comes back here while they are
    long), substitute into ``x``. ``rows`` overrides :func:`rows_per_thread` (for the benchmark);
    ``route`` and ``call``: the dominance test of :mod:`.auto`, on this level's rows only.
    """
    batch, n = x.shape
    rows = rows or rows_per_thread(x.dtype, n)
    size = 2 * -(-n // rows)
    reduced = reused(
        ("partition", batch, size, x.dtype),
        lambda: [cuda.device_array((batch, size), x.dtype) for _ in range(5)],
        stream,
    )
    threads = THREADS
    while threads > WARP_SIZE and 4 * threads * (rows + 1) * x.dtype.itemsize > _common.SHARED_BYTES:
        threads //= 2
    blocks = -(-batch * size // 2 // threads)
    shared = 4 * threads * (rows + 1) * x.dtype.itemsize
    reduce_kernel, substitute_kernel = _make(rows)
    launch = launchers(kernels, x.dtype)
    launch[reduce_kernel](
        blocks,
        threads,
        a,
        b,
        c,
        d,
        *reduced[:4],
        info,
        no_route() if route is None else route,
        call,
        shared=shared,
        stream=stream,
    )
    solve_reduced(*reduced, info, stream=stream)
    launch[substitute_kernel](blocks, threads, a, b, c, d, reduced[4], x, info, shared=shared, stream=stream)


def kernels(dtype):
    """Every kernel :func:`run` launches for ``dtype`` (two per ``R``: 4, 8, 16), with numba
    argument types."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix, info = t[:, ::1], types.int32[::1]
    for rows in (4, 8, 16):
        reduce_kernel, substitute_kernel = _make(rows)
        yield reduce_kernel, (matrix,) * 8 + (info, info, types.int64)
        yield substitute_kernel, (matrix,) * 6 + (info,)
