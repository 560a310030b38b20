"""Every registered algorithm against the sequential reference, on the simulator.

The suite walks :data:`prefixsum.ALGORITHMS`, so a new algorithm is tested without edits here.
Outputs are poisoned before each launch and every element is checked; the sizes cover one
element, one warp and its neighbours, one tile and its neighbours, and several tiles.
"""

import itertools
import zlib

import numpy as np
import pytest

import prefixsum as ps
from prefixsum.scans.testing import random_input, run_poisoned

SIZES = (1, 2, 31, 32, 33, 255, 256, 257, 1000, 4097)
DIRECTIONS = tuple(itertools.product((True, False), (False, True)))  # (inclusive, reverse)
ALGORITHMS = tuple(ps.ALGORITHMS)


def run_and_check(name, x, op, inclusive, reverse, **options):
    """Run algorithm ``name`` on poisoned output and assert that every element is right."""
    algorithm = ps.ALGORITHMS[name]
    run = run_poisoned(algorithm.run, x, op, inclusive=inclusive, reverse=reverse, **algorithm.resolve_options(options))
    bad = run.bad
    assert bad.size == 0, (
        f"{name} n={len(x)} op={op} dtype={x.dtype} inclusive={inclusive} reverse={reverse}: "
        f"{bad.size} wrong, first at {bad[0]}: got {run.result[bad[0]]!r}, expected {run.expected[bad[0]]!r}"
    )
    np.testing.assert_array_equal(run.input_after, x, err_msg="the input was modified")


def _rotate(seq, key):
    return seq[zlib.crc32(key.encode()) % len(seq)]


@pytest.mark.parametrize("name", ALGORITHMS)
# The largest size (many tiles of every algorithm) is in the slow tier: CI runs it, the developer loop not.
@pytest.mark.parametrize("n", [pytest.param(n, marks=pytest.mark.slow) if n > 1000 else n for n in SIZES])
def test_sizes(name, n, rng):
    """Every size, each direction; op and dtype rotate over the sizes so all appear."""
    for k, (inclusive, reverse) in enumerate(DIRECTIONS):
        op = ps.OPS[(SIZES.index(n) + k) % len(ps.OPS)]
        dtype = _rotate(ps.DTYPES, f"{name}{n}{k}")
        run_and_check(name, random_input(n, op, dtype, rng), op, inclusive, reverse)


@pytest.mark.parametrize("name", ALGORITHMS)
@pytest.mark.parametrize("op", ps.OPS)
def test_every_op_and_dtype(name, op, rng):
    """Every op in every dtype, over several tiles, directions rotating."""
    for k, dtype in enumerate(ps.DTYPES):
        inclusive, reverse = DIRECTIONS[(k + ps.OPS.index(op)) % len(DIRECTIONS)]
        run_and_check(name, random_input(600, op, dtype, rng), op, inclusive, reverse)


def test_integer_wraparound_matches_numpy():
    """Sums and products overflow exactly as numpy's cumsum and cumprod do."""
    for dtype in (np.int32, np.uint32, np.int64, np.uint64):
        big = np.full(300, np.iinfo(dtype).max // 3 + 7, dtype=dtype)
        np.testing.assert_array_equal(ps.scan(big, algorithm="ladder"), np.cumsum(big, dtype=dtype))
        factors = np.arange(3, 303).astype(dtype)
        np.testing.assert_array_equal(ps.scan(factors, "mul", algorithm="ladder"), np.cumprod(factors, dtype=dtype))


def test_exclusive_identities():
    """Element 0 of an exclusive scan is the operator's identity, for every op and dtype."""
    for op, dtype in itertools.product(ps.OPS, ps.DTYPES):
        x = np.array([5, 3, 7], dtype=dtype)
        out = ps.exclusive_scan(x, op, algorithm="ladder")
        assert out[0] == ps.identity(op, dtype), (op, dtype, out)
        assert out.dtype == dtype


def test_seed_004_example():
    """The lab sheet's worked example: 3 2 1 2 1 4 3 2 4 3 -> 0 3 5 6 8 9 13 16 18 22."""
    x = np.array([3, 2, 1, 2, 1, 4, 3, 2, 4, 3], dtype=np.int32)
    expected = [0, 3, 5, 6, 8, 9, 13, 16, 18, 22]
    assert ps.exclusive_scan(x).tolist() == expected
    assert ps.reference.exclusive_partial_sums(x.tolist()) == expected
    assert ps.reference.partial_sums([2] * 30) == list(range(2, 62, 2))


@pytest.mark.parametrize("block_size", (32, 64, 1024))
def test_ladder_block_sizes(block_size, rng):
    """Other tile sizes, including the largest block: four tiles, one level of carries."""
    x = random_input(3 * block_size + 5, "add", np.int64, rng)
    run_and_check("ladder", x, "add", True, False, block_size=block_size)


def test_ladder_with_two_levels_of_carries(rng):
    """34 tiles of 32: their totals fill 2 tiles of their own, whose 2 totals need a third scan.

    The tracer counts the tile scans, so the test cannot silently shrink to one level.
    """
    x = random_input(32 * 33 + 5, "add", np.int64, rng)
    run = ps.trace.record(run_and_check, "ladder", x, "add", False, True, block_size=32)
    assert run.error is None, run.error
    assert [launch.grid[0] for launch in run.launches if launch.kernel == "ladder_tile"] == [34, 2, 1]
