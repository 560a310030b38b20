"""Householder tridiagonalization on the device: the kernels and the device functions they share.

:func:`.householder.householder` computes ``Q^T A Q = T`` with ``Q`` orthogonal and ``T`` symmetric
tridiagonal, the classic ``tred2`` way: rows are reduced from the last upward. Before step
``i`` (``i = n-1, ..., 2``) rows and columns ``i+1 .. n-1`` are already tridiagonal; the step
zeroes ``A[i, :i-1]`` (and, by symmetry, the column) with a reflector ``P = I - u u^T / H``
acting on indices ``0 .. i-1``:

* ``x = A[i, :i]``, first divided by ``scale = sum |x_k|`` so that squaring cannot overflow or
  underflow (the scale cancels in ``P``, so ``u`` and ``H`` stay in scaled units);
* ``h = |x|^2``, ``f = x_{i-1}`` and ``g = -sign(f) sqrt(h)``, the sign chosen so that
  ``f - g`` adds magnitudes instead of cancelling;
* ``u = x - g e_{i-1}`` (only the last entry changes: ``f - g``) and ``H = |u|^2 / 2 = h - f g``;
  then ``P x = g e_{i-1}``, so ``T[i, i-1] = scale * g``;
* ``p = A u / H``, ``K = u.p / 2H``, ``q = p - K u``, and the two-sided product
  ``P A P = A - q u^T - u q^T`` updates the leading block (a rank-2 update, ``O(i^2)``, instead
  of two matrix products).

Step ``i = 1`` needs no reflector (``x`` has a single entry), and neither does a zero ``x``.
Each step leaves ``u`` in row ``i``, where it is no longer needed as matrix data, and ``H`` in
a vector ``hs``. Afterwards ``Q = P_{n-1} ... P_2`` is accumulated in place, backwards
(``tred2``'s second loop): for ``i = 1, ..., n-1`` the leading ``i x i`` block holds the product
of the reflectors of steps below ``i``, and step ``i`` applies ``P_i`` to it from the left,
``Q_block -= u (u^T Q_block) / H``, after row ``i-1`` and column ``i-1`` are set to those of
the identity. ``T``'s diagonal ``d`` is read off before that; its sub-diagonal ``e`` was
written by the steps themselves.

Parallel layout (the notes' ``tidx = threadIdx.x % n``): a thread owns column ``tidx`` of a
matrix and does everything that writes it: one entry of ``p``, one column of the rank-2
update, one column of the accumulation. Columns rather than rows, so that the threads of a
matrix touch consecutive addresses (``A[k, tidx]``), coalesced, and in shared memory on
consecutive banks (with the matrices of one warp padded apart, :func:`slot_stride`); by
symmetry column ``j`` is row ``j``. In shared memory the thread owning row ``i`` builds ``u``
and later ``q`` (sums over ``i`` entries, serial), while the others wait at a barrier; in the
global path (one matrix per block) the whole block shares those sums (:func:`prefixsum.primitives.block.block_sum`). A
reduction step has four phases between barriers: build ``u`` | ``p`` | ``K`` and ``q`` |
rank-2 update.

Two kernels, both on this same code (:func:`tridiagonalize`):

* :func:`tridiagonalize_shared` works in shared memory, several matrices per block when they
  are small (``threadIdx.x // n`` picks the matrix), for n up to :func:`max_shared_n` (77 for
  float64, 109 for float32 in 48 KiB);
* :func:`tridiagonalize_global` works in the output ``Q`` itself (a copy of ``A``), one block per
  matrix, each thread looping over several columns, for any n. Slower (global memory traffic),
  and one matrix per block needs a batch of them to fill the GPU.

Before either, :func:`check_matrices` checks on the device that every matrix is finite and
symmetric within the tolerance, one number per matrix coming back to the host.

The host side (checks, launches, :func:`.householder.solve_symmetric`) is :mod:`.householder`.
"""

import math

import numpy as np
from numba import cuda, types

from ..core.hardware import WARP_SIZE
from ..primitives.block import block_sum

CHECK_THREADS = 256  # a power of two: check_matrices reduces by halving


@cuda.jit(device=True)
def owns(i, first, step):
    """Whether a thread handling columns ``first, first + step, ...`` handles ``i``."""
    return i >= first and (i - first) % step == 0


@cuda.jit(device=True)
def load(a, matrix, w, first, step):
    """Copy this thread's columns of ``a[matrix]`` into ``w``, mirroring the lower triangle.

    Only the lower triangle is read (as LAPACK's ``uplo="L"``): the host checked that the upper
    one matches it within rounding, and an exactly symmetric ``w`` keeps ``T`` symmetric.
    """
    n = w.shape[0]
    for j in range(first, n, step):
        for k in range(n):
            w[k, j] = a[matrix, k, j] if k >= j else a[matrix, j, k]


@cuda.jit(device=True)
def reflector(w, hs, sub, matrix, i):
    """Step ``i``, phase 1 (the owner of row ``i``): ``u`` into row ``i``, ``H`` into ``hs[i]``."""
    zero = w.dtype.type(0)
    scale = zero
    for k in range(i):
        scale += abs(w[i, k])
    if i == 1 or scale == zero:
        # x has a single entry or none that is not 0: T[i, i-1] = x_{i-1} as it stands, and
        # H = 0 tells the other phases that there is no reflector.
        sub[matrix, i] = w[i, i - 1]
        hs[i] = zero
        return
    h = zero
    for k in range(i):
        w[i, k] /= scale
        h += w[i, k] * w[i, k]
    f = w[i, i - 1]
    g = -math.sqrt(h) if f >= zero else math.sqrt(h)
    sub[matrix, i] = scale * g
    hs[i] = h - f * g
    w[i, i - 1] = f - g


@cuda.jit(device=True)
def project(w, p, hs, i, j):
    """Step ``i``, phase 2 (column ``j < i``): ``p_j = (A u)_j / H``."""
    if hs[i] != w.dtype.type(0):
        s = w.dtype.type(0)
        for k in range(i):
            s += w[k, j] * w[i, k]
        p[j] = s / hs[i]


@cuda.jit(device=True)
def correct(w, p, hs, i):
    """Step ``i``, phase 3 (the owner of row ``i``): ``K = u.p / 2H``, then ``p <- q = p - K u``."""
    if hs[i] != w.dtype.type(0):
        s = w.dtype.type(0)
        for k in range(i):
            s += w[i, k] * p[k]
        K = s / (hs[i] + hs[i])
        for k in range(i):
            p[k] -= K * w[i, k]


@cuda.jit(device=True)
def update(w, q, hs, i, j):
    """Step ``i``, phase 4 (column ``j < i``): column ``j`` of ``A - q u^T - u q^T``.

    Also zeroes ``A[j, i]``: column ``i`` is done as matrix data, and the accumulation of ``Q``
    expects the identity's column there.
    """
    if hs[i] != w.dtype.type(0):
        uj, qj = w[i, j], q[j]
        for k in range(i):
            w[k, j] -= q[k] * uj + w[i, k] * qj
    w[j, i] = w.dtype.type(0)


@cuda.jit(device=True)
def reflector_parallel(w, hs, sub, matrix, i, scratch):
    """:func:`reflector` with its two sums over the whole block (one matrix per block)."""
    zero = w.dtype.type(0)
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    part = zero
    for k in range(tid, i, threads):
        part += abs(w[i, k])
    scale = block_sum(part, scratch)
    if i == 1 or scale == zero:
        if tid == 0:
            sub[matrix, i] = w[i, i - 1]
            hs[i] = zero
        return
    part = zero
    for k in range(tid, i, threads):
        w[i, k] /= scale
        part += w[i, k] * w[i, k]
    h = block_sum(part, scratch)  # its barriers also order the divisions above before the reads below
    if tid == 0:
        f = w[i, i - 1]
        g = -math.sqrt(h) if f >= zero else math.sqrt(h)
        sub[matrix, i] = scale * g
        hs[i] = h - f * g
        w[i, i - 1] = f - g


@cuda.jit(device=True)
def correct_parallel(w, p, hs, i, scratch):
    """:func:`correct` with the sum ``u.p`` over the whole block and ``q`` built by all threads."""
    tid, threads = cuda.threadIdx.x, cuda.blockDim.x
    part = w.dtype.type(0)
    for k in range(tid, i, threads):
        part += w[i, k] * p[k]
    s = block_sum(part, scratch)
    if hs[i] != w.dtype.type(0):
        K = s / (hs[i] + hs[i])
        for k in range(tid, i, threads):
            p[k] -= K * w[i, k]


@cuda.jit(device=True)
def reduce_rows(w, p, hs, sub, matrix, first, step, scratch):
    """``tred2``'s first loop: reflect rows ``n-1, ..., 1`` away, leaving T's diagonal in ``w``.

    With a ``scratch`` of ``blockDim.x`` elements (one matrix per block, the global path) the
    whole block shares the sums of phases 1 and 3; with an empty one the owner of row ``i``
    does them alone (several matrices per block: a block-wide sum would mix them).
    """
    n = w.shape[0]
    parallel = scratch.shape[0] > 0
    for i in range(n - 1, 0, -1):
        cuda.syncthreads()  # row i is final (and, at the first step, loaded)
        if parallel:
            reflector_parallel(w, hs, sub, matrix, i, scratch)
        elif owns(i, first, step):
            reflector(w, hs, sub, matrix, i)
        cuda.syncthreads()
        for j in range(first, i, step):
            project(w, p, hs, i, j)
        cuda.syncthreads()
        if parallel:
            correct_parallel(w, p, hs, i, scratch)
        elif owns(i, first, step):
            correct(w, p, hs, i)
        cuda.syncthreads()
        for j in range(first, i, step):
            update(w, p, hs, i, j)


@cuda.jit(device=True)
def accumulate(w, hs, first, step):
    """``tred2``'s second loop: turn the ``u`` left in rows ``1 .. n-1`` into ``Q``, in place."""
    n = w.shape[0]
    zero, one = w.dtype.type(0), w.dtype.type(1)
    for i in range(1, n):
        for j in range(first, i, step):
            # Row i-1 held u for step i-1, which every thread has used (barrier below).
            w[i - 1, j] = one if j == i - 1 else zero
            if hs[i] != zero:
                g = zero
                for k in range(i):
                    g += w[i, k] * w[k, j]
                g /= hs[i]
                for k in range(i):
                    w[k, j] -= g * w[i, k]
        cuda.syncthreads()
    for j in range(first, n, step):
        w[n - 1, j] = one if j == n - 1 else zero


@cuda.jit(device=True)
def tridiagonalize(a, matrix, w, p, hs, d, sub, first, step, scratch):
    """Reduce ``a[matrix]`` in ``w`` to ``Q`` and ``T`` (``d``, ``sub``); ``p``, ``hs``: scratch.

    Every thread of the block calls this (it has barriers); one with no columns passes
    ``first >= n``. ``scratch``: see :func:`reduce_rows`.
    """
    n = w.shape[0]
    load(a, matrix, w, first, step)
    reduce_rows(w, p, hs, sub, matrix, first, step, scratch)
    for j in range(first, n, step):
        d[matrix, j] = w[j, j]
    if first == 0:
        sub[matrix, 0] = w.dtype.type(0)  # outside T; zero so that sub is PCR's a-band as is
    accumulate(w, hs, first, step)


@cuda.jit
def tridiagonalize_shared(a, q, d, sub, per_block, stride):
    """``per_block`` matrices per block in shared memory, one thread per column.

    Matrix ``slot`` of the block starts ``stride >= n (n + 2)`` elements into the shared memory
    (:func:`slot_stride`).
    """
    batch, n = d.shape
    tidx = cuda.threadIdx.x % n
    slot = cuda.threadIdx.x // n
    matrix = cuda.blockIdx.x * per_block + slot
    size = n * (n + 2)
    mine = cuda.shared.array(0, d.dtype)[slot * stride : slot * stride + size]
    w = mine[: n * n].reshape((n, n))
    first = tidx if matrix < batch else n  # a block's last slots may have no matrix
    tridiagonalize(a, matrix, w, mine[n * n : n * n + n], mine[n * n + n :], d, sub, first, n, mine[:0])
    if first < n:
        for k in range(n):
            q[matrix, k, tidx] = w[k, tidx]


@cuda.jit
def tridiagonalize_global(a, q, d, sub, scratch):
    """One matrix per block, in ``q[matrix]`` itself; ``scratch[matrix]`` holds ``p`` and ``H``.

    ``blockDim.x`` is a power of two: the block's threads share the sums (:func:`prefixsum.primitives.block.block_sum`).
    """
    matrix = cuda.blockIdx.x
    sums = cuda.shared.array(0, d.dtype)[: cuda.blockDim.x]
    tridiagonalize(
        a, matrix, q[matrix], scratch[matrix, 0], scratch[matrix, 1], d, sub, cuda.threadIdx.x, cuda.blockDim.x, sums
    )


@cuda.jit
def multiply(q, v, out, transpose):
    """``out[m] = Q[m] v[m]``, or ``Q[m]^T v[m]`` when ``transpose``: one thread per entry.

    The transposed product reads down columns of Q, coalesced across threads; the plain one
    reads along rows, ``n`` elements apart from thread to thread.
    """
    batch, n = v.shape
    entry = cuda.grid(1)
    if entry >= batch * n:
        return
    m, i = entry // n, entry % n
    s = v.dtype.type(0)
    for k in range(n):
        s += (q[m, k, i] if transpose else q[m, i, k]) * v[m, k]
    out[m, i] = s


@cuda.jit
def check_matrices(verdict, a, tolerance):
    """One block per matrix: is ``a[m]`` finite, and symmetric within ``tolerance * max|a[m]|``?

    ``verdict[m]``: -1 if an entry is NaN or infinite, else the row-major index ``i n + j`` of
    the first entry with ``|a_ij - a_ji|`` above the bound (always in the upper triangle: the
    first of a pair), else ``n * n``. Two passes over the matrix: the largest magnitude (a
    block-wide max in shared memory), then the comparison; ``CHECK_THREADS`` threads.
    """
    m = cuda.blockIdx.x
    n = a.shape[1]
    tid = cuda.threadIdx.x
    largest = cuda.shared.array(CHECK_THREADS, a.dtype)
    first = cuda.shared.array(1, types.int64)
    if tid == 0:
        first[0] = n * n
    top = a.dtype.type(0)
    finite = True
    for k in range(tid, n * n, CHECK_THREADS):
        v = a[m, k // n, k % n]
        finite = finite and math.isfinite(v)
        top = max(top, abs(v))
    largest[tid] = top
    half = CHECK_THREADS // 2
    while half > 0:
        cuda.syncthreads()
        if tid < half:
            largest[tid] = max(largest[tid], largest[tid + half])
        half //= 2
    cuda.syncthreads()
    bound = tolerance * largest[0]
    if not finite:
        cuda.atomic.min(first, 0, -1)
    for k in range(tid, n * n, CHECK_THREADS):
        i, j = k // n, k % n
        if j > i and abs(a[m, i, j] - a[m, j, i]) > bound:
            cuda.atomic.min(first, 0, k)
    cuda.syncthreads()
    if tid == 0:
        verdict[m] = first[0]


def slot_stride(n):
    """Elements from one matrix's shared slice to the next's: ``n (n + 2)`` padded to ``n`` modulo 32.

    The threads of a warp read ``w[k, tidx]`` of their matrices, at ``slot * stride + k n + tidx``.
    With ``stride`` = n modulo 32 these are ``slot * n + tidx`` modulo 32 plus the same ``k n``
    for all: as many banks as threads, as if the warp's matrices were one. Unpadded, a slice of
    ``n (n + 2)`` elements that is a multiple of 32 (n = 16: 288) puts thread ``tidx`` of every
    matrix in the warp on one bank (chapter 09 counts the passes with the tracer).
    """
    size = n * (n + 2)
    return size + (n - size) % WARP_SIZE


@cuda.jit
def off_diagonal(bands, e):
    """``e[m, k] = bands[m n + k + 1]``: T's sub-diagonal, without the unused 0 of each row."""
    batch, width = e.shape
    k = cuda.grid(1)
    if k < batch * width:
        e[k // width, k % width] = bands[k // width * (width + 1) + k % width + 1]


def kernels(dtype):
    """Every kernel of this module for ``dtype``, with numba argument types (for PTX checks)."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    cube, matrix = t[:, :, ::1], t[:, ::1]
    yield tridiagonalize_shared, (cube, cube, matrix, matrix, types.int64, types.int64)
    yield tridiagonalize_global, (cube, cube, matrix, matrix, cube)
    yield multiply, (cube, matrix, matrix, types.boolean)
    yield check_matrices, (types.int64[::1], cube, t)
    yield off_diagonal, (t[::1], matrix)
