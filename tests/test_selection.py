"""The one-pass compaction (prefixsum.apps.selection) against numpy: x[mask] and flatnonzero.

Tiles of the default shape (2048 elements) for the sizes around one and a few tiles; tiles of 32
elements (monkeypatched) for many tiles, so that look-backs cross several windows of 32 and, with
resident blocks in turns, find predecessors that have published only their count or nothing.
"""

import collections
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda

import prefixsum as ps
from prefixsum import apps, trace
from prefixsum.apps import selection


@pytest.fixture
def small_tiles(monkeypatch):
    """Tiles of one warp x 1 element: 70 elements make 70 tiles."""
    monkeypatch.setattr(selection, "BLOCK_SIZE", 32)
    monkeypatch.setattr(selection, "ITEMS_PER_THREAD", 1)


def _input(n, dtype, density, rng):
    x = (
        (rng.normal(size=n) * 1000).astype(dtype)
        if np.dtype(dtype).kind == "f"
        else rng.integers(0, 100, n).astype(dtype)
    )
    return x, rng.random(n) < density


@pytest.mark.parametrize("n", [1, 2, 31, 33, 2047, 2048, 2049, 3 * 2048 + 5])
def test_compact_is_x_of_mask_on_one_and_several_tiles(n):
    rng = np.random.default_rng(n)
    for dtype, density in [("float32", 0.5), ("float64", 0.1), ("int32", 0.9), ("uint64", 0.5)]:
        x, mask = _input(n, dtype, density, rng)
        before = x.copy()
        got = apps.compact(x, mask)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, x[mask])
        np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(apps.compact_indices(mask), np.flatnonzero(mask))


@pytest.mark.parametrize("n", [1, 31, 32, 33, 70, 1100])
def test_many_tiles_all_none_and_numeric_masks(n, small_tiles):
    rng = np.random.default_rng(n)
    x, mask = _input(n, "float64", 0.3, rng)
    np.testing.assert_array_equal(apps.compact(x, mask), x[mask])
    np.testing.assert_array_equal(apps.compact(x, np.ones(n, bool)), x)
    assert apps.compact(x, np.zeros(n, bool)).shape == (0,)
    numeric = rng.integers(-2, 3, n).astype(np.int32)  # nonzero keeps, negative numbers too
    np.testing.assert_array_equal(apps.compact(x, numeric), x[numeric != 0])
    got = apps.compact_indices(numeric)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.flatnonzero(numeric))


def test_counts_longer_than_int32_take_the_two_word_states(monkeypatch, small_tiles):
    monkeypatch.setattr(selection, "INT32_COUNT_LIMIT", 50)
    rng = np.random.default_rng(3)
    x, mask = _input(300, "int32", 0.5, rng)
    assert selection.count_dtype(300) == np.int64
    np.testing.assert_array_equal(apps.compact(x, mask), x[mask])
    np.testing.assert_array_equal(apps.compact_indices(mask), np.flatnonzero(mask))


def test_device_output_with_and_without_waiting():
    rng = np.random.default_rng(5)
    x, mask = _input(3000, "float32", 0.4, rng)
    dx, dmask = cuda.to_device(x), cuda.to_device(mask)
    kept = apps.compact(dx, dmask)
    assert cuda.devicearray.is_cuda_ndarray(kept)
    np.testing.assert_array_equal(kept.copy_to_host(), x[mask])
    buffer, count = apps.compact(dx, dmask, sync=False)
    assert buffer.shape == (3000,) and count.shape == (1,) and count.dtype == np.int64
    assert count.copy_to_host()[0] == mask.sum()
    np.testing.assert_array_equal(buffer.copy_to_host()[: mask.sum()], x[mask])
    indices, count = apps.compact_indices(dmask, sync=False)
    np.testing.assert_array_equal(indices.copy_to_host()[: count.copy_to_host()[0]], np.flatnonzero(mask))
    empty, count = apps.compact(dx[:0], dmask[:0], sync=False)
    assert empty.shape == (0,) and count.copy_to_host()[0] == 0
    assert apps.compact_indices(np.zeros(0, bool)).shape == (0,)
    with pytest.raises(ValueError, match="one length"):
        apps.compact(x, mask[:3])
    with pytest.raises(ValueError, match="sync must be True or False; got 'no'"):
        apps.compact_indices(mask, sync="no")


@pytest.mark.parametrize("seed", range(2))
def test_concurrent_tiles_wait_for_counts_published_later(seed, small_tiles):
    rng = np.random.default_rng(seed)
    x, mask = _input(32 * 50 + 3, "float32", 0.5, rng)
    with ps.sim.block_order_seed(seed), ps.sim.resident_blocks(8):
        run = trace.record(apps.compact, x, mask)
    np.testing.assert_array_equal(run.result, x[mask])
    peeks = collections.Counter(r.block for r in run.records if r.array == "status" and r.atomic)
    # without waiting, tile b peeks at min(b, 32) states once and publishes twice
    assert any(count > min(block, 32) + 2 for block, count in peeks.items())


def test_one_launch_reads_each_flag_and_each_kept_value_once_and_races_nowhere(small_tiles):
    rng = np.random.default_rng(9)
    n = 32 * 6 + 7
    x, mask = _input(n, "float64", 0.5, rng)
    with ps.sim.resident_blocks(1):
        run = trace.record(apps.compact, x, mask)
    np.testing.assert_array_equal(run.result, x[mask])
    assert run.races() == [] and run.uninitialized_reads() == []
    assert [launch.kernel for launch in run.launches] == ["select"]
    counts = run.counts()
    atomics = sum(r.atomic for r in run.records)
    kept = int(mask.sum())
    assert counts["global_reads"] == n + kept  # (atomics count as writes only)
    assert counts["global_writes"] - atomics == kept + 1  # the kept values and the count
    # 7 tiles: 7 draws of a tile id and the counter's reset; tile 0 publishes its count as a
    # prefix, tiles 1..6 their count and prefix; tile b peeks at its b predecessors once.
    assert atomics == 8 + 1 + 6 * 2 + sum(range(1, 7))


@pytest.mark.usefixtures("ptx_compiler")
def test_the_one_pass_kernels_compile_to_ptx():
    code = """
        import numpy as np
        from numba import cuda
        import prefixsum
        from prefixsum.apps import selection
        from prefixsum.core.numba_gpu import pretend_device

        pretend_device((9, 0))
        for value, mask, counts, indices, store in [("float32", "bool", "int32", False, "st.global.f32"),
                                                    ("float64", "bool", "int64", False, "st.global.f64"),
                                                    ("int8", "float32", "int32", False, "st.global.u8"),
                                                    ("int64", "bool", "int32", True, "st.global.u64")]:
            dtypes = [np.dtype(t) for t in (value, mask, counts)]
            kernel = selection.select_kernel(dtypes[0], dtypes[2], indices)
            ptx, _ = cuda.compile_ptx(kernel.py_func, selection.argtypes(*dtypes, indices), cc=(9, 0))
            assert "vote.sync.ballot" in ptx and "ld.local" not in ptx, value
            # the kept values (indices: int64) and the count: one store each per step and thread, and one
            assert ptx.count(store) == 16 + (store == "st.global.u64"), (value, ptx.count(store))
            print("ok", value)
    """
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    child = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.count("ok") == 4
