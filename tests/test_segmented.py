"""apps.segmented_scan: inclusive and exclusive, forward and reverse, every op, in one pass."""

import re
import textwrap

import numpy as np
import pytest
from numba import cuda

import prefixsum as ps
from prefixsum import apps
from prefixsum.apps import segmented

SIZES = (1, 2, 31, 33, 65, 300)  # tiles of 64 (32 threads x 2): one to five
VARIANTS = [(True, False), (False, False), (True, True), (False, True)]
SMALL = {"block_size": 32, "items_per_thread": 2}


def values(n, dtype, op, rng):
    if np.dtype(dtype).kind == "f":
        return (rng.uniform(0.5, 1.5, n) if op == "mul" else rng.normal(size=n)).astype(dtype)
    return rng.integers(0 if np.dtype(dtype).kind == "u" else -5, 6, n).astype(dtype)


def assert_matches(got, x, flags, op, inclusive, reverse):
    expected = segmented.reference(x, flags, op, inclusive=inclusive, reverse=reverse)
    assert got.dtype == x.dtype and got.shape == x.shape
    if x.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected)
        return
    # a float result may differ by the rounding of the sums of magnitudes along its segment
    magnitude = segmented.reference(
        np.abs(x.astype(np.float64)), flags, "add" if op == "add" else "max", inclusive=True, reverse=reverse
    )
    allowed = 16 * np.finfo(x.dtype).eps * np.maximum(magnitude, 1.0) * (4 if op == "mul" else 1)
    with np.errstate(invalid="ignore"):  # inf - inf at an exclusive max's identity
        bad = ~(
            (np.abs(got.astype(np.float64) - expected) <= allowed)
            | (got == expected)
            | (np.isnan(got) & np.isnan(expected))
        )
    assert not bad.any(), f"wrong at {np.flatnonzero(bad)[:5]}"


@pytest.mark.parametrize(
    "algorithm, op",
    [
        ("lookback", "add"),
        ("lookback", "mul"),
        ("lookback", "max"),
        ("lookback", "min"),
        ("hierarchical", "add"),
        ("hierarchical", "min"),
    ],
)
@pytest.mark.parametrize("inclusive, reverse", VARIANTS)
def test_every_op_and_direction_against_numpy_segment_by_segment(algorithm, op, inclusive, reverse):
    for n in SIZES:
        rng = np.random.default_rng(n)
        dtype = ("int32", "float32", "float64", "uint64")[n % 4]
        x = values(n, dtype, op, rng)
        for density in (0.1, 0.005):  # many short segments; segments across several tiles
            flags = rng.random(n) < density
            before = (x.copy(), flags.copy())
            got = apps.segmented_scan(x, flags, op, inclusive=inclusive, reverse=reverse, algorithm=algorithm, **SMALL)
            assert_matches(got, x, flags, op, inclusive, reverse)
            np.testing.assert_array_equal(x, before[0]), np.testing.assert_array_equal(flags, before[1])


@pytest.mark.parametrize("inclusive, reverse", VARIANTS)
def test_no_flag_is_a_plain_scan_and_every_flag_is_the_identity_or_the_element(inclusive, reverse):
    x = np.arange(1, 201, dtype=np.int64)
    plain = ps.scan(x, inclusive=inclusive, reverse=reverse)
    np.testing.assert_array_equal(
        apps.segmented_scan(x, np.zeros(200, bool), inclusive=inclusive, reverse=reverse, **SMALL), plain
    )
    every = apps.segmented_scan(x, np.ones(200, np.int8), inclusive=inclusive, reverse=reverse, **SMALL)
    np.testing.assert_array_equal(every, x if inclusive else np.zeros(200, np.int64))


def test_flags_are_nonzero_values_of_any_integer_dtype_and_element_0_starts_a_segment():
    x = np.arange(1, 7, dtype=np.int32)
    for flags in ([0, 0, 0, 7, 0, 0], np.array([5, 0, 0, -1, 0, 0], np.int64), np.array([0, 0, 0, 1, 0, 0], np.uint8)):
        np.testing.assert_array_equal(apps.segmented_scan(x, flags), [1, 3, 6, 4, 9, 15])


@pytest.mark.parametrize("op, ufunc", [("max", np.maximum), ("min", np.minimum), ("add", np.add)])
def test_nan_spreads_within_its_segment_as_numpy(op, ufunc):
    x = np.array([1.0, np.nan, 3.0, 2.0, 5.0, np.nan, 0.5], np.float32)
    flags = np.array([1, 0, 0, 1, 0, 0, 1])
    expected = np.concatenate([ufunc.accumulate(part) for part in np.split(x, [3, 6])])
    np.testing.assert_array_equal(apps.segmented_scan(x, flags, op), expected)
    reverse = np.concatenate([ufunc.accumulate(part[::-1])[::-1] for part in np.split(x, [3, 6])])
    np.testing.assert_array_equal(apps.segmented_scan(x, flags, op, reverse=True), reverse)


def test_device_input_gives_device_output_and_an_empty_input_an_empty_result():
    x = np.arange(1, 101, dtype=np.float64)
    flags = (np.arange(100) % 7 == 0).astype(np.int32)
    got = apps.segmented_scan(cuda.to_device(x), cuda.to_device(flags), "add", inclusive=False)
    assert hasattr(got, "copy_to_host")
    np.testing.assert_array_equal(got.copy_to_host(), segmented.reference(x, flags, inclusive=False))
    empty = apps.segmented_scan(x[:0], flags[:0], "max", reverse=True)
    assert empty.shape == (0,) and empty.dtype == np.float64


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda x, f: apps.segmented_scan(x, f.astype(np.float32)), TypeError, "bool or integers; got dtype float32"),
        (lambda x, f: apps.segmented_scan(x, f.reshape(2, 4)), ValueError, "flags must be 1-D"),
        (lambda x, f: apps.segmented_scan(x, f[:5]), ValueError, "one length; got 8 and 5"),
        (lambda x, f: apps.segmented_scan(x, cuda.to_device(f)), ValueError, "both numpy arrays or both device arrays"),
        (lambda x, f: apps.segmented_scan(x, f, "sub"), ValueError, "unknown op 'sub'"),
        (lambda x, f: apps.segmented_scan(x.astype(np.float16), f), TypeError, "unsupported dtype 'float16'"),
        (lambda x, f: apps.segmented_scan(x.reshape(2, 4), f), ValueError, "x must be 1-D"),
        (lambda x, f: apps.segmented_scan(x, f, inclusive=None), ValueError, "inclusive must be True or False"),
        (lambda x, f: apps.segmented_scan(x, f, algorithm="ladder"), ValueError, "cannot combine every element"),
        (lambda x, f: apps.segmented_scan(x, f, block_size=48), ValueError, "block_size=48"),
    ],
)
def test_bad_input_is_refused_before_a_launch(call, error, message):
    x, flags = np.arange(8.0), np.array([1, 0, 0, 1, 0, 0, 0, 1])
    run = ps.trace.record(call, x, flags)
    assert isinstance(run.error, error) and re.search(re.escape(message), str(run.error)), repr(run.error)
    assert run.launches == []


def test_a_good_call_is_one_launch():
    """So that the refusals' zero launches mean something, and the scan is one pass."""
    x = np.arange(300.0)
    flags = np.arange(300) % 50 == 0
    for inclusive, reverse in VARIANTS:
        run = ps.trace.record(apps.segmented_scan, x, flags, inclusive=inclusive, reverse=reverse, **SMALL)
        assert run.error is None and [launch.kernel for launch in run.launches] == ["scan"]


def test_segmented_operators_compile_to_ptx(ptx_child):
    code = """
        import numpy as np
        from numba import cuda
        import prefixsum
        from prefixsum.apps import segmented
        from prefixsum.scans import user_ops
        from prefixsum.core.numba_gpu import pretend_device
        pretend_device((9, 0))
        for inclusive in (True, False):  # each variant's operator; max for its NaN test, float32 for 4-byte fields
            for reverse in (False, True):
                operator, _, scan_inclusive = segmented.operator("max", np.dtype("float32"), inclusive, reverse)
                chosen = user_ops.choose("lookback")
                for kernel, argtypes in user_ops.kernels(operator, scan_inclusive, reverse, chosen):
                    cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
                    print("ok", inclusive, reverse)
    """
    child = ptx_child(textwrap.dedent(code))
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.count("ok ") == 4
