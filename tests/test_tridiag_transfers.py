"""tridiag.solve of numpy batches with the copies overlapped (prefixsum.tridiag.transfers), on the simulator.

The thresholds are shrunk so that batches of a few small systems are cut into chunks of 1, 2 or 3
systems; the device buffers and the result start poisoned and every input is fresh random data,
so a chunk left unsolved or uncopied shows. Each result is checked element by element against
LAPACK in float64 and against the plain path.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import dataclasses  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from test_tridiag import check, dominant  # noqa: E402

from prefixsum import tridiag  # noqa: E402
from prefixsum.core import overlap, plans  # noqa: E402
from prefixsum.core.poison import poison  # noqa: E402
from prefixsum.tridiag import api, transfers  # noqa: E402


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

    def spy(run):
        def spied(a, b, c, d, x, info, **options):
            solved.append(x.shape)
            return run(a, b, c, d, x, info, **options)

        return spied

    for name, method in api.METHODS.items():  # every method, spied, in plans made afresh
        monkeypatch.setitem(api.METHODS._items, name, dataclasses.replace(method, run=spy(method.run)))
    plans.PLANS.clear()

    def cut(per, n, dtype):
        monkeypatch.setattr(transfers, "CHUNK_BYTES", per * 4 * n * np.dtype(dtype).itemsize)
        return solved

    yield cut
    plans.PLANS.clear()  # no plan keeps a spy


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


@pytest.fixture
def tiny_parts(monkeypatch):
    """Pieces of send_packed of up to 16 bytes, packed 8 bytes a thread, in a ring of 3 slots:
    every call wraps around it."""
    monkeypatch.setattr(overlap, "PACK_PIECE_BYTES", 16)
    monkeypatch.setattr(overlap, "MIN_PACK_BYTES", 8)
    monkeypatch.setattr(overlap, "PACK_SLOTS", 3)


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch, n, per", [(2, 5, 1), (3, 33, 1), (3, 7, 2), (7, 31, 3), (7, 4, 2), (7, 1, 7)])
def test_every_batch_across_chunk_boundaries(chunked, rng, monkeypatch, tiny_parts, dtype, batch, n, per, packed):
    """Straight from the caller's arrays (pageable) and packed in parts through the pinned ring."""
    monkeypatch.setattr(transfers, "PACKED_FROM_BYTES", 0 if packed else 1 << 62)
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


@pytest.mark.parametrize("packed", [True, False])
def test_arrays_that_are_not_contiguous(chunked, rng, monkeypatch, tiny_parts, packed):
    """Strided inputs (every other column of wider arrays) are packed through the pinned ring,
    chunked and the plain way, whatever the batch's size."""
    monkeypatch.setattr(transfers, "PACKED_FROM_BYTES", 0 if packed else 1 << 62)
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


def test_the_plain_way_reads_x_and_the_flags_in_one_wait(rng, monkeypatch):
    """A numpy call the plain way queues x's copy, then the failure flags', and waits once; a
    failure still names its system, and the flags are clear for the next call."""
    waits, real = [], transfers.copies()

    class Counted:
        copy_out = staticmethod(real.copy_out)

        @staticmethod
        def synchronize_stream(stream):
            waits.append(stream)
            real.synchronize_stream(stream)

    monkeypatch.setattr(transfers, "copies", lambda: Counted)
    monkeypatch.setattr(
        transfers,
        "send",
        lambda device, offset, planes, stream, packed: [
            device[p].copy_to_device(np.ascontiguousarray(v)) for p, v in enumerate(planes)
        ],
    )
    monkeypatch.setattr(api, "copy_to_host", lambda *args: pytest.fail("a second wait for the flags"))
    system = list(dominant(rng, 3, 20))
    check(tridiag.solve(*system), system, np.float64)
    assert len(waits) == 1
    system[1][1, 0] = 0  # a zero first pivot in system 1
    with pytest.raises(np.linalg.LinAlgError, match="system 1 of 3"):
        tridiag.solve(*system, method="thomas")
    system = list(dominant(rng, 3, 20))
    check(tridiag.solve(*system, method="thomas"), system, np.float64)
    assert len(waits) == 3


def test_chunk_sizes_follow_the_bytes():
    mib = 1 << 20
    assert transfers.chunk_systems(4096, 256, np.float32) * 4 * 256 * 4 == 16 * mib // transfers.TARGET_CHUNKS
    assert transfers.chunk_systems(1 << 20, 64, np.float64) * 4 * 64 * 8 == transfers.CHUNK_BYTES
    assert transfers.chunk_systems(3, 1 << 20, np.float64) == 1  # a system larger than a chunk: one a chunk
    assert not transfers.overlapped(1, 1 << 20, np.float64)  # nothing to cut
    assert not transfers.overlapped(100, 100, np.float64)  # below MIN_BYTES


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("batch, n", [(1, 1), (1, 9), (2, 3), (5, 4), (9, 2), (3, 17)])
def test_the_plain_way_sends_every_element(rng, monkeypatch, tiny_parts, packed, batch, n):
    """The plain way, packed in parts that wrap the ring several times (pieces of rows, whole
    rows), or pageable, into poisoned device inputs: every element of x is checked."""
    monkeypatch.setattr(transfers, "PACKED_FROM_BYTES", 0 if packed else 1 << 62)
    made = api.cuda.device_array

    def poisoned(shape, dtype):
        array = made(shape, dtype)
        array.copy_to_device(poison(np.empty(shape, dtype)))
        return array

    monkeypatch.setattr(api.cuda, "device_array", poisoned)
    monkeypatch.setattr(api, "reused", lambda key, make, stream=None: make())  # no device arrays of an earlier call
    for dtype in (np.float32, np.float64):
        system = [v.astype(dtype) for v in dominant(rng, batch, n)]
        check(tridiag.solve(*system), system, dtype)


@pytest.mark.parametrize(
    "shape, size, expected",
    [
        ((3, 4), 8, [(2, 4, 0), (1, 4, 8)]),  # whole rows, a short last part
        ((2, 10), 4, [(1, 4, 0), (1, 4, 4), (1, 2, 8), (1, 4, 10), (1, 4, 14), (1, 2, 18)]),  # pieces of a row
        ((1, 5), 100, [(1, 5, 0)]),
    ],
)
def test_parts_cover_each_plane_once_in_order(shape, size, expected):
    planes = [np.zeros(shape), np.ones(shape)]
    parts = [(block.shape[0], block.shape[1], start) for block, start in overlap._parts(planes, size)]
    per_plane = shape[0] * shape[1]
    assert parts == expected + [(r, c, start + per_plane) for r, c, start in expected]


@pytest.mark.parametrize(
    "shape, size, expected",
    [
        ((3, 4), 8, [(1, 0, 8), (1, 8, 4), (1, 12, 8), (1, 20, 4)]),  # a piece never holds more than size
        ((2, 2), 8, [(2, 0, 8)]),  # whole planes together
        ((1, 10), 4, [(1, 0, 4), (1, 4, 4), (1, 8, 2), (1, 10, 4), (1, 14, 4), (1, 18, 2)]),  # pieces of a row
    ],
)
def test_pieces_fill_slots_in_device_order(shape, size, expected):
    planes = [np.zeros(shape), np.ones(shape)]
    assert [(len(blocks), start, total) for blocks, start, total in overlap._pieces(planes, size)] == expected


def test_send_packed_keeps_order_across_calls(rng, tiny_parts):
    """Two sends in a row on one thread continue around the ring, each element landing at its
    offset; a strided plane is packed as well as a contiguous one."""
    from numba import cuda

    device = cuda.to_device(poison(np.empty(2 * 2 * 3 * 5 + 4, np.float64)))
    first = [rng.standard_normal((3, 5)) for _ in range(2)]
    second = [rng.standard_normal((3, 10))[:, ::2] for _ in range(2)]
    stream = cuda.default_stream()
    overlap.send_packed(device, 4 * 8, first, stream)
    overlap.send_packed(device, (4 + 30) * 8, second, stream)
    got = device.copy_to_host()
    np.testing.assert_array_equal(got[4:34], np.concatenate([v.ravel() for v in first]))
    np.testing.assert_array_equal(got[34:], np.concatenate([v.ravel() for v in second]))


def test_a_small_send_pins_little_and_a_larger_one_grows_the_ring(rng):
    """On a thread of its own (the ring is the thread's): a send of 320 bytes takes slots of
    MIN_SLOT_BYTES; one of 3 MiB grows them to 4 MiB; both land whole."""
    import concurrent.futures

    from numba import cuda

    from prefixsum.core import workspace

    def send(rows, cols):
        planes = [rng.standard_normal((rows, cols)) for _ in range(2)]
        device = cuda.to_device(poison(np.empty(2 * rows * cols)))
        overlap.send_packed(device, 0, planes, cuda.default_stream())
        np.testing.assert_array_equal(device.copy_to_host(), np.concatenate([v.ravel() for v in planes]))
        return workspace.staging("pack ring", 0).nbytes

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        assert pool.submit(send, 4, 5).result() == overlap.PACK_SLOTS * overlap.MIN_SLOT_BYTES
        assert pool.submit(send, 3, 1 << 16).result() == overlap.PACK_SLOTS * (4 << 20)
