"""The kernels of the partitioned pivoting solve: chunks eliminated by :mod:`.elimination`, level by level.

A thread owns a *chunk* of ``R`` pairs (``2R`` rows of the tridiagonal system at level 0, ``R``
pairs of a reduced system above it), loaded into shared memory with neighbouring threads
reading neighbouring addresses (:func:`prefixsum.primitives.chunk.chunk_loaders` for rows,
:func:`pair_loader` for pairs) and eliminated there (:func:`chunk_pass`). Three kinds of kernel,
each for rows (the system, ``*_rows``) and for pairs (a reduced system, ``*_pairs``):

* ``reduce``: every chunk eliminated, its reduced pair written to the next level's ``(10,
  batch, chunks)`` array (the upper row's window coefficients and right-hand side, then the lower's);
* ``substitute``: once the next level is solved, every chunk eliminated again with its first and
  last unknowns and its neighbours' known, its pivot rows kept over the slots of the pairs they
  came from, then back-substituted; x written coalesced;
* ``block``: whole systems of at most ``blockDim.x`` chunks in one block: the chunks reduced,
  the system's reduced pairs eliminated by one thread in shared memory (the *top*: every column
  but the system's first and last, then a 2 x 2 solve with pivoting, :func:`.elimination.ends`),
  the chunks substituted: one read of the inputs, one write of x.

Failures: a column with no nonzero candidate means the matrix is singular. ``reduce`` kernels
record it in ``pinfo`` (the pivoting solve's own flags, one per system, zero between calls);
the top thread of each system, the only thread that writes the system's ``info``, writes
``SINGULAR`` or 0 there (so that a verdict of another method for the same call is replaced),
clears ``pinfo`` and, for a singular system, makes its solution NaN; the stores report a
non-finite value as ``NOT_FINITE`` (atomic max: ``SINGULAR`` stays).

Masks: with ``call`` not 0 a kernel solves only the systems whose ``route`` entry is ``call``
(:mod:`.auto` routes there the systems that are not diagonally dominant) and writes nothing for
the others; a block with none of them returns at once.
"""
import functools
import math

import numpy as np
from numba import cuda, types

from ..primitives.chunk import chunk_loaders, chunk_storer
from ._common import NOT_FINITE, SINGULAR
from .elimination import ends, folded, opening, pair_step, reduced_pair

FIELDS = 10
"""Values of a pair in memory: the upper row's ``(w0, w1, w2, w3, r)``, then the lower's."""


@cuda.jit(device=True)
def routed(system, batch, route, call):
    """Whether this call solves ``system``: every system of the batch, or with ``call`` not 0
    those whose ``route`` entry is ``call``."""
    return system < batch and (call == 0 or route[system] == call)


@cuda.jit(device=True)
def masked_store(x, where, system, i, value):
    """Write ``x[system, i]`` if the call solves ``system`` (``where = (info, route, call)``),
    reporting a non-finite value in ``info``."""
    info, route, call = where
    if call == 0 or route[system] == call:
        x[system, i] = value
        if not math.isfinite(value):
            cuda.atomic.max(info, system, NOT_FINITE)


@cuda.jit(device=True)
def row_pair(buf, slots, base, j, zero):
    """Pair ``j`` of the chunk whose rows start at slot ``base`` of the four planes ``a, b, c, d``."""
    r = base + 2 * j
    return ((buf[r], buf[slots + r], buf[2 * slots + r], zero, buf[3 * slots + r]),
            (zero, buf[r + 1], buf[slots + r + 1], buf[2 * slots + r + 1], buf[3 * slots + r + 1]))


@cuda.jit(device=True)
def pair_at(buf, slots, base, j, zero):
    """Pair ``j`` of the chunk whose pairs start at slot ``base`` of the :data:`FIELDS` planes."""
    s = base + j
    return ((buf[s], buf[slots + s], buf[2 * slots + s], buf[3 * slots + s], buf[4 * slots + s]),
            (buf[5 * slots + s], buf[6 * slots + s], buf[7 * slots + s], buf[8 * slots + s], buf[9 * slots + s]))


@cuda.jit(device=True)
def keep_nothing(buf, slots, base, j, first, second):
    """The reduce pass keeps no pivot rows."""


@cuda.jit(device=True)
def keep_over_rows(buf, slots, base, j, first, second):
    """Pair ``j``'s pivot rows (spikes folded) over its two rows: ``(u1, u2, u3, r)`` over row
    ``2j``'s ``a, b, c, d``, ``(u1, u2, r)`` over row ``2j + 1``'s ``a, b, c``."""
    r = base + 2 * j
    buf[r], buf[slots + r], buf[2 * slots + r], buf[3 * slots + r] = first[0], first[1], first[2], first[5]
    buf[r + 1], buf[slots + r + 1], buf[2 * slots + r + 1] = second[0], second[1], second[4]


@cuda.jit(device=True)
def keep_over_pairs(buf, slots, base, j, first, second):
    """Pair ``j``'s pivot rows (spikes folded) over planes 0-3 and 4-6 of its slot."""
    s = base + j
    buf[s], buf[slots + s], buf[2 * slots + s], buf[3 * slots + s] = first[0], first[1], first[2], first[5]
    buf[4 * slots + s], buf[5 * slots + s], buf[6 * slots + s] = second[0], second[1], second[4]


@cuda.jit(device=True)
def keep_with_spike(buf, slots, base, j, first, second):
    """The top's pivot rows, which keep their spike on the system's first unknown: ``(u1, u2,
    u3, s0, r)`` over planes 0-4, ``(u1, u2, s0, r)`` over planes 5-8."""
    s = base + j
    buf[s], buf[slots + s], buf[2 * slots + s], buf[3 * slots + s], buf[4 * slots + s] = (
        first[0], first[1], first[2], first[4], first[5])
    buf[5 * slots + s], buf[6 * slots + s], buf[7 * slots + s], buf[8 * slots + s] = second[0], second[1], second[3], second[4]


@functools.lru_cache(maxsize=None)
def chunk_pass(get, keep):
    """Device function ``eliminate(buf, slots, base, count, x_before, x_first, fold, zero, one)``:
    the :func:`.elimination.pair_step` of pairs ``1 .. count - 1`` of the chunk at ``base`` (its
    pairs read by ``get``, its pivot rows kept by ``keep``), from the rows of its pair 0, their
    spikes moved to the right-hand side where ``fold`` (the chunk's columns -1 and 0 known:
    ``x_before``, ``x_first``). Returns the two rows left and False if A is singular."""

    @cuda.jit(device=True)
    def eliminate(buf, slots, base, count, x_before, x_first, fold, zero, one):
        upper, lower = get(buf, slots, base, 0, zero)
        k, l = opening(upper, lower, zero)
        if fold:
            k, l = folded(k, x_before, x_first, zero), folded(l, x_before, x_first, zero)
        ok = True
        for j in range(1, count):
            upper, lower = get(buf, slots, base, j, zero)
            k, l, first, second, good = pair_step(k, l, upper, lower, zero, one)
            ok = ok and good
            keep(buf, slots, base, j, first, second)
        return k, l, ok

    return eliminate


@cuda.jit(device=True)
def back_over_rows(buf, slots, base, count, x_first, x_last, x_after):
    """Back substitution from :func:`keep_over_rows`' pivot rows: ``x_i`` into row ``i``'s ``d``."""
    d = 3 * slots
    x1, x2 = x_last, x_after  # x_{2j+1}, x_{2j+2}
    for j in range(count - 1, 0, -1):
        r = base + 2 * j
        x0 = buf[2 * slots + r + 1] - buf[r + 1] * x1 - buf[slots + r + 1] * x2
        xm = buf[d + r] - buf[r] * x0 - buf[slots + r] * x1 - buf[2 * slots + r] * x2
        buf[d + r], buf[d + r - 1] = x0, xm
        x1, x2 = xm, x0
    buf[d + base], buf[d + base + 2 * count - 1] = x_first, x_last


@cuda.jit(device=True)
def back_over_pairs(buf, slots, base, count, x_first, x_last, x_after):
    """Back substitution from :func:`keep_over_pairs`' pivot rows: pair ``j``'s unknowns into its
    planes 7 and 8."""
    x1, x2 = x_last, x_after
    for j in range(count - 1, 0, -1):
        s = base + j
        x0 = buf[6 * slots + s] - buf[4 * slots + s] * x1 - buf[5 * slots + s] * x2
        xm = buf[3 * slots + s] - buf[s] * x0 - buf[slots + s] * x1 - buf[2 * slots + s] * x2
        buf[7 * slots + s], buf[8 * slots + s - 1] = x0, xm
        x1, x2 = xm, x0
    buf[7 * slots + base], buf[8 * slots + base + count - 1] = x_first, x_last


@cuda.jit(device=True)
def back_with_spike(buf, slots, base, count, x_first, x_last, zero):
    """The top's back substitution from :func:`keep_with_spike`' pivot rows: unknown ``2j`` into
    pair ``j``'s plane 0, ``2j + 1`` into its plane 9."""
    x1, x2 = x_last, zero  # x_{2j+1}, x_{2j+2}: nothing beyond the system's last
    for j in range(count - 1, 0, -1):
        s = base + j
        x0 = buf[8 * slots + s] - buf[5 * slots + s] * x1 - buf[6 * slots + s] * x2 - buf[7 * slots + s] * x_first
        xm = (buf[4 * slots + s] - buf[s] * x0 - buf[slots + s] * x1 - buf[2 * slots + s] * x2
              - buf[3 * slots + s] * x_first)
        buf[s], buf[9 * slots + s - 1] = x0, xm
        x1, x2 = xm, x0
    buf[base], buf[9 * slots + base + count - 1] = x_first, x_last


@cuda.jit(device=True)
def write_pair(out, system, k, upper, lower):
    out[0, system, k], out[1, system, k], out[2, system, k], out[3, system, k], out[4, system, k] = upper
    out[5, system, k], out[6, system, k], out[7, system, k], out[8, system, k], out[9, system, k] = lower


@cuda.jit(device=True)
def neighbours(xr, system, k, chunks, zero):
    """``(x_before, x_first, x_last, x_after)`` of chunk ``k`` from the next level's solution."""
    x_before = xr[system, 2 * k - 1] if k > 0 else zero
    x_after = xr[system, 2 * k + 2] if k + 1 < chunks else zero
    return x_before, xr[system, 2 * k], xr[system, 2 * k + 1], x_after


_top_pass = chunk_pass(pair_at, keep_with_spike)


@cuda.jit(device=True)
def top(buf, slots, base, chunks, system, info, pinfo, ok, zero, one, nan):
    """One thread's solve of a system's reduced pairs at slots ``base ..`` of the pair planes:
    every column but the first and last eliminated (:func:`keep_with_spike`), the 2 x 2 of those
    two, back substitution; the system's verdict (this kernel's ``ok``, the levels' ``pinfo``)
    into ``info`` (a singular system's unknowns NaN)."""
    k, l, good = _top_pass(buf, slots, base, chunks, zero, zero, False, zero, one)
    x_first, x_last, solvable = ends(k, l, zero, one)
    if ok and good and solvable and pinfo[system] == 0:
        info[system] = 0
    else:
        info[system] = SINGULAR
        x_first, x_last = nan, nan
    pinfo[system] = 0
    back_with_spike(buf, slots, base, chunks, x_first, x_last, zero)


@functools.lru_cache(maxsize=None)
def pair_loader(pairs):
    """``(load_pairs, store_pairs)`` for chunks of ``pairs`` pairs (a power of two): a block's
    chunks of a reduced system into the :data:`FIELDS` shared planes of ``blockDim.x * (pairs +
    1)`` slots (a slot of padding every ``pairs``: each thread's chunk starts at an odd stride),
    identity pairs past a system's end; and a level's solution from planes 7 and 8 back out.
    Both step through ``(system, pair)`` without a division per pair, neighbouring threads on
    neighbouring addresses."""
    shift = pairs.bit_length() - 1

    @cuda.jit(device=True)
    def load_pairs(p, buf, slots, padded, first):
        """Chunks ``first ..`` of the ``(FIELDS, batch, count)`` pairs ``p``, each system padded to ``padded`` pairs."""
        batch, count = p.shape[1], p.shape[2]
        zero, one = p.dtype.type(0), p.dtype.type(1)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        start = first * pairs + tid
        s, i = start // padded, start % padded
        step_s, step_i = threads // padded, threads % padded
        for j in range(tid, threads * pairs, threads):
            k = j + (j >> shift)
            if s < batch and i < count:
                for f in range(FIELDS):
                    buf[f * slots + k] = p[f, s, i]
            else:  # unknowns 2i and 2i + 1 alone, both 0
                for f in range(FIELDS):
                    buf[f * slots + k] = one if f == 1 or f == 7 else zero
            s += step_s
            i += step_i
            if i >= padded:
                i -= padded
                s += 1
        cuda.syncthreads()

    @cuda.jit(device=True)
    def store_pairs(sol, buf, slots, padded, first, route, call):
        """The unknowns of the block's pairs (planes 7 and 8) into ``sol`` (batch, 2 count), for
        the systems this call solves."""
        batch, count = sol.shape[0], sol.shape[1] // 2
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        start = first * pairs + tid
        s, i = start // padded, start % padded
        step_s, step_i = threads // padded, threads % padded
        for j in range(tid, threads * pairs, threads):
            k = j + (j >> shift)
            if i < count and routed(s, batch, route, call):
                sol[s, 2 * i], sol[s, 2 * i + 1] = buf[7 * slots + k], buf[8 * slots + k]
            s += step_s
            i += step_i
            if i >= padded:
                i -= padded
                s += 1

    return load_pairs, store_pairs


@cuda.jit(device=True)
def put_pair(buf, slots, s, upper, lower):
    """A pair into slot ``s`` of the :data:`FIELDS` planes."""
    buf[s], buf[slots + s], buf[2 * slots + s], buf[3 * slots + s], buf[4 * slots + s] = upper
    buf[5 * slots + s], buf[6 * slots + s], buf[7 * slots + s], buf[8 * slots + s], buf[9 * slots + s] = lower


@cuda.jit(device=True)
def topped(area, threads, tid, k, chunks, system, mine, info, pinfo, zero, one, nan):
    """The block kernels' middle: each thread's reduced pair is in slot ``tid`` of ``area``; the
    first thread of each system solves them (:func:`top`); every thread gets back its chunk's
    ``(x_before, x_first, x_last, x_after)``."""
    cuda.syncthreads()
    if k == 0 and mine:
        top(area, threads, tid, chunks, system, info, pinfo, True, zero, one, nan)
    cuda.syncthreads()
    x_before = area[9 * threads + tid - 1] if k > 0 else zero
    x_after = area[tid + 1] if k + 1 < chunks else zero
    return x_before, area[tid], area[9 * threads + tid], x_after


@functools.lru_cache(maxsize=None)
def row_kernels(pairs):
    """``(reduce_rows, substitute_rows, block_rows)`` for chunks of ``pairs`` pairs (``2 pairs``
    rows of the system; a power of two >= 2)."""
    rows = 2 * pairs
    quarters, _, _, load_chunks = chunk_loaders(rows)
    store_chunks = chunk_storer(rows, masked_store)
    reduce_pass = chunk_pass(row_pair, keep_nothing)
    solve_pass = chunk_pass(row_pair, keep_over_rows)

    @cuda.jit
    def reduce_rows(a, b, c, d, out, pinfo, route, call):
        """Level 0 of the levels: chunk ``k`` of system ``m``'s reduced pair into ``out[:, m, k]``."""
        batch, chunks = b.shape[0], out.shape[2]
        zero, one = b.dtype.type(0), b.dtype.type(1)
        shared = cuda.shared.array(0, b.dtype)
        sa, sb, sc, sd = quarters(shared)
        tid, first = cuda.threadIdx.x, cuda.blockIdx.x * cuda.blockDim.x
        system, k = (first + tid) // chunks, (first + tid) % chunks
        mine = routed(system, batch, route, call)
        if not cuda.syncthreads_or(np.int32(mine)):
            return
        load_chunks(a, b, c, d, sa, sb, sc, sd, chunks * rows, first)
        last_k, last_l, ok = reduce_pass(shared, sa.shape[0], tid * (rows + 1), pairs, zero, zero, False, zero, one)
        if mine:
            upper, lower = reduced_pair(last_k, last_l)
            write_pair(out, system, k, upper, lower)
            if not ok:
                cuda.atomic.max(pinfo, system, SINGULAR)

    @cuda.jit
    def substitute_rows(a, b, c, d, xr, x, info, route, call):
        """Every chunk again, its ends and neighbours from level 1's solution ``xr``; x out."""
        batch, chunks = b.shape[0], xr.shape[1] // 2
        zero, one = b.dtype.type(0), b.dtype.type(1)
        shared = cuda.shared.array(0, b.dtype)
        sa, sb, sc, sd = quarters(shared)
        tid, first = cuda.threadIdx.x, cuda.blockIdx.x * cuda.blockDim.x
        system, k = (first + tid) // chunks, (first + tid) % chunks
        mine = routed(system, batch, route, call)
        if not cuda.syncthreads_or(np.int32(mine)):
            return
        load_chunks(a, b, c, d, sa, sb, sc, sd, chunks * rows, first)
        x_before, x_first, x_last, x_after = zero, zero, zero, zero
        if mine:
            x_before, x_first, x_last, x_after = neighbours(xr, system, k, chunks, zero)
        base = tid * (rows + 1)
        solve_pass(shared, sa.shape[0], base, pairs, x_before, x_first, True, zero, one)
        back_over_rows(shared, sa.shape[0], base, pairs, x_first, x_last, x_after)
        cuda.syncthreads()
        store_chunks(x, (info, route, call), sd, chunks * rows, first)

    @cuda.jit
    def block_rows(a, b, c, d, x, info, pinfo, route, call, chunks):
        """Whole systems of ``chunks`` chunks, ``blockDim.x / chunks`` of them a block."""
        batch = b.shape[0]
        zero, one, nan = b.dtype.type(0), b.dtype.type(1), b.dtype.type(np.nan)
        shared = cuda.shared.array(0, b.dtype)
        sa, sb, sc, sd = quarters(shared)
        slots = sa.shape[0]
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        first = cuda.blockIdx.x * threads
        system, k = (first + tid) // chunks, tid % chunks
        mine = routed(system, batch, route, call)
        if not cuda.syncthreads_or(np.int32(mine)):
            return
        load_chunks(a, b, c, d, sa, sb, sc, sd, chunks * rows, first)
        base = tid * (rows + 1)
        last_k, last_l, ok = reduce_pass(shared, slots, base, pairs, zero, zero, False, zero, one)
        area = shared[4 * slots:4 * slots + 10 * threads]
        upper, lower = reduced_pair(last_k, last_l)
        put_pair(area, threads, tid, upper, lower)
        if mine and not ok:
            cuda.atomic.max(pinfo, system, SINGULAR)
        x_before, x_first, x_last, x_after = topped(area, threads, tid, k, chunks, system, mine, info, pinfo, zero,
                                                    one, nan)
        solve_pass(shared, slots, base, pairs, x_before, x_first, True, zero, one)
        back_over_rows(shared, slots, base, pairs, x_first, x_last, x_after)
        cuda.syncthreads()
        store_chunks(x, (info, route, call), sd, chunks * rows, first)

    return reduce_rows, substitute_rows, block_rows


@functools.lru_cache(maxsize=None)
def pair_kernels(pairs):
    """``(reduce_pairs, substitute_pairs, block_pairs)``: :func:`row_kernels`' three on a reduced
    system, chunks of ``pairs`` pairs (a power of two >= 2)."""
    load_pairs, store_pairs = pair_loader(pairs)
    reduce_pass = chunk_pass(pair_at, keep_nothing)
    solve_pass = chunk_pass(pair_at, keep_over_pairs)

    @cuda.jit
    def reduce_pairs(p, out, pinfo, route, call):
        """A level above the first: chunk ``k`` of system ``m``'s reduced pair into ``out[:, m, k]``."""
        batch, chunks = p.shape[1], out.shape[2]
        zero, one = p.dtype.type(0), p.dtype.type(1)
        shared = cuda.shared.array(0, p.dtype)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        slots = threads * (pairs + 1)
        first = cuda.blockIdx.x * threads
        system, k = (first + tid) // chunks, (first + tid) % chunks
        mine = routed(system, batch, route, call)
        if not cuda.syncthreads_or(np.int32(mine)):
            return
        load_pairs(p, shared, slots, chunks * pairs, first)
        last_k, last_l, ok = reduce_pass(shared, slots, tid * (pairs + 1), pairs, zero, zero, False, zero, one)
        if mine:
            upper, lower = reduced_pair(last_k, last_l)
            write_pair(out, system, k, upper, lower)
            if not ok:
                cuda.atomic.max(pinfo, system, SINGULAR)

    @cuda.jit
    def substitute_pairs(p, xr, sol, route, call):
        """Every chunk again, its ends and neighbours from the next level's solution ``xr``;
        this level's solution into ``sol``."""
        batch, chunks = p.shape[1], xr.shape[1] // 2
        zero, one = p.dtype.type(0), p.dtype.type(1)
        shared = cuda.shared.array(0, p.dtype)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        slots = threads * (pairs + 1)
        first = cuda.blockIdx.x * threads
        system, k = (first + tid) // chunks, (first + tid) % chunks
        mine = routed(system, batch, route, call)
        if not cuda.syncthreads_or(np.int32(mine)):
            return
        load_pairs(p, shared, slots, chunks * pairs, first)
        x_before, x_first, x_last, x_after = zero, zero, zero, zero
        if mine:
            x_before, x_first, x_last, x_after = neighbours(xr, system, k, chunks, zero)
        base = tid * (pairs + 1)
        solve_pass(shared, slots, base, pairs, x_before, x_first, True, zero, one)
        back_over_pairs(shared, slots, base, pairs, x_first, x_last, x_after)
        cuda.syncthreads()
        store_pairs(sol, shared, slots, chunks * pairs, first, route, call)

    @cuda.jit
    def block_pairs(p, sol, info, pinfo, route, call, chunks):
        """The top level: whole reduced systems of ``chunks`` chunks in one block."""
        batch = p.shape[1]
        zero, one, nan = p.dtype.type(0), p.dtype.type(1), p.dtype.type(np.nan)
        shared = cuda.shared.array(0, p.dtype)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        slots = threads * (pairs + 1)
        first = cuda.blockIdx.x * threads
        system, k = (first + tid) // chunks, tid % chunks
        mine = routed(system, batch, route, call)
        if not cuda.syncthreads_or(np.int32(mine)):
            return
        load_pairs(p, shared, slots, chunks * pairs, first)
        base = tid * (pairs + 1)
        last_k, last_l, ok = reduce_pass(shared, slots, base, pairs, zero, zero, False, zero, one)
        area = shared[FIELDS * slots:FIELDS * slots + FIELDS * threads]
        upper, lower = reduced_pair(last_k, last_l)
        put_pair(area, threads, tid, upper, lower)
        if mine and not ok:
            cuda.atomic.max(pinfo, system, SINGULAR)
        x_before, x_first, x_last, x_after = topped(area, threads, tid, k, chunks, system, mine, info, pinfo, zero,
                                                    one, nan)
        solve_pass(shared, slots, base, pairs, x_before, x_first, True, zero, one)
        back_over_pairs(shared, slots, base, pairs, x_first, x_last, x_after)
        cuda.syncthreads()
        store_pairs(sol, shared, slots, chunks * pairs, first, route, call)

    return reduce_pairs, substitute_pairs, block_pairs


def row_shared_bytes(threads, pairs, dtype, block=False):
    """Dynamic shared memory of a rows kernel: four planes of ``2 pairs + 1`` slots a thread
    (and for the block kernel the reduced pairs, :data:`FIELDS` slots a thread)."""
    return (4 * (2 * pairs + 1) + (FIELDS if block else 0)) * threads * np.dtype(dtype).itemsize


def pair_shared_bytes(threads, pairs, dtype, block=False):
    """Dynamic shared memory of a pairs kernel: :data:`FIELDS` planes of ``pairs + 1`` slots a
    thread (and for the block kernel the reduced pairs)."""
    return FIELDS * ((pairs + 1) + (1 if block else 0)) * threads * np.dtype(dtype).itemsize


def argtypes(dtype):
    """Numba argument types, ``{kernel name: types}``, of the six kernels for ``dtype``."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix, planes, flags, i64 = t[:, ::1], t[:, :, ::1], types.int32[::1], types.int64
    return {"reduce_rows": (matrix,) * 4 + (planes, flags, flags, i64),
            "substitute_rows": (matrix,) * 6 + (flags, flags, i64),
            "block_rows": (matrix,) * 5 + (flags, flags, flags, i64, i64),
            "reduce_pairs": (planes, planes, flags, flags, i64),
            "substitute_pairs": (planes, matrix, matrix, flags, i64),
            "block_pairs": (planes, matrix, flags, flags, flags, i64, i64)}


ROW_KERNELS = ("reduce_rows", "substitute_rows", "block_rows")
PAIR_KERNELS = ("reduce_pairs", "substitute_pairs", "block_pairs")


def kernels(dtype, row_pairs, pair_pairs):
    """Every kernel for chunks of each of ``row_pairs`` (rows kernels) and ``pair_pairs`` (pairs
    kernels) pairs, with numba argument types."""
    types_of = argtypes(dtype)
    for pairs in row_pairs:
        for name, kernel in zip(ROW_KERNELS, row_kernels(pairs)):
            yield kernel, types_of[name]
    for pairs in pair_pairs:
        for name, kernel in zip(PAIR_KERNELS, pair_kernels(pairs)):
            yield kernel, types_of[name]
