"""Householder tridiagonalization of symmetric matrices, and symmetric solves through it: the host side.

:func:`householder` computes ``Q^T A Q = T`` with ``Q`` orthogonal and ``T`` symmetric
tridiagonal (``tred2``, on the device: the steps, the parallel layout and the two kernels are
described in :mod:`.householder_kernels`, which holds them). This module checks the input,
launches the kernels and hands the results back.

:func:`solve_symmetric` solves ``A x = b`` as ``Q T Q^T x = b``: ``y = Q^T b``, ``T z = y``
by :func:`.api.solve` (the hybrid if every T is positive definite, else LU with partial
pivoting, :mod:`.pivoting`), ``x = Q z``.

The device functions that chapter 09 reads (``reflector``, ``update``, ``block_sum``, ...) are
reachable from here as well, under the names the chapter uses.
"""
import math

import numpy as np
from numba import cuda

from ..core.arrays import as_numba as _as_numba  # the name solve_symmetric and the checks call
from ..core.arrays import is_device_array
from ..core.hardware import WARP_SIZE
from ..core.workspace import one_call_at_a_time
from . import _common, pivoting
from .api import DTYPES, solve
from .householder_kernels import (  # noqa: F401  (the device functions chapter 09 reads through this module)
    CHECK_THREADS, accumulate, block_sum, check_matrices, correct, correct_parallel, kernels, load, multiply,
    off_diagonal, owns, project, reduce_rows, reflector, reflector_parallel, slot_stride, tridiagonalize,
    tridiagonalize_global, tridiagonalize_shared, update,
)

SYMMETRY_TOLERANCE = 100
"""A is symmetric when ``|A - A^T| <= SYMMETRY_TOLERANCE * eps(dtype) * max|A|`` elementwise."""
MULTIPLY_THREADS = 128


def max_shared_n(dtype):
    """The largest n :func:`tridiagonalize_shared` takes: 77 for float64, 109 for float32."""
    itemsize = np.dtype(dtype).itemsize
    return int(math.isqrt(_common.SHARED_BYTES // itemsize + 1)) - 1


@one_call_at_a_time
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


@one_call_at_a_time
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
    11: a relative error of about 1e-6 in float64), or stop at a zero one (a zero diagonal). The
    check costs one launch of one thread per system.
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
