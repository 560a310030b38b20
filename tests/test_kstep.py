"""The k-step scheme of the partial-sum lecture notes (reconstructed): its levels, both paths, its options.

tests/test_scan.py already runs "kstep" with its default options; here every L, the sizes
around powers of L, and the launch-per-step and one-block paths each on their own.
"""

import itertools

import numpy as np
import pytest

import prefixsum as ps
from prefixsum import trace
from prefixsum.scans import kstep
from prefixsum.scans.testing import random_input, run_poisoned

DIRECTIONS = tuple(itertools.product((True, False), (False, True)))  # (inclusive, reverse)


def sizes_around_powers(L):
    """1, 2, L, L+1, 35 and L^k - 1, L^k, L^k + 1 up to about a thousand."""
    sizes = {1, 2, L, L + 1, 35}
    power = L * L
    while power <= 1100:
        sizes |= {power - 1, power, power + 1}
        power *= L
    return sorted(sizes)


def check(x, op, inclusive, reverse, L, one_block):
    run = run_poisoned(kstep.run, x, op, inclusive=inclusive, reverse=reverse, L=L, one_block=one_block)
    bad = run.bad
    assert bad.size == 0, (
        f"L={L} one_block={one_block} n={len(x)} op={op} dtype={x.dtype} inclusive={inclusive} "
        f"reverse={reverse}: {bad.size} wrong, first at {bad[0]}: got {run.result[bad[0]]!r}, expected "
        f"{run.expected[bad[0]]!r}"
    )
    np.testing.assert_array_equal(run.input_after, x, err_msg="the input was modified")


def test_levels_of_the_seed_figure():
    """L = 3, K0 = 35: K = 35, 12, 4, 2, s* = 2; x at 0-34, z^0 35-46, z^1 47-50, z^2 51-52."""
    lv = kstep.levels(35, 3)
    sizes, offsets = lv
    assert sizes == (35, 12, 4, 2)
    assert lv.top == 2
    assert offsets == (0, 35, 47, 51)
    assert [(p, p + k - 1) for p, k in zip(offsets, sizes)] == [(0, 34), (35, 46), (47, 50), (51, 52)]
    assert lv.length == 53


@pytest.mark.parametrize(
    "n, L, sizes",
    [
        (1, 2, (1, 1)),
        (2, 2, (2, 1)),
        (3, 2, (3, 2)),
        (8, 8, (8, 1)),
        (9, 8, (9, 2)),
        (64, 8, (64, 8)),
        (65, 8, (65, 9, 2)),
        (1024, 2, (1024, 512, 256, 128, 64, 32, 16, 8, 4, 2)),
    ],
)
def test_levels_stop_when_the_next_level_fits_one_thread(n, L, sizes):
    lv = kstep.levels(n, L)
    assert lv.sizes == sizes
    assert lv.sizes[-1] <= L and all(k > L for k in lv.sizes[1:-1])
    assert lv.length == sum(sizes)


@pytest.mark.parametrize("L", (2, 3, 4, 8, 32))
@pytest.mark.parametrize("one_block", (False, True))
def test_sizes_around_powers_of_L(L, one_block, rng):
    for k, n in enumerate(sizes_around_powers(L)):
        inclusive, reverse = DIRECTIONS[k % len(DIRECTIONS)]
        op = ps.OPS[(k + L) % len(ps.OPS)]
        dtype = ps.DTYPES[(k + 2 * L) % len(ps.DTYPES)]
        check(random_input(n, op, dtype, rng), op, inclusive, reverse, L, one_block)


@pytest.mark.parametrize("one_block", (False, True))
def test_every_op_dtype_and_direction(one_block, rng):
    for k, (op, dtype) in enumerate(itertools.product(ps.OPS, ps.DTYPES)):
        inclusive, reverse = DIRECTIONS[k % len(DIRECTIONS)]
        check(random_input(35, op, dtype, rng), op, inclusive, reverse, 3, one_block)


def test_launch_path_beyond_one_block(rng):
    """A buffer too big for the one-block kernel: "auto" launches a kernel per step."""
    n = kstep.ONE_BLOCK_BUFFER
    assert not kstep.fits_one_block(n, 4)
    x = random_input(n, "add", np.int64, rng)
    check(x, "add", False, True, 4, "auto")
    with pytest.raises(ValueError, match=r"one_block=True: n=4096 with L=4 needs a buffer of 5460 elements"):
        ps.scan(x, algorithm="kstep", L=4, one_block=True)


@pytest.mark.parametrize("bad", (1, 0, -3, 2.0, "8", True, None))
def test_L_must_be_an_integer_of_at_least_two(bad):
    with pytest.raises(ValueError, match=rf"option L={bad!r} must be an integer >= 2"):
        ps.scan(np.ones(4, np.float32), algorithm="kstep", L=bad)
    with pytest.raises(ValueError, match=r"must be an integer >= 2"):
        kstep.levels(10, bad)


def test_bad_one_block_option():
    with pytest.raises(ValueError, match=r"option one_block='yes' must be 'auto', True or False"):
        ps.scan(np.ones(4, np.float32), algorithm="kstep", one_block="yes")


@pytest.mark.parametrize("one_block, launches, barriers", [(False, 2 * 2 + 5, 0), (True, 1, 2 * 2 + 4)])
def test_steps_never_race(one_block, launches, barriers, rng):
    """A step never touches what another thread of it writes: a barrier per step is enough."""
    x = random_input(35, "add", np.float64, rng)
    run = trace.record(ps.scan, x, algorithm="kstep", L=3, one_block=one_block, raise_errors=True)
    assert run.races() == [] and run.uninitialized_reads() == []
    counts = run.counts()
    assert (counts["launches"], counts["barriers"]) == (launches, barriers)
    assert counts["steps"] - 2 == 2 * kstep.levels(35, 3).top + 3  # all but the copy in and out
    assert counts["combines"] == expected_combines(35, 3)


def expected_combines(n, L):
    """Runs of m elements: m - 1 combines to reduce; min(m, L - 1) to correct (a full run's last is copied)."""
    sizes = kstep.levels(n, L).sizes
    reduce = sum(k - above for k, above in zip(sizes, sizes[1:]))
    correct = sum(min(k - L * j, L - 1) for k, above in zip(sizes, sizes[1:]) for j in range(above))
    return reduce + (sizes[-1] - 1) + correct


def test_kernels_lists_both_paths():
    names = {kernel.py_func.__name__ for kernel, _ in kstep.kernels("add", "float32", True, False, 8, "auto")}
    assert names == {"kstep_one_block", "kstep_load", "kstep_reduce", "kstep_top", "kstep_correct", "kstep_store"}
    assert {k.py_func.__name__ for k, _ in kstep.kernels("add", "float32", True, False, 8, True)} == {"kstep_one_block"}
