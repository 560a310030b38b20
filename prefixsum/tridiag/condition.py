"""An estimate of each system's reciprocal condition number, ``1 / (||A||_1 ||A^-1||_1)``, as LAPACK's ``?gtcon``.

``||A||_1`` is the largest column sum, read off the bands. ``||A^-1||_1`` is estimated as LAPACK's
``?lacn2`` does (Hager 1984; Higham, "FORTRAN codes for estimating the one-norm of a real or
complex matrix, with applications to condition estimation", ACM TOMS 14(4), 1988): from a few
solves with ``A`` and ``A^T`` (a power-method-like ascent on ``||A^-1 x||_1`` over the unit
ball of the 1-norm, whose maximum is at a unit vector ``e_j``), at most :data:`ITERATIONS`
rounds, and the larger of that and ``2 ||A^-1 v||_1 / (3 n)`` for Higham's alternating vector
``v_i = (-1)^i (1 + i / (n - 1))``. The estimate is a lower bound of ``||A^-1||_1``, usually
within a factor of 3 of it (Higham 1988), so ``rcond`` is at least the true reciprocal condition
number and usually within that factor of it. Each round solves the whole batch: ``2 + 2 ITERATIONS + 1`` solves
by ``solve`` (the pivoting solver, from :func:`.api.solve_ex`), O(n) work a system.

``A^T`` of ``tridiag(a, b, c)`` is ``tridiag(c shifted down, b, a shifted up)``: its
sub-diagonal is ``c_{i-1}`` and its super-diagonal ``a_{i+1}``.
"""

import numpy as np

ITERATIONS = 4
"""Rounds of the ascent at most (LAPACK's ``?lacn2`` takes up to 5 solves with each of A and A^T)."""


def one_norm(a, b, c):
    """``||A||_1`` of each (batch, n) system, in float64: the largest ``|c_{j-1}| + |b_j| + |a_{j+1}|``."""
    columns = np.abs(b).astype(np.float64)
    columns[:, 1:] += np.abs(c[:, :-1])
    columns[:, :-1] += np.abs(a[:, 1:])
    return columns.max(axis=1)


def transposed(a, b, c):
    """The bands of ``A^T`` (the ignored ``a[:, 0]`` and ``c[:, -1]`` set to 0)."""
    at, ct = np.zeros_like(a), np.zeros_like(c)
    at[:, 1:], ct[:, :-1] = c[:, :-1], a[:, 1:]
    return at, b, ct


def inverse_one_norm(solve, a, b, c):
    """An estimate of ``||A^-1||_1`` per system (module docstring); ``solve(a, b, c, rhs)`` solves a
    batch (numpy (batch, n) arrays in, x out)."""
    batch, n = b.shape
    dtype = b.dtype
    rows = np.arange(batch)
    transpose = transposed(a, b, c)
    y = solve(a, b, c, np.full((batch, n), 1.0 / n, dtype))
    estimate = np.abs(y).sum(axis=1, dtype=np.float64)
    if n == 1:
        return estimate
    signs = np.where(y >= 0, 1.0, -1.0).astype(dtype)
    z = solve(*transpose, signs)
    going = np.ones(batch, bool)
    j = np.abs(z).argmax(axis=1)
    for _ in range(ITERATIONS):
        unit = np.zeros((batch, n), dtype)
        unit[rows, j] = 1
        y = solve(a, b, c, unit)
        new = np.abs(y).sum(axis=1, dtype=np.float64)
        new_signs = np.where(y >= 0, 1.0, -1.0).astype(dtype)
        # Every ||A^-1 e_j||_1 bounds ||A^-1||_1 from below: keep the largest; go on while it grows
        # and the signs change (LAPACK's tests for convergence and for cycling).
        going &= (new > estimate) & np.any(new_signs != signs, axis=1)
        estimate = np.maximum(estimate, new)
        if not going.any():
            break
        signs = np.where(going[:, None], new_signs, signs)
        z = solve(*transpose, signs)
        new_j = np.abs(z).argmax(axis=1)
        going &= new_j != j
        j = np.where(going, new_j, j)
    alternating = ((-1.0) ** np.arange(n) * (1 + np.arange(n) / (n - 1))).astype(dtype)
    y = solve(a, b, c, np.broadcast_to(alternating, (batch, n)).copy())
    return np.maximum(estimate, 2 * np.abs(y).sum(axis=1, dtype=np.float64) / (3 * n))


def reciprocal_condition(solve, a, b, c):
    """``1 / (||A||_1 est(||A^-1||_1))`` per system, in float64: 0 where the estimate is not
    finite (a singular system, or one singular to working precision), as LAPACK's ``?gtcon``."""
    with np.errstate(all="ignore"):
        inverse = inverse_one_norm(solve, a, b, c)
        rcond = 1.0 / (one_norm(a, b, c) * inverse)
    return np.where(np.isfinite(rcond) & np.isfinite(inverse), rcond, 0.0)
