"""NaN and infinities: every algorithm gives numpy's result, without numpy's RuntimeWarning.

numpy's ``maximum``/``minimum`` propagate NaN (once a NaN is combined the result stays NaN), and
inf + -inf and 0 * inf are NaN. A parallel scan combines in another order than numpy's loop, so
where a NaN or an infinity appears and where it goes must not depend on that order. The truth
here is numpy itself (``ufunc.accumulate`` in the input's dtype), not the package's reference.

Sizes are kept small where the simulator is slow: each (algorithm, op) scans 1, 33, 100 and
600 elements in all four directions, float32 and float64 in turn, and 4097 elements (three
tiles of the largest tile, 2048) with a NaN on a tile boundary.
"""

import itertools
import warnings

import numpy as np
import pytest

import prefixsum as ps
from prefixsum.scans.testing import mismatches, random_input

DIRECTIONS = tuple(itertools.product((True, False), (False, True)))  # (inclusive, reverse)
UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def numpy_scan(x, op, inclusive, reverse):
    """numpy's scan of ``x`` in its dtype: ``accumulate``, mirrored for reverse, shifted for exclusive."""
    ordered = x[::-1] if reverse else x
    with np.errstate(over="ignore", invalid="ignore"):
        out = UFUNCS[op].accumulate(ordered, dtype=x.dtype)
    if not inclusive:
        out = np.concatenate((np.full(1, ps.identity(op, x.dtype)), out[:-1]))[: len(x)]
    return out[::-1] if reverse else out


def special(n, op, dtype, rng, *, nan=(), pos_inf=(), neg_inf=(), zero=()):
    """Random data for ``op`` with NaN, +inf, -inf and 0 at the given indices."""
    x = random_input(n, op, dtype, rng)
    for indices, value in ((zero, 0), (pos_inf, np.inf), (neg_inf, -np.inf), (nan, np.nan)):
        x[[i for i in indices if i < n]] = value
    return x


def assert_numpy_result(x, op, inclusive, reverse, **kw):
    """``ps.scan`` (and the reference) of ``x`` against numpy: NaN and infinities where numpy has
    them, max and min bit for bit, sums and products of finite values within the float tolerance."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = ps.scan(x, op, inclusive=inclusive, reverse=reverse, **kw)
        reference = ps.reference.scan(x, op, inclusive=inclusive, reverse=reverse)
    expected = numpy_scan(x, op, inclusive, reverse)
    where = f"{kw.get('algorithm')} n={len(x)} op={op} dtype={x.dtype} inclusive={inclusive} reverse={reverse}"
    np.testing.assert_array_equal(reference, expected, err_msg=f"reference: {where}")
    if op in ("max", "min"):
        np.testing.assert_array_equal(got, expected, err_msg=where)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=f"NaN positions: {where}")
    infinite = np.isinf(expected)
    np.testing.assert_array_equal(got[infinite], expected[infinite], err_msg=f"infinities: {where}")
    bad, _ = mismatches(got, x, op, inclusive=inclusive, reverse=reverse)
    assert bad.size == 0, f"{where}: {bad.size} wrong, first at {bad[0]}: {got[bad[0]]!r} vs numpy {expected[bad[0]]!r}"


@pytest.mark.parametrize("op", ps.OPS)
@pytest.mark.parametrize("name", ps.ALGORITHMS)
def test_nan_and_infinities_give_numpys_result(name, op, rng):
    """Every direction, with a NaN at the start, in the middle, at the end and at a tile boundary
    (256 is one for every block size of 256 and less), beside +-inf (and 0, for mul's 0 * inf);
    then the infinities without NaN (max and min must keep them, add must meet inf - inf)."""
    cases = (  # (n, where the specials go)
        (1, dict(nan=(0,))),
        (33, dict(nan=(16,), pos_inf=(3,), neg_inf=(29,))),
        (600, dict(nan=(0,), pos_inf=(420,))),  # 600: two tiles of 256 and a part (17 in the test below)
        (600, dict(nan=(599,), pos_inf=(360,), zero=(240,))),
        (600, dict(nan=(256,), pos_inf=(255,), neg_inf=(257,))),
        (100, dict(pos_inf=(10, 60), neg_inf=(40,), zero=(80,))),
    )
    for k, ((n, specials), (inclusive, reverse)) in enumerate(itertools.product(cases, DIRECTIONS)):
        dtype = (np.float32, np.float64)[(k + ps.OPS.index(op)) % 2]
        x = special(n, op, dtype, rng, **specials)
        assert_numpy_result(x, op, inclusive, reverse, algorithm=name)


@pytest.mark.parametrize("op", ps.OPS)
@pytest.mark.parametrize("name", ps.ALGORITHMS)
def test_nan_on_a_tile_boundary_over_several_tiles(name, op, rng):
    """4097 elements: three tiles of hierarchical's 2048, seventeen of the others' 256; the
    direction and dtype rotate over the ops."""
    k = ps.OPS.index(op)
    inclusive, reverse = DIRECTIONS[k]
    x = special(4097, op, (np.float32, np.float64)[k % 2], rng, nan=(2048,), pos_inf=(1000,), neg_inf=(3000,))
    assert_numpy_result(x, op, inclusive, reverse, algorithm=name)


@pytest.mark.parametrize("name", ps.ALGORITHMS)
def test_inf_minus_inf_warns_nowhere(name):
    """numpy warns "invalid value encountered" for inf + -inf; a GPU does not, and neither do
    the scan (its simulated kernels), the reference and the comparison."""
    x = np.array([np.inf, -np.inf, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ps.scan(x, algorithm=name)
        reference = ps.reference.scan(x)
        loop = ps.reference.scan_loop(x)
        bad, _ = mismatches(got, x)
    for result in (got, reference, loop):
        np.testing.assert_array_equal(result, [np.inf, np.nan, np.nan])
    assert bad.size == 0


def test_the_comparison_refuses_a_finite_value_where_numpy_has_an_infinity():
    """Where the reference is inf, its tolerance is inf too: only an equal inf may pass."""
    x = np.array([1.0, np.inf, 2.0], np.float32)
    assert mismatches(np.array([1.0, 5.0, np.inf], np.float32), x)[0].tolist() == [1]
    assert mismatches(np.array([1.0, np.nan, np.inf], np.float32), x)[0].tolist() == [1]
    assert mismatches(np.array([np.nan, np.inf, np.inf], np.float32), x)[0].tolist() == [0]
