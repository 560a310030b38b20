"""Cyclic reduction (CR): halve the system level by level, solve one row, substitute back.

Forward reduction, at stride s = 1, 2, 4, ... while 2s <= m: each row ``i`` with
``(i + 1) % 2s == 0`` eliminates its neighbours ``i - s`` and ``i + s`` (the same algebra as a
PCR step, :func:`._common.reduce_row`), so those rows form a tridiagonal system at stride 2s
with half as many rows. The rows a level writes are never the rows it reads (``i +- s`` have
``(i +- s + 1) % 2s == s``), so the reduction is in place with one barrier per level. It ends
with a single row, ``i = T - 1`` (T the largest power of two <= m), which stands alone.

Back substitution, at s = T, T/2, ..., 1: each row with ``(i + 1) % 2s == s`` takes
``x_i = (d_i - a_i x_{i-s} - c_i x_{i+s}) / b_i`` from two neighbours solved at a coarser level
(x overwrites d in place).

Work about 2n rows, depth 2 log2 n levels: less work than PCR (n log2 n) but twice the steps,
and half the threads idle at the first level, three quarters at the next, and so on.

One block solves one system or several small ones (the layout of :mod:`._common`). For n larger
than :func:`max_block_rows`, PCR steps in global memory first split each system into interleaved
subsystems that fit a block (:func:`.pcr.split`); CR then solves those.

No pivoting: for diagonally dominant or symmetric positive definite systems.
"""

import numpy as np
from numba import cuda, types

from ..core.registry import Capability
from ._common import (
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
)
from .pcr import split
from .registry import Method, register

BUFFERS = 1  # in place


@cuda.jit
def cr_shared(a, b, c, d, x, info, stride, m, per_block):
    """Solve every subsystem at ``stride`` (``m`` slots each, ``per_block`` per block) by CR."""
    batch, n = x.shape
    subsystems = batch * stride
    rows = per_block * m
    buf = cuda.shared.array(0, b.dtype)[: 4 * rows].reshape((4, rows))
    zero = b.dtype.type(0)
    identity = (zero, b.dtype.type(1), zero, zero)
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    for j in range(tid, rows, threads):
        load(a, b, c, d, buf, j, m, per_block, stride, n, subsystems)
    s = 1
    while 2 * s <= m:
        cuda.syncthreads()
        for j in range(tid, rows, threads):
            system, _, row, real = locate(j, m, per_block, stride, n, subsystems)
            if (row + 1) % (2 * s) == 0:
                right = slot(buf, j + s) if row + s < m else identity
                new, ok = reduce_row(slot(buf, j - s), slot(buf, j), right)
                put(buf, j, new)
                if real and not ok:
                    fail(info, system, ZERO_PIVOT)
        s *= 2
    while s >= 1:
        cuda.syncthreads()
        for j in range(tid, rows, threads):
            system, _, row, real = locate(j, m, per_block, stride, n, subsystems)
            if (row + 1) % (2 * s) == s:
                xl = buf[D, j - s] if row >= s else zero
                xr = buf[D, j + s] if row + s < m else zero
                if buf[B, j] != 0:
                    buf[D, j] = (buf[D, j] - buf[A, j] * xl - buf[C, j] * xr) / buf[B, j]
                elif real:
                    fail(info, system, ZERO_PIVOT)
        s //= 2
    cuda.syncthreads()
    for j in range(tid, rows, threads):
        system, i, _, real = locate(j, m, per_block, stride, n, subsystems)
        if real:
            store(x, info, system, i, buf[D, j])


def max_block_rows(dtype):
    """The largest n :func:`cr_shared` solves in one block: 1536 for float64, 3072 for float32."""
    return max_rows(np.dtype(dtype), BUFFERS)


def run(a, b, c, d, x, info, stream=None):
    """Solve the (batch, n) device systems into ``x``; failures go to ``info`` (see :mod:`.api`)."""
    rows, stride = split(a, b, c, d, info, max_block_rows(x.dtype), stream)
    shared_launch(launchers(kernels, x.dtype)[cr_shared], rows, x, info, stride, BUFFERS, stream)


def kernels(dtype):
    """Every kernel :func:`run` launches for ``dtype``, with numba argument types (for PTX checks)."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix, info, i64 = t[:, ::1], types.int32[::1], types.int64
    yield cr_shared, (matrix, matrix, matrix, matrix, matrix, info, i64, i64, i64)


METHOD = register(
    Method(
        name="cr",
        run=run,
        kernels=kernels,
        capabilities=Capability.NEEDS_DOMINANCE | Capability.BATCHED,
        summary="cyclic reduction: halve the system level by level, solve one row, substitute back; "
        "work 2n, depth 2 log2 n",
        source="Hockney (1965); Zhang, Cohen and Owens, PPoPP 2010",
    )
)
