"""Stone's tridiagonal solve (``prefixsum.apps.stone_solve``) against LAPACK, on the simulator.

The bound on every system's relative error is ``100 n eps kappa`` (``kappa`` by LAPACK's
``?gtcon``), on diagonally dominant and symmetric positive definite systems; the backward error
is checked where the module docstring states it (well-conditioned systems) and measured where it
says it grows (``tridiag(-1, 2 + delta, -1)``). The shooting scan it replaces in chapter 11 is in
``test_apps.py``.
"""

import textwrap

import numpy as np
import pytest
import scipy.linalg
import scipy.linalg.lapack
from numba import cuda

import prefixsum as ps  # noqa: F401  (chooses the simulator before numba.cuda is used)
from prefixsum import apps
from prefixsum.core.poison import poison_value

DTYPES = (np.float32, np.float64)


def dominant(rng, batch, n):
    """Random strictly diagonally dominant systems, diagonals of both signs."""
    a, c = rng.uniform(-1, 1, (2, batch, n))
    b = (np.abs(a) + np.abs(c) + rng.uniform(0.1, 1, (batch, n))) * rng.choice([-1, 1], (batch, n))
    return a, b, c, rng.normal(size=(batch, n))


def positive_definite(rng, batch, n):
    """``B B^T`` for lower bidiagonal ``B`` (diagonal in [1, 2], sub-diagonal in [0.5, 1]): symmetric
    positive definite, and not diagonally dominant in many rows."""
    beta, gamma = rng.uniform(1, 2, (batch, n)), rng.uniform(0.5, 1, (batch, n))
    gamma[:, 0] = 0
    off = gamma * np.roll(beta, 1, axis=1)  # T[i, i-1] = gamma_i beta_(i-1)
    return off, beta**2 + gamma**2, np.roll(off, -1, axis=1), rng.normal(size=(batch, n))


def lapack(a, b, c, d):
    """x of one system by LAPACK's banded solver (partial pivoting)."""
    return scipy.linalg.solve_banded((1, 1), np.vstack([np.r_[0, c[:-1]], b, np.r_[a[1:], 0]]), d)


def condition(a, b, c):
    """kappa_1 of one system: dense for n < 3, else LAPACK's estimate (?gttrf, ?gtcon)."""
    n = len(b)
    if n < 3:
        return np.linalg.cond(np.diag(b) + np.diag(a[1:], -1) + np.diag(c[:-1], 1), 1)
    factors = scipy.linalg.lapack.dgttrf(a[1:], b, c[:-1])[:5]
    column_sums = np.abs(b) + np.abs(np.r_[a[1:], 0]) + np.abs(np.r_[0, c[:-1]])
    rcond, info = scipy.linalg.lapack.dgtcon(*factors, column_sums.max())
    assert info == 0
    return 1 / rcond


def backward_error(a, b, c, d, x):
    """``|A x - d|_inf / (|A|_inf |x|_inf + |d|_inf)`` in float64."""
    r = b * x - d
    r[1:] += a[1:] * x[:-1]
    r[:-1] += c[:-1] * x[1:]
    rows = np.abs(b) + np.abs(np.r_[0, a[1:]]) + np.abs(np.r_[c[:-1], 0])
    return np.abs(r).max() / (rows.max() * np.abs(x).max() + np.abs(d).max())


def assert_within_lapack(systems, dtype, backward_eps=None):
    """Every system's error against LAPACK within 100 n eps kappa (and its backward error within
    ``backward_eps`` eps if given), the inputs untouched."""
    kept = [v.copy() for v in systems]
    x = apps.stone_solve(*systems)
    assert x.dtype == dtype and x.shape == systems[3].shape
    for v, k in zip(systems, kept):
        np.testing.assert_array_equal(v, k)
    eps = np.finfo(dtype).eps
    rows = [np.atleast_2d(v).astype(np.float64) for v in (*systems, x)]
    for a, b, c, d, got in zip(*rows):
        n = len(b)
        expected = lapack(a, b, c, d)
        error = np.abs(got - expected).max() / np.abs(expected).max()
        assert error <= 100 * n * eps * condition(a, b, c), (n, error)
        if backward_eps is not None:
            assert backward_error(a, b, c, d, got) <= backward_eps * eps, (n, backward_error(a, b, c, d, got) / eps)


@pytest.mark.parametrize("make", [dominant, positive_definite])
@pytest.mark.parametrize(
    "batch, n, dtype",
    [
        (1, 1, np.float32),
        (3, 2, np.float64),
        (4, 31, np.float32),
        (3, 33, np.float64),
        (2, 257, np.float32),
        (1, 1024, np.float32),
        (1, 1024, np.float64),
    ],
)
def test_stone_solve_is_within_lapack_on_dominant_and_positive_definite_systems(make, dtype, batch, n):
    systems = tuple(v.astype(dtype) for v in make(np.random.default_rng(batch * 1000 + n), batch, n))
    assert_within_lapack(systems, dtype, backward_eps=8)
    one = tuple(v[0] for v in systems)  # shape (n,)
    assert apps.stone_solve(*one).shape == (n,)


@pytest.mark.slow  # the three scans of 2^16 rows take the simulator about 20 s a system on two cores
@pytest.mark.parametrize(
    "make, dtype, rows", [(dominant, np.float64, 1 << 16), (positive_definite, np.float32, 1 << 16)]
)
def test_stone_solve_is_within_lapack_up_to_two_to_the_sixteen_rows(make, dtype, rows):
    """2^16 rows (issue 48's bound: error <= 100 n eps kappa up to n = 2^16) on float64 dominant
    systems, the dtype a user relies on, and on float32 positive definite ones (the smaller range of
    float32 leaves the unscaled minors' range soonest, and many of their rows are not dominant)."""
    systems = tuple(v.astype(dtype) for v in make(np.random.default_rng(16), 1, rows))
    assert_within_lapack(systems, dtype, backward_eps=8)


def test_nearly_singular_positive_definite_systems_stay_within_the_bound_though_the_pivots_lose_digits():
    """tridiag(-1, 2 + delta, -1): the pivot maps contract slowly, the scanned pivots lose digits
    (the backward error grows as delta shrinks), but the error stays within 100 n eps kappa."""
    n, dtype = 512, np.float64
    eps = np.finfo(dtype).eps
    d = np.random.default_rng(5).normal(size=n)
    backward = []
    for delta in (1e-2, 1e-4):
        systems = (-np.ones(n, dtype), np.full(n, 2 + delta, dtype), -np.ones(n, dtype), d.astype(dtype))
        assert_within_lapack(systems, dtype)
        backward.append(backward_error(*(v.astype(np.float64) for v in (*systems, apps.stone_solve(*systems)))) / eps)
    assert backward[1] > 10 * backward[0]


def test_stone_solve_on_device_arrays_returns_a_device_array_of_the_batch():
    a, b, c, d = dominant(np.random.default_rng(2), 3, 40)
    x = apps.stone_solve(*(cuda.to_device(v) for v in (a, b, c, d)))
    assert hasattr(x, "copy_to_host") and x.shape == (3, 40)
    np.testing.assert_allclose(
        x.copy_to_host(), np.array([lapack(*(v[k] for v in (a, b, c, d))) for k in range(3)]), rtol=1e-12, atol=1e-12
    )
    host_x = apps.stone_solve(a, b, cuda.to_device(c), d)  # d on the host: x on the host
    assert isinstance(host_x, np.ndarray)


def test_stone_solve_ignores_what_lies_outside_the_matrix():
    a, b, c, d = (v[0] for v in dominant(np.random.default_rng(3), 1, 9))
    x = apps.stone_solve(a, b, c, d)
    a[0], c[-1] = poison_value(np.float64), 1e300
    np.testing.assert_array_equal(apps.stone_solve(a, b, c, d), x)


def test_stone_solve_refuses_bad_input_and_reports_a_zero_pivot():
    ok = np.ones(4)
    with pytest.raises(TypeError, match="dtype"):
        apps.stone_solve(ok, ok, ok, ok.astype(np.int32))
    with pytest.raises(TypeError, match="one dtype"):
        apps.stone_solve(ok, ok, ok, ok.astype(np.float32))
    with pytest.raises(ValueError, match="one shape"):
        apps.stone_solve(ok, ok, ok, np.ones(5))
    with pytest.raises(ValueError, match="n >= 1"):
        apps.stone_solve(*[np.ones((2, 0))] * 4)
    assert apps.stone_solve(*[np.ones((0, 3))] * 4).shape == (0, 3)
    b = np.array([[4.0, 4, 4], [0.0, 4, 4]])  # the second system's first pivot is 0
    with pytest.raises(np.linalg.LinAlgError, match="system 1 of 2"):
        apps.stone_solve(np.ones((2, 3)), b, np.ones((2, 3)), np.ones((2, 3)))


def test_stone_solve_fails_silently_off_the_dominant_class_as_every_solver_without_pivoting():
    """A well-conditioned matrix (kappa_1 about 1400) whose second pivot is 1e-12: no error, and an
    answer far outside the bound, where LAPACK's partial pivoting is exact."""
    rng = np.random.default_rng(0)
    a, c = rng.uniform(-1, 1, (2, 16))
    b, d = rng.uniform(-1, 1, 16) * 0.5, rng.normal(size=16)
    b[1] = a[1] * c[0] / b[0] + 1e-12  # u_1 = b_1 - a_1 c_0 / u_0
    kappa, expected = condition(a, b, c), lapack(a, b, c, d)
    assert kappa < 1e4
    error = np.abs(apps.stone_solve(a, b, c, d) - expected).max() / np.abs(expected).max()
    assert error > 100 * 16 * np.finfo(np.float64).eps * kappa


def test_the_stone_kernels_and_operators_compile_to_ptx(ptx_child):
    code = """
        import numpy as np
        from numba import cuda
        import prefixsum
        from prefixsum.apps import stone
        from prefixsum.core.numba_gpu import pretend_device
        from prefixsum.scans import user_ops

        pretend_device((9, 0))
        for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
            for kernel, argtypes in stone.kernels(dtype):
                cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
                print("ok", kernel.py_func.__name__)
            scans = [(stone.mobius(dtype), stone.MOBIUS_IDENTITY, 5, False)]
            if dtype == np.float64:  # affine_segments is one source for every dtype: one dtype, both directions
                scans += [(stone.affine_segments, stone.SEGMENT_IDENTITY, 3, reverse) for reverse in (False, True)]
            for op, identity, fields, reverse in scans:
                operator = user_ops.operator_for(op, identity, [dtype] * fields, False)
                for kernel, argtypes in user_ops.kernels(operator, True, reverse, user_ops.choose("auto")):
                    cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
                    print("ok", kernel.py_func.__name__)
    """
    child = ptx_child(textwrap.dedent(code))
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.count("ok") == 2 * (4 + 1) + 2
