"""Register-resident batched solver: a partition (modified Thomas) step per thread, PCR across a warp.

For systems that fit in a warp's registers (``n <= 32 R`` with ``R`` rows per thread), after
Laszlo, Giles and Appleyard (2016), "Manycore algorithms for batch scalar and block tridiagonal
solvers", ACM Transactions on Mathematical Software 42(4), 31, whose first step is Wang's
(1981) partition method. A group of ``G`` lanes of one warp (``G`` a power of two, at most 32)
solves one system; lane ``t`` owns the ``R`` consecutive rows ``t R, ..., t R + R - 1`` (a
*chunk*; rows past ``n`` are identity rows ``(0, 1, 0, 0)``, ``x = 0``). Each row is
``a_k x_{k-1} + b_k x_k + c_k x_{k+1} = d_k``.

1. **Coalesced load**: the block's systems lie end to end in memory; the block copies them
   into shared memory, neighbouring threads reading neighbouring addresses, then each thread
   reads its own chunk into registers (``cuda.local.array(R)`` indexed only by
   the counters of fully unrolled loops: LLVM keeps such arrays in registers; the PTX check in
   the tests looks for ``.local``). One slot of padding every ``R`` rows makes lane ``t``'s
   rows start at ``t (R + 1)``, an odd stride: the reads are free of bank conflicts.
2. **Partition step** (``partition``, the "modified Thomas" sweep of the paper): every row
   is divided by its pivot (``b = 1`` afterwards: one division a row); a forward sweep over
   rows ``2 .. R-1`` eliminates each row's left neighbour in favour of the chunk's *first*
   unknown ``x_0`` (row 1's left neighbour is ``x_0``), and a backward sweep eliminates the
   right neighbour in favour of the chunk's *last* unknown ``x_{R-1}``. Afterwards every row reads
   ``x_k = d_k - a_k x_0 - c_k x_{R-1}`` (``b_k = 1``), and the chunk's first and last rows
   couple only the boundary unknowns of neighbouring chunks:

       a_0 x_{last of t-1} + x_0 + c_0 x_{R-1} = d_0,
       a_{R-1} x_0 + x_{R-1} + c_{R-1} x_{first of t+1} = d_{R-1}.

   That is a tridiagonal *reduced system* of ``2 G`` rows, two per lane: about ``10 R``
   multiplications and additions and ``R + 1`` divisions per thread, sequential but in registers.
3. **Reduced system across the lanes** (:func:`reduced`, on
   :func:`prefixsum.primitives.chunk.pcr_row` and :func:`~prefixsum.primitives.chunk.pcr_lanes`): one
   odd-even (cyclic reduction)
   step eliminates the chunks' first unknowns (each lane needs only lane ``t + 1``'s first row,
   one ``shfl_down_sync``), leaving ``G`` rows of last unknowns, one per lane; PCR solves these
   in ``log2 G`` steps, each fetching the rows ``s`` lanes up and down with
   ``shfl_up_sync``/``shfl_down_sync`` (3 values each way: rows are kept normalised,
   ``b = 1``). No shared memory, no barrier: a warp's lanes run in lockstep through the
   shuffles. Sub-warp groups (``G < 32``) share a warp; a lane treats anything from outside its
   group as an identity row.
4. **Back substitution**: lane ``t`` gets ``x_{last of t-1}`` with one more shuffle, then its
   first unknown and its interior ``x_k = d_k - a_k x_0 - c_k x_{R-1}``.
5. **Coalesced store**: each thread writes its ``R`` results into its shared slots, and the
   block copies them out with neighbouring threads writing neighbouring addresses, checking each
   value for NaN or infinity (:func:`._common.store`): the store of the block solver and the
   partition method (:func:`prefixsum.primitives.chunk.chunk_storer`), the block's systems being
   its chunks, each padded to ``G R`` rows.

Compared with :func:`.hybrid.hybrid_shared` (which does the same split with PCR steps in shared
memory, then Thomas): the coefficients are read from shared memory once, not once per PCR step;
the reduced system exchanges registers by shuffles without barriers; rows are normalised so a
row update takes one division, not two. Work per thread: ``R + 1`` divisions and about ``12 R``
multiplications and additions, plus ``1 + log2 G`` divisions for the reduced system; the hybrid's thread does
``log2(lanes)`` PCR updates of each of its rows, two divisions each, reading and writing four
shared-memory values per row and step, with a barrier between steps. On the H100 this kernel
took 0.26 to 0.43 of the hybrid's kernel time on the batches of ``benchmarks/tridiag.py``
(``benchmarks/tridiag_warp.py`` measures it).

One kernel per ``R`` in :data:`ROWS_PER_THREAD` (the arrays' length must be a compile-time
constant), made by :func:`_make`; ``G`` is a launch argument. :func:`plan` picks ``R`` and ``G``.
Zero pivots anywhere (a forward sweep, the partition's first row, a PCR step) are reported as
``ZERO_PIVOT`` for the system, non-finite results as ``NOT_FINITE``, as the other methods do;
no pivoting: for diagonally dominant or symmetric positive definite systems (on others a chunk's
pivots can vanish where Thomas's over the whole system would not).
"""

import numpy as np
from numba import cuda, types

from ..core.hardware import WARP_SIZE
from ..primitives.chunk import chunk_partition, chunk_solution, chunk_storer, pcr_lanes, pcr_row
from ..primitives.warp import FULL_MASK
from . import _common
from ._common import ZERO_PIVOT, dominant_row, fail, launchers, no_route, store

ROWS_PER_THREAD = (2, 4, 8, 16)
"""The chunk lengths ``R`` with a kernel each."""
TARGET_BYTES = 32
""":func:`plan` aims for ``R`` rows of ``TARGET_BYTES`` per coefficient (8 in float32, 4 in
float64) where ``n`` leaves a choice (at least ``n / 32`` rows are needed). More rows per thread
mean fewer PCR steps and fewer threads per system but a longer sweep and more registers.
``benchmarks/tridiag_warp.py`` (every R that fits, batches of 16 to 256 rows) shows why: R = 8
is the fastest in float32 or near R = 16, which loses at short systems; in float64 R = 4 is the
fastest everywhere."""
MAX_ROWS = WARP_SIZE * max(ROWS_PER_THREAD)
"""The largest ``n`` one warp holds: 512."""
THREADS = 128


@cuda.jit(device=True)
def reduced(first, last, lane, lanes, zero, one):
    """Step 3: ``x`` of this chunk's last row, from the two boundary rows ``(a, c, d)`` of
    every chunk of the group (``lanes`` of them). Returns ``(x_last, ok)``."""
    # Odd-even step: lane t + 1's first row gives x_{first of t+1} in terms of the last
    # unknowns of chunks t and t + 1; this chunk's first row likewise with t - 1 and t.
    af, cf, df = first
    an = cuda.shfl_down_sync(FULL_MASK, af, 1)
    cn = cuda.shfl_down_sync(FULL_MASK, cf, 1)
    dn = cuda.shfl_down_sync(FULL_MASK, df, 1)
    if lane + 1 >= lanes:
        an, cn, dn = zero, zero, zero
    a, c, d, ok = pcr_row(last, first, (an, cn, dn), one)
    # PCR on the G last unknowns, one row per lane, by shuffles; rows beyond the group are
    # identity rows.
    x, good = pcr_lanes(a, c, d, lane, lanes, zero, one)
    return x, ok and good


def _make(rows):
    """The kernel for chunks of ``rows`` rows (a power of two >= 2)."""
    shift = rows.bit_length() - 1  # i // rows == i >> shift
    partition = chunk_partition(rows)
    solution = chunk_solution(rows)
    store_chunks = chunk_storer(rows, store)

    @cuda.jit
    def warp_solve(a, b, c, d, x, info, lanes_log2, route, call):
        """Solve systems ``blockIdx.x * per_block ...``, ``2^lanes_log2`` lanes and ``rows`` rows
        each; with ``call`` not 0, set ``route[system]`` to ``call`` if a row is not diagonally
        dominant (:mod:`.auto`)."""
        batch, n = x.shape
        zero, one = b.dtype.type(0), b.dtype.type(1)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        lanes = 1 << lanes_log2
        per_block = threads >> lanes_log2
        lane = tid & (lanes - 1)
        group = tid >> lanes_log2
        first = cuda.blockIdx.x * per_block  # the block's first system
        system = first + group
        real = system < batch
        span = lanes * (rows + 1)
        # Four buffers, one per coefficient, as slices of one: a reshape would call numba's
        # runtime and keep the shape in local memory.
        slots = per_block * span
        shared = cuda.shared.array(0, b.dtype)
        sa, sb = shared[:slots], shared[slots : 2 * slots]
        sc, sd = shared[2 * slots : 3 * slots], shared[3 * slots : 4 * slots]

        # 1. Coalesced copy in: row j of the block's systems end to end is (s, i) = divmod(j, n),
        # stepped by `threads` rows without a division per row. (Tried on the H100: a loop of
        # `rows` unrolled steps issuing all of a thread's loads into registers before its
        # shared-memory stores took more registers, 78 instead of 64 at R = 8 in float32, and
        # was 2-8% slower in float32, 5-10% faster in float64; not kept.)
        count = min(per_block, batch - first) * n
        step_s, step_i = threads // n, threads % n
        s, i = tid // n, tid % n
        for _ in range(tid, count, threads):
            k = s * span + i + (i >> shift)
            # a of row 0 and c of row n - 1 lie outside the matrix: ignored, whatever they hold,
            # and never read (they may never have been written: compute-sanitizer's initcheck).
            sa[k] = a[first + s, i] if i > 0 else zero
            sb[k] = b[first + s, i]
            sc[k] = c[first + s, i] if i + 1 < n else zero
            sd[k] = d[first + s, i]
            s += step_s
            i += step_i
            if i >= n:
                i -= n
                s += 1
        cuda.syncthreads()

        la = cuda.local.array(rows, b.dtype)
        lb = cuda.local.array(rows, b.dtype)
        lc = cuda.local.array(rows, b.dtype)
        ld = cuda.local.array(rows, b.dtype)
        base = group * span + lane * (rows + 1)
        row0 = lane * rows
        for k in range(rows):
            row = row0 + k
            if real and row < n:
                la[k], lb[k], lc[k], ld[k] = sa[base + k], sb[base + k], sc[base + k], sd[base + k]
            else:
                la[k], lb[k], lc[k], ld[k] = zero, one, zero, zero
        if call != 0 and real:
            every = True
            for k in range(rows):
                every = every and dominant_row(la[k], lb[k], lc[k])
            if not every:
                route[system] = call

        # 2. The partition step, 3. the reduced system, 4. back substitution.
        ok = partition(la, lb, lc, ld, one)
        x_last, good = reduced(
            (la[0], lc[0], ld[0]), (la[rows - 1], lc[rows - 1], ld[rows - 1]), lane, lanes, zero, one
        )
        ok = ok and good
        x_before = cuda.shfl_up_sync(FULL_MASK, x_last, 1)  # the previous chunk's last unknown
        if lane == 0:
            x_before = zero
        x_first = ld[0] - la[0] * x_before - lc[0] * x_last
        if real and not ok:
            fail(info, system, ZERO_PIVOT)

        # 5. Coalesced store: each thread's results into its own slots (which only it has read),
        # then out by rows as they came in: the block's systems are its chunks (``lanes`` a
        # system, each system padded to ``lanes * rows`` rows), as the block solver's are.
        solution(sd, base, la, lc, ld, x_first, x_last)
        cuda.syncthreads()
        store_chunks(x, info, sd, lanes * rows, first * lanes)

    return warp_solve


KERNELS = {rows: _make(rows) for rows in ROWS_PER_THREAD}


def plan(batch, n, dtype, rows=None):
    """``(rows, lanes, blocks, threads, shared bytes)`` of the launch for (batch, n) systems.

    ``rows`` (R, default :data:`TARGET_BYTES` over the item size) is raised to the least that lets 32 lanes hold n,
    and ``lanes`` (G) is the least power of two with ``G R >= n``. A block is :data:`THREADS`
    threads (fewer where its four coefficient buffers would not fit the shared-memory budget,
    at least a warp), ``THREADS / G`` systems.
    """
    if n > MAX_ROWS:
        raise ValueError(f"the warp solver takes n <= {MAX_ROWS}; got {n}")
    itemsize = np.dtype(dtype).itemsize
    rows = max(rows or TARGET_BYTES // itemsize, min(r for r in ROWS_PER_THREAD if r * WARP_SIZE >= n))
    lanes = 1 << (max(1, -(-n // rows)) - 1).bit_length()
    threads = THREADS
    while threads > WARP_SIZE and 4 * threads * (rows + 1) * itemsize > _common.SHARED_BYTES:
        threads //= 2
    per_block = threads // lanes
    shared = 4 * threads * (rows + 1) * itemsize
    return rows, lanes, -(-batch // per_block), threads, shared


def run(a, b, c, d, x, info, rows=None, route=None, call=0, stream=None):
    """Solve the (batch, n) device systems (n <= :data:`MAX_ROWS`) into ``x``; failures go to
    ``info`` (see :mod:`.api`). ``rows`` overrides :func:`plan`'s choice of R; ``route`` and
    ``call``: the dominance test of :mod:`.auto`."""
    batch, n = x.shape
    rows, lanes, blocks, threads, shared = plan(batch, n, x.dtype, rows)
    launchers(kernels, x.dtype)[KERNELS[rows]](
        blocks,
        threads,
        a,
        b,
        c,
        d,
        x,
        info,
        lanes.bit_length() - 1,
        no_route() if route is None else route,
        call,
        shared=shared,
        stream=stream,
    )


def _argtypes(dtype):
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix = t[:, ::1]
    return (matrix, matrix, matrix, matrix, matrix, types.int32[::1], types.int64, types.int32[::1], types.int64)


def kernels(dtype):
    """Every kernel :func:`run` launches for ``dtype`` (one per ``R``), with numba argument types."""
    for rows in ROWS_PER_THREAD:
        yield KERNELS[rows], _argtypes(dtype)
