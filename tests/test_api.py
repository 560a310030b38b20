"""The public interface: kinds of arrays in and out, bad inputs and their messages."""
import numpy as np
import pytest
from numba import cuda

import prefixsum as ps


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


@pytest.mark.parametrize("bad", [np.bool_, np.float16, np.complex64, np.int8, np.uint16, object, "U3"])
def test_unsupported_dtype_is_a_type_error(bad):
    x = np.zeros(4, dtype=bad)
    with pytest.raises(TypeError, match=r"unsupported dtype .*allowed dtypes: int32, uint32, int64, uint64, float32, float64"):
        ps.scan(x)


def test_two_dimensional_input():
    with pytest.raises(ValueError, match=r"x must be 1-D; got an array of shape \(2, 3\)"):
        ps.scan(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"x must be 1-D; got an array of shape \(\)"):
        ps.scan(np.float32(3))


def test_unknown_op():
    with pytest.raises(ValueError, match=r"unknown op 'sub'; allowed ops: add, mul, max, min"):
        ps.scan(np.ones(3, np.float32), "sub")


def test_unknown_algorithm():
    with pytest.raises(ValueError, match=r"unknown algorithm .quick.; allowed: auto, ladder, folding, hillis_steele, blelloch, kstep, hierarchical"):
        ps.scan(np.ones(3, np.float32), algorithm="quick")


def test_unknown_and_invalid_options():
    with pytest.raises(ValueError, match=r"unknown option 'L' for algorithm 'ladder'; allowed options: block_size"):
        ps.scan(np.ones(3, np.float32), algorithm="ladder", L=3)
    for bad in (0, 48, 2048, 16, "256", True):
        with pytest.raises(ValueError, match=r"option block_size=.* must be a power of two from 32 to 1024"):
            ps.scan(np.ones(3, np.float32), algorithm="ladder", block_size=bad)


def test_flags_must_be_bools():
    with pytest.raises(ValueError, match=r"inclusive must be True or False; got 'yes'"):
        ps.scan(np.ones(3, np.float32), inclusive="yes")


def test_errors_come_before_any_launch_and_leave_input_alone():
    x = np.arange(5, dtype=np.float32)
    before = x.copy()
    with pytest.raises(ValueError):
        ps.scan(x, "pow")
    np.testing.assert_array_equal(x, before)


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
    assert ps.scans.registry.lookup("auto").name == "hierarchical"
    with ps.sim.enabled(False):
        assert ps.scans.registry.lookup("auto").name == "ladder"
        np.testing.assert_array_equal(ps.scan(x), np.cumsum(x))
