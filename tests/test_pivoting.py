"""LU with partial pivoting (``method="pivoting"``) and ``solve_symmetric`` on matrices that are
not positive definite, against LAPACK (``scipy.linalg.solve``) in float64.

The bound on every system's relative error is ``100 n eps kappa``: a backward-stable solve
(Householder, then partial pivoting, whose growth on a tridiagonal matrix is at most 2) moves
the solution by about ``n eps kappa`` relative to its size. The kernels' PTX is compiled by
test_ptx.py's PTX test, which walks ``tridiag.ptx_kernels()``.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import importlib  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.linalg  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum import tridiag  # noqa: E402
from prefixsum.core.poison import poison  # noqa: E402
from prefixsum.core.registry import Capability  # noqa: E402
from prefixsum.tridiag import pivoting  # noqa: E402

hh = importlib.import_module("prefixsum.tridiag.householder")  # the package's householder is the function

DTYPES = (np.float32, np.float64)


def dense(a, b, c):
    """The (batch, n, n) float64 matrices of the bands (``a[:, 0]``, ``c[:, -1]`` left out)."""
    batch, n = b.shape
    M = np.zeros((batch, n, n))
    k = np.arange(n)
    M[:, k, k] = b
    M[:, k[1:], k[:-1]] = a[:, 1:]
    M[:, k[:-1], k[1:]] = c[:, :-1]
    return M


def within_lapack(A, rhs, x, dtype):
    """Every system's ``|x - x_lapack| / |x_lapack| <= 100 n eps kappa(A)``, in float64."""
    assert x.shape == rhs.shape and x.dtype == dtype
    A64, rhs64 = A.astype(np.float64), rhs.astype(np.float64)
    n = A.shape[-1]
    for m in range(A.shape[0]):
        expected = scipy.linalg.solve(A64[m], rhs64[m])
        error = np.linalg.norm(x[m] - expected) / np.linalg.norm(expected)
        bound = 100 * n * np.finfo(dtype).eps * np.linalg.cond(A64[m])
        assert error <= bound, f"system {m} of {A.shape[0]}: relative error {error:.3g} > {bound:.3g}"


def with_eigenvalues(rng, values):
    """Symmetric ``V diag(values) V^T`` with a random orthogonal V, one matrix per row of values."""
    batch, n = values.shape
    V, _ = np.linalg.qr(rng.normal(size=(batch, n, n)))
    A = V @ (values[:, :, None] * V.transpose(0, 2, 1))
    return (A + A.transpose(0, 2, 1)) / 2


def symmetric_batch(rng, n, dtype):
    """Indefinite (random normal entries), nearly singular (eigenvalues of both signs down to
    ``sqrt(eps)``) and well-conditioned indefinite (eigenvalues in +-[1, 2]) matrices."""
    M = rng.normal(size=(1, n, n))
    signs = rng.choice([-1.0, 1.0], n)
    signs[:2] = (1.0, -1.0)[:n]  # indefinite whenever n >= 2 (n = 1: the negative one below)
    near = np.geomspace(np.sqrt(np.finfo(dtype).eps), 1, n) * signs[::-1]
    well = rng.uniform(1, 2, n) * signs if n > 1 else -rng.uniform(1, 2, 1)
    return np.concatenate([(M + M.transpose(0, 2, 1)) / 2, with_eigenvalues(rng, np.stack([near, well]))]).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, batch", ((1, 3), (2, 5), (31, 2), (32, 3), (33, 2), (64, 2), (100, 1), (257, 1)))
def test_pivoting_solves_general_systems_as_lapack_does(n, batch, dtype, rng):
    a, b, c, d = rng.normal(size=(4, batch, n)).astype(dtype)
    x = tridiag.solve(a, b, c, d, method="pivoting")
    within_lapack(dense(a, b, c), d, x, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pivoting_writes_every_element_of_a_poisoned_output(dtype, rng):
    batch, n = 130, 9  # two blocks of THREADS, the second nearly empty
    a, b, c, d = rng.normal(size=(4, batch, n)).astype(dtype)
    x = cuda.to_device(poison(np.empty((batch, n), dtype)))
    info = cuda.to_device(np.zeros(batch, np.int32))
    pivoting.run(*(cuda.to_device(v) for v in (a, b, c, d)), x, info)
    assert not info.copy_to_host().any()
    within_lapack(dense(a, b, c), d, x.copy_to_host(), dtype)


def test_systems_whose_first_pivots_are_zero_are_solved():
    # [[0, 1], [1, 1]] and tridiag(1, 0, 1): every non-pivoting method stops at the first pivot.
    x = tridiag.solve(
        np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([1.0, 0.0]), np.array([1.0, 3.0]), method="pivoting"
    )
    np.testing.assert_allclose(x, [2.0, 1.0], rtol=1e-15)
    n = 8
    a, b, c = np.ones(n), np.zeros(n), np.ones(n)
    d = np.arange(1.0, n + 1)
    within_lapack(
        dense(a[None], b[None], c[None]), d[None], tridiag.solve(a, b, c, d, method="pivoting")[None], np.float64
    )


def test_a_singular_system_is_a_lin_alg_error_naming_it():
    b = np.ones((4, 5))
    b[2, 3] = 0  # a zero row and column at 3 (a = c = 0): singular
    with pytest.raises(np.linalg.LinAlgError, match=r"system 2 of 4 \(1 failed in all\): the matrix is singular"):
        tridiag.solve(np.zeros((4, 5)), b, np.zeros((4, 5)), np.ones((4, 5)), method="pivoting")


@pytest.mark.parametrize("dtype", DTYPES)
def test_positive_definiteness_is_read_from_the_ldlt_pivots(dtype):
    d = np.array([[2.0, 2, 2, 2], [2, 2, 2, 2], [1e-10, 1e-10, 1e-10, 1e-10]], dtype)
    sub = np.array([[0.0, 1, 1, 1], [0, 1, 1, 1], [0, 1, 1, 1]], dtype)
    check = pivoting.is_positive_definite
    assert check(cuda.to_device(d[:2]), cuda.to_device(sub[:2]))  # tridiag(1, 2, 1): eigenvalues 2 - 2cos > 0
    assert not check(cuda.to_device(d), cuda.to_device(sub))  # the last: pivots 1e-10, then about -1e10
    assert not check(cuda.to_device(-d[:1]), cuda.to_device(sub[:1]))  # negative definite
    d[1, 2] = np.nan
    assert not check(cuda.to_device(d[:2]), cuda.to_device(sub[:2]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (1, 2, 16, 31, 32, 33))
def test_solve_symmetric_on_indefinite_and_nearly_singular_matrices_matches_lapack(n, dtype, rng):
    A = symmetric_batch(rng, n, dtype)
    rhs = rng.normal(size=A.shape[:2]).astype(dtype)
    within_lapack(A, rhs, tridiag.solve_symmetric(A, rhs), dtype)


def spy_on_methods(monkeypatch):
    methods = []

    def solve(*args, method, **options):
        methods.append(method)
        return tridiag.solve(*args, method=method, **options)

    monkeypatch.setattr(hh, "solve", solve)
    return methods


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("diagonal", (1e-10, 0.0))
def test_the_issues_failures_tridiag_1_1e_10_1_and_a_zero_diagonal(diagonal, dtype, rng, monkeypatch):
    # Issue 28: in float64 the non-pivoting route was off by 9.3e-7 on the first (condition
    # number 11; bound 3.8e-12) and called the second, as well conditioned, singular.
    n = 16
    off = np.ones(n - 1)
    A = (np.diag(np.full(n, diagonal)) + np.diag(off, 1) + np.diag(off, -1)).astype(dtype)[None]
    rhs = rng.normal(size=(1, n)).astype(dtype)
    methods = spy_on_methods(monkeypatch)
    within_lapack(A, rhs, tridiag.solve_symmetric(A, rhs), dtype)
    assert len(methods) == 1 and tridiag.METHODS[methods[0]].can(Capability.PIVOTS)  # the fastest that pivots


def test_positive_definite_batches_keep_the_non_pivoting_hybrid(rng, monkeypatch):
    N = rng.normal(size=(3, 12, 12))
    A = N @ N.transpose(0, 2, 1) / 12 + np.eye(12)
    rhs = rng.normal(size=(3, 12))
    methods = spy_on_methods(monkeypatch)
    within_lapack(A, rhs, tridiag.solve_symmetric(A, rhs), np.float64)
    assert methods == ["hybrid"]  # the fastest measured, and it does not pivot


def test_a_singular_matrix_is_a_lin_alg_error_naming_the_system():
    A = np.stack([np.eye(4), -np.eye(4), np.diag([1.0, 0.0, -2.0, 3.0])])
    with pytest.raises(
        np.linalg.LinAlgError,
        match=r"method='(pivoting|routed)'.*system 2 of 3 \(1 failed in all\): "
        r"the matrix is singular",
    ):
        tridiag.solve_symmetric(A, np.ones((3, 4)))
