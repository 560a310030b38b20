"""Parallel cyclic reduction (PCR): every row eliminates its neighbours at stride s = 1, 2, 4, ...

One step replaces row i by a combination of rows i - s, i, i + s that no longer involves
``x_{i-s}`` or ``x_{i+s}`` (:func:`._common.reduce_row`): with ``k1 = a_i / b_{i-s}`` and
``k2 = c_i / b_{i+s}``,

    a_i' = -a_{i-s} k1,   c_i' = -c_{i+s} k2,
    b_i' = b_i - c_{i-s} k1 - a_{i+s} k2,   d_i' = d_i - d_{i-s} k1 - d_{i+s} k2,

so after the step each row couples ``x_{i-2s}, x_i, x_{i+2s}``: the system has split into two
independent ones (even and odd rows) of half the size. After ``ceil(log2 n)`` steps every row
stands alone and ``x_i = d_i / b_i``. Work ``n log2 n`` rows, depth ``log2 n`` steps; every
thread stays busy at every step (unlike cyclic reduction).

The notes reorder rows odd/even after each step so that the halves are contiguous; here the rows
stay in place and the stride doubles instead, which is the same computation without the moves.

Two kernels:

* :func:`pcr_shared`: all steps in shared memory, one block per group of small systems (several
  systems per block, the notes' ``threadIdx.x % n`` mapping) or per system up to
  :func:`max_block_rows` rows. Each step reads one buffer and writes the other (ping-pong), so a
  step needs one barrier and no thread overwrites a row another thread has yet to read.
* :func:`pcr_global_step`: one PCR step in global memory, one launch per step (the launch
  boundary is the barrier). For n larger than a block, global steps run until the ``s``
  interleaved subsystems of each system (``ceil(n / s)`` rows each) fit a block; then
  :func:`pcr_shared` finishes them all.

No pivoting: for diagonally dominant or symmetric positive definite systems.
"""

import numpy as np
from numba import cuda, types

from ..core.registry import Capability
from ._common import (
    GLOBAL_THREADS,
    ZERO_PIVOT,
    A,
    B,
    C,
    D,
    fail,
    launchers,
    load,
    locate,
    max_rows,
    put,
    reduce_row,
    shared_launch,
    slot,
    store,
    work_rows,
)
from .registry import Method, register

BUFFERS = 2  # ping-pong


@cuda.jit(device=True)
def eliminate(buf, src, j, row, s, m):
    """One PCR step for slot ``j``: row ``row`` of its ``m``-row subsystem at stride ``s``, read
    from the ping-pong buffer ``buf[src]`` and written to ``buf[1 - src]`` (``buf[coefficient, j]``
    layout), with identity rows past either end. Returns False on a zero pivot (the row is copied
    unchanged). :func:`pcr_shared` and the hybrid's PCR steps (:func:`.hybrid.pcr_steps`,
    :func:`.hybrid.pcr_window`) share it."""
    zero = buf.dtype.type(0)
    identity = (zero, buf.dtype.type(1), zero, zero)
    left = slot(buf[src], j - s) if row >= s else identity
    right = slot(buf[src], j + s) if row + s < m else identity
    new, ok = reduce_row(left, slot(buf[src], j), right)
    put(buf[1 - src], j, new)
    return ok


@cuda.jit
def pcr_shared(a, b, c, d, x, info, stride, m, per_block):
    """Solve every subsystem at ``stride`` (``m`` slots each, ``per_block`` per block) by PCR."""
    batch, n = x.shape
    subsystems = batch * stride
    rows = per_block * m
    buf = cuda.shared.array(0, b.dtype)[: BUFFERS * 4 * rows].reshape((BUFFERS, 4, rows))
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    for j in range(tid, rows, threads):
        load(a, b, c, d, buf[0], j, m, per_block, stride, n, subsystems)
    src = 0
    s = 1
    while s < m:
        cuda.syncthreads()
        for j in range(tid, rows, threads):
            system, _, row, real = locate(j, m, per_block, stride, n, subsystems)
            ok = eliminate(buf, src, j, row, s, m)  # padding rows too: the next step reads them
            if real and not ok:
                fail(info, system, ZERO_PIVOT)
        src = 1 - src
        s *= 2
    cuda.syncthreads()
    for j in range(tid, rows, threads):
        system, i, _, real = locate(j, m, per_block, stride, n, subsystems)
        if real:
            if buf[src, B, j] == 0:
                fail(info, system, ZERO_PIVOT)
            else:
                store(x, info, system, i, buf[src, D, j] / buf[src, B, j])


@cuda.jit
def pcr_global_step(a, b, c, d, out, info, s):
    """One PCR step at stride ``s`` in global memory: rows of ``a, b, c, d`` -> ``out[A..D]``."""
    batch, n = b.shape
    k = cuda.grid(1)
    if k >= batch * n:
        return
    system, i = k // n, k % n
    zero, one = b.dtype.type(0), b.dtype.type(1)
    identity = (zero, one, zero, zero)
    # Coefficients reaching past either end are 0: this is where a[..., 0] and c[..., -1] are
    # ignored at the first step (later steps compute 0 there anyway).
    row = (a[system, i] if i >= s else zero, b[system, i], c[system, i] if i + s < n else zero, d[system, i])
    left = (a[system, i - s], b[system, i - s], c[system, i - s], d[system, i - s]) if i >= s else identity
    right = (a[system, i + s], b[system, i + s], c[system, i + s], d[system, i + s]) if i + s < n else identity
    new, ok = reduce_row(left, row, right)
    out[A, system, i], out[B, system, i], out[C, system, i], out[D, system, i] = new
    if not ok:
        fail(info, system, ZERO_PIVOT)


def max_block_rows(dtype):
    """The largest n :func:`pcr_shared` solves in one block: 768 for float64, 1536 for float32."""
    return max_rows(np.dtype(dtype), BUFFERS)


def split(a, b, c, d, info, limit, stream=None):
    """Global PCR steps until each system's interleaved subsystems have at most ``limit`` rows.

    Returns ``(rows, stride)``: the (a, b, c, d) arrays to finish from (the inputs themselves
    when no step was needed; the inputs are never written) and the stride reached. The launches
    go to ``stream`` (a :class:`~prefixsum.core.streams.Stream`; None: numba's default).
    """
    batch, n = b.shape
    rows, stride = (a, b, c, d), 1
    if n <= limit:
        return rows, stride
    work = work_rows(batch, n, b.dtype, stream)
    step = launchers(kernels, b.dtype)[pcr_global_step]
    blocks = -(-batch * n // GLOBAL_THREADS)
    while -(-n // stride) > limit:
        out, out_rows = work[stride.bit_length() % 2]  # alternate, so a step never writes what it reads
        step(blocks, GLOBAL_THREADS, *rows, out, info, stride, stream=stream)
        rows, stride = out_rows, 2 * stride
    return rows, stride


def run(a, b, c, d, x, info, stream=None):
    """Solve the (batch, n) device systems into ``x``; failures go to ``info`` (see :mod:`.api`)."""
    rows, stride = split(a, b, c, d, info, max_block_rows(x.dtype), stream)
    shared_launch(launchers(kernels, x.dtype)[pcr_shared], rows, x, info, stride, BUFFERS, stream)


def kernels(dtype):
    """Every kernel :func:`run` launches for ``dtype``, with numba argument types (for PTX checks)."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix, info, i64 = t[:, ::1], types.int32[::1], types.int64
    yield pcr_shared, (matrix, matrix, matrix, matrix, matrix, info, i64, i64, i64)
    yield pcr_global_step, (matrix, matrix, matrix, matrix, t[:, :, ::1], info, i64)


METHOD = register(
    Method(
        name="pcr",
        run=run,
        kernels=kernels,
        capabilities=Capability.NEEDS_DOMINANCE | Capability.BATCHED,
        summary="parallel cyclic reduction: every row eliminates its neighbours at strides 1, 2, 4, ...; "
        "work n log2 n, depth log2 n",
        source="Hockney and Jesshope, Parallel Computers (1981); Zhang, Cohen and Owens, PPoPP 2010",
    )
)
