"""The paths of ``method="pivoting"`` against LAPACK: one thread per system, chunks factored with
partial pivoting in levels (:func:`.spike.spike_reduce` / :func:`.spike.spike_substitute`) and
whole systems in one block (:func:`.spike.spike_block`), and the systems they flag solved again.

Every path is forced on every shape (``rows``: 0 for one thread, or the chunk ``S`` at every
level), with blocks of 32 threads so that small systems already take several blocks and several
levels on the simulator. The bound on each system's relative error is ``100 n eps kappa``, as in
test_pivoting.py; outputs start poisoned and the inputs are checked unchanged. The kernels' PTX
is compiled by test_ptx.py (``tridiag.ptx_kernels()``), and test_tridiag.py checks that the
float32 ones compute in float32 without local memory.
"""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.linalg  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum import tridiag  # noqa: E402
from prefixsum.core.poison import poison  # noqa: E402
from prefixsum.tridiag import pivoting  # noqa: E402
from prefixsum.tridiag._common import UNSTABLE  # noqa: E402

DTYPES = (np.float32, np.float64)
SHAPES = ((1, 1), (3, 2), (2, 31), (2, 32), (2, 33), (1, 100), (2, 129), (1, 300))
"""n = 1, 2, 31, 32, 33 and past chunk boundaries (4 and 8 divide 32 and 128; 33, 129, 700 leave
a ragged last chunk); 300 takes two levels at S = 4 with 32 threads, then a block."""


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(pivoting, "THREADS", 32)
    monkeypatch.setattr(pivoting, "TILE_THREADS", 32)


def systems(rng, batch, n, dtype, kind):
    """``(a, b, c, d)`` of one kind: ``normal`` (random, neither dominant nor definite),
    ``indefinite`` (symmetric, small diagonal: eigenvalues of both signs), ``near`` (symmetric,
    nearly singular: ``tridiag(1, 2 cos(pi / (n + 1)) (1 + 1e-4), 1)``, the smallest eigenvalue
    about 1e-4 of the largest, up to a random diagonal perturbation of 1e-7) or ``dominant``."""
    a, b, c, d = rng.normal(size=(4, batch, n))
    if kind == "indefinite":
        c[:, :-1] = a[:, 1:]
        b = rng.uniform(-0.1, 0.1, (batch, n))
    elif kind == "near":
        a[:], c[:] = 1, 1
        b = np.full((batch, n), -2 * np.cos(np.pi / (n + 1)) * (1 + 1e-4)) + rng.uniform(-1e-7, 1e-7, (batch, n))
    elif kind == "dominant":
        b = np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))
    return [v.astype(dtype) for v in (a, b, c, d)]


def within_lapack(a, b, c, d, x):
    """Every system's ``|x - x_lapack| / |x_lapack| <= 100 n eps kappa`` in float64, against
    ``scipy.linalg.solve_banded`` (LAPACK's ``?gbsv``); a NaN (poison) in x fails."""
    batch, n = b.shape
    for m in range(batch):
        bands = np.zeros((3, n))
        bands[0, 1:], bands[1], bands[2, :-1] = c[m, :-1], b[m], a[m, 1:]
        expected = scipy.linalg.solve_banded((1, 1), bands, d[m].astype(np.float64))
        dense = np.diag(b[m].astype(np.float64)) + np.diag(a[m, 1:].astype(np.float64), -1) + np.diag(c[m, :-1].astype(np.float64), 1)
        bound = 100 * n * np.finfo(b.dtype).eps * np.linalg.cond(dense)
        error = np.linalg.norm(x[m] - expected) / np.linalg.norm(expected)
        assert error <= bound, f"system {m} of {batch}: relative error {error:.3g} > {bound:.3g}"


def solved(system, rows, dtype):
    """``pivoting.run`` with ``rows`` into a poisoned output; the inputs checked unchanged."""
    before = [v.copy() for v in system]
    device = [cuda.to_device(v) for v in system]
    x = cuda.to_device(poison(np.empty(system[3].shape, dtype)))
    info = cuda.to_device(np.zeros(system[3].shape[0], np.int32))
    pivoting.run(*device, x, info, rows=rows)
    assert not info.copy_to_host().any()
    for original, on_device in zip(before, device):
        np.testing.assert_array_equal(on_device.copy_to_host(), original)
    return x.copy_to_host()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", (0, 4, 8))
@pytest.mark.parametrize("batch, n", SHAPES)
def test_every_path_solves_general_systems_as_lapack_does(batch, n, rows, dtype, rng):
    system = systems(rng, batch, n, dtype, "normal")
    within_lapack(*system, solved(system, rows, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ("indefinite", "near", "dominant"))
@pytest.mark.parametrize("rows, block", ((4, False), (8, True), (16, True)))
def test_partitioned_paths_on_indefinite_nearly_singular_and_dominant_systems(kind, rows, block, dtype, rng, monkeypatch):
    monkeypatch.setattr(pivoting, "BLOCK_SOLVE", block)
    system = systems(rng, 3, 200, dtype, kind)
    within_lapack(*system, solved(system, rows, dtype))


def test_the_plan_splits_only_systems_of_more_than_two_chunks():
    assert pivoting.plan(100, 32, np.float32) == 0  # ONE_THREAD_ROWS
    assert pivoting.plan(1, 33, np.float32) == pivoting.SPIKE_ROWS
    assert pivoting.plan(64, 64, np.float32) == pivoting.BATCH_SPIKE_ROWS == pivoting.plan(64, 256, np.float64)
    assert pivoting.plan(64, 255, np.float64) == pivoting.SPIKE_ROWS == pivoting.plan(63, 1000, np.float32)
    assert pivoting.plan(1, 16, np.float32, rows=4) == pivoting.plan(1, 1 << 20, np.float64, rows=0) == 0
    assert pivoting.plan(1, 1 << 20, np.float64, rows=16) == 16


def blocks_with_a_lone_first_row(rng, batch, n, dtype, rows):
    """Dominant systems whose chunks' first rows (S k, k >= 1) read ``a x_{i-1} = d``: every such
    block has a zero row (its ``a`` moves to the right-hand side), singular, though A is not."""
    a, b, c, d = systems(rng, batch, n, dtype, "dominant")
    b[:, rows::rows] = c[:, rows::rows] = 0
    return a, b, c, d


@pytest.mark.parametrize("block", (False, True))
@pytest.mark.parametrize("dtype", DTYPES)
def test_systems_with_singular_blocks_are_flagged_and_solved_again_by_one_thread(block, dtype, rng, monkeypatch):
    monkeypatch.setattr(pivoting, "BLOCK_SOLVE", block)
    system = blocks_with_a_lone_first_row(rng, 2, 150, dtype, 8)
    system[1][0] = np.abs(system[0][0]) + np.abs(system[2][0]) + 1  # system 0 dominant again: not flagged
    device = [cuda.to_device(v) for v in system]
    x, info = cuda.device_array((2, 150), dtype), cuda.to_device(np.zeros(2, np.int32))
    pivoting.levels(*device, x, info, rows=8)
    assert list(info.copy_to_host()) == [0, UNSTABLE]
    within_lapack(*system, solved(system, 8, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_nearly_singular_block_is_flagged_by_its_growth(dtype, rng):
    a, b, c, d = systems(rng, 1, 64, dtype, "dominant")
    b[0, 8], c[0, 8] = 1e-5, 0  # block 1's first row: its pivot 1e-5, its spike about 1e5
    info = cuda.to_device(np.zeros(1, np.int32))
    pivoting.levels(*(cuda.to_device(v) for v in (a, b, c, d)), cuda.device_array((1, 64), dtype), info, rows=8)
    assert info.copy_to_host()[0] == UNSTABLE
    within_lapack(a, b, c, d, solved([a, b, c, d], 8, dtype))


@pytest.mark.parametrize("rows", (4, 8))
def test_a_singular_system_on_the_partitioned_path_is_an_error_naming_it(rows, rng, monkeypatch):
    monkeypatch.setattr(pivoting, "SPIKE_ROWS", rows)
    a, b, c, d = systems(rng, 3, 100, np.float64, "normal")
    a[1, 41], b[1, 40], c[1, 39] = 0, 0, 0  # system 1: column 40 holds no nonzero
    with pytest.raises(np.linalg.LinAlgError, match=r"system 1 of 3 \(1 failed in all\): the matrix is singular"):
        tridiag.solve(a, b, c, d, method="pivoting")
