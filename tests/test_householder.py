"""prefixsum.tridiag.householder and solve_symmetric against numpy and LAPACK, and their errors.

Every check is in float64 against float64 references. Sizes stay small (the simulator runs
one OS thread per CUDA thread, and the reduction is O(n^3) per matrix); the global-memory
kernel is reached at small n by shrinking the shared-memory budget and the block size.
The kernels' PTX is compiled by test_ptx.py's PTX test, which walks tridiag.ptx_kernels().
"""

import os
import re

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import functools  # noqa: E402
import importlib  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.linalg  # noqa: E402

from prefixsum import tridiag  # noqa: E402
from prefixsum.tridiag import _common  # noqa: E402

# The module; the package's attribute of that name is the function.
hh = importlib.import_module("prefixsum.tridiag.householder")

DTYPES = (np.float32, np.float64)
# (n, batch): trivial (1: nothing to reduce, 2: already tridiagonal), odd and even, around a
# warp, and 64 = 4 matrices of a 256-thread block.
SIZES = ((1, 3), (2, 10), (3, 10), (5, 3), (7, 10), (16, 3), (31, 1), (33, 3), (64, 1))


def random_symmetric(rng, batch, n, dtype):
    """Symmetric matrices with standard normal entries, exactly symmetric in ``dtype``."""
    M = rng.normal(size=(batch, n, n))
    return ((M + M.transpose(0, 2, 1)) / 2).astype(dtype)


def positive_definite(rng, batch, n, dtype):
    """Symmetric positive definite matrices N N^T / n + I, condition numbers below ~10."""
    N = rng.normal(size=(batch, n, n))
    A = N @ N.transpose(0, 2, 1) / n + np.eye(n)
    return ((A + A.transpose(0, 2, 1)) / 2).astype(dtype)


def tridiagonal(d, e):
    """The (batch, n, n) float64 matrices tridiag(e, d, e)."""
    d, e = np.asarray(d, np.float64), np.asarray(e, np.float64)
    n = d.shape[-1]
    T = np.zeros(d.shape + (n,))
    k = np.arange(n)
    T[..., k, k] = d
    T[..., k[1:], k[:-1]] = T[..., k[:-1], k[1:]] = e
    return T


def unit(A, dtype):
    """``n eps ||A||_2`` per matrix, shape (batch, 1): the scale of a backward-stable error."""
    n = A.shape[-1]
    return n * np.finfo(dtype).eps * np.linalg.norm(A.astype(np.float64), 2, axis=(-2, -1))[:, None]


def reduce(A):
    """householder(A), checking that A is left unchanged and the outputs' shapes and dtypes."""
    before = A.copy()
    d, e, Q = tridiag.householder(A)
    np.testing.assert_array_equal(A, before)
    n = A.shape[-1]
    assert (d.shape, e.shape, Q.shape) == (A.shape[:-1], A.shape[:-2] + (n - 1,), A.shape)
    assert d.dtype == e.dtype == Q.dtype == A.dtype
    return d, e, Q


@functools.lru_cache(maxsize=None)
def reduced(n, batch, dtype):
    """A random symmetric batch and its (d, e, Q), computed once for all the tests of a case."""
    A = random_symmetric(np.random.default_rng([n, batch, np.dtype(dtype).itemsize]), batch, n, dtype)
    return (A, *reduce(A))


def check_reduction(A, d, e, Q, dtype):
    """Q orthogonal, Q^T A Q = tridiag(e, d, e) and its eigenvalues A's, to backward-error size."""
    A, Q = A.astype(np.float64), Q.astype(np.float64)
    n = A.shape[-1]
    eps = np.finfo(dtype).eps
    bound = 8 * unit(A, dtype)[:, 0]
    within(np.abs(Q.transpose(0, 2, 1) @ Q - np.eye(n)).max(axis=(1, 2)), 8 * n * eps, "|Q^T Q - I|")
    T = tridiagonal(d, e)
    within(np.abs(Q.transpose(0, 2, 1) @ A @ Q - T).max(axis=(1, 2)), bound, "|Q^T A Q - T|")
    within(np.abs(np.linalg.eigvalsh(T) - np.linalg.eigvalsh(A)).max(axis=1), bound, "eigenvalue error")


def within(values, bounds, what):
    bounds = np.broadcast_to(bounds, values.shape)
    bad = np.flatnonzero(~(values <= bounds))
    assert not bad.size, f"{bad.size} off; matrix {bad[0]} has {what} {values[bad[0]]:.3g} > {bounds[bad[0]]:.3g}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, batch", SIZES)
def test_q_is_orthogonal_and_q_t_a_q_is_tridiag_e_d_e_with_the_eigenvalues_of_a(n, batch, dtype):
    check_reduction(*reduced(n, batch, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, batch", SIZES)
def test_the_last_row_and_column_of_q_are_the_identitys(n, batch, dtype):
    # tred2 reduces from the last row up: no reflector ever touches index n - 1.
    Q = reduced(n, batch, dtype)[3]
    np.testing.assert_array_equal(Q[:, -1], np.eye(n)[-1].astype(dtype)[None].repeat(batch, 0))
    np.testing.assert_array_equal(Q[:, :, -1], Q[:, -1])


def lapack_upper(A):
    """d and |e| of LAPACK's dsytrd with uplo="U", which, like tred2, starts from the last row."""
    _, d, e, _, info = scipy.linalg.lapack.dsytrd(A, lower=0)
    assert info == 0
    return d, np.abs(e)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, batch", [size for size in SIZES if size[0] > 1])
def test_d_and_abs_e_match_lapack_dsytrd_upper(n, batch, dtype):
    A, d, e, _ = reduced(n, batch, dtype)
    rng = np.random.default_rng(n)
    for k, (Ak, dk, ek) in enumerate(zip(A.astype(np.float64), d, np.abs(e))):
        dl, el = lapack_upper(Ak)
        # Far from the last row T's entries can be ill-conditioned functions of A (T is what
        # Lanczos would build from e_{n-1}): two backward-stable reductions may then differ by
        # far more than n eps ||A||. The tolerance adds LAPACK's own response to perturbations
        # of that size.
        size = unit(Ak[None], dtype)[0, 0]
        response = 0.0
        for _ in range(2):
            E = rng.normal(size=(n, n))
            dp, ep = lapack_upper(Ak + (E + E.T) * size / np.linalg.norm(E + E.T, 2))
            response = max(response, np.abs(dp - dl).max(), np.abs(ep - el).max())
        tolerance = 8 * (size + response)
        for name, ours, theirs in (("d", dk, dl), ("|e|", ek, el)):
            error = np.abs(ours - theirs).max()
            assert error <= tolerance, f"matrix {k}: {name} differs from LAPACK's by {error:.3g} > {tolerance:.3g}"
        if n > 2:  # uplo="L" reduces from the first row down: another T altogether
            assert np.abs(dk - scipy.linalg.lapack.dsytrd(Ak, lower=1)[1]).max() > 1e-2 * np.linalg.norm(Ak, 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_matrix_gives_unbatched_results_equal_to_a_batch_of_one(dtype):
    A = reduced(16, 3, dtype)[0][1]
    d, e, Q = reduce(A)
    d1, e1, Q1 = reduce(A[None])
    for single, batched in ((d, d1), (e, e1), (Q, Q1)):
        np.testing.assert_array_equal(single, batched[0])


@pytest.mark.parametrize(
    "n, batch, target_rows",
    ((5, 60, 256), *(pytest.param(*case, marks=pytest.mark.slow) for case in ((1, 40, 32), (2, 25, 32)))),
)
def test_many_small_matrices_share_blocks_with_a_partly_empty_last_block(n, batch, target_rows, rng, monkeypatch):
    # 5 x 60: 51 matrices in the first block, 9 in the second, as the package runs them. 1 x 40 and
    # 2 x 25 with blocks of 32 slots: 32 and 8 matrices, 16 and 9; the same slots and the same partly
    # empty last block as 1 x 300 (256 and 44) at 256 slots, for an eighth of the simulated threads.
    monkeypatch.setattr(_common, "TARGET_ROWS", target_rows)
    spy = Spy(hh.tridiagonalize_shared)
    monkeypatch.setattr(hh, "tridiagonalize_shared", spy)
    A = random_symmetric(rng, batch, n, np.float64)
    check_reduction(A, *reduce(A), np.float64)
    per_block = target_rows // n
    assert [launch[:2] for launch in spy.launches] == [(-(-batch // per_block), per_block * n)]
    assert 0 < batch % per_block


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_that_need_no_reflector(dtype, rng):
    # Diagonal: every row is zero left of the diagonal, so nothing moves.
    D = np.diag(rng.normal(size=6)).astype(dtype)
    d, e, Q = reduce(D)
    np.testing.assert_array_equal(d, np.diag(D))
    np.testing.assert_array_equal(e, 0)
    np.testing.assert_array_equal(Q, np.eye(6))
    # Already tridiagonal: each reflector only flips a sign. A zero row in the middle (the
    # block-diagonal case), and the zero matrix.
    T = tridiagonal(rng.normal(size=7), rng.normal(size=6)).astype(dtype)
    B = random_symmetric(rng, 1, 7, dtype)[0]
    B[3], B[:, 3] = 0, 0
    for A in (T, B, np.zeros((5, 5), dtype)):
        d, e, Q = reduce(A)
        check_reduction(A[None], d[None], e[None], Q[None], dtype)
    d, e, _ = reduce(T)
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(d, np.diag(T), rtol=0, atol=64 * eps * np.abs(T).max())
    np.testing.assert_allclose(np.abs(e), np.abs(np.diag(T, -1)), rtol=0, atol=64 * eps * np.abs(T).max())


@pytest.mark.parametrize(
    "dtype, factor",
    [
        (np.float64, 1e160),
        (np.float64, 1e-160),
        (np.float32, 1e20),
        (np.float32, 1e-20),
    ],
)
def test_scaling_keeps_huge_and_tiny_matrices_accurate(dtype, factor):
    # |x|^2 would overflow (or fall to subnormals) without tred2's division by sum |x_k|.
    A, d, e, _ = reduced(16, 3, dtype)
    ds, es, Qs = reduce(A * dtype(factor))
    assert np.isfinite(ds).all() and np.isfinite(es).all() and np.isfinite(Qs).all()
    tolerance = 8 * unit(A, dtype)
    within(np.abs(ds / dtype(factor) - d).max(axis=1), tolerance[:, 0], "d / factor error")
    within(np.abs(es / dtype(factor) - e).max(axis=1), tolerance[:, 0], "e / factor error")


class Spy:
    """Stands in for a kernel and records each launch configuration."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, []

    def __getitem__(self, config):
        self.launches.append(config)
        return self.kernel[config]


# The global path is O(n^3) a matrix on the simulator, with a barrier per step for every thread:
# each case is as small as what it shows allows (n = 80 at 48 KiB took minutes of CPU). Where
# the 48 KiB boundary lies is test_max_shared_n_is_the_largest_n_that_fits's.
@pytest.mark.slow  # O(n^3) on the simulator even at these sizes
@pytest.mark.parametrize(
    "dtype, n, batch, shared_bytes, threads, launched",
    [
        (
            np.float64,
            40,
            2,
            4096,
            32,
            32,
        ),  # max_shared_n(float64) is 21 in 4 KiB; 2 columns a thread, the second round partly empty
        (np.float32, 40, 3, 4096, 256, 64),  # max_shared_n(float32) is 31 in 4 KiB; n up to a power of two
        (
            np.float64,
            65,
            1,
            4096,
            256,
            128,
        ),  # one matrix: whole-block sums over 4 warps, 63 threads (two whole warps) without a column
    ],
)
def test_global_memory_path(dtype, n, batch, shared_bytes, threads, launched, rng, monkeypatch):
    monkeypatch.setattr(_common, "SHARED_BYTES", shared_bytes)
    monkeypatch.setattr(_common, "GLOBAL_THREADS", threads)
    assert n > hh.max_shared_n(dtype)
    spy = Spy(hh.tridiagonalize_global)
    monkeypatch.setattr(hh, "tridiagonalize_global", spy)
    A = random_symmetric(rng, batch, n, dtype)
    check_reduction(A, *reduce(A), dtype)
    assert spy.launches == [(batch, launched, 0, launched * np.dtype(dtype).itemsize)]  # the sums' scratch


def test_max_shared_n_is_the_largest_n_that_fits():
    assert (hh.max_shared_n(np.float64), hh.max_shared_n(np.float32)) == (77, 109)
    for dtype in DTYPES:
        n, size = hh.max_shared_n(dtype), np.dtype(dtype).itemsize
        assert n * (n + 2) * size <= _common.SHARED_BYTES < (n + 1) * (n + 3) * size


def check_solution(A, rhs, x, dtype):
    assert x.shape == rhs.shape and x.dtype == dtype
    A64, rhs64 = A.astype(np.float64), rhs.astype(np.float64)
    expected = np.linalg.solve(A64, rhs64[..., None])[..., 0]
    n = A.shape[-1]
    bound = 16 * n * np.finfo(dtype).eps * np.linalg.cond(A64) * np.abs(expected).max(axis=-1)
    within(np.abs(x - expected).max(axis=-1).reshape(-1), bound.reshape(-1), "error")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, batch", ((1, 3), (2, 10), (3, 10), (5, 3), (16, 3), (33, 2), (64, 1)))
def test_solve_symmetric_matches_numpy(n, batch, dtype, rng):
    A = positive_definite(rng, batch, n, dtype)
    rhs = rng.normal(size=(batch, n)).astype(dtype)
    copies = A.copy(), rhs.copy()
    x = tridiag.solve_symmetric(A, rhs)
    np.testing.assert_array_equal(A, copies[0])
    np.testing.assert_array_equal(rhs, copies[1])
    check_solution(A, rhs, x, dtype)


def test_solve_symmetric_one_system_and_the_global_path(rng, monkeypatch):
    A, rhs = positive_definite(rng, 1, 20, np.float64)[0], rng.normal(size=20)
    check_solution(A, rhs, tridiag.solve_symmetric(A, rhs), np.float64)
    monkeypatch.setattr(_common, "SHARED_BYTES", 1024)  # max_shared_n(float64) = 10
    spy = Spy(hh.tridiagonalize_global)
    monkeypatch.setattr(hh, "tridiagonalize_global", spy)
    check_solution(A, rhs, tridiag.solve_symmetric(A, rhs), np.float64)
    assert len(spy.launches) == 1


def test_a_singular_t_is_a_lin_alg_error_naming_the_system():
    A = np.stack([np.eye(4), np.diag([1.0, 0.0, 2.0, 3.0]), np.zeros((4, 4))])
    with pytest.raises(
        np.linalg.LinAlgError,
        match=r"method='(pivoting|routed)'.*system 1 of 3 \(2 failed in all\): "
        r"the matrix is singular",
    ):
        tridiag.solve_symmetric(A, np.ones((3, 4)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_non_symmetric_matrix_is_a_value_error_stating_the_tolerance(dtype, rng):
    A = random_symmetric(rng, 2, 5, dtype)
    top = np.abs(A[1]).max()
    tolerance = 100 * np.finfo(dtype).eps * top
    near = A.copy()
    near[1, 0, 3] += dtype(tolerance / 2)  # within the tolerance: accepted, and never read
    for got, expected in zip(reduce(near), reduce(A)):
        np.testing.assert_array_equal(got, expected)
    far = A.copy()
    far[1, 0, 3] += dtype(4 * tolerance)
    message = (
        r"not symmetric: \|A - A\^T\| = .* at A\[1, 0, 3\] exceeds the tolerance "
        rf"100 \* eps\({np.dtype(dtype).name}\) \* max\|A\|"
    )
    with pytest.raises(ValueError, match=message):
        tridiag.householder(far)
    with pytest.raises(ValueError, match=message):
        tridiag.solve_symmetric(far, np.ones((2, 5), dtype))


@pytest.mark.parametrize("shape", ((3, 4), (2, 3, 4), (4,), (1, 2, 3, 3), (0, 0), (2, 0, 0)))
def test_a_non_square_matrix_is_a_value_error_naming_its_shape(shape):
    shown = re.escape(str(shape))  # core.inputs' wording where the dimensions are wrong, the square check's where not
    with pytest.raises(ValueError, match=rf"square.*got {shown}|A must be 2-D or 3-D; got an array of shape {shown}"):
        tridiag.householder(np.zeros(shape))


@pytest.mark.parametrize("dtype", (np.int32, np.float16, np.complex128, bool))
def test_an_unsupported_dtype_is_a_type_error_naming_it(dtype):
    with pytest.raises(TypeError, match=rf"{np.dtype(dtype).name}.*float32 and float64"):
        tridiag.householder(np.eye(3, dtype=dtype))


def test_non_finite_entries_are_a_value_error():
    A = np.eye(3)
    A[1, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        tridiag.householder(A)


def test_solve_symmetric_checks_rhs():
    with pytest.raises(ValueError, match=r"rhs must have shape \(2, 3\).*got \(3,\)"):
        tridiag.solve_symmetric(np.stack([np.eye(3)] * 2), np.ones(3))
    with pytest.raises(TypeError, match="rhs has dtype float32, A float64"):
        tridiag.solve_symmetric(np.eye(3), np.ones(3, np.float32))


def test_an_empty_batch_gives_empty_results():
    d, e, Q = tridiag.householder(np.zeros((0, 4, 4), np.float32))
    assert (d.shape, e.shape, Q.shape) == ((0, 4), (0, 3), (0, 4, 4)) and Q.dtype == np.float32
    assert tridiag.solve_symmetric(np.zeros((0, 4, 4)), np.zeros((0, 4))).shape == (0, 4)


def test_every_kernel_is_listed_for_the_ptx_check():
    listed = {(kernel.py_func.__name__, str(argtypes[1].dtype)) for kernel, argtypes in tridiag.ptx_kernels()}
    for name in ("tridiagonalize_shared", "tridiagonalize_global", "multiply"):
        assert {(name, "float32"), (name, "float64")} <= listed
