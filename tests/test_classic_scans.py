"""What is specific to the folding, Hillis-Steele and Blelloch scans, on the simulator.

Correctness over every size, op, dtype and direction comes from tests/test_scan.py, which walks
the registry; here: the source documents' worked examples, the lab sheet's 256-element exercise, the options,
and the deliberately racy Hillis-Steele kernel.
"""

import inspect
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import prefixsum as ps
from prefixsum.classroom import lessons
from prefixsum.scans import blelloch, hillis_steele
from prefixsum.scans.testing import mismatches, random_input

CLASSIC = ("folding", "hillis_steele", "blelloch")


def test_folding_seed_002_example():
    """The partial-sum notebook folds 33 ones into 33, 32, ..., 1: the fold's own direction is the suffix scan."""
    ones = np.ones(33, dtype=np.int32)
    assert ps.scan(ones, reverse=True, algorithm="folding").tolist() == list(range(33, 0, -1))
    assert ps.scan(ones, algorithm="folding").tolist() == list(range(1, 34))


def test_blelloch_256_seed_004_example():
    """The lab sheet's example, padded with zeros to 256: 3 2 1 2 1 4 3 2 4 3 -> 0 3 5 6 8 9 13 16 18 22."""
    x = np.zeros(256, dtype=np.int32)
    x[:10] = [3, 2, 1, 2, 1, 4, 3, 2, 4, 3]
    result = blelloch.blelloch_256(x)
    assert result.dtype == np.int32
    assert result[:10].tolist() == [0, 3, 5, 6, 8, 9, 13, 16, 18, 22]
    assert (result[10:] == 25).all()


@pytest.mark.parametrize("dtype", (np.int32, np.float32))
def test_blelloch_256_random(dtype, rng):
    """Random inputs; int32 over the full range, so the sums wrap around as numpy's do."""
    x = random_input(256, "add", dtype, rng)
    before = x.copy()
    bad, _ = mismatches(blelloch.blelloch_256(x), x, "add", inclusive=False)
    assert bad.size == 0, f"wrong at {bad[:5]}"
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize(
    "x, error",
    [
        (np.zeros(255, np.int32), ValueError),
        (np.zeros(257, np.int32), ValueError),
        (np.zeros((16, 16), np.int32), ValueError),
        (np.zeros(256, np.int64), TypeError),
        (np.zeros(256, np.float64), TypeError),
    ],
)
def test_blelloch_256_rejects(x, error):
    with pytest.raises(error, match="blelloch_256 needs"):
        blelloch.blelloch_256(x)


@pytest.mark.parametrize(
    "op, dtype, inclusive, reverse",
    [
        ("add", np.float32, True, False),
        ("max", np.int64, False, True),
    ],
)
def test_blelloch_conflict_free_changes_nothing_but_the_layout(op, dtype, inclusive, reverse, rng):
    """The padding moves values in shared memory only: both layouts give bit-identical results."""
    x = random_input(300, op, dtype, rng)
    results = [
        ps.scan(x, op, inclusive=inclusive, reverse=reverse, algorithm="blelloch", block_size=32, conflict_free=flag)
        for flag in (True, False)
    ]
    np.testing.assert_array_equal(results[0], results[1])
    assert mismatches(results[0], x, op, inclusive=inclusive, reverse=reverse)[0].size == 0


@pytest.mark.parametrize("name", CLASSIC)
def test_small_blocks_with_two_levels_of_carries(name, rng):
    """block_size=32: more tiles than a tile holds, so the totals are scanned recursively twice
    (the tracer counts the tile scans: tile + 2 tiles, then 2, then 1)."""
    tile = 64 if name == "blelloch" else 32
    x = random_input(tile * (tile + 1) + 5, "add", np.int64, rng)
    run = ps.trace.record(ps.scan, x, inclusive=False, reverse=True, algorithm=name, block_size=32)
    assert run.error is None, run.error
    assert mismatches(run.result, x, inclusive=False, reverse=True)[0].size == 0
    carries = [launch for launch in run.launches if launch.kernel == "carry_into_tile"]
    assert [launch.grid[0] for launch in run.launches if launch not in carries] == [tile + 2, 2, 1]


@pytest.mark.parametrize("name", CLASSIC)
@pytest.mark.parametrize("block_size", (16, 48, 2048, True, "256"))
def test_invalid_block_size(name, block_size):
    with pytest.raises(ValueError, match="block_size"):
        ps.scan(np.ones(4, np.float32), algorithm=name, block_size=block_size)


@pytest.mark.parametrize("conflict_free", (1, "yes", None))
def test_invalid_conflict_free(conflict_free):
    with pytest.raises(ValueError, match="conflict_free"):
        ps.scan(np.ones(4, np.float32), algorithm="blelloch", conflict_free=conflict_free)


def test_options_are_declared():
    assert ps.ALGORITHMS["folding"].options == {"block_size": 256}
    assert ps.ALGORITHMS["hillis_steele"].options == {"block_size": 256}
    assert ps.ALGORITHMS["blelloch"].options == {"block_size": 256, "conflict_free": True}


def test_in_place_hillis_steele_is_a_tile_kernel():
    """The racy kernel takes the tile kernel's arguments and runs; its result is not asserted."""
    racy = lessons.hillis_steele_in_place_tile_kernel("add", np.int32, True, False, 32)
    safe = hillis_steele.hillis_steele_tile_kernel("add", np.int32, True, False, 32)
    assert inspect.signature(racy.py_func).parameters.keys() == inspect.signature(safe.py_func).parameters.keys()
    assert racy is not safe
    n = 50
    out = cuda.device_array(n, np.int32)
    totals = cuda.device_array(2, np.int32)
    racy[2, 32](cuda.to_device(np.ones(n, np.int32)), out, totals, n)
    assert out.copy_to_host().shape == (n,)


def test_unregistered_kernels_compile_to_ptx(ptx_child):
    """The lab sheet's 256-element kernel, the racy kernel and the lessons' warp scans are not in the registry's PTX
    walk."""
    code = textwrap.dedent("""
        from numba import cuda
        from prefixsum.classroom import lessons
        from prefixsum.scans import blelloch
        from prefixsum.scans.tiles import array_type, tile_kernel_argtypes

        from prefixsum.core.numba_gpu import pretend_device
        pretend_device((9, 0))
        to_compile = [(blelloch.blelloch_256_kernel(d), (array_type(d), array_type(d))) for d in ("int32", "float32")]
        to_compile.append((lessons.hillis_steele_in_place_tile_kernel("add", "float32", True, False, 256),
                             tile_kernel_argtypes("float32")))
        for kernel, argtypes in to_compile:
            ptx, _ = cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
            assert ".entry" in ptx and "bar.sync" in ptx, kernel.py_func.__name__
        for variant in lessons.VARIANTS:  # warp scans: no block barrier
            kernel = lessons.warp_scan_kernel(variant, "add", "float32")
            ptx, _ = cuda.compile_ptx(kernel.py_func, (array_type("float32"), array_type("float32")), cc=(9, 0))
            assert ".entry" in ptx, variant
    """)
    child = ptx_child(code)
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]


def test_chapter_01_prints_what_a_single_array_add_scan_runs(monkeypatch):
    """Chapter 01 prints ``tiles.scan_tiles`` and ``ladder.ladder_tile_kernel``: a ladder scan of one
    array with a built-in operator must run exactly those, the kernel compiled from its source as
    written (the tuple plumbing of user operators is ``scan_field_tiles`` and a rewrite, not used)."""
    from prefixsum.scans import ladder, tiles

    chapter = (Path(__file__).parents[1] / "notebooks" / "sources" / "01_ladder.py").read_text()
    assert "print(inspect.getsource(ps.scans.tiles.scan_tiles))" in chapter
    assert "print(inspect.getsource(ps.scans.ladder.ladder_tile_kernel))" in chapter
    drivers, launched = [], []
    real_driver = tiles.scan_tiles

    def spied_driver(x, out, tile_kernel, **kw):
        drivers.append("scan_tiles")
        launched.append(tile_kernel.py_func)
        return real_driver(x, out, tile_kernel, **kw)

    monkeypatch.setattr(tiles, "scan_tiles", spied_driver)
    monkeypatch.setattr(tiles, "scan_field_tiles", lambda *a, **kw: drivers.append("scan_field_tiles"))
    x = np.arange(1, 101, dtype=np.int32)
    np.testing.assert_array_equal(ps.scan(x, algorithm="ladder", block_size=32), np.cumsum(x))
    assert drivers == ["scan_tiles", "scan_tiles"]  # the tiles, then their 4 totals
    printed = inspect.getsource(ladder.ladder_tile_kernel)
    for tile_function in launched:
        assert inspect.getsource(tile_function) in printed  # the readable kernel itself, not a rewrite
        assert tile_function.__code__.co_filename == ladder.__file__
