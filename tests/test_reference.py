"""The reference: the vectorised scan gives the sequential loops' results, bit for bit."""

import itertools

import numpy as np
import pytest

import prefixsum as ps
from prefixsum.scans.testing import random_input

SIZES = (0, 1, 2, 31, 32, 33, 1000)
DIRECTIONS = tuple(itertools.product((True, False), (False, True)))  # (inclusive, reverse)


@pytest.mark.parametrize("dtype", ps.DTYPES)
@pytest.mark.parametrize("op", ps.OPS)
def test_vectorised_scan_equals_the_loop(op, dtype, rng):
    """Every op, dtype, direction and size; floats with a NaN and an infinity in the middle."""
    for n, (inclusive, reverse) in itertools.product(SIZES, DIRECTIONS):
        x = random_input(n, op, dtype, rng)
        if dtype.kind == "f" and n > 2:
            x[n // 3], x[2 * n // 3] = np.inf, np.nan
        fast = ps.reference.scan(x, op, inclusive=inclusive, reverse=reverse)
        loop = ps.reference.scan_loop(x, op, inclusive=inclusive, reverse=reverse)
        where = f"n={n} inclusive={inclusive} reverse={reverse}"
        assert fast.dtype == loop.dtype == dtype, where
        assert fast.tobytes() == loop.tobytes(), f"{where}: {fast} != {loop}"  # bits: -0.0, NaN
        wide = ps.reference.scan_float64(x, op, inclusive=inclusive, reverse=reverse)
        assert (
            wide.tobytes()
            == ps.reference.scan_loop(x.astype(np.float64), op, inclusive=inclusive, reverse=reverse).tobytes()
        ), where


def test_a_sum_starting_at_negative_zero_is_positive_zero_in_both():
    """The loop starts from the identity +0.0, and +0.0 + -0.0 is +0.0: so does the vectorised scan."""
    x = np.array([-0.0, -0.0], np.float32)
    for inclusive in (True, False):
        assert np.signbit(ps.reference.scan(x, inclusive=inclusive)).tolist() == [False, False]


def test_the_seeds_loops_agree_with_the_scan():
    """The partial-sum notebook's partial_sums and the lab sheet's exclusive_partial_sums, on Python lists."""
    x = [3, 2, 1, 2, 1, 4, 3, 2, 4, 3]
    assert ps.reference.partial_sums(x) == ps.reference.scan(np.array(x, np.int64)).tolist()
    assert ps.reference.exclusive_partial_sums(x) == ps.reference.scan(np.array(x, np.int64), inclusive=False).tolist()


def test_integer_wraparound_is_numpys():
    for dtype in (np.int32, np.uint32, np.int64, np.uint64):
        big = np.full(50, np.iinfo(dtype).max // 3 + 7, dtype=dtype)
        np.testing.assert_array_equal(ps.reference.scan(big), np.cumsum(big, dtype=dtype))
        np.testing.assert_array_equal(ps.reference.scan(big, "mul"), np.cumprod(big, dtype=dtype))


def test_errors_name_the_problem():
    with pytest.raises(TypeError, match=r"unsupported dtype 'float16'"):
        ps.reference.scan(np.ones(3, np.float16))
    with pytest.raises(ValueError, match=r"unknown op 'sub'"):
        ps.reference.scan(np.ones(3), "sub")
