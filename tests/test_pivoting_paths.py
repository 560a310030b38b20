"""The paths of ``method="pivoting"`` against LAPACK: one thread per system, whole systems in a
block (``block_rows``) and levels of reduced systems (``reduce_*``, ``block_pairs``,
``substitute_*``) of :mod:`prefixsum.tridiag.chunked`, and their masks and flags.

Every path is forced on every shape (``pairs``: 0 for one thread, or the chunk's ``R``), with
blocks of 32 threads, so that small systems already take several blocks and one to three levels
on the simulator. The bound on each system's relative error is ``100 n eps kappa``, as in
test_pivoting.py; outputs start poisoned and the inputs are checked unchanged. The kernels' PTX
is compiled by test_ptx.py (``tridiag.ptx_kernels()``), which also checks that the float32 ones
compute in float32 without local memory; tests/test_pivoting_families.py has the issue's
families of systems through the public calls.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402
from test_pivoting_families import within_lapack  # noqa: E402

from prefixsum.core import tables  # noqa: E402
from prefixsum.core.poison import poison  # noqa: E402
from prefixsum.tridiag import chunked, pivoting, registry  # noqa: E402
from prefixsum.tridiag._common import NOT_FINITE, SINGULAR  # noqa: E402

DTYPES = (np.float32, np.float64)
SHAPES = ((1, 1), (3, 2), (2, 3), (2, 31), (2, 33), (1, 100), (2, 129), (1, 300))
"""n = 1, 2, 3, around a warp, past chunk boundaries (33, 129: a ragged last chunk); with 16
threads a block, 300 rows take a level at R = 4 and 8 (38 and 19 chunks), then ``block_pairs``."""


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(pivoting, "THREADS", 16)
    monkeypatch.setattr(pivoting, "TILE_THREADS", 32)
    monkeypatch.setattr(pivoting, "ONE_THREAD_ROWS", 0)  # the chunked paths at every n but where forced


def systems(rng, batch, n, dtype, kind):
    """``(a, b, c, d)`` of one kind: ``normal`` (random, neither dominant nor definite),
    ``indefinite`` (symmetric, small diagonal: eigenvalues of both signs), ``near`` (symmetric,
    nearly singular: ``tridiag(1, 2 cos(pi / (n + 1)) (1 + 1e-4), 1)``, the smallest eigenvalue
    about 1e-4 of the largest, up to a random diagonal perturbation of 1e-7), ``tiny``
    (``tridiag(1, 1e-10, 1)``: every partition of odd length nearly singular) or ``dominant``."""
    a, b, c, d = rng.normal(size=(4, batch, n))
    if kind == "indefinite":
        c[:, :-1] = a[:, 1:]
        b = rng.uniform(-0.1, 0.1, (batch, n))
    elif kind == "near":
        a[:], c[:] = 1, 1
        b = np.full((batch, n), -2 * np.cos(np.pi / (n + 1)) * (1 + 1e-4)) + rng.uniform(-1e-7, 1e-7, (batch, n))
    elif kind == "tiny":
        a[:], b[:], c[:] = 1, 1e-10, 1
    elif kind == "dominant":
        b = np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))
    return [v.astype(dtype) for v in (a, b, c, d)]


def solved(system, pairs, dtype, route=None, call=0, x=None, info=None):
    """``pivoting.run`` with ``pairs`` into a poisoned output (or ``x``) and ``info`` (zeros,
    or the one given); the inputs checked unchanged. Returns ``(x, info)`` on the host."""
    before = [v.copy() for v in system]
    device = [cuda.to_device(v) for v in system]
    x = cuda.to_device(poison(np.empty(system[3].shape, dtype)) if x is None else x)
    info = cuda.to_device(np.zeros(system[3].shape[0], np.int32) if info is None else info)
    pivoting.run(*device, x, info, route=route, call=call, pairs=pairs)
    for original, on_device in zip(before, device):
        np.testing.assert_array_equal(on_device.copy_to_host(), original)
    return x.copy_to_host(), info.copy_to_host()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pairs", (0, 4, 16))
@pytest.mark.parametrize("batch, n", SHAPES)
def test_every_path_solves_general_systems_as_lapack_does(batch, n, pairs, dtype, rng):
    system = systems(rng, batch, n, dtype, "normal")
    x, info = solved(system, pairs, dtype)
    assert not info.any()
    within_lapack(*system, x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ("indefinite", "near", "tiny", "dominant"))
@pytest.mark.parametrize("pairs, pair_pairs", ((4, 4), (8, 16), (16, 8)))
def test_levels_on_indefinite_nearly_singular_tiny_diagonal_and_dominant_systems(
    kind, pairs, pair_pairs, dtype, rng, monkeypatch
):
    monkeypatch.setattr(pivoting, "PAIR_PAIRS", pair_pairs)
    system = systems(rng, 3, 601, dtype, kind)  # two levels at R = 4 (76, then 19 pairs), one at 8 and 16
    x, info = solved(system, pairs, dtype)
    assert not info.any()
    within_lapack(*system, x)


def test_a_chunk_length_without_kernels_is_refused():
    with pytest.raises(ValueError, match=r"pairs=2: the chunks have kernels for 4, 8, 16 pairs"):
        pivoting.plan(1, 100, np.float32, pairs=2)


def test_the_plan_takes_one_thread_for_short_systems_and_chunks_beyond(monkeypatch):
    monkeypatch.setattr(pivoting, "ONE_THREAD_ROWS", 32)
    assert pivoting.plan(100, 32, np.float32) == 0
    assert pivoting.plan(1, 33, np.float32) in pivoting.ALL_ROW_PAIRS
    assert pivoting.plan(1, 1 << 20, np.float64, pairs=0) == 0 and pivoting.plan(1, 100, np.float32, pairs=4) == 4


def sweep_times():
    """``{(dtype, batch, n): {R: microseconds}}`` of the committed sweep's ``pivoting:pairs=R`` kernel rows."""
    found = {}
    for row in tables.rows(registry.TABLE):
        if row["method"].startswith("pivoting:pairs=") and row["kind"] == "ours (kernels)" and row["correct"] == "True":
            shape = (row["dtype"], int(row["batch"]), int(row["n"]))
            found.setdefault(shape, {})[int(row["method"].rsplit("=", 1)[1])] = float(row["median_us"])
    return found


def test_the_plan_takes_the_chunks_the_sweep_found_fastest_at_each_measured_shape():
    times = sweep_times()
    assert len(times) >= 10 and {r for shape in times.values() for r in shape} == set(pivoting.ALL_ROW_PAIRS)
    chosen = {shape: pivoting.plan(shape[1], shape[2], np.dtype(shape[0])) for shape in times}
    assert chosen == {shape: min(t, key=t.get) for shape, t in times.items()}
    assert len(set(chosen.values())) > 1  # no one R was the fastest everywhere: the choice is per shape
    # between measured shapes, the nearest one's: 2000 systems of 900 rows are nearest 1000 x 1000
    assert pivoting.plan(2000, 900, np.float32) == chosen[("float32", 1000, 1000)]


def test_the_plan_falls_back_to_the_constants_without_the_table(monkeypatch):
    monkeypatch.setattr(tables, "rows", lambda name: ())
    pivoting.fastest_row_pairs.cache_clear()
    try:
        assert pivoting.plan(512, 512, np.float32) == pivoting.ROW_PAIRS[4]
        assert pivoting.plan(1, 1 << 20, np.float64) == pivoting.LEVEL_ROW_PAIRS[8]
    finally:
        pivoting.fastest_row_pairs.cache_clear()


def singular_in_a_batch(rng, batch, n, dtype, bad):
    """Random systems; those in ``bad`` with row and column ``k = n // 2`` emptied (singular)."""
    a, b, c, d = systems(rng, batch, n, dtype, "normal")
    k = n // 2
    for m in bad:
        a[m, k] = b[m, k] = c[m, k] = c[m, k - 1] = 0  # n >= 2: k - 1 >= 0
        if k + 1 < n:
            a[m, k + 1] = 0
    return a, b, c, d


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pairs, n", ((0, 20), (4, 40), (8, 300)))
def test_singular_systems_are_flagged_nan_and_the_others_solved(pairs, n, dtype, rng):
    bad = (1, 4)
    system = singular_in_a_batch(rng, 6, n, dtype, bad)
    x, info = solved(system, pairs, dtype)
    assert [m for m in range(6) if info[m]] == list(bad) and set(info[list(bad)]) == {SINGULAR}
    assert np.isnan(x[list(bad)]).all()
    good = [m for m in range(6) if m not in bad]
    within_lapack(*(v[good] for v in system), x[good])
    x, info = solved([v[good] for v in system], pairs, dtype)  # the flags of the levels were cleared
    assert not info.any()


@pytest.mark.parametrize("pairs, n", ((0, 20), (4, 60), (4, 300)))
def test_a_masked_call_solves_and_writes_only_its_systems_and_their_info(pairs, n, rng):
    dtype = np.float64
    system = systems(rng, 5, n, dtype, "normal")
    route = cuda.to_device(np.array([7, 6, 7, 0, 7], np.int32))  # call 7: systems 0, 2 and 4
    before = np.full((5, n), 3.0)
    flags = np.array([2, 2, 1, 2, 0], np.int32)  # what another method said of them
    x, info = solved(system, pairs, dtype, route=route, call=7, x=before, info=flags)
    assert list(info) == [0, 2, 0, 2, 0]  # the routed systems' verdicts replace the others'
    assert (x[[1, 3]] == 3.0).all()
    within_lapack(*(v[[0, 2, 4]] for v in system), x[[0, 2, 4]])
    x, info = solved(system, pairs, dtype, route=route, call=8, x=before, info=flags)  # nothing routed to call 8
    assert (x == 3.0).all() and list(info) == list(flags)


def test_a_non_finite_right_hand_side_is_reported_and_singular_wins_over_it(rng):
    system = singular_in_a_batch(rng, 3, 40, np.float64, (2,))
    system[3][1, 5] = np.inf
    system[3][2, 5] = np.nan
    x, info = solved(system, 4, np.float64)
    assert list(info) == [0, NOT_FINITE, SINGULAR]


def test_the_shared_memory_of_every_kernel_fits_the_budget(monkeypatch):
    monkeypatch.setattr(pivoting, "THREADS", 128)
    for dtype in DTYPES:
        for pairs in pivoting.ALL_ROW_PAIRS:
            for block in (False, True):
                threads = pivoting.threads_for(chunked.row_shared_bytes, pairs, dtype, block)
                assert chunked.row_shared_bytes(threads, pairs, dtype, block) <= 48 * 1024 and threads >= 32
        for pairs in pivoting.ALL_PAIR_PAIRS:
            threads = pivoting.threads_for(chunked.pair_shared_bytes, pairs, dtype, True)
            assert chunked.pair_shared_bytes(threads, pairs, dtype, True) <= 48 * 1024 and threads >= 32
