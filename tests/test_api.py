"""The public interface: kinds of arrays in and out, bad inputs and their messages.

Every bad input must raise before any kernel is launched: :func:`refused` runs the call under
the tracer (:func:`prefixsum.trace.record`), which counts every launch, and checks the input.
"""

import itertools
import re
import warnings

import numpy as np
import pytest
from numba import cuda

import prefixsum as ps
from prefixsum.scans import api


def test_numpy_in_numpy_out_and_input_unchanged():
    x = np.array([4, -1, 7, 2, 9], dtype=np.int64)
    before = x.copy()
    out = ps.scan(x)
    assert isinstance(out, np.ndarray) and out.dtype == x.dtype
    assert out.tolist() == [4, 3, 10, 12, 21]
    np.testing.assert_array_equal(x, before)


def test_device_in_device_out():
    x = np.array([1.5, 2.0, -3.0], dtype=np.float32)
    d = cuda.to_device(x)
    out = ps.scan(d, "max")
    assert cuda.devicearray.is_cuda_ndarray(out)
    np.testing.assert_array_equal(out.copy_to_host(), [1.5, 2.0, 2.0])
    np.testing.assert_array_equal(d.copy_to_host(), x)


@pytest.mark.parametrize("dtype", ps.DTYPES)
def test_empty_input(dtype):
    out = ps.scan(np.zeros(0, dtype))
    assert out.shape == (0,) and out.dtype == dtype
    assert ps.scan(cuda.to_device(np.zeros(0, dtype))).shape == (0,)


def test_lists_are_accepted():
    assert ps.scan([1, 2, 3]).tolist() == [1, 3, 6]


def refused(error, match, x, *args, **kwargs):
    """Assert that ``ps.scan(x, *args, **kwargs)`` raises ``error`` with a message matching
    ``match`` before any kernel is launched (the tracer counts launches), leaving ``x`` as it was."""
    before = x.copy_to_host() if cuda.devicearray.is_cuda_ndarray(x) else np.array(x, copy=True)
    run = ps.trace.record(ps.scan, x, *args, **kwargs)
    assert isinstance(run.error, error), f"expected {error.__name__}, got {run.error!r}"
    assert re.search(match, str(run.error)), f"{str(run.error)!r} does not match {match!r}"
    assert run.launches == [], f"kernels were launched before the error: {[launch.kernel for launch in run.launches]}"
    after = x.copy_to_host() if cuda.devicearray.is_cuda_ndarray(x) else x
    np.testing.assert_array_equal(after, before, err_msg="the input was modified")


ALLOWED_DTYPES = "allowed dtypes: int32, uint32, int64, uint64, float32, float64"


@pytest.mark.parametrize(
    "bad, name",
    [
        (np.bool_, "bool"),
        (np.float16, "float16"),
        (np.complex64, "complex64"),
        (np.complex128, "complex128"),
        (object, "object"),
        ("U3", "<U3"),
        (np.int8, "int8"),
        (np.uint16, "uint16"),
        ("M8[ns]", "datetime64[ns]"),
    ],
)
def test_unsupported_dtype_is_a_type_error_naming_it(bad, name):
    refused(TypeError, rf"^unsupported dtype {re.escape(repr(name))}; {ALLOWED_DTYPES}$", poison(bad))


def test_big_endian_input_is_scanned_in_native_byte_order():
    """numpy's cumsum accepts either byte order; so does scan, and the caller's array is untouched."""
    for dtype in ps.DTYPES:
        big = np.arange(1, 6).astype(dtype.newbyteorder(">"))
        before = big.copy()
        for out in (ps.scan(big, algorithm="ladder"), ps.reference.scan(big)):
            assert out.dtype == dtype and out.dtype.isnative, out.dtype
            np.testing.assert_array_equal(out, np.cumsum(big.astype(dtype), dtype=dtype))
        assert big.dtype.byteorder == ">" and big.tobytes() == before.tobytes()
    np.testing.assert_array_equal(
        ps.scan(np.arange(5, dtype=">i4"), "max", inclusive=False), [np.iinfo(np.int32).min, 0, 1, 2, 3]
    )


def test_a_device_array_in_the_other_byte_order_is_refused_saying_so():
    refused(
        TypeError,
        r"unsupported byte order: dtype '>f8' is big-endian \(float64\)",
        cuda.to_device(np.arange(5, dtype=">f8")),
    )
    refused(TypeError, r"^unsupported dtype 'float16'", np.arange(5, dtype=">f2"))  # converted, then refused


@pytest.mark.parametrize(
    "x, shape",
    [
        (np.ones((2, 3), np.float32), r"\(2, 3\) \(ndim=2\)"),
        (np.float32(3), r"\(\) \(ndim=0\)"),
        (cuda.to_device(np.ones((4, 2), np.int64)), r"\(4, 2\) \(ndim=2\)"),
    ],
)
def test_input_not_one_dimensional(x, shape):
    refused(ValueError, r"x must be 1-D; got an array of shape " + shape, x)


def test_a_non_contiguous_device_array():
    refused(
        ValueError,
        r"a device array x must be contiguous; got strides \(16,\) for elements of 8 bytes",
        cuda.to_device(np.arange(10.0))[::2],
    )


def test_unknown_op():
    refused(ValueError, r"unknown op 'sub'; allowed ops: add, mul, max, min", poison(np.float32), "sub")
    refused(ValueError, r"unknown op None; allowed ops: add, mul, max, min", poison(np.int32), None)


def test_unknown_algorithm():
    refused(
        ValueError,
        r"unknown algorithm 'quick'; allowed: auto, ladder, folding, hillis_steele, blelloch, kstep, "
        r"hierarchical",
        poison(np.float32),
        algorithm="quick",
    )


@pytest.mark.parametrize("bad", (0, 48, 2048, 16, "256", True))
def test_invalid_option_value(bad):
    refused(
        ValueError,
        rf"option block_size={re.escape(repr(bad))} must be a power of two from 32 to 1024",
        poison(np.float32),
        algorithm="ladder",
        block_size=bad,
    )


def test_unknown_option():
    refused(
        ValueError,
        r"unknown option 'L' for algorithm 'ladder'; allowed options: block_size",
        poison(np.float32),
        algorithm="ladder",
        L=3,
    )
    refused(
        ValueError,
        r"unknown option 'block' for algorithm 'hierarchical'; allowed options: block_size, "
        r"items_per_thread",
        poison(np.float32),
        algorithm="hierarchical",
        block=3,
    )


def test_flags_must_be_bools():
    refused(ValueError, r"inclusive must be True or False; got 'yes'", poison(np.float32), inclusive="yes")
    refused(ValueError, r"reverse must be True or False; got 1", poison(np.float32), reverse=1)


def test_a_repeated_device_call_is_still_checked_and_scanned_afresh(rng):
    """A device call seen before skips the checks its key proves (api._device_call): the arguments
    the key does not prove are still refused, and each call scans its own input. Without the
    tracer, which on a GPU runs the call on the simulator with the array's contents (contiguous)."""
    n = 1000
    inputs = [rng.integers(-50, 50, n).astype(np.int32) for _ in range(3)]
    for x in inputs:
        for inclusive, reverse in ((True, False), (False, True)):
            got = ps.scan(cuda.to_device(x), inclusive=inclusive, reverse=reverse).copy_to_host()
            expected = np.cumsum(x[::-1] if reverse else x, dtype=np.int32)
            expected = np.concatenate(([0], expected[:-1])) if not inclusive else expected
            np.testing.assert_array_equal(got, expected[::-1] if reverse else expected)
    wide = cuda.to_device(np.arange(2 * n, dtype=np.int32))
    view = wide[:n]  # contiguous, of the key's shape: scanned
    view.copy_to_device(inputs[0])
    np.testing.assert_array_equal(ps.scan(view).copy_to_host(), np.cumsum(inputs[0], dtype=np.int32))
    x = cuda.to_device(inputs[1])
    for args, kwargs, match in (
        ((wide[::2],), {}, r"a device array x must be contiguous; got strides \(8,\) for elements of 4 bytes"),
        ((x,), {"inclusive": 1}, r"inclusive must be True or False; got 1"),
        ((x, "sub"), {}, r"unknown op 'sub'"),
        ((x,), {"identity": 0}, r"takes one array and no identity"),
        ((cuda.to_device(inputs[2].reshape(10, 100)),), {}, r"x must be 1-D"),
    ):
        with pytest.raises(ValueError, match=match):
            ps.scan(*args, **kwargs)
    np.testing.assert_array_equal(x.copy_to_host(), inputs[1])
    np.testing.assert_array_equal(wide.copy_to_host()[n:], np.arange(n, 2 * n))


def poison(dtype, n=37):
    """An input whose every byte is known (0xA5 repeated where the dtype allows), to see any write."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OU":
        return np.array([f"p{i}" for i in range(n)], dtype=dtype)
    return np.frombuffer(b"\xa5" * (n * dtype.itemsize), dtype=dtype).copy()


@pytest.mark.parametrize("name", ps.ALGORITHMS)
def test_a_good_input_is_never_modified(name):
    """Every algorithm, numpy and device arrays, every direction: the input keeps every byte."""
    for dtype, (inclusive, reverse) in zip(
        (np.float64, np.uint32, np.int64, np.float32), itertools.product((True, False), (False, True))
    ):
        x = poison(dtype, 300)
        before = x.tobytes()
        x.flags.writeable = False  # a numpy input is only read
        ps.scan(x, "max", inclusive=inclusive, reverse=reverse, algorithm=name)
        assert x.tobytes() == before
        device = cuda.to_device(x)
        ps.scan(device, "add", inclusive=inclusive, reverse=reverse, algorithm=name)
        assert device.copy_to_host().tobytes() == before, f"{name} modified its device input"


def test_the_tracer_sees_the_launches_of_a_good_scan():
    """So that :func:`refused`'s zero launches means something."""
    run = ps.trace.record(ps.scan, np.ones(40, np.float32), algorithm="ladder", block_size=32)
    assert run.error is None and [launch.kernel for launch in run.launches] == [
        "ladder_tile",
        "ladder_tile",
        "carry_into_tile",
    ]


def test_a_long_simulation_is_announced_once_before_it_starts(monkeypatch):
    monkeypatch.setattr(api, "_announced_slow", False)
    monkeypatch.setattr(api, "SLOW_SIMULATION_S", 1e-4)  # 100 elements take longer than this
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            ps.scan(np.arange(100), algorithm="kstep")
    notices = [w for w in caught if "on the CUDA simulator" in str(w.message)]
    assert len(notices) == 1, [str(w.message) for w in caught]
    assert re.match(
        r"prefixsum: scanning 100 elements with 'kstep' on the CUDA simulator will take about 0 s",
        str(notices[0].message),
    )
    assert notices[0].filename == __file__  # it points at the caller's line
    # before the start: raised as an error, the warning stops the scan before any launch
    monkeypatch.setattr(api, "_announced_slow", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        run = ps.trace.record(ps.scan, np.arange(100))
    assert isinstance(run.error, UserWarning) and run.launches == []


def test_a_short_simulation_is_not_announced(monkeypatch):
    monkeypatch.setattr(api, "_announced_slow", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ps.scan(np.arange(1000))
    assert not api._announced_slow


def test_the_estimate_grows_with_n_and_names_the_algorithm():
    """10 million elements: minutes on the classroom simulator, an hour or more on numba's."""
    assert 200 < api.simulation_seconds(10_000_000, "hierarchical") < 2000
    assert api.simulation_seconds(2_000_000, "ladder") == 2 * api.simulation_seconds(1_000_000, "ladder")
    with ps.sim.enabled(False):
        assert api.simulation_seconds(10_000_000, "ladder") > 3600
    assert api.simulation_seconds(1000, "a user's algorithm") > 0


def test_identity_values():
    assert ps.identity("add", np.uint32) == 0
    assert ps.identity("mul", np.float64) == 1
    assert ps.identity("max", np.int32) == np.iinfo(np.int32).min
    assert ps.identity("min", np.uint64) == np.iinfo(np.uint64).max
    assert ps.identity("max", np.float32) == -np.inf


def test_device_info():
    info = ps.device_info()
    assert isinstance(info["simulator"], bool) and isinstance(info["name"], str)


def test_registry_rejects_a_duplicate_name():
    with pytest.raises(ValueError, match="already taken"):
        ps.register(ps.ALGORITHMS["ladder"])


def test_auto_avoids_warp_intrinsics_on_the_stock_simulator():
    x = np.arange(1, 100, dtype=np.int64)
    assert ps.scans.registry.lookup("auto").name == "lookback"
    with ps.sim.enabled(False):
        assert ps.scans.registry.lookup("auto").name == "ladder"
        np.testing.assert_array_equal(ps.scan(x), np.cumsum(x))
