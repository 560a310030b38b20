"""Chunks of tridiagonal rows: a thread's ``rows`` consecutive rows, in shared memory and registers.

The warp solver and the partition method of :mod:`prefixsum.tridiag` give each thread a chunk of ``rows`` rows (a power
of two) of a system laid out as four coefficient arrays ``a, b, c, d``. :func:`chunk_loaders` copies a block's chunks
(from any chunk: the partitioned pivoting solver's blocks overlap) into shared memory coalesced (neighbouring threads
read neighbouring rows) and each thread's chunk from there into its registers; the shared buffers skip a slot every
``rows`` rows, so that the threads reading their own chunks hit different banks; :func:`chunk_storer` writes the
solution back from there the same way. :func:`chunk_partition` is the partition step on a chunk in registers, and
:func:`chunk_solution` a chunk's unknowns from its two ends, :func:`chunk_test` a test on every row of a chunk;
:func:`pcr_row` and :func:`pcr_lanes` solve the reduced system of the chunks' ends (Laszlo, Giles and Appleyard 2016):
an odd-even step, then PCR, by shuffles within a warp.
"""

import functools

from numba import cuda

from .warp import FULL_MASK


@cuda.jit(device=True)
def pivot_inverse(pivot, one):
    """``(1 / pivot, pivot != 0)``; 1 / 1 on a zero pivot, so no thread divides by zero (the
    system is reported anyway, and the simulator would warn)."""
    ok = pivot != 0
    return one / (pivot if ok else one), ok


@cuda.jit(device=True)
def pcr_row(row, up, down, one):
    """One PCR step on a normalised row ``(a, c, d)`` (``b = 1``) with the rows ``s`` above and
    below it (identity rows ``(0, 0, 0)`` past the system's ends): ``(a, c, d, ok)`` coupling the
    unknowns ``2 s`` away.

    It is also the odd-even (cyclic reduction) step on the partition's reduced system: chunk
    ``t``'s last row, with chunk ``t``'s first row above it and chunk ``t + 1``'s first below,
    becomes a row coupling the last unknowns of chunks ``t - 1``, ``t`` and ``t + 1``."""
    a, c, d = row
    au, cu, du = up
    ad, cd, dd = down
    inverse, ok = pivot_inverse(one - a * cu - c * ad, one)
    return -a * au * inverse, -c * cd * inverse, (d - a * du - c * dd) * inverse, ok


@cuda.jit(device=True)
def pcr_lanes(a, c, d, lane, lanes, zero, one):
    """PCR on one normalised row ``(a, c, d)`` per lane of a group of ``lanes`` lanes (a power
    of two, at most a warp; every lane of the warp calls it): ``log2(lanes)`` steps, each
    fetching the rows ``s`` lanes up and down with ``shfl_up_sync``/``shfl_down_sync``, no
    shared memory, no barrier. A lane treats anything from outside its group as an identity row.
    Returns ``(x, ok)``: this lane's unknown, and False if a pivot was zero."""
    ok = True
    s = 1
    while s < lanes:
        au = cuda.shfl_up_sync(FULL_MASK, a, s)
        cu = cuda.shfl_up_sync(FULL_MASK, c, s)
        du = cuda.shfl_up_sync(FULL_MASK, d, s)
        ad = cuda.shfl_down_sync(FULL_MASK, a, s)
        cd = cuda.shfl_down_sync(FULL_MASK, c, s)
        dd = cuda.shfl_down_sync(FULL_MASK, d, s)
        if lane < s:
            au, cu, du = zero, zero, zero
        if lane + s >= lanes:
            ad, cd, dd = zero, zero, zero
        a, c, d, good = pcr_row((a, c, d), (au, cu, du), (ad, cd, dd), one)
        ok = ok and good
        s *= 2
    return d, ok


@functools.lru_cache(maxsize=None)
def chunk_partition(rows):
    """Device function ``partition(la, lb, lc, ld, one)``: the partition step on a chunk of
    ``rows`` rows (a power of two >= 2) in registers, made once per ``rows``; the warp and block
    solvers and the partition method use it (:mod:`prefixsum.tridiag.warp`,
    :mod:`prefixsum.tridiag.block`, :mod:`prefixsum.tridiag.partition`)."""

    @cuda.jit(device=True)
    def partition(la, lb, lc, ld, one):
        """Step 2 in registers: rows end as ``x_k = d_k - a_k x_0 - c_k x_{R-1}`` (``b_k = 1``).

        Returns False if a pivot was zero."""
        inverse, ok = pivot_inverse(lb[0], one)
        la[0] *= inverse
        lc[0] *= inverse
        ld[0] *= inverse
        inverse, good = pivot_inverse(lb[1], one)
        ok = ok and good
        la[1] *= inverse
        lc[1] *= inverse
        ld[1] *= inverse
        # Forward: row k - 1 is a_{k-1} x_0 + x_{k-1} + c_{k-1} x_k = d_{k-1}; subtracting a_k
        # times it from row k replaces x_{k-1} by x_0.
        for k in range(2, rows):
            inverse, good = pivot_inverse(lb[k] - la[k] * lc[k - 1], one)
            ok = ok and good
            ld[k] = (ld[k] - la[k] * ld[k - 1]) * inverse
            la[k] = -la[k] * la[k - 1] * inverse
            lc[k] = lc[k] * inverse
        # Backward: row k + 1 now reads a_{k+1} x_0 + x_{k+1} + c_{k+1} x_{R-1} = d_{k+1};
        # substituting its x_{k+1} into row k leaves x_0, x_k, x_{R-1}. Row R - 2 is already so.
        for k in range(rows - 3, 0, -1):
            ld[k] -= lc[k] * ld[k + 1]
            la[k] -= lc[k] * la[k + 1]
            lc[k] = -lc[k] * lc[k + 1]
        if rows > 2:
            # Row 0 couples x_{-1} (the previous chunk's last), x_0 and x_1: substituting x_1
            # leaves x_{-1}, x_0 and x_{R-1}.
            inverse, good = pivot_inverse(one - lc[0] * la[1], one)
            ok = ok and good
            ld[0] = (ld[0] - lc[0] * ld[1]) * inverse
            la[0] *= inverse
            lc[0] = -lc[0] * lc[1] * inverse
        return ok

    return partition


@functools.lru_cache(maxsize=None)
def chunk_solution(rows):
    """Device function ``solution(sd, base, la, lc, ld, x_first, x_last)``: a chunk's ``rows``
    unknowns, once its partition step has run (:func:`chunk_partition`) and its two end unknowns
    are known, into the slots ``sd[base:base + rows]`` (its own: only this thread has read them),
    from where the block stores them coalesced."""

    @cuda.jit(device=True)
    def solution(sd, base, la, lc, ld, x_first, x_last):
        sd[base] = x_first
        for k in range(1, rows - 1):
            sd[base + k] = ld[k] - la[k] * x_first - lc[k] * x_last
        sd[base + rows - 1] = x_last

    return solution


@functools.lru_cache(maxsize=None)
def chunk_loaders(rows):
    """``(quarters, load_block, chunk, load_chunks)``: the device functions that bring a block's chunks of
    ``rows`` rows (a power of two >= 2) into shared memory and a thread's chunk into registers."""
    shift = rows.bit_length() - 1

    @cuda.jit(device=True)
    def quarters(shared):
        """The four buffers ``(a, b, c, d)`` of a block's ``blockDim.x * rows`` rows in its shared
        memory, with one slot of padding every ``rows`` rows (a thread's chunk starts at an odd
        stride: no bank conflicts when each thread reads its own)."""
        slots = cuda.blockDim.x * (rows + 1)
        return shared[:slots], shared[slots : 2 * slots], shared[2 * slots : 3 * slots], shared[3 * slots : 4 * slots]

    @cuda.jit(device=True)
    def load_chunks(a, b, c, d, sa, sb, sc, sd, padded, first):
        """Copy ``blockDim.x`` chunks, from chunk ``first`` of the systems laid end to end (each
        padded to ``padded`` rows, a multiple of ``rows``, at least n), into the shared buffers,
        neighbouring threads reading neighbouring addresses; identity rows in the padding and
        past the last system, and ``a`` of a system's first row and ``c`` of its last set to 0
        (ignored, whatever they hold). Rows are stepped through as (system, column) without a
        division per row."""
        batch, n = b.shape
        zero, one = b.dtype.type(0), b.dtype.type(1)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        start = first * rows + tid
        s, i = start // padded, start % padded
        step_s, step_i = threads // padded, threads % padded
        for j in range(tid, threads * rows, threads):
            k = j + (j >> shift)
            if s < batch and i < n:
                sa[k] = a[s, i] if i > 0 else zero
                sb[k] = b[s, i]
                sc[k] = c[s, i] if i + 1 < n else zero
                sd[k] = d[s, i]
            else:
                sa[k], sb[k], sc[k], sd[k] = zero, one, zero, zero
            s += step_s
            i += step_i
            if i >= padded:
                i -= padded
                s += 1
        cuda.syncthreads()

    @cuda.jit(device=True)
    def load_block(a, b, c, d, sa, sb, sc, sd, padded):
        """Copy the block's rows of the systems laid end to end, each padded to ``padded`` rows
        (a multiple of ``rows``, at least n), into the shared buffers: :func:`load_chunks` from
        chunk ``blockIdx.x * blockDim.x``, the chunks of the blocks side by side."""
        load_chunks(a, b, c, d, sa, sb, sc, sd, padded, cuda.blockIdx.x * cuda.blockDim.x)

    @cuda.jit(device=True)
    def chunk(sa, sb, sc, sd, la, lb, lc, ld):
        """This thread's chunk from the shared buffers into its registers."""
        base = cuda.threadIdx.x * (rows + 1)
        for k in range(rows):
            la[k], lb[k], lc[k], ld[k] = sa[base + k], sb[base + k], sc[base + k], sd[base + k]

    return quarters, load_block, chunk, load_chunks


@functools.lru_cache(maxsize=None)
def chunk_storer(rows, store):
    """Device function ``store_chunks(x, info, sd, padded, first)``: the other half of
    ``load_chunks`` (:func:`chunk_loaders`), for the solution.

    Writes ``blockDim.x`` chunks of ``x`` (batch, n), from chunk ``first`` of the systems laid end
    to end (each padded to ``padded`` rows), from the shared slots ``sd`` where they were loaded,
    neighbouring threads writing neighbouring addresses; the padding and the rows past the last
    system are not written. ``store(x, info, system, i, value)`` writes one value (the solver's
    own, which reports a value that is not finite in ``info``).
    """
    shift = rows.bit_length() - 1

    @cuda.jit(device=True)
    def store_chunks(x, info, sd, padded, first):
        batch, n = x.shape
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        start = first * rows + tid
        s, i = start // padded, start % padded
        step_s, step_i = threads // padded, threads % padded
        for j in range(tid, threads * rows, threads):
            if s < batch and i < n:
                store(x, info, s, i, sd[j + (j >> shift)])
            s += step_s
            i += step_i
            if i >= padded:
                i -= padded
                s += 1

    return store_chunks


@functools.lru_cache(maxsize=None)
def chunk_test(rows, test):
    """Device function ``holds(sa, sb, sc, base)``: whether ``test(a, b, c)`` holds on every row
    of the chunk of ``rows`` rows at slot ``base`` of the shared buffers (padding rows included:
    :func:`chunk_loaders` makes them identity rows)."""

    @cuda.jit(device=True)
    def holds(sa, sb, sc, base):
        every = True
        for k in range(rows):
            every = every and test(sa[base + k], sb[base + k], sc[base + k])
        return every

    return holds


@functools.lru_cache(maxsize=None)
def chunk_kernel_parts(rows, store):
    """``(partitioned, quarters, load_block, solution, store_chunks)``: what a kernel that
    solves chunks of ``rows`` rows in registers takes from this module (the partition method's
    and the block solver's), with ``store`` for :func:`chunk_storer`. ``partitioned(sa, sb, sc,
    sd, la, lb, lc, ld, one)`` reads this thread's chunk from the shared buffers into its
    registers and runs the partition step on it (False on a zero pivot)."""
    quarters, load_block, chunk, _ = chunk_loaders(rows)
    partition = chunk_partition(rows)

    @cuda.jit(device=True)
    def partitioned(sa, sb, sc, sd, la, lb, lc, ld, one):
        chunk(sa, sb, sc, sd, la, lb, lc, ld)
        return partition(la, lb, lc, ld, one)

    return partitioned, quarters, load_block, chunk_solution(rows), chunk_storer(rows, store)
