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

from ..core.arrays import is_device_array
from ..core.hardware import WARP_SIZE
from ..core.inputs import as_input
from ..core.streams import as_stream, launch_stream
from ..core.workspace import one_call_at_a_time
from . import _common, pivoting
from .api import solve
from .checks import check_float_dtype, check_solution_out
from .householder_kernels import (  # noqa: F401  (the device functions chapter 09 reads through this module)
    CHECK_THREADS,
    accumulate,
    block_sum,
    check_matrices,
    correct,
    correct_parallel,
    kernels,
    load,
    multiply,
    off_diagonal,
    owns,
    project,
    reduce_rows,
    reflector,
    reflector_parallel,
    slot_stride,
    tridiagonalize,
    tridiagonalize_global,
    tridiagonalize_shared,
    update,
)
from .registry import fastest

SYMMETRY_TOLERANCE = 100
"""A is symmetric when ``|A - A^T| <= SYMMETRY_TOLERANCE * eps(dtype) * max|A|`` elementwise."""
MULTIPLY_THREADS = 128


def max_shared_n(dtype):
    """The largest n :func:`tridiagonalize_shared` takes: 77 for float64, 109 for float32."""
    itemsize = np.dtype(dtype).itemsize
    return int(math.isqrt(_common.SHARED_BYTES // itemsize + 1)) - 1


@one_call_at_a_time
def householder(A, *, stream=None):
    """Reduce symmetric matrices to tridiagonal form: ``Q^T A Q = T`` by Householder reflectors.

    Parameters
    ----------
    A : array_like or device array, shape (n, n) or (batch, n, n)
        Symmetric matrices, float32 or float64, n >= 1. Only the lower triangle is used; the
        upper one must match it: ``|A - A^T| <= 100 * eps(dtype) * max|A|`` elementwise (max
        over each matrix), checked on the device. Never modified. A device array (numba's, or
        anything with ``__cuda_array_interface__``, C-contiguous) is used in place; host data
        is copied to the device once.
    stream : optional
        The stream the reduction is queued on (any form :func:`prefixsum.scan` takes). The call
        waits for it only, to read the symmetry check's verdict (and numpy results).

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
    where = as_stream(stream)
    on = launch_stream(where)
    A, on_device = _check_matrices(A, where)
    shape = A.shape
    batch, n = (1, shape[0]) if len(shape) == 2 else shape[:2]
    q, d, bands = _tridiagonalize(A.reshape(batch, n, n), where)
    e = cuda.device_array((batch, n - 1), A.dtype)
    if e.size:
        off_diagonal[-(-e.size // MULTIPLY_THREADS), MULTIPLY_THREADS, on](bands, e)
    results = d.reshape(shape[:-1]), e.reshape(*shape[:-2], n - 1), q.reshape(shape)
    if on_device:
        return results
    results = tuple(r.copy_to_host(stream=on) for r in results)
    where.synchronize()
    return results


@one_call_at_a_time
def solve_symmetric(A, rhs, *, out=None, stream=None):
    """Solve ``A x = rhs`` for any symmetric nonsingular A: Householder, then a tridiagonal solve.

    ``A = Q T Q^T`` (:func:`householder`), so ``x = Q z`` with ``T z = Q^T rhs``, a tridiagonal
    system. If every T of the batch is positive definite (the pivots of ``L D L^T`` all
    positive, :func:`.pivoting.is_positive_definite`), it is solved by the fastest method
    measured for its shape (:func:`.registry.fastest`: the hybrid, which does not pivot and is
    stable there), otherwise by the fastest that pivots (backward stable for every nonsingular
    T). Both products with Q run as kernels; everything stays on the device until x.

    Parameters
    ----------
    A : array_like or device array, shape (n, n) or (batch, n, n)
        Symmetric and nonsingular (definite or not), float32 or float64, checked as by
        :func:`householder`.
    rhs : array_like or device array, shape (n,) or (batch, n)
        ``A.shape[:-1]``, A's dtype; a device array must be C-contiguous.
    out : array, optional
        Where x goes: of rhs's kind, shape and dtype, contiguous, sharing no memory with rhs.
    stream : optional
        The stream the solve is queued on (any form :func:`prefixsum.scan` takes); the call waits
        for it only (for the checks' verdicts and the failure flags).

    Returns
    -------
    numpy.ndarray or numba device array
        x, of rhs's shape and dtype: a device array when ``rhs`` is one; ``out`` when given.

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
    where = as_stream(stream)
    on = launch_stream(where)
    rhs, rhs_on_device = as_input(rhs, "rhs", ndim=(1, 2))
    shape = tuple(rhs.shape)
    if out is not None:  # before the symmetry check's launch
        out = check_solution_out(out, [rhs] * 4, [rhs_on_device] * 4, shape, rhs.dtype)
    A, _ = _check_matrices(A, where)
    if np.dtype(rhs.dtype) != np.dtype(A.dtype):
        raise TypeError(f"rhs has dtype {np.dtype(rhs.dtype)}, A {np.dtype(A.dtype)}: they must match")
    if shape != tuple(A.shape[:-1]):
        raise ValueError(f"rhs must have shape {tuple(A.shape[:-1])} (A.shape[:-1]); got {shape}")
    batch, n = (1, shape[0]) if len(shape) == 1 else shape
    if batch == 0:
        if out is not None:
            return out
        return cuda.device_array(shape, rhs.dtype) if rhs_on_device else np.empty(shape, rhs.dtype)
    q, d, bands = _tridiagonalize(A.reshape(batch, n, n), where)
    v = (
        rhs.reshape(batch, n)
        if rhs_on_device
        else cuda.to_device(np.ascontiguousarray(rhs.reshape(batch, n)), stream=on)
    )
    y = _multiply(q, v, True, where)
    # a_i = T[i, i-1] and c_i = T[i, i+1] = a_{i+1}: c is a one shifted view of the same
    # memory. Each system's last c reads the next one's a_0 (or the spare last element); PCR
    # ignores both.
    a, c = bands[:-1].reshape(batch, n), bands[1:].reshape(batch, n)
    definite = pivoting.is_positive_definite(d, bands[:-1].reshape(batch, n), where)
    method = fastest(batch, n, A.dtype, pivots=not definite).name
    try:
        z = solve(a, d, c, y, method=method, stream=where)
    except np.linalg.LinAlgError as error:
        raise np.linalg.LinAlgError(f"solve_symmetric: A = Q T Q^T, T solved by method={method!r}: {error}") from None
    into = out.reshape(batch, n) if out is not None and rhs_on_device else None
    x = _multiply(q, z, False, where, into)
    if rhs_on_device:
        return out if out is not None else x.reshape(shape)
    host = x.reshape(-1).copy_to_host(None if out is None else out.reshape(-1), stream=on)
    where.synchronize()
    return out if out is not None else host.reshape(shape)


def _check_matrices(A, stream):
    """``(A, on_device)``: A on the device (numba's array; host data copied there once), or the
    TypeError / ValueError that :func:`householder` documents.

    Kind, dtype and dimensions are checked by :func:`prefixsum.core.inputs.as_input`, the shape
    on the host; finiteness and symmetry on the device (:func:`check_matrices`, on ``stream``, a
    :class:`~prefixsum.core.streams.Stream`), which hands back one number per matrix.
    """
    A, on_device = as_input(A, "A", check=lambda dtype: check_float_dtype(dtype, "A"), ndim=(2, 3))
    shape = tuple(A.shape)
    if shape[-1] != shape[-2] or shape[-1] < 1:
        raise ValueError(f"A must be square, of shape (n, n) or (batch, n, n) with n >= 1; got {shape}")
    on = launch_stream(stream)
    if not on_device:
        A = cuda.to_device(np.ascontiguousarray(A), stream=on)
    n = shape[-1]
    stack = A.reshape(int(np.prod(shape[:-2], dtype=np.int64)), n, n)
    if stack.shape[0]:
        verdict = cuda.device_array(stack.shape[0], np.int64)
        eps = np.finfo(A.dtype).eps
        check_matrices[stack.shape[0], CHECK_THREADS, on](verdict, stack, A.dtype.type(SYMMETRY_TOLERANCE * eps))
        verdict = verdict.copy_to_host(stream=on)
        stream.synchronize()
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
                f"{SYMMETRY_TOLERANCE} * eps({np.dtype(A.dtype).name}) * max|A| = {bound:.3g}"
            )
    return A, on_device


def _tridiagonalize(A, stream=None):
    """Launch the reduction of the (batch, n, n) matrices; returns device ``q, d, bands``.

    ``A`` is a host array (copied to the device) or a C-contiguous device array (used as it is,
    so that the benchmark times the kernels alone), the launches queued on ``stream`` (a
    :class:`~prefixsum.core.streams.Stream`; None: numba's default).

    ``bands`` is flat, ``batch * n + 1`` long: ``bands[m * n + i] = T_m[i, i-1]``, 0 at i = 0,
    and a spare last element (see :func:`solve_symmetric`).
    """
    batch, n, _ = A.shape
    q = cuda.device_array((batch, n, n), A.dtype)
    d = cuda.device_array((batch, n), A.dtype)
    bands = cuda.device_array(batch * n + 1, A.dtype)
    if batch == 0:
        return q, d, bands
    on = launch_stream(stream) if stream is not None and stream.key else 0  # 0: numba's default stream
    a = A if is_device_array(A) else cuda.to_device(np.ascontiguousarray(A), stream=on)
    sub = bands[: batch * n].reshape(batch, n)
    if n <= max_shared_n(A.dtype):
        stride = slot_stride(n)
        per_block = max(1, min(_common.TARGET_ROWS // n, _common.SHARED_BYTES // (stride * A.dtype.itemsize), batch))
        blocks = -(-batch // per_block)
        # The last slot needs only n (n + 2) elements: one matrix per block always fits.
        shared = ((per_block - 1) * stride + n * (n + 2)) * A.dtype.itemsize
        tridiagonalize_shared[blocks, per_block * n, on, shared](a, q, d, sub, per_block, stride)
    else:
        threads = min(1 << (max(n, WARP_SIZE) - 1).bit_length(), _common.GLOBAL_THREADS)
        scratch = cuda.device_array((batch, 2, n), A.dtype)
        tridiagonalize_global[batch, threads, on, threads * A.dtype.itemsize](a, q, d, sub, scratch)
    return q, d, bands


def _multiply(q, v, transpose, stream, out=None):
    """``Q v`` or ``Q^T v`` for (batch, n, n) and (batch, n) device arrays, into ``out`` or a new
    device array, queued on ``stream`` (a :class:`~prefixsum.core.streams.Stream`)."""
    out = cuda.device_array(v.shape, v.dtype) if out is None else out
    blocks = -(-v.shape[0] * v.shape[1] // MULTIPLY_THREADS)
    multiply[blocks, MULTIPLY_THREADS, launch_stream(stream)](q, v, out, transpose)
    return out
