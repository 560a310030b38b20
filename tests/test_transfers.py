"""ps.scan of numpy arrays with the copies overlapped (prefixsum.scans.transfers), on the simulator.

Tiles of 32 elements and chunks of two tiles, so that small arrays cross many chunk boundaries:
every element of every result is checked against the reference, the device buffers start
poisoned and every input is fresh random data (a chunk left unscanned or uncopied shows).
"""

import textwrap

import numpy as np
import pytest

import prefixsum as ps
from prefixsum.core.plans import PLANS
from prefixsum.scans import lookback, transfers
from prefixsum.scans.testing import expected_scan, poisoned, random_input, wrong_indices

TILE = {"block_size": 32, "items_per_thread": 1}
DIRECTIONS = [(True, False), (False, False), (True, True), (False, True)]  # (inclusive, reverse)


@pytest.fixture
def chunked(monkeypatch):
    """Every lookback scan of a numpy array goes through transfers.scan, two tiles a chunk; the
    device buffers it gets are poisoned; returns the list of each launch's (tiles, first tile)."""
    monkeypatch.setattr(transfers, "MIN_BYTES", 0)
    monkeypatch.setattr(transfers, "PINNED_RESULT_BYTES", 0)
    monkeypatch.setattr(transfers, "CHUNK_BYTES", 2 * 32 * 4)  # two tiles of 4-byte elements, one of 8-byte
    monkeypatch.setattr(transfers, "MIN_CHUNK_BYTES", 0)
    monkeypatch.setattr(transfers, "TARGET_CHUNKS", 1)  # every chunk CHUNK_BYTES, rounded up to whole tiles
    latest = transfers.latest

    def poisoned_latest(role, n, dtype, stream=None):
        buffer = latest(role, n, dtype, stream)
        buffer.copy_to_device(poisoned(n, dtype))
        return buffer

    monkeypatch.setattr(transfers, "latest", poisoned_latest)
    launches = []
    launcher = lookback.launcher

    def spied(*key):
        launch = launcher(*key)

        def call(grid, block, *args, **where):
            launches.append((grid, args[-1]))
            return launch(grid, block, *args, **where)

        return call

    monkeypatch.setattr(lookback, "launcher", spied)
    PLANS.clear()  # plans made before hold the launcher itself
    yield launches
    PLANS.clear()


def check(x, op, inclusive, reverse, **options):
    expected, allowed = expected_scan(x, op, inclusive=inclusive, reverse=reverse)
    result = ps.scan(x, op, inclusive=inclusive, reverse=reverse, algorithm="lookback", **options)
    assert isinstance(result, np.ndarray) and result.dtype == x.dtype.newbyteorder("=") and result.shape == x.shape
    bad = wrong_indices(result, expected, allowed)
    assert bad.size == 0, f"n={x.size} {x.dtype} {op} inclusive={inclusive} reverse={reverse}: wrong at {bad[:8]}"


@pytest.mark.parametrize("n", [1, 31, 32, 33, 63, 64, 65, 128, 200, 257])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_every_size_class_and_direction_across_chunk_boundaries(chunked, n, dtype, rng):
    for inclusive, reverse in DIRECTIONS:
        check(random_input(n, "add", dtype, rng), "add", inclusive, reverse, **TILE)
    tiles = -(-n // 32)
    per_chunk = 2 if dtype == "float32" else 1
    chunks = -(-tiles // per_chunk)
    # one launch per chunk, each over its own tiles, the carry left to the look-back
    assert chunked[-chunks:] == [(min(per_chunk, tiles - k * per_chunk), k * per_chunk) for k in range(chunks)]
    assert len(chunked) == 4 * chunks


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64", "float32", "float64"])
@pytest.mark.parametrize("op", ["add", "mul", "max", "min"])
def test_every_dtype_and_operator_over_several_chunks(chunked, dtype, op, rng):
    for inclusive, reverse in [(True, False), (False, True)]:
        check(random_input(197, op, dtype, rng), op, inclusive, reverse, **TILE)
    assert len(chunked) >= 2 * 4


def test_the_default_tiles_and_a_strided_big_endian_input(chunked, rng):
    x = random_input(3 * 4096 + 5, "add", np.dtype("float32"), rng)
    check(x, "add", True, False)  # 128 x 32 tiles: one a chunk of 16 KiB
    assert len(chunked) == 4
    wide = random_input(400, "add", np.dtype("int32"), rng)
    check(wide[::2], "add", True, False, **TILE)  # a strided view is copied chunk by chunk
    check(wide.astype(">i4"), "max", False, True, **TILE)


def test_the_input_is_never_modified(chunked, rng):
    x = random_input(300, "add", np.dtype("float64"), rng)
    kept = x.copy()
    x.flags.writeable = False
    ps.scan(x, algorithm="lookback", **TILE)
    assert np.array_equal(x, kept)


def test_only_lookback_and_arrays_of_min_bytes_go_through_the_chunks(monkeypatch, rng):
    taken = []
    monkeypatch.setattr(transfers, "scan", lambda *args, **kwargs: taken.append(args) or np.zeros(0))
    monkeypatch.setattr(transfers, "MIN_BYTES", 4 * 100)
    x = random_input(99, "add", np.dtype("float32"), rng)
    check(x, "add", True, False)  # 396 bytes: the plain way
    expected, allowed = expected_scan(x)
    assert wrong_indices(ps.scan(x, algorithm="ladder"), expected, allowed).size == 0
    assert not taken
    ps.scan(random_input(100, "add", np.dtype("float32"), rng), algorithm="lookback")
    assert len(taken) == 1


def test_the_chunk_launches_compile_to_ptx(ptx_child):
    """The kernel each chunk launches (a tile offset ``first``) compiles for sm_90, 4- and 8-byte types,
    each in both directions; each dtype in one of them (the direction is a constant of the kernel,
    not a parameter, and ``python -m prefixsum ptx`` compiles every dtype's inclusive forward scan)."""
    child = ptx_child(
        textwrap.dedent("""
        import numpy as np
        from numba import cuda
        from prefixsum.core.numba_gpu import pretend_device
        from prefixsum.scans import lookback

        pretend_device((9, 0))
        forward, backward = (True, False), (False, True)  # (inclusive, reverse)
        for dtype, (inclusive, reverse) in (("float32", forward), ("int32", backward), ("float64", backward),
                                            ("uint64", forward)):
            dtype = np.dtype(dtype)
            items = lookback.tile_items(dtype, 128, None)
            kernel = lookback.lookback_kernel("add", dtype, inclusive, reverse, 128, items)
            ptx, _ = cuda.compile_ptx(kernel.py_func, lookback.argtypes(dtype), cc=(9, 0))
            assert ".entry" in ptx and "_param_37" in ptx and "_param_38" not in ptx, dtype
            print("ok", dtype)
    """)
    )
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    assert child.stdout.count("ok ") == 4


def test_past_the_pinned_budget_results_come_through_the_slots(chunked, monkeypatch, rng):
    from prefixsum.core import workspace

    monkeypatch.setattr(workspace, "KEPT_PINNED_BYTES", 0)
    monkeypatch.setattr(workspace._local, "pinned", workspace._PinnedPool(), raising=False)
    for n in (1, 65, 257):
        for inclusive, reverse in DIRECTIONS:
            check(random_input(n, "add", np.dtype("float32"), rng), "add", inclusive, reverse, **TILE)


def test_a_result_kept_by_the_caller_is_never_reused_and_a_dropped_one_is(chunked, rng):
    x, y = (random_input(300, "add", np.dtype("int32"), rng) for _ in range(2))
    first = ps.scan(x, algorithm="lookback", **TILE)
    view = first[10:]
    del first
    second = ps.scan(y, algorithm="lookback", **TILE)  # the first result's view still holds its memory
    assert np.array_equal(view, np.cumsum(x, dtype=np.int32)[10:])
    assert np.array_equal(second, np.cumsum(y, dtype=np.int32))
    address = second.ctypes.data
    del second
    assert ps.scan(y, algorithm="lookback", **TILE).ctypes.data == address  # dropped: handed out again


def test_the_plain_way_returns_its_result_in_kept_pinned_memory_too(monkeypatch, rng):
    monkeypatch.setattr(transfers, "PINNED_RESULT_BYTES", 0)
    x = random_input(77, "add", np.dtype("float64"), rng)
    expected, allowed = expected_scan(x)
    first = ps.scan(x, algorithm="ladder")
    assert wrong_indices(first, expected, allowed).size == 0
    address = first.ctypes.data
    del first
    again = ps.scan(x, algorithm="ladder")
    assert again.ctypes.data == address and wrong_indices(again, expected, allowed).size == 0
