"""One level of the partitioned pivoting solver: chunks factored with partial pivoting, separators reduced.

Each system, padded in the indexing to whole chunks of ``S`` rows (identity rows ``(0, 1, 0,
0)``, ``x = 0``), is cut into chunks; thread ``k`` owns chunk ``k``: its first ``R = S - 1`` rows
(the *block* ``A_k``) and its last row, the *separator* ``s_k``. The block's rows couple to the
previous separator only through ``alpha`` (``a`` of its first row) and to its own separator only
through ``gamma`` (``c`` of its last row), so with ``x_s`` the separators' unknowns

    x_k = g - x_{s_{k-1}} v - x_{s_k} w,   g = A_k^{-1} d_k,   v = A_k^{-1} alpha e_1,   w = A_k^{-1} gamma e_R

(``v`` and ``w`` are SPIKE's spikes). Putting the block's first and last unknowns into the
separator rows ``a_s x_{last of k} + b_s x_{s_k} + c_s x_{first of k+1} = d_s`` leaves the
tridiagonal *reduced system* of the separators, one row per chunk (the Schur complement of the
blocks):

    (-a_s v_R) x_{s_{k-1}} + (b_s - a_s w_R - c_s v'_1) x_{s_k} + (-c_s w'_1) x_{s_{k+1}} = d_s - a_s g_R - c_s g'_1

(primes: chunk ``k + 1``'s). :func:`spike_reduce` factors every block by LU with partial
pivoting (:mod:`.lu`, three right-hand sides, U's rows written over the block's own slots of
shared memory) and writes the reduced rows; a block's last thread only lends its chunk's first
entries ``g'_1, v'_1, w'_1`` to its neighbour, since the blocks overlap by one chunk. The reduced
system is solved by :func:`.pivoting.levels`' route (another level, a block, or one thread per
system); :func:`spike_substitute` factors each block again with the separators' values moved to
the right-hand side (cheaper than storing U: registers and shared memory are free, bandwidth is
not) and writes ``x``, coalesced through shared memory as :mod:`.partition` does.

:func:`spike_block` does all of it in one launch when a system's chunks fit one block: U stays
in shared memory, the reduced system is solved there by one thread per system (LU with partial
pivoting over its separator slots, U's rows in the padding slots), and each block is
back-substituted from its stored U with ``g - x_{s_{k-1}} v - x_{s_k} w`` as right-hand side:
one read of the inputs and one write of ``x``, against three of each for a level and its
substitution.

Singularity and growth: a block with no nonzero pivot in some column is singular, and a block's
spikes may be large: :func:`spike_reduce` flags the system ``UNSTABLE`` when a block is singular
or its growth ``max(|v_1|, |v_R|, |w_1|, |w_R|, sigma |g_1| / delta, sigma |g_R| / delta)``
(``sigma``: the largest coefficient of the chunk, ``delta``: the largest ``|d|`` of its block;
every term is bounded by ``sigma ||A_k^{-1}||``) exceeds ``limit``; :func:`.pivoting.run`
re-solves flagged systems by the one-thread LU.
"""
import functools

import numpy as np
from numba import cuda, types

from ..primitives.chunk import chunk_loaders, chunk_storer
from ._common import UNSTABLE, fail, store
from .lu import carry, pivot


@functools.lru_cache(maxsize=None)
def kernels_for(rows):
    """``(spike_reduce, spike_substitute, spike_block)`` for chunks of ``rows`` rows (a power of two >= 4)."""
    quarters, _, _, load_chunks = chunk_loaders(rows)
    store_chunks = chunk_storer(rows, store)
    inner = rows - 1  # the block's rows; the chunk's last row is its separator

    @cuda.jit(device=True)
    def factor(sa, sb, sc, sd, base, zero, one):
        """LU with partial pivoting of the block whose chunk starts at slot ``base``, with the
        right-hand sides ``d``, ``alpha e_1`` and ``gamma e_R``: U's rows, divided by their
        pivots, over the block's slots (``sb``: upper, ``sc``: fill, ``sd``: d's, ``sa``:
        alpha's; gamma's is nonzero only in row ``R - 2``, returned as ``y_w``).

        Returns ``(g_1, v_1, w_1, g_R, v_R, w_R, y_w, growth, ok)``: the spikes' and g's first and
        last entries, the chunk's growth (module docstring) and False for a singular block.
        """
        alpha, gamma = sa[base], sc[base + inner - 1]
        sigma, delta = zero, zero
        for j in range(rows):
            sigma = max(sigma, abs(sa[base + j]), abs(sb[base + j]), abs(sc[base + j]))
        for j in range(inner):
            delta = max(delta, abs(sd[base + j]))
        p, q, rg = sb[base], sc[base] if inner > 1 else zero, sd[base]
        rv, rw = alpha, gamma if inner == 1 else zero
        ok = True
        y_w = zero
        for j in range(inner - 1):
            nxt = base + j + 1
            right = sc[nxt] if j + 2 < inner else zero
            inverse, upper, fill, f, swap, p, q, good = pivot(p, q, sa[nxt], sb[nxt], right, zero, one)
            ok = ok and good
            yg, rg = carry(swap, f, rg, sd[nxt])
            yv, rv = carry(swap, f, rv, zero)
            yw, rw = carry(swap, f, rw, gamma if j + 2 == inner else zero)
            sb[base + j], sc[base + j], sd[base + j], sa[base + j] = upper, fill, yg * inverse, yv * inverse
            y_w = yw * inverse
        ok = ok and p != zero
        inverse = one / (p if p != zero else one)
        g_last, v_last, w_last = rg * inverse, rv * inverse, rw * inverse
        g1, v1, w1 = g_last, v_last, w_last
        g2, v2, w2 = zero, zero, zero
        for j in range(inner - 2, -1, -1):
            upper, fill = sb[base + j], sc[base + j]
            g0 = sd[base + j] - upper * g1 - fill * g2
            v0 = sa[base + j] - upper * v1 - fill * v2
            w0 = (y_w if j == inner - 2 else zero) - upper * w1 - fill * w2
            g2, v2, w2, g1, v1, w1 = g1, v1, w1, g0, v0, w0
        growth = max(abs(v1), abs(v_last), abs(w1), abs(w_last))
        if delta > zero:
            growth = max(growth, sigma * max(abs(g1), abs(g_last)) / delta)
        return g1, v1, w1, g_last, v_last, w_last, y_w, growth, ok

    @cuda.jit(device=True)
    def reduced_row(separator, last, following, last_of_system, zero):
        """The separator's row of the reduced system from this chunk's last entries ``(g_R, v_R,
        w_R)`` and the next chunk's first ``(g'_1, v'_1, w'_1)`` (ignored for a system's last)."""
        a_s, b_s, c_s, d_s = separator
        g_last, v_last, w_last = last
        g_next, v_next, w_next = following
        if last_of_system:  # c_s is 0 there; the next chunk is another system's (or none)
            g_next, v_next, w_next = zero, zero, zero
        return -a_s * v_last, b_s - a_s * w_last - c_s * v_next, -c_s * w_next, d_s - a_s * g_last - c_s * g_next

    @cuda.jit
    def spike_reduce(a, b, c, d, ra, rb, rc, rd, info, limit):
        """Factor every block; write reduced row ``k`` of system ``m`` into ``r*[m, k]``."""
        batch = b.shape[0]
        chunks = ra.shape[1]
        zero, one = b.dtype.type(0), b.dtype.type(1)
        sa, sb, sc, sd = quarters(cuda.shared.array(0, b.dtype))
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        first = cuda.blockIdx.x * (threads - 1)  # the blocks overlap by one chunk
        load_chunks(a, b, c, d, sa, sb, sc, sd, chunks * rows, first)
        g = first + tid
        system, k = g // chunks, g % chunks
        base = tid * (rows + 1)
        g1, v1, w1, g_last, v_last, w_last, _, growth, ok = factor(sa, sb, sc, sd, base, zero, one)
        separator = sa[base + inner], sb[base + inner], sc[base + inner], sd[base + inner]
        # Lend the first entries to the previous thread, in the padding slot after the chunk.
        sa[base + rows], sb[base + rows], sc[base + rows] = g1, v1, w1
        cuda.syncthreads()
        if tid + 1 < threads and system < batch:
            following = base + rows + 1 + rows
            ra[system, k], rb[system, k], rc[system, k], rd[system, k] = reduced_row(
                separator, (g_last, v_last, w_last), (sa[following], sb[following], sc[following]),
                k + 1 == chunks, zero)
            if not (ok and growth <= limit):  # NaN fails too
                fail(info, system, UNSTABLE)

    @cuda.jit
    def spike_block(a, b, c, d, x, info, chunks, limit):
        """Whole systems of ``chunks`` chunks in one block (``blockDim.x / chunks`` of them):
        the blocks factored, the reduced system in shared memory solved by one thread per
        system (LU with partial pivoting), the chunks back-substituted from U kept in shared
        memory; one read of the inputs, one write of ``x``."""
        batch, n = x.shape
        padded = chunks * rows
        zero, one = b.dtype.type(0), b.dtype.type(1)
        sa, sb, sc, sd = quarters(cuda.shared.array(0, b.dtype))
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        first = cuda.blockIdx.x * threads
        load_chunks(a, b, c, d, sa, sb, sc, sd, padded, first)
        system, k = (first + tid) // chunks, tid % chunks
        span = rows + 1
        base = tid * span
        g1, v1, w1, g_last, v_last, w_last, y_w, growth, ok = factor(sa, sb, sc, sd, base, zero, one)
        separator = sa[base + inner], sb[base + inner], sc[base + inner], sd[base + inner]
        sa[base + rows], sb[base + rows], sc[base + rows] = g1, v1, w1
        cuda.syncthreads()
        following = base + span + rows
        row = reduced_row(separator, (g_last, v_last, w_last), (sa[following], sb[following], sc[following]) if k + 1 < chunks
                          else (zero, zero, zero), k + 1 == chunks, zero)
        sa[base + inner], sb[base + inner], sc[base + inner], sd[base + inner] = row
        if system < batch and not (ok and growth <= limit):
            fail(info, system, UNSTABLE)
        cuda.syncthreads()
        if k == 0:
            # The reduced system: row t in thread tid + t's separator slot; U's rows into the
            # padding slots, the solution over the separators' d.
            top = base + inner
            p, q, r = sb[top], sc[top] if chunks > 1 else zero, sd[top]
            solvable = True
            for t in range(chunks - 1):
                nxt = top + (t + 1) * span
                right = sc[nxt] if t + 2 < chunks else zero
                inverse, upper, fill, f, swap, p, q, good = pivot(p, q, sa[nxt], sb[nxt], right, zero, one)
                solvable = solvable and good
                y, r = carry(swap, f, r, sd[nxt])
                pad = base + t * span + rows
                sa[pad], sb[pad], sc[pad] = upper, fill, y * inverse
            solvable = solvable and p != zero
            if system < batch and not solvable:
                fail(info, system, UNSTABLE)
            after = r / (p if p != zero else one)
            beyond = zero
            sd[top + (chunks - 1) * span] = after
            for t in range(chunks - 2, -1, -1):
                pad = base + t * span + rows
                xt = sc[pad] - sa[pad] * after - sb[pad] * beyond
                sd[top + t * span] = xt
                after, beyond = xt, after
        cuda.syncthreads()
        # Back substitution in the chunk: x = g - x_before v - x_separator w, from U's rows.
        x_separator = sd[base + inner]
        x_before = sd[base - span + inner] if k > 0 else zero  # the previous chunk's separator
        x1 = g_last - x_before * v_last - x_separator * w_last
        x2 = zero
        sd[base + inner - 1] = x1
        for j in range(inner - 2, -1, -1):
            y = sd[base + j] - x_before * sa[base + j] - (x_separator * y_w if j == inner - 2 else zero)
            x0 = y - sb[base + j] * x1 - sc[base + j] * x2
            sd[base + j] = x0
            x2, x1 = x1, x0
        cuda.syncthreads()
        store_chunks(x, info, sd, padded, first)

    @cuda.jit
    def spike_substitute(a, b, c, d, xr, x, info):
        """Every block solved again with its separators' values ``xr`` moved to the right-hand
        side; ``x`` written coalesced through shared memory."""
        batch, n = x.shape
        chunks = xr.shape[1]
        padded = chunks * rows
        zero, one = b.dtype.type(0), b.dtype.type(1)
        sa, sb, sc, sd = quarters(cuda.shared.array(0, b.dtype))
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        first = cuda.blockIdx.x * threads
        load_chunks(a, b, c, d, sa, sb, sc, sd, padded, first)
        g = first + tid
        system, k = g // chunks, g % chunks
        base = tid * (rows + 1)
        x_before, x_separator = zero, zero
        if system < batch:
            x_separator = xr[system, k]
            if k > 0:
                x_before = xr[system, k - 1]
        sd[base] -= sa[base] * x_before
        sd[base + inner - 1] -= sc[base + inner - 1] * x_separator
        p, q, r = sb[base], sc[base] if inner > 1 else zero, sd[base]
        for j in range(inner - 1):
            nxt = base + j + 1
            right = sc[nxt] if j + 2 < inner else zero
            inverse, upper, fill, factor, swap, p, q, good = pivot(p, q, sa[nxt], sb[nxt], right, zero, one)
            y, r = carry(swap, factor, r, sd[nxt])
            sb[base + j], sc[base + j], sd[base + j] = upper, fill, y * inverse
        # A singular block was flagged by spike_reduce; its values here are replaced.
        x1 = r / (p if p != zero else one)
        x2 = zero
        sd[base + inner - 1] = x1
        for j in range(inner - 2, -1, -1):
            x0 = sd[base + j] - sb[base + j] * x1 - sc[base + j] * x2
            sd[base + j] = x0
            x2, x1 = x1, x0
        sd[base + inner] = x_separator
        cuda.syncthreads()
        store_chunks(x, info, sd, padded, first)

    return spike_reduce, spike_substitute, spike_block


def shared_bytes(threads, rows, dtype):
    """Dynamic shared memory of a launch: four coefficients, ``rows + 1`` slots a thread."""
    return 4 * threads * (rows + 1) * np.dtype(dtype).itemsize


def argtypes(dtype):
    """``(reduce's, substitute's, block's)`` numba argument types for ``dtype``."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix, info, i64 = t[:, ::1], types.int32[::1], types.int64
    return (matrix,) * 8 + (info, i64), (matrix,) * 6 + (info,), (matrix,) * 5 + (info, i64, i64)
