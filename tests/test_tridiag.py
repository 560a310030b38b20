"""prefixsum.tridiag.solve against scipy's banded solver, and its errors (its kernels' PTX: tests/test_ptx.py;
the hybrid's windows, routes, warp solver and partition method: tests/test_tridiag_hybrid.py).

The helpers that check a solution against the float64 reference (:func:`dominant`, :func:`spd`,
:func:`check`, :func:`check_flagged`, ...) live here; the other tridiagonal test modules import them.

The simulator runs one OS thread per CUDA thread, so sizes stay at a few hundred to a couple of
thousand threads per case; the global-memory path of PCR and CR is reached at small n by
shrinking the shared-memory budget the solvers plan with.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.linalg  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum import tridiag  # noqa: E402
from prefixsum.core.registry import Capability  # noqa: E402
from prefixsum.tridiag import _common, api, cr, pcr  # noqa: E402

METHODS = tuple(tridiag.METHODS)
NON_PIVOTING = tuple(
    name
    for name, method in tridiag.METHODS.items()  # tests/test_pivoting.py has those that pivot
    if Capability.NEEDS_DOMINANCE in method.capabilities
)
DTYPES = (np.float32, np.float64)
# (n, batch): one element, tiny, the notes' 7 and 11, around a warp, not powers of two, several
# blocks of small systems (7 x 37: 36 systems per block, then 1; 5 x 300: 6 blocks), one system
# per block with several rows per thread (257; 1000, which float64 PCR first splits in global memory).
SIZES = (
    (1, 3),
    (2, 5),
    (3, 4),
    (5, 300),
    (7, 37),
    (11, 9),
    (31, 2),
    (32, 3),
    (33, 2),
    (64, 2),
    (100, 2),
    (257, 1),
    (1000, 1),
)


def dominant(rng, batch, n):
    """Random strictly diagonally dominant systems, |b| >= |a| + |c| + 0.5, signs mixed."""
    a, c = rng.uniform(-1, 1, (2, batch, n))
    b = (np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))) * rng.choice([-1, 1], (batch, n))
    return a, b, c, rng.normal(size=(batch, n))


def spd(rng, batch, n):
    """Random symmetric positive definite systems L L^T (L lower bidiagonal), often not dominant."""
    diag, sub = rng.uniform(1, 2, (batch, n)), rng.uniform(-0.5, 0.5, (batch, n))
    sub[:, 0] = 0
    a = sub * np.roll(diag, 1, axis=1)  # T[i, i-1] = L[i, i-1] L[i-1, i-1]
    c = np.roll(a, -1, axis=1)  # symmetric: T[i, i+1] = T[i+1, i]
    return a, diag**2 + sub**2, c, rng.normal(size=(batch, n))


def reference(a, b, c, d):
    """float64 solutions by LAPACK's banded solver (with pivoting), one system at a time."""
    x = np.empty(d.shape)
    for k in range(d.shape[0]):
        bands = np.zeros((3, d.shape[1]))
        bands[0, 1:], bands[1], bands[2, :-1] = c[k, :-1], b[k], a[k, 1:]
        x[k] = scipy.linalg.solve_banded((1, 1), bands, d[k].astype(np.float64))
    return x


def check(x, system, dtype):
    """Every element of ``x`` finite, near the float64 solution, with a small residual."""
    a, b, c, d = (v.astype(np.float64) for v in system)
    a[:, 0], c[:, -1] = 0, 0  # outside the matrix
    assert x.shape == d.shape and x.dtype == dtype
    assert np.isfinite(x).all()
    eps = np.finfo(dtype).eps
    n = d.shape[1]
    steps = max(1, int(np.ceil(np.log2(n + 1))))
    expected = reference(a, b, c, d)
    scale = np.abs(expected).max(axis=1, keepdims=True)
    # The test systems have condition numbers below ~10; PCR's error grows with its log2 n steps.
    within(np.abs(x - expected), 64 * eps * steps * scale, "error")
    residual = b * x - d
    residual[:, 1:] += a[:, 1:] * x[:, :-1]
    residual[:, :-1] += c[:, :-1] * x[:, 1:]
    size = (np.abs(a) + np.abs(b) + np.abs(c)).max(axis=1, keepdims=True) * scale + np.abs(d).max(axis=1, keepdims=True)
    within(np.abs(residual), 32 * eps * steps * size, "residual")


def within(values, bounds, what):
    bad = [tuple(map(int, k)) for k in np.argwhere(~(values <= bounds))]
    assert not bad, (
        f"{len(bad)} elements too far off; the first, (system, row) = {bad[0]}, has {what} {values[bad[0]]:.3g}"
    )


def check_flagged(x, info, system, dtype, flagged):
    """``info`` flags exactly the systems of ``flagged`` (``{system: code}``); every other system
    of ``x`` is right (:func:`check`)."""
    expected = np.zeros(len(info), np.int32)
    expected[list(flagged)] = list(flagged.values())
    np.testing.assert_array_equal(info, expected)
    good = expected == 0
    check(x[good], [v[good] for v in system], dtype)


def solve(system, dtype, method):
    inputs = [v.astype(dtype) for v in system]
    copies = [v.copy() for v in inputs]
    x = tridiag.solve(*inputs, method=method)
    for before, after in zip(copies, inputs):
        np.testing.assert_array_equal(after, before)  # inputs unchanged
    return x


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, batch", SIZES)
def test_diagonally_dominant_systems_match_scipy(n, batch, dtype, method, rng):
    system = dominant(rng, batch, n)
    check(solve(system, dtype, method), system, dtype)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, batch", ((5, 8), (40, 3), (129, 1)))
def test_symmetric_positive_definite_systems_match_scipy(n, batch, dtype, method, rng):
    system = spd(rng, batch, n)
    check(solve(system, dtype, method), system, dtype)


@pytest.mark.parametrize("method", METHODS)
def test_outside_coefficients_are_ignored_and_one_system_keeps_its_shape(method, rng):
    a, b, c, d = (v[0] for v in dominant(rng, 1, 20))
    x = tridiag.solve(a, b, c, d, method=method)
    a[0], c[-1] = np.nan, np.inf
    y = tridiag.solve(a, b, c, d, method=method)
    assert y.shape == (20,) and y.dtype == np.float64
    np.testing.assert_array_equal(y, x)
    check(y[None], [v[None] for v in (a, b, c, d)], np.float64)


@pytest.mark.parametrize("method", ("pcr", "cr"))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("blocks, batch", ((1.1, 3), (3.3, 1)))
def test_global_memory_path_when_a_system_does_not_fit_a_block(blocks, batch, dtype, method, rng, monkeypatch):
    # 1 KiB of shared memory: a block holds 16 to 64 rows (PCR float64 to CR float32), so global
    # PCR steps must first split each system into interleaved subsystems (1 or 2 steps here).
    monkeypatch.setattr(_common, "SHARED_BYTES", 1024)
    module = {"pcr": pcr, "cr": cr}[method]
    n = int(blocks * module.max_block_rows(dtype))
    strides, split = [], pcr.split

    def spy(*args):
        rows, stride = split(*args)
        strides.append(stride)
        return rows, stride

    monkeypatch.setattr(module, "split", spy)
    system = dominant(rng, batch, n)
    check(solve(system, dtype, method), system, dtype)
    assert strides == [2 if blocks < 2 else 4]


def test_auto_is_the_fastest_measured_method_that_pivots_and_a_named_method_is_itself(rng):
    for dtype in DTYPES:  # benchmarks/tridiag.csv (H100): routing pays on many systems, not on one long one
        assert api.choose("auto", 1000, 1000, dtype) == "routed"
        assert api.choose("auto", 1, 1 << 20, dtype) == "pivoting"
    assert api.choose("cr", 7, 100, np.float32) == "cr"
    system = dominant(rng, 4, 50)
    check(tridiag.solve(*system), system, np.float64)


def test_device_arrays_are_used_in_place_and_host_arrays_cross_once_each_way(rng, monkeypatch):
    system = dominant(rng, 3, 40)
    device = [cuda.to_device(v) for v in system]
    tridiag.solve(*device, method="hybrid"), tridiag.solve(*system, method="hybrid")  # the kept buffers are made
    copies = []
    array_type = type(device[0])
    for name in ("copy_to_device", "copy_to_host"):
        original = getattr(array_type, name)
        monkeypatch.setattr(
            array_type,
            name,
            lambda self, *args, _f=original, _n=name, **kw: copies.append((_n, self.shape)) or _f(self, *args, **kw),
        )
    to_device = cuda.to_device
    monkeypatch.setattr(
        cuda, "to_device", lambda v, *args, **kw: copies.append(("to_device", np.shape(v))) or to_device(v, *args, **kw)
    )
    x = tridiag.solve(*device, method="hybrid")
    # Device arrays: nothing crosses but the failure flags, 4 bytes a system.
    assert copies == [("copy_to_host", (3,))] and cuda.devicearray.is_cuda_ndarray(x)
    copies.clear()
    x = tridiag.solve(*system, method="hybrid")
    # Host arrays: each of a, b, c, d straight into its plane (the simulator's copies see them
    # flattened), x, and the flags.
    assert copies == [("copy_to_device", (3 * 40,))] * 4 + [("copy_to_host", (3 * 40,)), ("copy_to_host", (3,))]
    check(x, system, np.float64)


def test_host_inputs_are_never_modified_and_kept_buffers_never_leak_between_calls(rng):
    first, second = dominant(rng, 3, 40), dominant(rng, 3, 40)
    saved = [v.copy() for v in first + second]
    x1 = tridiag.solve(*first)
    x2 = tridiag.solve(*second)  # the same shape: the same kept device and pinned buffers
    assert all(np.array_equal(v, w) for v, w in zip(first + second, saved))
    check(x1, first, np.float64), check(x2, second, np.float64)
    d1 = tridiag.solve(*(cuda.to_device(v) for v in first))
    d2 = tridiag.solve(*(cuda.to_device(v) for v in second))
    check(d1.copy_to_host(), first, np.float64), check(d2.copy_to_host(), second, np.float64)


@pytest.mark.parametrize("method", ("auto", "hybrid"))
def test_a_failure_does_not_leak_into_the_next_call(method, rng):
    a, b, c, d = dominant(rng, 4, 10)
    bad_a, bad_b = a.copy(), b.copy()
    bad_b[1, 0] = bad_a[1, 1] = 0  # column 0 of system 1 empty: singular, a zero pivot without pivoting
    with pytest.raises(np.linalg.LinAlgError, match="system 1 of 4"):
        tridiag.solve(bad_a, bad_b, c, d, method=method)
    check(tridiag.solve(a, b, c, d, method=method), (a, b, c, d), np.float64)


def test_a_large_system_through_global_memory(rng):
    n = pcr.max_block_rows(np.float32) + 64
    system = dominant(rng, 1, n)
    check(solve(system, np.float32, "pcr"), system, np.float32)


@pytest.mark.parametrize("method", METHODS)
def test_device_arrays_in_give_a_device_array_out(method, rng):
    system = dominant(rng, 3, 9)
    x = tridiag.solve(*(cuda.to_device(v) for v in system), method=method)
    assert cuda.devicearray.is_cuda_ndarray(x) and x.shape == (3, 9)
    check(x.copy_to_host(), system, np.float64)


def test_an_empty_batch_gives_an_empty_result():
    x = tridiag.solve(*np.ones((4, 0, 5), np.float32))
    assert x.shape == (0, 5) and x.dtype == np.float32


@pytest.mark.parametrize("method", NON_PIVOTING)
def test_a_zero_pivot_names_the_failing_system(method, rng):
    a, b, c, d = dominant(rng, 6, 12)
    b[3] = 0
    with pytest.raises(np.linalg.LinAlgError, match=r"system 3 of 6 .*zero pivot"):
        tridiag.solve(a, b, c, d, method=method)


@pytest.mark.parametrize("method", NON_PIVOTING)
def test_a_nonsingular_system_that_needs_pivoting_is_refused(method):
    # [[0, 1], [1, 1]] is invertible, but its first pivot is 0: these methods do not pivot.
    with pytest.raises(np.linalg.LinAlgError, match="system 0 of 1 .*zero pivot"):
        tridiag.solve(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([1.0, 0.0]), np.ones(2), method=method)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # numba's stock simulator warns on inf - inf
@pytest.mark.parametrize("method", METHODS)
def test_a_non_finite_result_names_the_failing_system(method, rng):
    a, b, c, d = dominant(rng, 5, 9)
    d[2, 4] = np.inf
    with pytest.raises(np.linalg.LinAlgError, match=r"system 2 of 5 .*non-finite"):
        tridiag.solve(a, b, c, d, method=method)


@pytest.mark.parametrize("dtype", (np.int32, np.float16, np.complex128, bool))
def test_an_unsupported_dtype_is_a_type_error_naming_it(dtype):
    good = np.ones(4)
    with pytest.raises(TypeError, match=rf"{np.dtype(dtype).name}.*float32 and float64"):
        tridiag.solve(good, good, np.ones(4, dtype), good)


def test_mixed_dtypes_are_a_type_error():
    with pytest.raises(TypeError, match="float64, float64, float32, float64"):
        tridiag.solve(np.ones(4), np.ones(4), np.ones(4, np.float32), np.ones(4))


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((4,), (4,), (4,), (5,)), r"one shape; got \(4,\), \(4,\), \(4,\), \(5,\)"),
        (((2, 4), (2, 4), (2, 4), (4,)), r"\(2, 4\), \(2, 4\), \(2, 4\), \(4,\)"),
        (((1, 2, 4),) * 4, r"a must be 1-D or 2-D; got an array of shape \(1, 2, 4\)"),  # core.inputs' one wording
        (((3, 0),) * 4, r"n >= 1"),
    ],
)
def test_bad_shapes_are_value_errors_naming_them(shapes, message):
    with pytest.raises(ValueError, match=message):
        tridiag.solve(*(np.ones(s) for s in shapes))


def test_an_unknown_method_is_a_value_error_listing_the_methods():
    with pytest.raises(ValueError, match="unknown method 'gauss'; allowed: auto, pcr, cr, thomas"):
        tridiag.solve(*np.ones((4, 3)), method="gauss")
