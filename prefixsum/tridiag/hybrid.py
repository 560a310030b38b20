"""Hybrid PCR-Thomas: a few PCR steps to split each system, then Thomas per piece, in one block.

PCR's ``k`` steps at strides ``1, 2, ..., 2^(k-1)`` split a system of ``m`` rows into
``lanes = 2^k`` independent interleaved subsystems (rows ``r, r + lanes, r + 2 lanes, ...``,
each about ``m / lanes`` long): :func:`pcr_steps`, the steps of :func:`.pcr.pcr_shared` stopped
early. Each of those
is then solved by one thread with the Thomas algorithm (:func:`sweep`), about ``8 m / lanes``
flops in ``2 m / lanes`` sequential steps instead of PCR's remaining ``log2(m / lanes)`` steps
over all ``m`` rows. This is the Thomas-PCR hybrid of Laszlo, Giles and Appleyard (2016), done
in shared memory:

* PCR does ``m log2(lanes)`` row updates instead of ``m log2(m)``; Thomas adds ``2 m``: with
  ``m / lanes = 4`` rows per thread, 512 rows take 7 PCR steps and a Thomas sweep of 4 rows
  instead of 9 PCR steps.
* Thread ``lane`` of a subsystem walks rows ``lane, lane + lanes, ...``: at every Thomas step
  the threads of a warp touch consecutive slots, free of bank conflicts.
* Loads and stores go through shared memory in an order where neighbouring threads touch
  neighbouring addresses (:func:`spread`): coalesced, whatever the stride.

One kernel, :func:`hybrid_shared`, several small systems per block or one system per block up to
:func:`max_block_rows` rows (the layout of :mod:`._common`); larger systems are first split by
global PCR steps (:func:`.pcr.split`), and the hybrid finishes the pieces.

:func:`run` gives systems of up to :data:`WARP_ROWS` (512) rows to :mod:`.warp` instead, whose
kernel keeps each thread's rows in registers and was several times faster on the H100, systems
of up to :func:`block_rows` (a block's worth: 2048 rows in float32, 1024 in float64) to
:mod:`.block` (the same method, one system per block), and longer ones to a level of
:mod:`.partition`, whose reduced systems come back to :func:`run`;
:func:`run_shared` is this module's path alone, at every n.

No pivoting: for diagonally dominant or symmetric positive definite systems.
"""

import numpy as np
from numba import cuda, types

from ..core.registry import Capability
from . import block, partition, warp
from ._common import (
    MAX_THREADS,
    ZERO_PIVOT,
    A,
    B,
    C,
    D,
    fail,
    launchers,
    load,
    load_row,
    locate,
    max_rows,
    put,
    reduce_row,  # noqa: F401  (chapter 07's exercise calls hybrid.reduce_row)
    slot,
    store,
    work_rows,
)
from .pcr import eliminate
from .registry import Method, register

BUFFERS = 2  # PCR's ping-pong
WINDOW_BYTES = 32  # a window's row spans one 32-byte memory sector of neighbouring subsystems
SPLIT_ROWS = 64
"""Large systems are split until the pieces have at most this many rows: small enough that a
block takes many neighbouring pieces, so that its loads are coalesced."""
WARP_ROWS = warp.MAX_ROWS
"""Systems of at most this many rows go to :func:`.warp.run` (0: none do): all it takes. Its
kernel is faster than :func:`hybrid_shared` on every batch that ``benchmarks/tridiag_warp.py``
times (n from 16 to 512, 8 to 100,000 systems, both dtypes)."""
PARTITION = True
"""Whether :func:`run` takes systems longer than :data:`WARP_ROWS` to the block solver and the
partition method (tests and the benchmark turn it off to reach :func:`run_shared`)."""
BLOCK_ROWS = None
"""Systems longer than :data:`WARP_ROWS` and of at most this many rows go to :func:`.block.run`
(None: as many as a block holds, :func:`.block.max_rows`; 0: none, every such system to a level
of the partition method; tests and the benchmark set it). In ``benchmarks/tridiag.csv`` (CUPTI)
the block solver, alone or under a partition level, took less kernel time than the levels down to
the warp solver on every shape measured, in both dtypes, and less than cuSPARSE's
``gtsv2StridedBatch``."""
THOMAS_ROWS = 4
"""Rows per thread that the plan aims for in the Thomas part: more means fewer PCR steps but a
longer sequential sweep and fewer threads."""


@cuda.jit(device=True)
def sweep(buf, first, count, step):
    """Thomas on the ``count`` rows ``first, first + step, ...`` of ``buf``: x into ``buf[D]``.

    The rows form one tridiagonal system (``a`` of the first and ``c`` of the last are 0).
    Forward: ``c'`` into ``buf[C]`` and ``d'`` into ``buf[D]``; backward: x over ``d'``.
    Returns False, leaving the rows half done, on a zero pivot.
    """
    zero = buf.dtype.type(0)
    cp, dp = zero, zero
    for t in range(count):
        j = first + t * step
        pivot = buf[B, j] - buf[A, j] * cp
        if pivot == 0:
            return False
        inverse = buf.dtype.type(1) / pivot  # one division a row, not two
        cp = buf[C, j] * inverse
        dp = (buf[D, j] - buf[A, j] * dp) * inverse
        buf[C, j] = cp
        buf[D, j] = dp
    for t in range(count - 2, -1, -1):
        j = first + t * step
        dp = buf[D, j] - buf[C, j] * dp
        buf[D, j] = dp
    return True


@cuda.jit(device=True)
def spread(k, m, per_block, stride):
    """The slot that thread-loop index ``k`` loads or stores, so that neighbouring ``k`` touch
    neighbouring addresses: slot ``k`` itself when ``stride == 1`` (a block's systems lie
    end to end), else row ``k // per_block`` of subsystem ``k % per_block`` (subsystem ``g``'s
    column is ``g % stride + row * stride``: consecutive subsystems, consecutive columns)."""
    if stride == 1:
        return k
    return (k % per_block) * m + k // per_block


@cuda.jit(device=True)
def pcr_steps(buf, info, first, lane, count, lanes, m, system, real):
    """PCR steps at ``s = 1, 2, ...`` while ``s < lanes``, on the slots loaded in ``buf[0]``.

    This thread updates rows ``lane, lane + lanes, ...`` (``count`` of them) of the subsystem
    whose row ``lane`` is slot ``first``: the same rows its Thomas sweep takes afterwards, and
    their indices need no division (:func:`.pcr.pcr_shared` recomputes each slot's place with
    ``locate``, four 64-bit integer divisions a row and a step). Returns the buffer holding
    the result.
    """
    src = 0
    s = 1
    while s < lanes:
        cuda.syncthreads()
        for t in range(count):
            if not eliminate(buf, src, first + t * lanes, lane + t * lanes, s, m) and real:
                fail(info, system, ZERO_PIVOT)
        src = 1 - src
        s *= 2
    return src


@cuda.jit
def hybrid_shared(a, b, c, d, x, info, stride, m, per_block, lanes):
    """Solve every subsystem at ``stride`` (``m`` slots, ``per_block`` per block, ``lanes``
    threads each) by ``log2(lanes)`` PCR steps, then one Thomas sweep per thread."""
    batch, n = x.shape
    subsystems = batch * stride
    rows = per_block * m
    buf = cuda.shared.array(0, b.dtype)[: BUFFERS * 4 * rows].reshape((BUFFERS, 4, rows))
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    piece, lane = tid // lanes, tid % lanes
    first = piece * m + lane
    count = -(-(m - lane) // lanes) if piece < per_block else 0
    system, column, _, real = locate(first, m, per_block, stride, n, subsystems)
    # At stride 1 this thread's own rows are neighbouring columns of its neighbours' (coalesced),
    # found without a division; after global steps they lie ``stride`` apart, and the block's
    # subsystems side by side are read together instead (:func:`spread`).
    if stride == 1:
        for t in range(count):
            load_row(a, b, c, d, buf[0], first + t * lanes, system, column + t * lanes, lane + t * lanes, real, 1)
    else:
        for k in range(tid, rows, threads):
            load(a, b, c, d, buf[0], spread(k, m, per_block, stride), m, per_block, stride, n, subsystems)
    src = pcr_steps(buf, info, first, lane, count, lanes, m, system, real)
    cuda.syncthreads()
    if count > 0 and not sweep(buf[src], first, count, lanes) and real:
        fail(info, system, ZERO_PIVOT)
    cuda.syncthreads()
    if stride == 1:
        for t in range(count):
            if real:
                store(x, info, system, column + t * lanes, buf[src, D, first + t * lanes])
    else:
        for k in range(tid, rows, threads):
            j = spread(k, m, per_block, stride)
            system, i, _, real = locate(j, m, per_block, stride, n, subsystems)
            if real:
                store(x, info, system, i, buf[src, D, j])


@cuda.jit
def pcr_window(a, b, c, d, out, info, stride, steps, width, reach):
    """``steps`` PCR steps on the subsystems at ``stride``, a window of them per block.

    A block owns ``reach`` consecutive rows of ``width`` neighbouring subsystems (consecutive
    columns: a 32-byte segment per row) and loads ``halo = 2^steps - 1`` more rows on either
    side: a row after ``steps`` steps depends only on rows within ``halo`` of it, so the owned
    rows come out exact while the halo's own rows, cut off from their neighbours, are discarded.
    One launch does the work of ``steps`` launches of :func:`.pcr.pcr_global_step`, reading
    each row ``(reach + 2 halo) / reach`` times instead of three times per step.
    """
    batch, n = b.shape
    m = -(-n // stride)
    halo = (1 << steps) - 1
    window = reach + 2 * halo
    rows = width * window
    buf = cuda.shared.array(0, b.dtype)[: BUFFERS * 4 * rows].reshape((BUFFERS, 4, rows))
    groups, chunks = stride // width, -(-m // reach)
    system = cuda.blockIdx.x // (groups * chunks)
    column0 = (cuda.blockIdx.x // chunks) % groups * width
    row0 = cuda.blockIdx.x % chunks * reach - halo
    zero = b.dtype.type(0)
    identity = (zero, b.dtype.type(1), zero, zero)
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    for j in range(tid, rows, threads):
        row, i = row0 + j // width, column0 + j % width + (row0 + j // width) * stride
        if row >= 0 and i < n:
            put(
                buf[0],
                j,
                (
                    a[system, i] if row > 0 else zero,
                    b[system, i],
                    c[system, i] if i + stride < n else zero,
                    d[system, i],
                ),
            )
        else:
            put(buf[0], j, identity)
    src = 0
    for step in range(steps):
        s = width << step
        cuda.syncthreads()
        for j in range(tid, rows, threads):
            if not eliminate(buf, src, j, j, s, rows) and halo <= j // width < halo + reach:
                fail(info, system, ZERO_PIVOT)
        src = 1 - src
    cuda.syncthreads()
    for j in range(tid, rows, threads):
        row, i = row0 + j // width, column0 + j % width + (row0 + j // width) * stride
        if halo <= j // width < halo + reach and row < m and i < n:
            out[A, system, i], out[B, system, i], out[C, system, i], out[D, system, i] = slot(buf[src], j)


def split_windows(a, b, c, d, info, limit, stream=None):
    """:func:`pcr_window` launches until the subsystems have at most ``limit`` rows.

    Returns ``(rows, stride)`` as :func:`.pcr.split` does: the inputs themselves when no step
    was needed, never written.
    """
    batch, n = b.shape
    rows, stride = (a, b, c, d), 1
    if n <= limit:
        return rows, stride
    work = work_rows(batch, n, b.dtype, stream)
    window_launch = launchers(kernels, b.dtype)[pcr_window]
    slots = max_block_rows(b.dtype)
    turn = 0
    while -(-n // stride) > limit:
        m = -(-n // stride)
        width = min(stride, WINDOW_BYTES // b.dtype.itemsize)
        window = slots // width
        # As many steps as leave the halo at most a quarter of the window, and no more than
        # bring the pieces down to ``limit`` rows.
        steps = min((window // 4 + 1).bit_length() - 1, (-(-m // limit) - 1).bit_length())
        reach = window - 2 * ((1 << steps) - 1)
        blocks = batch * (stride // width) * -(-m // reach)
        shared = BUFFERS * 4 * width * window * b.dtype.itemsize
        out, out_rows = work[turn]
        window_launch(blocks, MAX_THREADS, *rows, out, info, stride, steps, width, reach, shared=shared, stream=stream)
        rows, stride, turn = out_rows, stride << steps, 1 - turn
    return rows, stride


def max_block_rows(dtype):
    """The largest n :func:`hybrid_shared` solves in one block: 768 for float64, 1536 for float32."""
    return max_rows(np.dtype(dtype), BUFFERS)


def plan(batch, n, stride, dtype):
    """``(blocks, threads, shared bytes, m, per_block, lanes)`` of the launch at ``stride``.

    ``lanes``: the power of two nearest below ``m / THOMAS_ROWS`` (at least 1, at most
    ``MAX_THREADS``); then as many subsystems per block as ``MAX_THREADS`` threads and the
    shared memory allow.
    """
    m = -(-n // stride)
    subsystems = batch * stride
    lanes = 1 << (max(1, m // THOMAS_ROWS).bit_length() - 1)
    lanes = min(lanes, MAX_THREADS)
    per_block = max(1, min(MAX_THREADS // lanes, max_block_rows(dtype) // m, subsystems))
    shared = BUFFERS * 4 * per_block * m * np.dtype(dtype).itemsize
    return -(-subsystems // per_block), per_block * lanes, shared, m, per_block, lanes


def run(a, b, c, d, x, info, route=None, call=0, stream=None):
    """Solve the (batch, n) device systems into ``x``; failures go to ``info`` (see :mod:`.api`).

    Systems of at most :data:`WARP_ROWS` rows go to the register-resident warp solver
    (:func:`.warp.run`), faster there on the H100; where :data:`PARTITION` is on, longer ones of
    at most :func:`block_rows` rows to the block solver (:func:`.block.run`: one system a block,
    one launch), and the longer still to a level of the partition method
    (:func:`.partition.run`), whose reduced systems come back here (to the block or the warp
    solver, or another level); the rest to :func:`run_shared`. With ``call`` not 0 (:mod:`.auto`)
    the first kernel also tests every row for diagonal dominance, setting ``route[system]`` to
    ``call`` where one fails; those kernels are the warp solver's, the block solver's and the
    partition method's, so such a call takes them whatever :data:`WARP_ROWS` and
    :data:`PARTITION` say.
    """
    batch, n = x.shape
    checked = call != 0
    if n <= WARP_ROWS or (checked and n <= warp.MAX_ROWS):
        warp.run(a, b, c, d, x, info, route=route, call=call, stream=stream)
    elif (PARTITION or checked) and n <= block_rows(x.dtype):
        block.run(a, b, c, d, x, info, route=route, call=call, stream=stream)
    elif (PARTITION or checked) and partition.takes(batch, n, x.dtype):
        partition.run(a, b, c, d, x, info, run, route=route, call=call, stream=stream)
    else:
        run_shared(a, b, c, d, x, info, stream)


def block_rows(dtype):
    """The longest systems :func:`run` gives the block solver: :data:`BLOCK_ROWS`, or
    :func:`.block.max_rows` where it is None."""
    return block.max_rows(dtype) if BLOCK_ROWS is None else BLOCK_ROWS


def run_shared(a, b, c, d, x, info, stream=None):
    """:func:`run` by :func:`hybrid_shared` alone (after :func:`pcr_window` launches for systems
    larger than a block), whatever n."""
    n = x.shape[1]
    limit = n if n <= max_block_rows(x.dtype) else min(SPLIT_ROWS, max_block_rows(x.dtype))
    rows, stride = split_windows(a, b, c, d, info, limit, stream)
    blocks, threads, shared, m, per_block, lanes = plan(*x.shape, stride, x.dtype)
    launchers(kernels, x.dtype)[hybrid_shared](
        blocks, threads, *rows, x, info, stride, m, per_block, lanes, shared=shared, stream=stream
    )


def kernels(dtype):
    """Every kernel :func:`run` launches for ``dtype``, with numba argument types (for PTX checks)."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix, info, i64 = t[:, ::1], types.int32[::1], types.int64
    yield hybrid_shared, (matrix, matrix, matrix, matrix, matrix, info, i64, i64, i64, i64)
    yield pcr_window, (matrix, matrix, matrix, matrix, t[:, :, ::1], info, i64, i64, i64, i64)


def method_kernels(dtype):
    """Every kernel the hybrid may launch for ``dtype``: its own, the warp solver's, the block
    solver's and the partition method's."""
    for module_kernels in (kernels, warp.kernels, block.kernels, partition.kernels):
        yield from module_kernels(dtype)


METHOD = register(
    Method(
        name="hybrid",
        run=run,
        kernels=method_kernels,
        capabilities=Capability.NEEDS_DOMINANCE | Capability.BATCHED,
        summary="PCR steps until each thread holds a few rows, then Thomas on them; a warp's or a block's "
        "partition step in registers for short systems",
        source="Laszlo, Giles and Appleyard, ACM TOMS 42(4) (2016); Wang's partition method (1981)",
    )
)
