"""Right by default (issue 44): ``tridiag.solve`` and ``solve_ex``, ``method="auto"`` (the default)
and ``"pivoting"``, on the families of systems that defeat a solver without pivoting, against
LAPACK's ``?gtsv`` (``scipy.linalg.lapack``), float32 and float64, n from 1 to 1000, one system and
a batch; and the outcome of every system of a batch, the condition estimate, the routing of
``"auto"``.

Each system's error must be within ``100 n eps kappa`` of LAPACK's solution, in the 1-norm, with
``kappa`` LAPACK's own estimate (``?gtcon``, a lower bound: the test is stricter than the
bound), or the system must be reported (``info``) and the others answered. The kernels' paths
are forced one by one in test_pivoting_paths.py; here the public calls choose them.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.linalg.lapack as lapack  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum import tridiag  # noqa: E402
from prefixsum.core.arrays import is_device_array  # noqa: E402
from prefixsum.tridiag import auto, pivoting  # noqa: E402

DTYPES = (np.float32, np.float64)
SIZES = (1, 2, 3, 16, 33, 64, 300, 1000)
FAMILIES = ("indefinite", "tiny diagonal", "alternating", "one tiny pivot", "singular in a batch")


def lapack_solution(a, b, c, d):
    """``(x, kappa_1)`` of one system by LAPACK in float64 (``?gtsv``; ``?gttrf`` and ``?gtcon``
    for the condition number); kappa is infinite for a singular system."""
    a, b, c, d = (np.asarray(v, np.float64) for v in (a, b, c, d))
    n = b.size
    if n <= 2:  # the wrappers of ?gtsv and ?gtcon want n >= 2 and n >= 3
        dense = np.diag(b) + np.diag(a[1:], -1) + np.diag(c[:-1], 1)
        if np.linalg.matrix_rank(dense) < n:
            return None, np.inf
        return np.linalg.solve(dense, d), np.linalg.cond(dense, 1)
    *_, x, info = lapack.dgtsv(a[1:], b, c[:-1], d[:, None])
    if info:
        kappa = np.inf
    else:
        dl, factored, du, du2, ipiv, info_f = lapack.dgttrf(a[1:], b, c[:-1])
        norm = max(np.abs(b[j]) + (abs(c[j - 1]) if j else 0) + (abs(a[j + 1]) if j + 1 < n else 0) for j in range(n))
        rcond, _ = lapack.dgtcon(dl, factored, du, du2, ipiv, norm)
        kappa = np.inf if info_f or rcond == 0 else 1 / rcond
    return (x[:, 0] if info == 0 else None), kappa


def within_lapack(a, b, c, d, x, info=None):
    """Every system of the batch within ``100 n eps kappa_1`` of LAPACK's solution, or (where
    ``info`` is given) reported; a poisoned or NaN x of a system not reported fails."""
    batch, n = b.shape
    eps = np.finfo(b.dtype).eps
    for m in range(batch):
        expected, kappa = lapack_solution(a[m], b[m], c[m], d[m])
        if info is not None and info[m]:
            assert expected is None or kappa * n * eps > 1e-3, (
                f"system {m} reported ({info[m]}) but solvable, kappa {kappa:.2g}"
            )
            continue
        assert expected is not None, f"system {m}: LAPACK finds it singular, the solve does not say so"
        error = np.abs(x[m] - expected).sum() / np.abs(expected).sum()
        bound = 100 * n * eps * kappa
        assert error <= bound, f"system {m} of {batch}: relative error {error:.3g} > {bound:.3g} (kappa {kappa:.3g})"


def family(rng, name, batch, n, dtype):
    """``(a, b, c, d)`` of ``batch`` systems of the family ``name``:

    * ``indefinite``: a, b, c uniform in [-1, 1] (the benchmark's);
    * ``tiny diagonal``: ``tridiag(1, 1e-10, 1)``, well conditioned for even n, nearly singular
      for odd; every pivot of elimination without pivoting is 1e-10 or its reciprocal;
    * ``alternating``: ``a = c = 1``, ``b_i = (-1)^i u_i``, u uniform in [0.5, 1.5]: symmetric
      indefinite, no row dominant;
    * ``one tiny pivot``: dominant but for one row, whose ``b`` makes the pivot of elimination
      without pivoting there ``1e-4`` relative (representable in float32);
    * ``singular in a batch``: indefinite, with system 1 (of a batch) singular, its row and
      column ``n // 2`` zero.
    """
    a, b, c, d = rng.uniform(-1, 1, (4, batch, n))
    if name == "tiny diagonal":
        a[:], b[:], c[:] = 1, 1e-10, 1
    elif name == "alternating":
        a[:], c[:] = 1, 1
        b = np.where(np.arange(n) % 2 == 0, 1.0, -1.0) * rng.uniform(0.5, 1.5, (batch, n))
    elif name == "one tiny pivot":
        b = np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))
        k = n // 2
        for m in range(batch if k else 0):
            pivot = b[m, 0]
            for i in range(1, k):
                pivot = b[m, i] - a[m, i] * c[m, i - 1] / pivot
            b[m, k] = a[m, k] * c[m, k - 1] / pivot + 1e-4 * abs(b[m, k])
    elif name == "singular in a batch" and batch > 1:
        k = n // 2
        b[1, k] = a[1, k] = c[1, k] = 0
        if k:
            c[1, k - 1] = 0
        if k + 1 < n:
            a[1, k + 1] = 0
    return [v.astype(dtype) for v in (a, b, c, d)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("method", ("auto", "pivoting"))
def test_every_family_at_every_size_within_lapack_or_reported(method, name, dtype, rng):
    for n in SIZES:
        for batch in (1, 4) if n <= 300 else (3,):
            system = family(rng, name, batch, n, dtype)
            before = [v.copy() for v in system]
            x, info, _ = tridiag.solve_ex(*system, method=method)
            assert all(np.array_equal(u, v) for u, v in zip(before, system))
            assert x.shape == (batch, n) and x.dtype == dtype and info.shape == (batch,)
            within_lapack(*system, x, info)
            if name == "singular in a batch" and batch > 1:
                assert list(info) == [0, tridiag.SINGULAR, 0, 0][:batch] and np.isnan(x[1]).all()


def test_the_issues_failure_tridiag_1_1e_10_1_is_gone_and_was_there_without_pivoting(rng):
    for dtype in DTYPES:
        for n in (16, 64, 600):
            a, b, c, d = family(rng, "tiny diagonal", 1, n, dtype)
            within_lapack(a, b, c, d, tridiag.solve(a, b, c, d))
            hybrid = tridiag.solve(a, b, c, d, method="hybrid")  # the old default: wrong, without a word
            expected, _ = lapack_solution(a[0], b[0], c[0], d[0])
            error = np.abs(hybrid[0] - expected).max() / np.abs(expected).max()
            assert error > (10 if dtype == np.float32 else 1e-7)  # kappa 11 to 380: the bound is 4e-3 to 2e-9


def test_auto_routes_exactly_the_systems_that_are_not_diagonally_dominant(rng):
    for n in (7, 300, 700, 3000):  # the warp solver, the block solver, a level of the partition method
        a, b, c, d = rng.uniform(-1, 1, (4, 5, n))
        b = np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (5, n))
        b[1, n - 1] = 0.5 * (abs(a[1, n - 1]))  # one row off in system 1, the last one
        b[3, 0] = -abs(c[3, 0])  # |b| = |c|: dominant, not strictly
        a[4, 0], c[4, n - 1] = 1e9, 1e9  # outside the matrix: ignored by the test as by the solve
        x, info, _ = tridiag.solve_ex(a, b, c, d, method="routed")  # what "auto" takes for many systems
        assert list(auto.routed(5)) == [False, True, False, True, False] and not info.any()
        within_lapack(a, b, c, d, x)


def test_a_device_batch_keeps_its_good_systems_and_says_which_failed_and_why(rng):
    a, b, c, d = family(rng, "singular in a batch", 4, 50, np.float64)
    d[2, 7] = np.inf
    x, info, rcond = tridiag.solve_ex(*(cuda.to_device(v) for v in (a, b, c, d)), condition=True)
    assert is_device_array(x) and list(info) == [0, tridiag.SINGULAR, tridiag.NOT_FINITE, 0]
    within_lapack(a[[0, 3]], b[[0, 3]], c[[0, 3]], d[[0, 3]], x.copy_to_host()[[0, 3]])
    assert rcond[1] == rcond[2] == 0 and (rcond[[0, 3]] > 0).all()
    with pytest.raises(np.linalg.LinAlgError, match=r"system 1 of 4 \(2 failed in all\): the matrix is singular"):
        tridiag.solve(a, b, c, d)
    one = tridiag.solve_ex(a[0], b[0], c[0], d[0])  # one system: info and rcond of shape ()
    assert one.info.shape == () and one.info == 0 and one.rcond is None and one.x.shape == (50,)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_condition_estimate_is_lapacks(dtype, rng):
    for name in ("indefinite", "tiny diagonal", "one tiny pivot"):
        for n in (1, 2, 17, 200):
            system = family(rng, name, 3, n, dtype)
            rcond = tridiag.solve_ex(*system, condition=True).rcond
            for m in range(3):
                _, kappa = lapack_solution(*(v[m] for v in system))
                ratio = rcond[m] * kappa
                assert 1 / 3 <= ratio <= 3 or (kappa * np.finfo(dtype).eps > 1e-2 and ratio <= 3), (name, n, m, ratio)


def test_a_singular_system_on_one_thread_and_on_chunks_is_nan_and_named(rng, monkeypatch):
    for rows in (32, 0):  # n = 20: one thread per system, then chunks
        monkeypatch.setattr(pivoting, "ONE_THREAD_ROWS", rows)
        a, b, c, d = family(rng, "singular in a batch", 3, 20, np.float32)
        x, info, _ = tridiag.solve_ex(a, b, c, d, method="pivoting")
        assert list(info) == [0, tridiag.SINGULAR, 0] and np.isnan(x[1]).all() and np.isfinite(x[[0, 2]]).all()
