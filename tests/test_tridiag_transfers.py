"""tridiag.solve of numpy batches with the copies overlapped (prefixsum.tridiag.transfers), on the simulator.

The thresholds are shrunk so that batches of a few small systems are cut into chunks of 1, 2 or 3
systems; the device buffers and the result start poisoned and every input is fresh random data,
so a chunk left unsolved or uncopied shows. Each result is checked element by element against
LAPACK in float64 and against the plain path.
"""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from prefixsum import tridiag  # noqa: E402
from prefixsum.core.poison import poison  # noqa: E402
from prefixsum.tridiag import api, transfers  # noqa: E402
from test_tridiag import check, dominant  # noqa: E402


@pytest.fixture
def chunked(monkeypatch):
    """Returns ``cut(per)``: from then on every numpy batch of two systems or more goes through
    transfers.solve, ``per`` systems a chunk, into poisoned device buffers and a poisoned result;
    the list it returns gets each chunk's (rows, n) as it is solved."""
    solved = []
    monkeypatch.setattr(transfers, "MIN_BYTES", 0)
    monkeypatch.setattr(transfers, "MIN_CHUNK_BYTES", 0)
    monkeypatch.setattr(transfers, "TARGET_CHUNKS", 1)  # every chunk CHUNK_BYTES (or the whole batch)
    made, pinned = transfers.buffers, transfers.pinned_result

    def poisoned_buffers(*args):
        inputs, x, chunks = made(*args)
        for array in (inputs, x):
            array.copy_to_device(poison(np.empty(array.shape, array.dtype)))
        return inputs, x, chunks

    def poisoned_result(n, dtype):
        return poison(pinned(n, dtype))

    monkeypatch.setattr(transfers, "buffers", poisoned_buffers)
    monkeypatch.setattr(transfers, "pinned_result", poisoned_result)
    methods = dict(api.METHODS)
    for name, run in methods.items():
        def spied(a, b, c, d, x, info, run=run):
            solved.append(x.shape)
            return run(a, b, c, d, x, info)
        monkeypatch.setitem(api.METHODS, name, spied)

    def cut(per, n, dtype):
        monkeypatch.setattr(transfers, "CHUNK_BYTES", per * 4 * n * np.dtype(dtype).itemsize)
        return solved
    return cut


def plain(system, method):
    """The same call the plain way (one copy each way)."""
    kept = transfers.MIN_BYTES
    transfers.MIN_BYTES = 1 << 62
    try:
        return tridiag.solve(*system, method=method)
    finally:
        transfers.MIN_BYTES = kept


def solve_and_check(system, dtype, method="auto"):
    inputs = [v.copy() for v in system]
    x = tridiag.solve(*system, method=method)
    assert isinstance(x, np.ndarray)
    for before, after in zip(inputs, system):
        np.testing.assert_array_equal(before, after)  # inputs never modified
    check(x, system, dtype)
    expected = plain(system, method)
    scale = np.abs(expected).max(axis=1, keepdims=True)
    bad = np.argwhere(~(np.abs(x - expected) <= 64 * np.finfo(dtype).eps * scale))
    assert bad.size == 0, f"differs from the plain path at (system, row) {tuple(bad[0])}"
    return x


@pytest.mark.parametrize("pageable", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch, n, per", [(2, 5, 1), (3, 33, 1), (3, 7, 2), (7, 31, 3), (7, 4, 2), (7, 1, 7)])
def test_every_batch_across_chunk_boundaries(chunked, rng, monkeypatch, dtype, batch, n, per, pageable):
    """Straight from the caller's arrays (pageable) and through the staging threads' pinned slots."""
    monkeypatch.setattr(transfers, "PAGEABLE", pageable)
    solved = chunked(per, n, dtype)
    system = [v.astype(dtype) for v in dominant(rng, batch, n)]
    solve_and_check(system, dtype)
    chunks = -(-batch // per)
    assert solved[:chunks] == [(min(per, batch - k * per), n) for k in range(chunks)]


@pytest.mark.parametrize("method", list(tridiag.METHODS))
def test_every_method_through_chunks(chunked, rng, method):
    for dtype in (np.float32, np.float64):
        solved = chunked(3, 9, dtype)
        solve_and_check([v.astype(dtype) for v in dominant(rng, 7, 9)], dtype, method)
        assert solved[:3] == [(3, 9), (3, 9), (1, 9)]
        solved.clear()


@pytest.mark.parametrize("pageable", [True, False])
def test_arrays_that_are_not_contiguous(chunked, rng, monkeypatch, pageable):
    """Strided inputs (every other column of wider arrays) go through the pinned slots, and the
    plain path packs them, whatever PAGEABLE says."""
    monkeypatch.setattr(transfers, "PAGEABLE", pageable)
    solved = chunked(2, 10, np.float64)
    wide = dominant(rng, 5, 20)
    system = [v[:, ::2] for v in wide]
    x = solve_and_check(system, np.float64)
    assert x.flags.c_contiguous and solved[:3] == [(2, 10), (2, 10), (1, 10)]


def test_one_system_is_never_cut(chunked, rng):
    solved = chunked(1, 40, np.float64)
    assert not transfers.overlapped(1, 40, np.float64)
    a, b, c, d = (v[0] for v in dominant(rng, 1, 40))
    x = tridiag.solve(a, b, c, d)
    assert x.shape == (40,)
    check(x[None], [v[None] for v in (a, b, c, d)], np.float64)
    assert solved[0] == (1, 40)


def test_a_failure_names_its_system_in_the_whole_batch(chunked, rng):
    chunked(2, 12, np.float64)
    a, b, c, d = dominant(rng, 7, 12)
    b[5] = 0  # system 5, in the third chunk
    with pytest.raises(np.linalg.LinAlgError, match="system 5 of 7"):
        tridiag.solve(a, b, c, d, method="hybrid")
    solve_and_check(list(dominant(rng, 7, 12)), np.float64)  # the flags were cleared after the failure


def test_a_full_pinned_budget_goes_the_plain_way(chunked, rng, monkeypatch):
    solved = chunked(1, 6, np.float64)
    monkeypatch.setattr(transfers, "pinned_result", lambda n, dtype: None)
    system = list(dominant(rng, 3, 6))
    check(tridiag.solve(*system), system, np.float64)
    assert solved == [(3, 6)]


def test_chunk_sizes_follow_the_bytes():
    mib = 1 << 20
    assert transfers.chunk_systems(4096, 256, np.float32) * 4 * 256 * 4 == 16 * mib // transfers.TARGET_CHUNKS
    assert transfers.chunk_systems(1 << 20, 64, np.float64) * 4 * 64 * 8 == transfers.CHUNK_BYTES
    assert transfers.chunk_systems(3, 1 << 20, np.float64) == 1  # a system larger than a chunk: one a chunk
    assert not transfers.overlapped(1, 1 << 20, np.float64)  # nothing to cut
    assert not transfers.overlapped(100, 100, np.float64)  # below MIN_BYTES
