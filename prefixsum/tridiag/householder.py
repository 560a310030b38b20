"""Householder tridiagonalization of symmetric matrices, and symmetric solves through it.

:func:`householder` computes ``Q^T A Q = T`` with ``Q`` orthogonal and ``T`` symmetric
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
global path (one matrix per block) the whole block shares those sums (:func:`block_sum`). A
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

:func:`solve_symmetric` solves ``A x = b`` as ``Q T Q^T x = b``: ``y = Q^T b``, ``T z = y``
by :func:`.api.solve` (the hybrid if every T is positive definite, else LU with partial
pivoting, :mod:`.pivoting`), ``x = Q z``.
"""
import math

import numpy as np
from numba import cuda, types

from ..core.arrays import is_device_array
from ..core.hardware import WARP_SIZE
from . import _common, pivoting
from .api import DTYPES, solve

SYMMETRY_TOLERANCE = 100
"""A is symmetric when ``|A - A^T| <= SYMMETRY_TOLERANCE * eps(dtype) * max|A|`` elementwise."""
MULTIPLY_THREADS = 128
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
def block_sum(value, scratch):
    """The sum of ``value`` over the block's threads, returned to every thread.

    ``scratch`` is a shared array of ``blockDim.x`` (a power of two) elements; a tree of
    ``log2(blockDim.x)`` halvings, each behind a barrier, and one more barrier so that the
    next call cannot overwrite ``scratch[0]`` before every thread has read it.
    """
    tid = cuda.threadIdx.x
    scratch[tid] = value
    half = cuda.blockDim.x // 2
    while half > 0:
        cuda.syncthreads()
        if tid < half:
            scratch[tid] += scratch[tid + half]
        half //= 2
    cuda.syncthreads()
    total = scratch[0]
    cuda.syncthreads()
    return total


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
    mine = cuda.shared.array(0, d.dtype)[slot * stride:slot * stride + size]
    w = mine[:n * n].reshape((n, n))
    first = tidx if matrix < batch else n  # a block's last slots may have no matrix
    tridiagonalize(a, matrix, w, mine[n * n:n * n + n], mine[n * n + n:], d, sub, first, n, mine[:0])
    if first < n:
        for k in range(n):
            q[matrix, k, tidx] = w[k, tidx]


@cuda.jit
def tridiagonalize_global(a, q, d, sub, scratch):
    """One matrix per block, in ``q[matrix]`` itself; ``scratch[matrix]`` holds ``p`` and ``H``.

    ``blockDim.x`` is a power of two: the block's threads share the sums (:func:`block_sum`).
    """
    matrix = cuda.blockIdx.x
    sums = cuda.shared.array(0, d.dtype)[:cuda.blockDim.x]
    tridiagonalize(a, matrix, q[matrix], scratch[matrix, 0], scratch[matrix, 1], d, sub,
                   cuda.threadIdx.x, cuda.blockDim.x, sums)


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


@cuda.jit
def off_diagonal(bands, e):
    """``e[m, k] = bands[m n + k + 1]``: T's sub-diagonal, without the unused 0 of each row."""
    batch, width = e.shape
    k = cuda.grid(1)
    if k < batch * width:
        e[k // width, k % width] = bands[k // width * (width + 1) + k % width + 1]


def slot_stride(n):
    """Elements from one matrix's shared slice to the next's: ``n (n + 2)`` padded to ``n`` modulo 32.

    The threads of a warp read ``w[k, tidx]`` of their matrices, at ``slot * stride + k n + tidx``.
    With ``stride`` = n modulo 32 these are ``slot * n + tidx`` modulo 32 plus the same ``k n``
    for all: as many banks as threads, as if the warp's matrices were one. Unpadded, a slice of
    ``n (n + 2)`` elements that is a multiple of 32 (n = 16: 288) puts thread ``tidx`` of every
    matrix in the warp on one bank (chapter 08 counts the passes with the tracer).
    """
    size = n * (n + 2)
    return size + (n - size) % WARP_SIZE


def max_shared_n(dtype):
    """The largest n :func:`tridiagonalize_shared` takes: 77 for float64, 109 for float32."""
    itemsize = np.dtype(dtype).itemsize
    return int(math.isqrt(_common.SHARED_BYTES // itemsize + 1)) - 1


def householder(A):
    """Reduce symmetric matrices to tridiagonal form: ``Q^T A Q = T`` by Householder reflectors.

    Parameters
    ----------
    A : array_like or device array, shape (n, n) or (batch, n, n)
        Symmetric matrices, float32 or float64, n >= 1. Only the lower triangle is used; the
        upper one must match it: ``|A - A^T| <= 100 * eps(dtype) * max|A|`` elementwise (max
        over each matrix), checked on the device. Never modified. A device array (numba's, or
        anything with ``__cuda_array_interface__``, C-contiguous) is used in place; host data
        is copied to the device once.

    Returns
    -------
    d : numpy.ndarray or numba device array, shape (..., n)
        (All three are device arrays when ``A`` is one.)
        The diagonal of T.
    e : numpy.ndarray, shape (..., n-1)
        The sub- (and super-) diagonal of T: ``e[k] = T[k+1, k]``. Signs depend on the
        reflectors' conventions; ``|e|`` matches LAPACK's ``?sytrd`` with ``uplo="U"``, which
        also reduces from the last row upward.
    Q : numpy.ndarray, shape (..., n, n)
        Orthogonal, with ``Q^T A Q = T``; its last row and column are those of the identity.

    Raises
    ------
    TypeError
        A dtype other than float32 or float64.
    ValueError
        A not square (shape (n, n) or (batch, n, n), n >= 1), not finite, or not symmetric
        within the tolerance above.

    Notes
    -----
    ``tred2``: about ``n^3`` multiply-adds per matrix for the reduction (the whole matrix is
    updated, not one triangle: twice LAPACK's count, for conflict-free column access) and
    ``2/3 n^3`` for accumulating Q, in ``4 (n - 1)`` plus ``n - 1`` barrier phases. Matrices up
    to :func:`max_shared_n` are reduced in shared memory, several per block; larger ones in
    global memory, one block per matrix. See the module docstring for the steps.

    Examples
    --------
    >>> import numpy as np
    >>> from prefixsum.tridiag import householder
    >>> A = np.array([[4.0, 1, 2], [1, 3, 0], [2, 0, 5]])
    >>> d, e, Q = householder(A)
    >>> T = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    >>> bool(np.allclose(Q.T @ A @ Q, T) and np.allclose(Q.T @ Q, np.eye(3)))
    True
    """
    A, on_device = _check_matrices(A)
    shape = A.shape
    batch, n = (1, shape[0]) if len(shape) == 2 else shape[:2]
    q, d, bands = _tridiagonalize(A.reshape(batch, n, n))
    e = cuda.device_array((batch, n - 1), A.dtype)
    if e.size:
        off_diagonal[-(-e.size // MULTIPLY_THREADS), MULTIPLY_THREADS](bands, e)
    results = d.reshape(shape[:-1]), e.reshape(*shape[:-2], n - 1), q.reshape(shape)
    return results if on_device else tuple(r.copy_to_host() for r in results)


def solve_symmetric(A, rhs):
    """Solve ``A x = rhs`` for any symmetric nonsingular A: Householder, then a tridiagonal solve.

    ``A = Q T Q^T`` (:func:`householder`), so ``x = Q z`` with ``T z = Q^T rhs``, a tridiagonal
    system. If every T of the batch is positive definite (the pivots of ``L D L^T`` all
    positive, :func:`.pivoting.is_positive_definite`), it is solved by
    ``tridiag.solve(..., method="hybrid")`` (its warp solver up to 512 rows, the partition method
    beyond), which does not pivot and is stable there; otherwise by ``method="pivoting"``, LU
    with partial pivoting, backward stable for every nonsingular T. Both products with Q run as
    kernels; everything stays on the device until x.

    Parameters
    ----------
    A : array_like or device array, shape (n, n) or (batch, n, n)
        Symmetric and nonsingular (definite or not), float32 or float64, checked as by
        :func:`householder`.
    rhs : array_like or device array, shape (n,) or (batch, n)
        ``A.shape[:-1]``, A's dtype; a device array must be C-contiguous.

    Returns
    -------
    numpy.ndarray or numba device array
        x, of rhs's shape and dtype: a device array when ``rhs`` is one.

    Raises
    ------
    TypeError, ValueError
        As :func:`householder`, and for an rhs of another dtype or shape.
    numpy.linalg.LinAlgError
        A (so T) is singular, or the result is not finite. The message names the first failing
        system.

    Notes
    -----
    T has A's eigenvalues, so it is positive definite exactly when A is. The non-pivoting
    solvers are stable on such T and fastest; on an indefinite T they can divide by a tiny pivot
    and lose every digit without an error (``tridiag(1, 1e-10, 1)``, n = 16, condition number
    11: a relative error of 1e-6 in float64), or stop at a zero one (a zero diagonal). The check
    costs one launch of one thread per system.
    """
    rhs_on_device = is_device_array(rhs)
    rhs = _as_numba(rhs) if rhs_on_device else np.asarray(rhs)
    if rhs_on_device and not rhs.is_c_contiguous():
        raise ValueError("device array rhs must be C-contiguous")
    A, _ = _check_matrices(A)
    if np.dtype(rhs.dtype) != np.dtype(A.dtype):
        raise TypeError(f"rhs has dtype {np.dtype(rhs.dtype)}, A {np.dtype(A.dtype)}: they must match")
    if tuple(rhs.shape) != tuple(A.shape[:-1]):
        raise ValueError(f"rhs must have shape {tuple(A.shape[:-1])} (A.shape[:-1]); got {tuple(rhs.shape)}")
    shape = tuple(rhs.shape)
    batch, n = (1, shape[0]) if len(shape) == 1 else shape
    if batch == 0:
        x = cuda.device_array(shape, rhs.dtype)
        return x if rhs_on_device else x.copy_to_host()
    q, d, bands = _tridiagonalize(A.reshape(batch, n, n))
    v = rhs.reshape(batch, n) if rhs_on_device else cuda.to_device(np.ascontiguousarray(rhs.reshape(batch, n)))
    y = _multiply(q, v, transpose=True)
    # a_i = T[i, i-1] and c_i = T[i, i+1] = a_{i+1}: c is a one shifted view of the same
    # memory. Each system's last c reads the next one's a_0 (or the spare last element); PCR
    # ignores both.
    a, c = bands[:-1].reshape(batch, n), bands[1:].reshape(batch, n)
    method = "hybrid" if pivoting.is_positive_definite(d, bands[:-1].reshape(batch, n)) else "pivoting"
    try:
        z = solve(a, d, c, y, method=method)
    except np.linalg.LinAlgError as error:
        raise np.linalg.LinAlgError(f"solve_symmetric: A = Q T Q^T, T solved by method={method!r}: {error}") from None
    x = _multiply(q, z, transpose=False).reshape(shape)
    return x if rhs_on_device else x.copy_to_host()


def _check_matrices(A):
    """``(A, on_device)``: A on the device (numba's array; host data copied there once), or the
    TypeError / ValueError that :func:`householder` documents.

    Shape and dtype are checked on the host; finiteness and symmetry on the device
    (:func:`check_matrices`), which hands back one number per matrix.
    """
    on_device = is_device_array(A)
    A = _as_numba(A) if on_device else np.asarray(A)
    if np.dtype(A.dtype) not in DTYPES:
        raise TypeError(f"A has dtype {np.dtype(A.dtype)}; the allowed dtypes are float32 and float64")
    shape = tuple(A.shape)
    if len(shape) not in (2, 3) or shape[-1] != shape[-2] or shape[-1] < 1:
        raise ValueError(f"A must be square, of shape (n, n) or (batch, n, n) with n >= 1; got {shape}")
    if not on_device:
        A = cuda.to_device(np.ascontiguousarray(A))
    elif not A.is_c_contiguous():
        raise ValueError("device array A must be C-contiguous")
    n = shape[-1]
    stack = A.reshape(int(np.prod(shape[:-2], dtype=np.int64)), n, n)
    if stack.shape[0]:
        verdict = cuda.device_array(stack.shape[0], np.int64)
        eps = np.finfo(A.dtype).eps
        check_matrices[stack.shape[0], CHECK_THREADS](verdict, stack, A.dtype.type(SYMMETRY_TOLERANCE * eps))
        verdict = verdict.copy_to_host()
        if (verdict < 0).any():
            raise ValueError("A has NaN or infinite entries")
        bad = np.flatnonzero(verdict < n * n)
        if bad.size:
            m = int(bad[0])
            i, j = divmod(int(verdict[m]), n)
            M = stack[m].copy_to_host()
            bound = SYMMETRY_TOLERANCE * eps * np.abs(M).max()
            where = f"A[{m}, {i}, {j}]" if len(shape) == 3 else f"A[{i}, {j}]"
            raise ValueError(
                f"A is not symmetric: |A - A^T| = {abs(M[i, j] - M[j, i]):.3g} at {where} exceeds the tolerance "
                f"{SYMMETRY_TOLERANCE} * eps({np.dtype(A.dtype).name}) * max|A| = {bound:.3g}")
    return A, on_device


def _as_numba(v):
    """A device array as numba's, without a copy."""
    return v if cuda.devicearray.is_cuda_ndarray(v) else cuda.as_cuda_array(v)


def _tridiagonalize(A):
    """Launch the reduction of the (batch, n, n) matrices; returns device ``q, d, bands``.

    ``A`` is a host array (copied to the device) or a C-contiguous device array (used as it is,
    so that the benchmark times the kernels alone).

    ``bands`` is flat, ``batch * n + 1`` long: ``bands[m * n + i] = T_m[i, i-1]``, 0 at i = 0,
    and a spare last element (see :func:`solve_symmetric`).
    """
    batch, n, _ = A.shape
    q = cuda.device_array((batch, n, n), A.dtype)
    d = cuda.device_array((batch, n), A.dtype)
    bands = cuda.device_array(batch * n + 1, A.dtype)
    if batch == 0:
        return q, d, bands
    a = A if is_device_array(A) else cuda.to_device(np.ascontiguousarray(A))
    sub = bands[:batch * n].reshape(batch, n)
    if n <= max_shared_n(A.dtype):
        stride = slot_stride(n)
        per_block = max(1, min(_common.TARGET_ROWS // n, _common.SHARED_BYTES // (stride * A.dtype.itemsize), batch))
        blocks = -(-batch // per_block)
        # The last slot needs only n (n + 2) elements: one matrix per block always fits.
        shared = ((per_block - 1) * stride + n * (n + 2)) * A.dtype.itemsize
        tridiagonalize_shared[blocks, per_block * n, 0, shared](a, q, d, sub, per_block, stride)
    else:
        threads = min(1 << (max(n, WARP_SIZE) - 1).bit_length(), _common.GLOBAL_THREADS)
        scratch = cuda.device_array((batch, 2, n), A.dtype)
        tridiagonalize_global[batch, threads, 0, threads * A.dtype.itemsize](a, q, d, sub, scratch)
    return q, d, bands


def _multiply(q, v, transpose):
    """``Q v`` or ``Q^T v`` for (batch, n, n) and (batch, n) device arrays, as a device array."""
    out = cuda.device_array(v.shape, v.dtype)
    blocks = -(-v.shape[0] * v.shape[1] // MULTIPLY_THREADS)
    multiply[blocks, MULTIPLY_THREADS](q, v, out, transpose)
    return out


def kernels(dtype):
    """Every kernel of this module for ``dtype``, with numba argument types (for PTX checks)."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    cube, matrix = t[:, :, ::1], t[:, ::1]
    yield tridiagonalize_shared, (cube, cube, matrix, matrix, types.int64, types.int64)
    yield tridiagonalize_global, (cube, cube, matrix, matrix, cube)
    yield multiply, (cube, matrix, matrix, types.boolean)
    yield check_matrices, (types.int64[::1], cube, t)
    yield off_diagonal, (t[::1], matrix)
