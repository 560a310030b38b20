"""The hybrid and the register-resident solvers it routes to (tests/test_block.py has the block
solver): its windows, its plan and its routes, the warp solver and the partition method, against
the float64 reference on every element of a poisoned output (tests/test_tridiag.py has the helpers
and the public solve of every method).
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402
from test_tridiag import DTYPES, check, check_flagged, dominant, solve, spd  # noqa: E402

from prefixsum import tridiag  # noqa: E402
from prefixsum.core.poison import poison  # noqa: E402
from prefixsum.tridiag import _common, block, hybrid, partition, warp  # noqa: E402


@pytest.mark.parametrize("dtype", DTYPES)
# 1000 rows take three launches: the slow tier.
@pytest.mark.parametrize("n, batch", ((40, 3), (300, 1), pytest.param(1000, 2, marks=pytest.mark.slow)))
def test_hybrid_windows_split_systems_that_do_not_fit_a_block(n, batch, dtype, rng, monkeypatch):
    # 1 KiB: 16 (float64) or 32 (float32) slots a block; the windows take one to three launches,
    # the later ones several neighbouring subsystems wide. 8 threads a window block, not 256: each
    # thread loops over 2 or 4 of its slots, as over 3 or 6 at 48 KiB and 256 threads, where 256
    # threads for 16 or 32 slots left most of them idle (and cost the simulator a Python thread
    # each). hybrid_shared's launches for these systems take at most 8 threads: its plans stay as they were.
    monkeypatch.setattr(_common, "SHARED_BYTES", 1024)
    monkeypatch.setattr(hybrid, "MAX_THREADS", 8)
    monkeypatch.setattr(hybrid, "WARP_ROWS", 0)  # every n through hybrid_shared
    monkeypatch.setattr(hybrid, "PARTITION", False)
    launches, split = [], hybrid.split_windows

    def spy(*args):
        rows, stride = split(*args)
        launches.append(stride)
        return rows, stride

    monkeypatch.setattr(hybrid, "split_windows", spy)
    system = dominant(rng, batch, n)
    check(solve(system, dtype, "hybrid"), system, dtype)
    assert -(-n // launches[0]) <= hybrid.max_block_rows(dtype) < n


@pytest.mark.parametrize("own", (False, True), ids=("shared", "warp-partition"))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, batch", ((1, 5), (9, 70), (64, 6), (200, 2), (3000, 1)))
def test_hybrid_writes_every_element_of_a_poisoned_output(n, batch, dtype, own, rng, monkeypatch):
    # shared: hybrid_shared at every n; else the warp solver up to 512 rows, the partition beyond.
    if not own:
        monkeypatch.setattr(hybrid, "WARP_ROWS", 0)
        monkeypatch.setattr(hybrid, "PARTITION", False)
    system = [v.astype(dtype) for v in dominant(rng, batch, n)]
    x = cuda.to_device(poison(np.empty((batch, n), dtype)))
    info = cuda.to_device(np.zeros(batch, np.int32))
    hybrid.run(*(cuda.to_device(v) for v in system), x, info)
    assert not info.copy_to_host().any()
    check(x.copy_to_host(), system, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (1, 3, 15, 16, 64, 100, 512, 768, 1536))
def test_hybrid_plan_gives_each_thread_about_thomas_rows(n, dtype):
    blocks, threads, shared, m, per_block, lanes = hybrid.plan(300, n, 1, dtype)
    aim = max(1, n // hybrid.THOMAS_ROWS)
    assert lanes & (lanes - 1) == 0 and (lanes <= aim < 2 * lanes or lanes == _common.MAX_THREADS)
    assert m == n and threads == per_block * lanes <= _common.MAX_THREADS and blocks * per_block >= 300
    assert shared <= _common.SHARED_BYTES or n > hybrid.max_block_rows(dtype)


WARP_NS = (1, 2, 3, 31, 32, 33, 63, 64, 65, 100, 256, 512)


def warp_solve(system, rows=None):
    """:func:`.warp.run` on ``system`` (host arrays) into a poisoned output: ``(x, info)``, the
    inputs checked unchanged on the device."""
    device = [cuda.to_device(v) for v in system]
    x = cuda.to_device(poison(np.empty(system[3].shape, system[3].dtype)))
    info = cuda.to_device(np.zeros(system[3].shape[0], np.int32))
    warp.run(*device, x, info, rows=rows)
    for before, after in zip(system, device):
        np.testing.assert_array_equal(after.copy_to_host(), before)  # inputs unchanged
    return x.copy_to_host(), info.copy_to_host()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", (1, 2, 7))
@pytest.mark.parametrize("n", WARP_NS)
def test_warp_solver_matches_the_float64_reference_on_every_element(n, batch, dtype, rng):
    # A block of 128 threads holds 128 / G systems: batch 7 puts several systems in a block for
    # small n and spreads them over blocks for large n; the outside coefficients are NaN.
    system = [v.astype(dtype) for v in dominant(rng, batch, n)]
    system[0][:, 0], system[2][:, -1] = np.nan, np.nan
    x, info = warp_solve(system)
    assert not info.any()
    check(x, system, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", warp.ROWS_PER_THREAD)
def test_warp_solver_every_chunk_length(rows, dtype, rng):
    # Each kernel (one per R) on symmetric positive definite systems (often not dominant), at
    # the largest n its 32 lanes hold less one (a padded chunk) and a short n (idle lanes).
    for n, batch in ((32 * rows - 1, 2), (2 * rows + 1, 5)):
        system = [v.astype(dtype) for v in spd(rng, batch, n)]
        x, info = warp_solve(system, rows=rows)
        assert not info.any()
        check(x, system, dtype)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # numba's stock simulator warns on inf - inf
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", (5, 100, 512))
def test_warp_solver_reports_zero_pivots_and_non_finite_results_per_system(n, dtype, rng):
    # 40 systems: the failing ones (3, a zero diagonal; 33, an infinite right-hand side) lie in
    # other blocks than the first for n >= 100; no other system is flagged.
    system = [v.astype(dtype) for v in dominant(rng, 40, n)]
    system[1][3] = 0
    system[3][33, n // 2] = np.inf
    x, info = warp_solve(system)
    check_flagged(x, info, system, dtype, {3: _common.ZERO_PIVOT, 33: _common.NOT_FINITE})


def test_warp_solver_zero_pivot_of_a_chunk_and_of_the_reduced_system():
    # [[0, 1], [1, 1]]: the first chunk's first pivot is 0. [[1, 1], [1, 1]] with R = 2 is one
    # chunk whose pivots are 1 and 1, but its reduced system's is 1 - 1 * 1 = 0 (singular).
    for b0, rows in ((0.0, None), (1.0, 2)):
        system = [np.array([v]) for v in ([0.0, 1.0], [b0, 1.0], [1.0, 0.0], [1.0, 1.0])]
        _, info = warp_solve(system, rows=rows)
        assert info.tolist() == [_common.ZERO_PIVOT]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", WARP_NS)
def test_warp_plan_fits_a_warp_and_the_shared_memory(n, dtype):
    rows, lanes, blocks, threads, shared = warp.plan(300, n, dtype)
    assert rows in warp.ROWS_PER_THREAD and lanes & (lanes - 1) == 0 and lanes <= 32
    assert lanes * rows >= n and (lanes == 1 or lanes * rows < 2 * n)  # no idle half group
    assert rows == max(warp.TARGET_BYTES // np.dtype(dtype).itemsize, -(-n // 32)) or rows * 16 < n <= rows * 32
    assert threads % 32 == 0 and blocks * (threads // lanes) >= 300 and shared <= _common.SHARED_BYTES
    with pytest.raises(ValueError, match="n <= 512"):
        warp.plan(1, 513, dtype)


def test_hybrid_takes_the_warp_solver_up_to_512_rows_and_the_block_partition_or_hybrid_shared_above(rng, monkeypatch):
    calls = []
    monkeypatch.setattr(warp, "run", lambda *args, **kwargs: calls.append("warp"))
    monkeypatch.setattr(block, "run", lambda *args, **kwargs: calls.append("block"))
    monkeypatch.setattr(partition, "run", lambda *args, **kwargs: calls.append("partition"))
    monkeypatch.setattr(hybrid, "run_shared", lambda *args: calls.append("shared"))
    for n in (1, 512, 513, 1025):
        tridiag.solve(*dominant(rng, 2, n), method="hybrid")  # float64: a block holds 1024 rows
    monkeypatch.setattr(hybrid, "PARTITION", False)
    tridiag.solve(*dominant(rng, 2, 513), method="hybrid")
    assert calls == ["warp", "warp", "block", "partition", "shared"]


def partition_solve(system, monkeypatch, warp_rows=None):
    """:func:`.hybrid.run` on ``system`` (host arrays) into a poisoned output, the levels of the
    partition method recorded, without the block solver (tests/test_block.py has the route
    through it): ``(x, info, levels)``, the inputs checked unchanged. With
    ``warp_rows``, the warp solver takes only systems of up to that many rows, so that small
    systems go through several levels."""
    monkeypatch.setattr(hybrid, "BLOCK_ROWS", 0)
    if warp_rows:
        monkeypatch.setattr(hybrid, "WARP_ROWS", warp_rows)
        monkeypatch.setattr(partition, "MAX_ROWS", warp_rows)
    levels, level = [], partition.run
    monkeypatch.setattr(
        partition, "run", lambda *args, **kwargs: levels.append(args[3].shape) or level(*args, **kwargs)
    )
    device = [cuda.to_device(v) for v in system]
    x = cuda.to_device(poison(np.empty(system[3].shape, system[3].dtype)))
    info = cuda.to_device(np.zeros(system[3].shape[0], np.int32))
    hybrid.run(*device, x, info)
    for before, after in zip(system, device):
        np.testing.assert_array_equal(after.copy_to_host(), before)
    return x.copy_to_host(), info.copy_to_host(), levels


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "n, batch, levels",
    (
        (513, 1, 1),
        (1003, 1, 1),
        (4097, 1, 2),
        (1024, 3, 1),
        (4096, 2, 2),
        (1003, 3, 1),
        (513, 5, 1),
        (527, 2, 1),
        (4111, 2, 2),
    ),
)
def test_partition_matches_the_float64_reference_on_every_element(n, batch, levels, dtype, rng, monkeypatch):
    # R = 8 at these sizes (partition.rows_per_thread; float64 4097 and 4111: 16). n = 513, 1003, 4097: one system, its
    # last chunk cut short; 1024 and 4096: batches, n a multiple of R; 1003, 513, 527, 4111:
    # batches whose systems are padded to whole chunks (a ragged last chunk of 3, 1, 7 and 7
    # rows; 4111: its reduced system, 2 x 514 rows, padded again at the second level). The
    # outside coefficients are NaN.
    system = [v.astype(dtype) for v in dominant(rng, batch, n)]
    system[0][:, 0], system[2][:, -1] = np.nan, np.nan
    x, info, seen = partition_solve(system, monkeypatch)
    assert not info.any() and len(seen) == levels
    check(x, system, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_partition_recurses_until_a_warp_takes_the_reduced_system(dtype, rng, monkeypatch):
    # With the warp solver taking only 16 rows, and R = 8 at levels this small: 1024 -> 256 -> 64
    # -> 16 rows, three levels, then a warp.
    system = [v.astype(dtype) for v in dominant(rng, 2, 1024)]
    x, info, seen = partition_solve(system, monkeypatch, warp_rows=16)
    assert not info.any() and seen == [(2, 1024), (2, 256), (2, 64)]
    check(x, system, dtype)


def test_partition_rows_per_thread_leaves_a_block_in_one_level_where_it_can():
    # A block holds 2048 rows in float32 and 1024 in float64: the least R in (8, 16) whose level
    # leaves that many, else 16 in float32 and 8 in float64.
    lengths = (8192, 8193, 16384, 16385, 1 << 20)
    assert [partition.rows_per_thread(np.float32, n) for n in lengths] == [8, 16, 16, 16, 16]
    assert [partition.rows_per_thread(np.float64, n) for n in (4096, 4097, 8192, 8193, 1 << 20)] == [8, 16, 16, 8, 8]


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("dtype", DTYPES)
def test_partition_reports_zero_pivots_and_non_finite_results_per_system(dtype, rng, monkeypatch):
    a, b, c, d = (v.astype(dtype) for v in dominant(rng, 3, 1024))
    b[1, 700] = 0
    a[1, 700] = c[1, 699] = 0  # a zero pivot in the middle of chunk 43 of system 1
    d[2, 5] = np.inf
    x, info, _ = partition_solve((a, b, c, d), monkeypatch)
    assert info[0] == 0 and info[1] == _common.ZERO_PIVOT and info[2] == _common.NOT_FINITE
    with pytest.raises(np.linalg.LinAlgError, match=r"system 1 of 3 .*zero pivot"):
        tridiag.solve(a, b, c, d, method="hybrid")


def test_hybrid_takes_the_partition_for_every_system_longer_than_a_warp_takes_without_the_block(rng, monkeypatch):
    calls = []
    monkeypatch.setattr(hybrid, "BLOCK_ROWS", 0)
    monkeypatch.setattr(partition, "run", lambda *args, **kwargs: calls.append(args[3].shape))
    monkeypatch.setattr(hybrid, "run_shared", lambda *args: calls.append("shared"))
    for batch, n in ((1, 513), (2, 528), (2, 520), (3, 512)):
        tridiag.solve(*dominant(rng, batch, n), method="hybrid")
    assert calls == [(1, 513), (2, 528), (2, 520)]  # 520: padded to 528 in the indexing; 512 rows: the warp solver
