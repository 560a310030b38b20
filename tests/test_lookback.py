"""The single-pass scan with decoupled look-back (prefixsum.scans.lookback) beyond the generic suites.

test_scan, test_api, test_check, test_special_values and test_ptx cover "lookback" for every op,
dtype, direction and size with its default tiles; here: many small tiles (look-backs over more
than one window of 32), the look-back itself over states prepared by hand (the simulator runs
blocks one after another, so there a predecessor has always published its prefix), the epochs,
the tile counter, and the launcher.
"""

import collections
import re
import textwrap

import numpy as np
import pytest
from numba import cuda, types
from test_scan import run_and_check

import prefixsum as ps
from prefixsum import trace
from prefixsum.core.launch import Launcher
from prefixsum.primitives import tile_state
from prefixsum.scans import lookback
from prefixsum.scans.ops import host_ufunc
from prefixsum.scans.testing import expected_scan, random_input, wrong_indices

TILE_TEST_BLOCK = 32


@pytest.mark.parametrize("dtype", ps.DTYPES, ids=str)
def test_many_small_tiles(dtype, rng):
    """71 tiles of 32 elements (a look-back window is 32 tiles), both directions."""
    n = 32 * 70 + 5
    for k, (inclusive, reverse) in enumerate(((True, False), (False, True))):
        op = ps.OPS[(k + ps.DTYPES.index(dtype)) % 4]
        run_and_check(
            "lookback", random_input(n, op, dtype, rng), op, inclusive, reverse, block_size=32, items_per_thread=1
        )


@pytest.mark.parametrize("block_size, items_per_thread", [(64, 3), (32, 32), (1024, None)])
def test_other_tile_shapes(block_size, items_per_thread, rng):
    tile = block_size * (items_per_thread or 4)
    for op, dtype, inclusive, reverse in (("add", "float32", True, False), ("min", "int64", False, True)):
        run_and_check(
            "lookback",
            random_input(3 * tile + 17, op, dtype, rng),
            op,
            inclusive,
            reverse,
            block_size=block_size,
            items_per_thread=items_per_thread,
        )


@pytest.mark.parametrize("op, dtype", [("add", "float32"), ("max", "int32"), ("add", "float64"), ("mul", "uint64")])
def test_look_back_over_aggregates_stops_at_the_closest_prefix(op, dtype, rng):
    """Tile 70 looks back over prepared states: aggregates of tiles 21..69, a prefix at tile 20.

    The first window (tiles 38..69) holds aggregates only, so the look-back takes a second one
    (6..37), which stops at the prefix: the aggregates of tiles 6..19 must not count. The tile's
    own inclusive prefix is then published for the tiles after it.
    """
    dtype = np.dtype(dtype)
    tile, epoch = 70, 5
    combine = host_ufunc(op)
    values = random_input(tile + 1, op, dtype, rng)
    aggregate = values[tile]
    status_np, values_np = _states(dtype, tile + 1)
    flags = np.full(tile + 1, 2 * epoch + lookback.AGGREGATE, np.uint32)
    flags[20] = 2 * epoch + lookback.PREFIX
    flags[tile] = 0  # not yet published
    status, packed_values = cuda.to_device(status_np), cuda.to_device(values_np)
    _publish_all(dtype)[1, 1](status, packed_values, cuda.to_device(flags), cuda.to_device(values))
    result = cuda.device_array(1, dtype)
    _look_back_kernel(op, dtype)[1, 32](status, packed_values, tile, aggregate, epoch, result)

    expected = values[20]
    for t in range(21, tile):
        expected = combine(expected, values[t])
    assert result.copy_to_host()[0] == pytest.approx(expected, rel=1e-5)
    flag, value = _peek_one(dtype)(status, packed_values, tile)
    assert flag == 2 * epoch + lookback.PREFIX
    assert value == pytest.approx(combine(expected, aggregate), rel=1e-5)


def _states(dtype, tiles):
    return lookback.state_arrays(dtype.itemsize, 0, tiles)


def _publish_all(dtype):
    publish, _ = lookback.state_access(dtype)

    @cuda.jit
    def publish_all(status, packed_values, flags, values):
        for t in range(flags.shape[0]):
            if flags[t]:
                publish(status, packed_values, t, flags[t], values[t])

    return publish_all


def _look_back_kernel(op, dtype):
    look = lookback.look_back(op, dtype)

    @cuda.jit
    def look_back(status, packed_values, tile, aggregate, epoch, result):
        before = look(status, packed_values, tile, aggregate, epoch)
        if cuda.threadIdx.x == 0:
            result[0] = before

    return look_back


def _peek_one(dtype):
    _, peek = lookback.state_access(dtype)
    flags = cuda.device_array(1, np.uint32)
    found = cuda.device_array(1, dtype)

    @cuda.jit
    def peek_one(status, packed_values, tile, flags, found):
        flags[0], found[0] = peek(status, packed_values, tile)

    def run(status, packed_values, tile):
        peek_one[1, 1](status, packed_values, tile, flags, found)
        return flags.copy_to_host()[0], found.copy_to_host()[0]

    return run


def test_items_per_thread_by_dtype():
    assert lookback.tile_items(np.dtype("float32"), 128, None) == 32
    assert lookback.tile_items(np.dtype("int64"), 128, None) == 32
    assert lookback.tile_items(np.dtype("float64"), 1024, None) == 4  # the largest tile: 4096
    assert lookback.tile_items(np.dtype("int32"), 1024, None) == 8  # a 4-byte type's: 8192
    assert lookback.tile_items(np.dtype("float64"), 128, 5) == 5
    assert lookback.tile_items(np.dtype("float32"), 256, 32) == 32
    with pytest.raises(ValueError, match="8192 elements per tile, but a tile of float64 holds at most 4096"):
        lookback.tile_items(np.dtype("float64"), 256, 32)
    with pytest.raises(ValueError, match="16384 elements per tile"):
        lookback.check_options(512, 32)


def test_states_are_reused_across_calls_and_cleared_when_the_epoch_wraps(rng):
    x = random_input(32 * 40, "add", "int32", rng)
    ps.scan(x, algorithm="lookback", block_size=32, items_per_thread=1)
    states = tile_state.kept_states(4)
    before = states.epoch
    np.testing.assert_array_equal(
        ps.scan(x, algorithm="lookback", block_size=32, items_per_thread=1), np.cumsum(x, dtype=x.dtype)
    )
    assert states.epoch == before + 1
    states.epoch = lookback.MAX_EPOCH - 1
    np.testing.assert_array_equal(
        ps.scan(x, algorithm="lookback", block_size=32, items_per_thread=1), np.cumsum(x, dtype=x.dtype)
    )
    assert states.epoch == 1
    assert not states.status.copy_to_host()[40:].any()  # a fresh array: the states of one call only


def test_the_last_tile_sets_the_counter_back_to_zero(rng):
    x = random_input(32 * 9, "add", "float64", rng)
    ps.scan(x, algorithm="lookback", block_size=32, items_per_thread=1)
    assert tile_state.kept_states(8).counter.copy_to_host()[0] == 0


@pytest.mark.parametrize("seed", range(3))
def test_concurrent_blocks_look_back_over_aggregates(seed, rng):
    """Resident blocks in turns: tiles find predecessors with only an aggregate out, or nothing yet."""
    n = 32 * 50 + 3
    for dtype in ("float32", "uint64"):
        x = random_input(n, "add", dtype, rng)
        with ps.sim.block_order_seed(seed), ps.sim.resident_blocks(8):
            run = trace.record(ps.scan, x, algorithm="lookback", block_size=32, items_per_thread=1)
        assert wrong_indices(run.result, *expected_scan(x)).size == 0
        peeks = collections.Counter(r.block for r in run.records if r.array == "status" and r.atomic)
        # without waiting, tile b peeks at min(b, 32) states once and publishes twice: a packed
        # state is one atomic each way, a pair (the simulator's model of one 16-byte access) three
        per_access = 1 if lookback.packed(np.dtype(dtype)) else 3
        assert any(count > per_access * (min(block, 32) + 2) for block, count in peeks.items())


def test_one_launch_moves_two_words_per_element_and_races_nowhere(rng):
    block_size, items = 32, 2
    n = 64 * 5 + 7  # 6 tiles
    x = random_input(n, "add", np.int64, rng)
    with ps.sim.resident_blocks(1):  # blocks one after another: every predecessor has its prefix out
        run = trace.record(ps.scan, x, algorithm="lookback", block_size=block_size, items_per_thread=items)
    np.testing.assert_array_equal(run.result, np.cumsum(x, dtype=x.dtype))
    assert run.races() == [] and run.uninitialized_reads() == []
    assert [launch.kernel for launch in run.launches] == ["scan"]
    counts = run.counts()
    atomics = sum(r.atomic for r in run.records)
    assert counts["global_reads"] == n
    assert counts["global_writes"] - atomics == n
    # The states (int64: flag and value as one pair, three atomics each way on the simulator):
    # 6 draws of a tile id and the counter's reset; tile 0 publishes its prefix, tiles 1..5
    # their aggregate and prefix; tile b peeks at b predecessors: 7 + 3 * (1 + 5 * 2 + 15).
    assert atomics == 85


def test_a_tile_is_indexed_without_numbas_negative_index_guard(ptx_child):
    """Issue 29: a signed index costs numba's guard against a negative one (``shr.s64 x, 63``,
    an ``and``, an add) on every access; the tile's unsigned indices cost none, and its 32 loads
    from global memory are one address plus constant offsets. (Before: 223 guards for float32.)
    The few guards left index the look-back states, once per tile."""
    code = """
        import prefixsum
        import numpy as np
        from numba import cuda
        from prefixsum.core.numba_gpu import compiling_for
        from prefixsum.scans import lookback
        for dtype in ("float32", "float64"):
            for reverse in (False, True):
                (kernel, argtypes), = lookback.kernels("add", np.dtype(dtype), True, reverse, 128, None)
                with compiling_for((9, 0)):
                    ptx, _ = cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
                print("@@kernel", dtype, reverse)
                print(ptx)
    """
    child = ptx_child(textwrap.dedent(code))
    assert child.returncode == 0, child.stderr[-3000:]
    kernels = child.stdout.split("@@kernel ")[1:]
    assert len(kernels) == 4
    for ptx in kernels:
        label, width = ptx.splitlines()[0], ptx.split()[0][-2:]
        guards = re.findall(r"shr\.s64\s+%rd\d+,\s*%rd\d+,\s*63;", ptx)
        offset_loads = re.findall(rf"ld\.global\.f{width}\s+%fd?\d+,\s*\[%rd\d+\+\d+\];", ptx)
        assert len(guards) <= 4, (label, len(guards))
        assert len(offset_loads) >= 31, (label, len(offset_loads))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"items_per_thread": 33}, "items_per_thread=33 must be None"),
        ({"items_per_thread": 2.0}, "items_per_thread=2.0"),
        ({"block_size": 48}, "block_size=48 must be a power of two"),
        ({"block_size": 1024, "items_per_thread": 16}, "16384 elements per tile"),
    ],
)
def test_lookback_refuses_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        ps.scan(np.ones(4, np.float32), algorithm="lookback", **options)


def test_launcher_takes_arrays_and_integers_only():
    with pytest.raises(TypeError, match="C-contiguous arrays and integers"):
        Launcher(lookback.lookback_kernel("add", np.dtype("float32"), True, False, 32, 1), (types.float32,))


def test_the_tile_is_the_fastest_measured_shape_at_the_nearest_length(monkeypatch):
    """Issue 45: with neither option, the tile per element size and length comes from scan_tiles.csv."""
    from prefixsum.scans import tile_choice

    measured = tile_choice.measured()
    assert set(measured) == {4, 8}
    for itemsize, dtype in ((4, np.float32), (8, np.int64)):
        rows = measured[itemsize]
        for n, block_size, items in rows:
            assert lookback.tile_shape(np.dtype(dtype), n, None, None) == (block_size, items)
        # between two measured lengths: the nearer in log2; below the first and above the last, the ends
        (n0, *shape0), (n1, *shape1) = rows[0], rows[1]
        assert lookback.tile_shape(np.dtype(dtype), n0 + 1, None, None) == tuple(shape0)
        assert lookback.tile_shape(np.dtype(dtype), n1 - 1, None, None) == tuple(shape1)
        assert lookback.tile_shape(np.dtype(dtype), 1, None, None) == tuple(shape0)
        assert lookback.tile_shape(np.dtype(dtype), 1 << 40, None, None) == tuple(rows[-1][1:])
    # options given win; a tuple of dtypes (a user operator) keeps 128 threads
    assert lookback.tile_shape(np.dtype(np.float32), 1 << 16, 64, 4) == (64, 4)
    assert lookback.tile_shape(np.dtype(np.float64), 1 << 16, 256, None) == (256, 16)
    assert lookback.tile_shape((np.dtype(np.float32), np.dtype(np.float32)), 1 << 16, None, None)[0] == 128
    monkeypatch.setattr(tile_choice, "measured", lambda: {})
    assert lookback.tile_shape(np.dtype(np.float32), 1 << 16, None, None) == tile_choice.DEFAULT_SHAPE


def test_the_table_holds_the_fastest_shape_of_the_run_that_measured_it():
    """scan_tiles.csv agrees with cub_tuning.csv: per element size and length, the fastest correct
    "lookback" shape of the run (the 4-byte rows of the later run, with the atomics kept)."""
    import csv
    import pathlib

    folder = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
    with open(folder / "cub_tuning.csv", newline="") as handle:
        timed = [
            r
            for r in csv.DictReader(handle)
            if r["part"] == "scan"
            and r["variant"].startswith("lookback:")
            and "[" not in r["variant"]
            and r["correct"] == "True"
        ]
    with open(folder / "scan_tiles.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == 16
    for row in table:
        same = [r for r in timed if np.dtype(r["dtype"]).itemsize == int(row["itemsize"]) and r["n"] == row["n"]]
        fastest = min(same, key=lambda r: float(r["kernel_us"]))
        assert (
            fastest["variant"] == f"lookback:block_size={row['block_size']},items_per_thread={row['items_per_thread']}"
        )
        assert float(fastest["kernel_us"]) == float(row["kernel_us"])


def test_auto_launches_the_tile_of_the_table(rng):
    n = 5000
    x = random_input(n, "add", np.float64, rng)
    run = trace.record(ps.scan, x)
    block_size, items = lookback.tile_shape(x.dtype, n, None, None)
    np.testing.assert_allclose(run.result, np.cumsum(x), rtol=1e-9, atol=1e-9)
    assert [launch.grid[0] for launch in run.launches] == [-(-n // (block_size * items))]
    assert [launch.block[0] for launch in run.launches] == [block_size]
