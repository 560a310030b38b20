"""prefixsum.apps against numpy and scipy: compaction, radix sort, recurrences, segmented scans,
the tridiagonal solve as a scan, cubic splines."""

import textwrap

import numpy as np
import pytest
import scipy.interpolate
import scipy.linalg
import scipy.signal
from numba import cuda

import prefixsum as ps
from prefixsum import apps

SIZES = (1, 2, 33, 257, 600)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float64", "int32", "uint64"])
def test_compact_is_x_of_mask(n, dtype):
    rng = np.random.default_rng(n)
    x = rng.integers(0, 1000, n).astype(dtype)
    mask = rng.random(n) < 0.3
    before = x.copy()
    np.testing.assert_array_equal(apps.compact(x, mask), x[mask])
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(apps.compact(x, np.ones(n, bool)), x)
    assert apps.compact(x, np.zeros(n, bool)).shape == (0,)


def test_compact_on_device_and_bad_input():
    x = np.arange(10.0)
    out = apps.compact(cuda.to_device(x), cuda.to_device(x % 2 == 0))
    np.testing.assert_array_equal(out.copy_to_host(), x[::2])
    assert apps.compact(x[:0], x[:0] > 0).shape == (0,)
    with pytest.raises(ValueError, match="one length"):
        apps.compact(x, x[:3] > 0)


def _keys(n, dtype, rng):
    if np.dtype(dtype).kind == "f":
        keys = (rng.normal(size=n) * 10.0 ** rng.integers(-30, 30, n)).astype(dtype)
        keys[: min(n, 3)] = [np.inf, -np.inf, 0.0][: min(n, 3)]
    else:
        info = np.iinfo(dtype)
        keys = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    keys[n // 2 :] = rng.choice(keys[: max(n // 2, 1)], size=n - n // 2)  # many equal keys: stability shows
    return keys


@pytest.mark.parametrize("n", (1, 2, pytest.param(100, marks=pytest.mark.slow)))  # up to 64 scans per sort
@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64", "float32", "float64"])
def test_the_one_bit_radix_sort_is_a_stable_sort(n, dtype):
    rng = np.random.default_rng(n)
    keys = _keys(n, dtype, rng)
    before = keys.copy()
    values = rng.normal(size=n)
    got_keys, got_values = apps.radix_sort_one_bit(keys, values)
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(got_keys, keys[order])
    np.testing.assert_array_equal(got_values, values[order])
    np.testing.assert_array_equal(keys, before)
    assert got_keys.dtype == keys.dtype


def test_the_one_bit_radix_sort_puts_negative_zero_first_and_nan_last():
    keys = np.array([np.nan, 0.0, -0.0, 1.0, -1.0], np.float32)
    got = apps.radix_sort_one_bit(keys)
    np.testing.assert_array_equal(np.signbit(got[1:3]), [True, False])
    assert np.isnan(got[-1]) and got[0] == -1


def test_one_split_moves_zeros_first_in_order():
    keys = cuda.to_device(np.array([5, 2, 7, 4, 1], np.uint32))
    split, values = apps.split_by_bit(keys, 0, cuda.to_device(np.arange(5)))
    np.testing.assert_array_equal(split.copy_to_host(), [2, 4, 5, 7, 1])
    np.testing.assert_array_equal(values.copy_to_host(), [1, 3, 0, 2, 4])


def test_the_one_bit_radix_sort_splits_only_by_the_bits_in_which_keys_differ(monkeypatch):
    splits = []
    split = apps.radix.split_by_bit
    monkeypatch.setattr(
        apps.radix,
        "split_by_bit",
        lambda keys, bit, values, **where: splits.append(bit) or split(keys, bit, values, **where),
    )
    keys = np.array([0b1010, 0b0010, 0b1000, 0b1010] * 10, np.int64)
    np.testing.assert_array_equal(apps.radix_sort_one_bit(keys), np.sort(keys))
    assert splits == [1, 3]


def test_the_one_bit_radix_sort_refuses_other_dtypes():
    with pytest.raises(TypeError, match="float16"):
        apps.radix_sort_one_bit(np.ones(3, np.float16))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_linear_recurrence_is_the_loop(n, dtype):
    rng = np.random.default_rng(n)
    a, b = rng.uniform(-1, 1, n).astype(dtype), rng.normal(size=n).astype(dtype)
    x, expected = 0.5, []
    for ai, bi in zip(a.astype(float), b.astype(float)):
        x = ai * x + bi
        expected.append(x)
    tolerance = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(apps.linear_recurrence(a, b, x0=0.5), expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize(
    "b, a",
    [([0.2], [1, -0.8]), ([0.1, 0.2, 0.1], [1, -1.2, 0.5]), ([1.0, 2.0], [2.0]), ([0.5, 0.5], [2.0, -1.9, 0.95])],
)
def test_lfilter_matches_scipy(b, a):
    x = np.random.default_rng(0).normal(size=700)
    np.testing.assert_allclose(apps.lfilter(b, a, x), scipy.signal.lfilter(b, a, x), atol=1e-11)


def test_lfilter_refuses_a_longer_denominator():
    with pytest.raises(ValueError, match="1 to 3"):
        apps.lfilter([1.0], [1.0, 0.1, 0.1, 0.1], np.ones(4))


@pytest.mark.parametrize("op", ["add", "mul", "max", "min"])
@pytest.mark.parametrize("n", SIZES)
def test_segmented_scan_restarts_at_every_flag(op, n):
    rng = np.random.default_rng(n)
    x = rng.integers(-5, 6, n).astype(np.int64)
    flags = (rng.random(n) < 0.1).astype(np.int32)
    starts = np.flatnonzero(flags)
    expected = np.concatenate(
        [
            getattr(np, {"add": "cumsum", "mul": "cumprod"}.get(op, ""))(part)
            if op in ("add", "mul")
            else getattr(np, "maximum" if op == "max" else "minimum").accumulate(part)
            for part in np.split(x, starts)
            if part.size
        ]
    )
    np.testing.assert_array_equal(apps.segmented_scan(x, flags, op), expected)


def test_tridiagonal_scan_agrees_with_pcr_and_scipy_on_small_systems_and_loses_accuracy_on_large():
    rng = np.random.default_rng(4)

    def errors(n):
        a, c = rng.uniform(0.5, 1, (2, n))
        b, d = 3 + rng.random(n), rng.normal(size=n)
        banded = np.vstack([np.r_[0, c[:-1]], b, np.r_[a[1:], 0]])
        exact = scipy.linalg.solve_banded((1, 1), banded, d)
        return (
            np.abs(apps.tridiagonal_scan(a, b, c, d) - exact).max(),
            np.abs(ps.tridiag.solve(a, b, c, d) - exact).max(),
        )

    scan_small, pcr_small = errors(8)
    assert scan_small < 1e-10 and pcr_small < 1e-13
    scan_large, pcr_large = errors(64)
    assert scan_large > 1e3 * scan_small and pcr_large < 1e-13
    np.testing.assert_allclose(apps.tridiagonal_scan(*[np.array([v]) for v in (0.0, 2.0, 0.0, 3.0)]), [1.5])


@pytest.mark.parametrize("bc_type", ["natural", ((1, 0.5), (1, -0.3))])
@pytest.mark.parametrize("n", (2, 3, 30, 300))
def test_cubic_spline_matches_scipy(bc_type, n):
    rng = np.random.default_rng(n)
    x = np.sort(rng.uniform(0, 10, n)) + np.arange(n) * 1e-3
    y = np.sin(x) + rng.normal(size=n) * 0.1
    ours, theirs = apps.cubic_spline(x, y, bc_type), scipy.interpolate.CubicSpline(x, y, bc_type=bc_type)
    t = np.linspace(x[0] - 1, x[-1] + 1, 301)
    scale = 1 + np.abs(theirs.c).max()
    np.testing.assert_allclose(ours.c, theirs.c, atol=1e-9 * scale)
    for nu in (0, 1, 2):
        np.testing.assert_allclose(ours(t, nu), theirs(t, nu), atol=1e-9 * scale)
    np.testing.assert_allclose(ours.antiderivative()(t), theirs.antiderivative()(t), atol=1e-8 * scale)
    assert ours.integrate(x[0], x[-1]) == pytest.approx(theirs.integrate(x[0], x[-1]), abs=1e-8 * scale)


def test_cubic_spline_bad_input():
    with pytest.raises(ValueError, match="increasing"):
        apps.cubic_spline(np.array([0.0, 0.0, 1.0]), np.ones(3))
    with pytest.raises(ValueError, match="bc_type"):
        apps.cubic_spline(np.arange(3.0), np.ones(3), bc_type="clamped")


def test_the_checkers_of_chapter_11_pass_the_package_and_catch_a_wrong_order():
    assert ps.check.compaction(apps.compact, sizes=(1, 2, 33, 100))
    wrong = ps.check.compaction(lambda x, m: x[::-1][m[::-1]], sizes=(1, 2, 33))
    assert wrong.diagnosis == "wrong-result" and "order" in wrong.hint
    split = ps.check.radix_pass(lambda keys, bit: apps.split_by_bit(cuda.to_device(keys), int(bit))[0], sizes=(1, 33))
    assert split, str(split)
    unstable = ps.check.radix_pass(
        lambda keys, bit: np.sort(keys)[np.argsort((np.sort(keys) >> bit) & 1, kind="stable")], sizes=(33,)
    )
    assert not unstable


def test_the_applications_kernels_compile_to_ptx(ptx_child):
    code = """
        import numpy as np
        from numba import cuda, types
        import prefixsum
        from prefixsum.apps import compaction, radix, recurrences, splines
        from prefixsum.core.numba_gpu import pretend_device
        from prefixsum.scans import user_ops

        pretend_device((9, 0))
        array = lambda t, ndim=1: types.Array(t, ndim, "C")
        kernels = [
            (compaction.to_flags, (array(types.boolean), array(types.int32))),
            (compaction.scatter_kept,
             (array(types.float32), array(types.int32), array(types.int32), array(types.float32))),
            (radix.order_preserving, (array(types.uint64), types.uint64, types.uint64)),
            (radix.restore_keys, (array(types.uint32), types.uint32, types.uint32)),
            (splines.evaluate_pieces,
             (array(types.float64), array(types.float64, 2), array(types.float64), array(types.float64))),
        ]
        for unsigned in (types.uint32, types.uint64):
            kernels.append((radix.zero_flags, (array(unsigned), unsigned, array(types.int32))))
            kernels.append((radix.split_scatter, (array(unsigned), array(types.float64), array(types.int32),
                                                  array(types.int32), array(unsigned), array(types.float64))))
        for kernel, argtypes in kernels:
            cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
            print("ok", kernel.py_func.__name__)
        operators = [
            (recurrences.affine2, recurrences.AFFINE2_IDENTITY, ["float64"] * 6),
            (radix.or_and, (0, 2**32 - 1), ["uint32", "uint32"]),
        ]
        for op, identity, dtypes in operators:
            operator = user_ops.operator_for(op, identity, [np.dtype(d) for d in dtypes], False)
            for kernel, argtypes in user_ops.kernels(operator, True, False, user_ops.choose("auto")):
                cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
                print("ok", kernel.py_func.__name__)
    """
    child = ptx_child(textwrap.dedent(code))
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.count("ok") == 9 + 2  # "auto" carries a user operator on lookback: one kernel
