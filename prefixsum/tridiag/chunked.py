"""The kernels of the partitioned pivoting solve: chunks eliminated by :mod:`.elimination`, level by level.

A thread owns a *chunk* of ``R`` pairs (``2R`` rows of the tridiagonal system at level 0, ``R``
pairs of a reduced system above it), loaded into shared memory with neighbouring threads
reading neighbouring addresses (:func:`prefixsum.primitives.chunk.chunk_loaders` for rows,
:func:`.slots.pair_loader` for pairs) and eliminated there (:func:`.slots.chunk_pass`; the
layouts in :mod:`.slots`). Three kinds of kernel,
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
from .elimination import ends, reduced_pair
from .slots import (
    FIELDS,
    back_over_pairs,
    back_over_rows,
    back_with_spike,
    chunk_pass,
    keep_nothing,
    keep_over_pairs,
    keep_over_rows,
    keep_with_spike,
    pair_at,
    pair_loader,
    put_pair,
    row_pair,
    write_pair,
)


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
def neighbours(xr, system, k, chunks, zero):
    """``(x_before, x_first, x_last, x_after)`` of chunk ``k`` from the next level's solution."""
    x_before = xr[system, 2 * k - 1] if k > 0 else zero
    x_after = xr[system, 2 * k + 2] if k + 1 < chunks else zero
    return x_before, xr[system, 2 * k], xr[system, 2 * k + 1], x_after


_top_pass = chunk_pass(pair_at, keep_with_spike)


@cuda.jit(device=True)
def top(buf, slots, base, chunks, system, info, pinfo, zero, one, nan):
    """One thread's solve of a system's reduced pairs at slots ``base ..`` of the pair planes:
    every column but the first and last eliminated (:func:`keep_with_spike`), the 2 x 2 of those
    two, back substitution; the system's verdict (its own and the chunks', ``pinfo``) into
    ``info`` (a singular system's unknowns NaN)."""
    k, l, good = _top_pass(buf, slots, base, chunks, zero, zero, False, zero, one)
    x_first, x_last, solvable = ends(k, l, zero, one)
    if good and solvable and pinfo[system] == 0:
        info[system] = 0
    else:
        info[system] = SINGULAR
        x_first, x_last = nan, nan
    pinfo[system] = 0
    back_with_spike(buf, slots, base, chunks, x_first, x_last, zero)


@cuda.jit(device=True)
def topped(area, threads, tid, k, chunks, system, mine, info, pinfo, zero, one, nan):
    """The block kernels' middle: each thread's reduced pair is in slot ``tid`` of ``area``; the
    first thread of each system solves them (:func:`top`); every thread gets back its chunk's
    ``(x_before, x_first, x_last, x_after)``."""
    cuda.syncthreads()
    if k == 0 and mine:
        top(area, threads, tid, chunks, system, info, pinfo, zero, one, nan)
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
        area = shared[4 * slots : 4 * slots + 10 * threads]
        upper, lower = reduced_pair(last_k, last_l)
        put_pair(area, threads, tid, upper, lower)
        if mine and not ok:
            cuda.atomic.max(pinfo, system, SINGULAR)
        x_before, x_first, x_last, x_after = topped(
            area, threads, tid, k, chunks, system, mine, info, pinfo, zero, one, nan
        )
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
        area = shared[FIELDS * slots : FIELDS * slots + FIELDS * threads]
        upper, lower = reduced_pair(last_k, last_l)
        put_pair(area, threads, tid, upper, lower)
        if mine and not ok:
            cuda.atomic.max(pinfo, system, SINGULAR)
        x_before, x_first, x_last, x_after = topped(
            area, threads, tid, k, chunks, system, mine, info, pinfo, zero, one, nan
        )
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
    return {
        "reduce_rows": (matrix,) * 4 + (planes, flags, flags, i64),
        "substitute_rows": (matrix,) * 6 + (flags, flags, i64),
        "block_rows": (matrix,) * 5 + (flags, flags, flags, i64, i64),
        "reduce_pairs": (planes, planes, flags, flags, i64),
        "substitute_pairs": (planes, matrix, matrix, flags, i64),
        "block_pairs": (planes, matrix, flags, flags, flags, i64, i64),
    }


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
