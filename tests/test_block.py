"""The block solver (prefixsum.tridiag.block: one system per block, the warp solver's method across
a block) against the float64 reference, its failure reports, its plan, and its place in the
hybrid's route (its kernels' PTX: tests/test_ptx.py)."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402
from test_tridiag import check, check_flagged, dominant, spd  # noqa: E402

from prefixsum import tridiag  # noqa: E402
from prefixsum.core.poison import poison  # noqa: E402
from prefixsum.tridiag import _common, block, hybrid, partition, warp  # noqa: E402

DTYPES = (np.float32, np.float64)


def block_solve(system, rows=None, run=None):
    """``run`` (:func:`.block.run` by default) on ``system`` (host arrays) into a poisoned
    output: ``(x, info)``, the inputs checked unchanged on the device."""
    device = [cuda.to_device(v) for v in system]
    x = cuda.to_device(poison(np.empty(system[3].shape, system[3].dtype)))
    info = cuda.to_device(np.zeros(system[3].shape[0], np.int32))
    if run is None:
        block.run(*device, x, info, rows=rows)
    else:
        run(*device, x, info)
    for before, after in zip(system, device):
        np.testing.assert_array_equal(after.copy_to_host(), before)  # inputs unchanged
    return x.copy_to_host(), info.copy_to_host()


def solves_right(system, rows=None, run=None):
    """:func:`block_solve`, no failure reported, every element right (:func:`check`)."""
    x, info = block_solve(system, rows, run)
    assert not info.any()
    check(x, system, system[3].dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, batch", ((513, 1), (1000, 3), (1023, 1), (1024, 2), (1025, 1), (777, 2)))
def test_block_solver_matches_the_float64_reference_on_every_element(n, batch, dtype, rng):
    # Just past a warp's 512 rows; 1000 (R = 8: 125 chunks, 3 idle lanes); one short of, at and
    # one past 1024 (float64's largest block: 1025 goes through the hybrid, a level of the
    # partition method first); 777, no multiple of R. The outside coefficients are NaN.
    system = [v.astype(dtype) for v in dominant(rng, batch, n)]
    system[0][:, 0], system[2][:, -1] = np.nan, np.nan
    solves_right(system, run=hybrid.run if n > block.max_rows(dtype) else None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", block.ROWS_PER_THREAD)
def test_block_solver_every_chunk_length_at_its_largest_and_shortest_system(rows, dtype, rng):
    # Each kernel on symmetric positive definite systems (often not dominant), at the largest n
    # a block holds with it less 3 (a ragged last chunk, several warps: shared-memory PCR steps)
    # and just past a warp's rows at this R (two warps, one shared step; or one warp, none).
    largest = block.max_rows(dtype, rows)
    for n, batch in ((largest - 3, 1), (32 * rows + 1, 2)):
        solves_right([v.astype(dtype) for v in spd(rng, batch, n)], rows=rows)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # numba's stock simulator warns on inf - inf
@pytest.mark.parametrize("dtype", DTYPES)
def test_block_solver_reports_zero_pivots_and_non_finite_results_per_system(dtype, rng):
    # 6 systems of 1000 rows: 1, a zero diagonal; 4, an infinite right-hand side; no other flagged.
    system = [v.astype(dtype) for v in dominant(rng, 6, 1000)]
    system[1][1] = 0
    system[3][4, 600] = np.inf
    x, info = block_solve(system)
    check_flagged(x, info, system, dtype, {1: _common.ZERO_PIVOT, 4: _common.NOT_FINITE})


def test_block_solver_zero_pivot_of_a_chunk_and_of_the_odd_even_step_within_and_across_warps():
    # Chunks of R = 4 rows over 128 lanes (four warps, two PCR steps through shared memory):
    # [[1, 1], [1, 1]] is singular. Rows 3 and 4 make it the reduced system's odd-even pivot
    # (chunk 0's last row and chunk 1's first); rows 255 and 256 make it the pivot of chunk 63's
    # odd-even step, whose neighbour lies in another warp; row 0 with b = 0 a chunk's own pivot.
    n = 3 * 128 + 9
    for singular in (3, 255, None):
        a, b, c, d = (np.zeros(n), np.full(n, 4.0), np.zeros(n), np.ones(n))
        if singular is None:
            b[0] = 0
        else:
            b[singular : singular + 2] = 1
            c[singular], a[singular + 1] = 1, 1
        _, info = block_solve([v[None] for v in (a, b, c, d)], rows=4)
        assert info.tolist() == [_common.ZERO_PIVOT], singular


@pytest.mark.parametrize("dtype", DTYPES)
def test_block_plan_fits_the_shared_memory_and_raises_past_it(dtype, monkeypatch):
    itemsize = np.dtype(dtype).itemsize
    assert block.max_rows(dtype) == {4: 2048, 8: 1024}[itemsize]
    for n in (513, 1000, 1023, min(1025, block.max_rows(dtype)), block.max_rows(dtype)):
        rows, lanes, shared = block.plan(n, dtype)
        assert rows in block.ROWS_PER_THREAD and rows >= min(block.TARGET_ROWS[itemsize])
        assert lanes & (lanes - 1) == 0 and lanes >= 32 and lanes * rows >= n and lanes * rows < 2 * n + 32 * rows
        assert shared == block.shared_bytes(rows, lanes, dtype) <= _common.SHARED_BYTES
    with pytest.raises(ValueError, match=rf"n <= {block.max_rows(dtype)} in {np.dtype(dtype).name}; got"):
        block.plan(block.max_rows(dtype) + 1, dtype)
    monkeypatch.setattr(_common, "SHARED_BYTES", 12 * 1024)  # a shrunk budget: smaller blocks
    assert block.max_rows(dtype) == {4: 512, 8: 256}[itemsize]
    assert block.plan(block.max_rows(dtype), dtype)[2] <= 12 * 1024


def test_block_plan_takes_short_chunks_for_a_small_batch_and_long_ones_for_a_large_one():
    # float32: R = 4 where it holds n in a batch of fewer than block.LARGE rows, 16 in a larger
    # one; float64: 8 (R = 4 holds only 512 rows), whatever the batch.
    assert [block.plan(1000, np.float32, batch=batch)[:2] for batch in (1, 100, 1000)] == [(4, 256), (4, 256), (16, 64)]
    assert block.plan(2000, np.float32, batch=100)[:2] == (8, 256)
    assert [block.plan(1000, np.float64, batch=batch)[:2] for batch in (1, 1000)] == [(8, 128), (8, 128)]
    assert block.plan(1000, np.float64, rows=16)[:2] == (16, 64)


def test_block_plan_follows_a_changed_target_and_answers_from_its_memo(monkeypatch):
    """:func:`block.plan` and :func:`block.max_rows` are kept per question and settings: a changed
    TARGET_ROWS (benchmarks/tridiag.py sweeps it) is a new question, and the old one comes back."""
    assert block.plan(1000, np.float32, batch=1)[:2] == (4, 256)
    monkeypatch.setitem(block.TARGET_ROWS, 4, (16, 16))
    assert block.plan(1000, np.float32, batch=1)[:2] == (16, 64)
    assert block.max_rows(np.float32) == 2048
    monkeypatch.undo()
    hits = block._plan.cache_info().hits
    assert block.plan(1000, np.dtype(np.float32), batch=1)[:2] == (4, 256)
    assert block._plan.cache_info().hits == hits + 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_block_solver_in_a_shrunk_shared_memory_budget(dtype, rng, monkeypatch):
    # 12 KiB: at most 64 lanes of R = 8 (float32) or 32 lanes of R = 8 (float64).
    monkeypatch.setattr(_common, "SHARED_BYTES", 12 * 1024)
    n = block.max_rows(dtype)
    assert block.plan(n, dtype)[1] < 128
    solves_right([v.astype(dtype) for v in dominant(rng, 3, n)])


def test_hybrid_takes_the_warp_then_the_block_then_the_partition_whose_reduced_systems_take_the_block(rng, monkeypatch):
    calls = []
    for module, name in ((warp, "warp"), (block, "block"), (partition, "partition")):
        monkeypatch.setattr(
            module,
            "run",
            lambda *args, real=module.run, name=name, **kwargs: (
                calls.append((name, args[4].shape)) or real(*args, **kwargs)
            ),
        )
    largest = block.max_rows(np.float32)
    for n in (512, 513, largest, largest + 1):
        tridiag.solve(*(v.astype(np.float32) for v in dominant(rng, 2, n)), method="hybrid")
    # R = 8 at a level of 2 x 2049 rows (partition.rows_per_thread): 2 x 2 * 257 = 514 reduced rows
    assert calls == [
        ("warp", (2, 512)),
        ("block", (2, 513)),
        ("block", (2, largest)),
        ("partition", (2, largest + 1)),
        ("block", (2, 514)),
    ]
    calls.clear()
    monkeypatch.setattr(hybrid, "BLOCK_ROWS", 0)  # the route before the block solver
    tridiag.solve(*dominant(rng, 2, 513), method="hybrid")
    assert calls == [("partition", (2, 513)), ("warp", (2, 130))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", (1, 3))
def test_partition_then_block_matches_the_reference(batch, dtype, rng, monkeypatch):
    # A shrunk budget makes the block small (512 rows in float32, 256 in float64) and the warp
    # solver takes only 64 rows, so that a system slightly longer than a block goes through a level
    # of the partition method (R = 8) and its reduced system of 2 n / 8 rows to the block solver.
    monkeypatch.setattr(_common, "SHARED_BYTES", 12 * 1024)
    monkeypatch.setattr(hybrid, "WARP_ROWS", 64)
    monkeypatch.setattr(partition, "MAX_ROWS", 64)
    n = block.max_rows(dtype) + 37
    seen = []
    level = block.run
    monkeypatch.setattr(block, "run", lambda *args, **kwargs: seen.append(args[4].shape) or level(*args, **kwargs))
    system = [v.astype(dtype) for v in dominant(rng, batch, n)]
    system[0][:, 0], system[2][:, -1] = np.nan, np.nan
    x, info = block_solve(system, run=hybrid.run)
    assert not info.any() and seen == [(batch, 2 * -(-n // 8))]
    check(x, system, dtype)
