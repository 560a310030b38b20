"""Tridiagonal systems that need pivoting: LU with partial pivoting, one thread per system.

The method is LAPACK's ``?gtsv`` (``?gttrf`` and ``?gttrs`` in one pass). Elimination step ``i``
compares the current row's pivot ``p`` (column ``i``) with the next row's sub-diagonal entry
``a_{i+1}`` and takes the larger in magnitude as the pivot:

* ``|p| >= |a_{i+1}|``: no interchange. ``l = a_{i+1} / p``; row ``i`` of U is ``(p, q, 0)`` and
  the next row loses ``l`` times it.
* otherwise the two rows change places. Row ``i`` of U is the next row ``(a_{i+1}, b_{i+1},
  c_{i+1})``, and ``l = p / a_{i+1}``; the old row, less ``l`` times the new one, gains an entry
  two places right of its diagonal: ``U`` is banded with one extra super-diagonal of fill.

The right-hand side is eliminated alongside, so back substitution
``x_i = (y_i - U[i, i+1] x_{i+1} - U[i, i+2] x_{i+2}) / U[i, i]`` finishes the solve. Only when
both candidates are 0 does the elimination stop: column ``i`` of the partly eliminated matrix is
zero on and below the diagonal, so the matrix is singular (the failure :data:`SINGULAR`).

Why this method and not diagonal pivoting (Erway, Marcia and Tyson 2011; Chang and Hwu's SPIKE
with Bunch-Kaufman 1x1/2x2 pivots, as cuSPARSE's ``gtsv2`` does):

* **Stability is proved and simple.** Partial pivoting on a tridiagonal matrix keeps every
  entry of U within twice the largest entry of the matrix (growth factor at most 2; Higham,
  *Accuracy and Stability of Numerical Algorithms*, 2nd ed., ch. 9, after Bothe 1975), so the solve is backward stable
  for *any* nonsingular tridiagonal system, symmetric or not. Diagonal pivoting needs its
  Bunch-Kaufman threshold to bound growth, and SPIKE's partitions are only as stable as the
  reduced system their pivots leave behind.
* **It matches the reference.** It is the algorithm that ``scipy.linalg.solve_banded`` and
  LAPACK's ``?gtsv`` run, so the tests compare like with like.
* **Where it is used, the batch supplies the parallelism.** :func:`.householder.solve_symmetric`
  solves one tridiagonal system per matrix, with n at most a few hundred (the reduction costs
  ``n^3``): a thread per system fills the GPU once the batch has thousands of systems.

The price: no parallelism inside a system, as for Thomas. ``benchmarks/tridiag.csv`` (an H200,
``--only-pivoting``): on batches, 1.4 to 1.8 times the kernel time of cuSPARSE's
``gtsvInterleavedBatch`` with ``algo=1`` (the same algorithm on an interleaved layout, whose reads
coalesce); on one system of 2^20 rows, 364 ms (float32) against ``gtsv2``'s 0.11 ms, whose SPIKE
partitions split the system over the GPU. Use it where the batch is large and the systems
short, as in :func:`.householder.solve_symmetric`.

Memory layout: the inputs are (batch, n), each thread walking its own row, ``n`` elements from
its neighbours (uncoalesced, as Thomas). U's three bands and the eliminated right-hand side go
to a scratch array of our own, laid out ``(4, n, batch)`` so that neighbouring threads write and
read back neighbouring addresses.
"""
import numpy as np
from numba import cuda, types

from ._common import SINGULAR, fail, launchers, reused, store

THREADS = 128
DIAGONAL, SUPER, FILL, RHS = 0, 1, 2, 3  # the scratch's rows: U[i, i], U[i, i+1], U[i, i+2], y_i


@cuda.jit
def gtsv(a, b, c, d, x, info, u):
    """Solve system ``cuda.grid(1)`` by LU with partial pivoting; ``u`` (4, n, batch) holds U and y."""
    system = cuda.grid(1)
    batch, n = x.shape
    if system >= batch:
        return
    zero = b.dtype.type(0)
    # The current row, after the eliminations so far: p x_i + q x_{i+1} = r (its entry at
    # i+2 is 0 until it is stored, since only a row moved down by an interchange gains one).
    p, q, r = b[system, 0], c[system, 0] if n > 1 else zero, d[system, 0]
    for i in range(n - 1):
        below = a[system, i + 1]
        diagonal, right, rhs = b[system, i + 1], c[system, i + 1] if i + 2 < n else zero, d[system, i + 1]
        if abs(p) >= abs(below):
            if p == zero:  # and below == 0: column i is zero on and below the diagonal
                fail(info, system, SINGULAR)
                return
            factor = below / p
            u[DIAGONAL, i, system], u[SUPER, i, system], u[FILL, i, system], u[RHS, i, system] = p, q, zero, r
            p, q, r = diagonal - factor * q, right, rhs - factor * r
        else:
            factor = p / below
            u[DIAGONAL, i, system], u[SUPER, i, system], u[FILL, i, system], u[RHS, i, system] = below, diagonal, right, rhs
            p, q, r = q - factor * diagonal, -factor * right, r - factor * rhs
    if p == zero:
        fail(info, system, SINGULAR)
        return
    after = r / p  # x_{i+1} and, below, x_{i+2} of the back substitution
    store(x, info, system, n - 1, after)
    beyond = zero
    for i in range(n - 2, -1, -1):
        xi = (u[RHS, i, system] - u[SUPER, i, system] * after - u[FILL, i, system] * beyond) / u[DIAGONAL, i, system]
        store(x, info, system, i, xi)
        after, beyond = xi, after


@cuda.jit
def positive_definite(d, sub, verdict):
    """``verdict[0]`` becomes 1 if some system ``m`` of ``tridiag(sub, d, sub)`` is not positive definite.

    One thread per system runs the pivots of ``T = L D L^T`` (Cholesky's, squared):
    ``p_0 = d_0``, ``p_i = d_i - sub_i^2 / p_{i-1}``. T is positive definite exactly when every
    pivot is positive; NaN fails the test as well. ``sub[m, i] = T[i, i-1]``, ``sub[m, 0]`` unused.
    """
    system = cuda.grid(1)
    batch, n = d.shape
    if system >= batch:
        return
    zero = d.dtype.type(0)
    pivot = d[system, 0]
    for i in range(1, n):
        if not pivot > zero:
            break
        pivot = d[system, i] - sub[system, i] * sub[system, i] / pivot
    if not pivot > zero:
        cuda.atomic.max(verdict, 0, 1)


def run(a, b, c, d, x, info):
    """Solve the (batch, n) device systems into ``x``; failures go to ``info`` (see :mod:`.api`)."""
    batch, n = x.shape
    u = reused(("pivoting", batch, n, x.dtype), lambda: cuda.device_array((4, n, batch), x.dtype))
    launchers(kernels, x.dtype)[gtsv](-(-batch // THREADS), THREADS, a, b, c, d, x, info, u)


def is_positive_definite(d, sub):
    """Whether every symmetric tridiagonal ``tridiag(sub, d, sub)`` of the batch is positive definite.

    ``d``, ``sub``: (batch, n) device arrays, ``sub[m, i] = T_m[i, i-1]``. One launch and one
    integer copied back.
    """
    verdict = cuda.to_device(np.zeros(1, np.int32))
    batch = d.shape[0]
    launchers(kernels, d.dtype)[positive_definite](-(-batch // THREADS), THREADS, d, sub, verdict)
    return not verdict.copy_to_host()[0]


def kernels(dtype):
    """Every kernel of this module for ``dtype``, with numba argument types (for PTX checks)."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix = t[:, ::1]
    yield gtsv, (matrix, matrix, matrix, matrix, matrix, types.int32[::1], t[:, :, ::1])
    yield positive_definite, (matrix, matrix, types.int32[::1])
