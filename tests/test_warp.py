"""Warp scans (prefixsum.primitives.warp, run by prefixsum.classroom.lessons) alone, the race in Figure 1 of Lungu,
Petroşanu and Pîrjan (2011), and the hierarchical scan's options; the generic suites (test_scan, test_ptx) cover
"hierarchical" for every op and dtype."""

import itertools
import textwrap

import numpy as np
import pytest
from test_scan import run_and_check

import prefixsum as ps
from prefixsum import trace
from prefixsum.classroom import lessons as warp
from prefixsum.scans import hierarchical
from prefixsum.scans.testing import random_input

# (threads per block, elements): one warp, a warp with lanes missing, a short end, a partial
# last warp in every block.
SHAPES = ((32, 32), (20, 20), (64, 100), (48, 96))


def per_warp_reference(x, op, inclusive, threads):
    """Scan each run of ``x`` that one warp holds on its own."""
    out = np.empty_like(x)
    for block in range(0, len(x), threads):
        end = min(block + threads, len(x))
        for first in range(block, end, 32):
            last = min(first + 32, end)
            out[first:last] = ps.reference.scan(x[first:last], op, inclusive=inclusive)
    return out


@pytest.mark.parametrize("variant", ("syncwarp", "shfl"))
@pytest.mark.parametrize("op", ps.OPS)
def test_warp_scans_match_the_reference(variant, op, rng):
    dtypes = ("int32", "uint32", "uint64", "float64")
    for dtype, (threads, n), inclusive in itertools.product(dtypes, SHAPES, (True, False)):
        x = random_input(n, op, dtype, rng)
        got = warp.warp_scan(x, variant, op, inclusive=inclusive, threads=threads)
        expected = per_warp_reference(x, op, inclusive, threads)
        where = f"{variant} {op} {dtype} threads={threads} n={n} inclusive={inclusive}"
        if x.dtype.kind == "f":
            np.testing.assert_allclose(got, expected, rtol=1e-12, err_msg=where)
        else:
            np.testing.assert_array_equal(got, expected, err_msg=where)


def test_figure_1_without_syncwarp_races():
    """The paper's warp scan on plain shared memory: the tracer flags the race; the simulator's
    schedule (each lane to the end in turn, legal since Volta) even gets the sums wrong."""
    x = np.arange(1, 33, dtype=np.int32)
    racy = trace.record(warp.warp_scan, x, "volatile")
    assert racy.error is None
    races = racy.races()
    assert races and all(r.array == "buf" and not r.between_blocks for r in races)
    assert not np.array_equal(racy.result, np.cumsum(x))
    # max is idempotent: combining a lane twice does no harm, so only the tracer sees the race
    assert np.array_equal(warp.warp_scan(x, "volatile", "max"), x)
    for variant in ("syncwarp", "shfl"):
        clean = trace.record(warp.warp_scan, x, variant)
        assert clean.error is None and clean.races() == [] and clean.uninitialized_reads() == []
        np.testing.assert_array_equal(clean.result, np.cumsum(x))


def test_figure_2_without_a_barrier_races_on_the_warp_totals():
    """The paper's block scan: no barrier between the warps' totals and warp 0's scan of them. With
    32 warps, thread 1023 writes ptr[31] while thread 31 reads it; the fixed kernel is clean."""
    x = np.arange(1, 1025, dtype=np.int64)
    racy = trace.record(warp.figure2_block_scan, x)
    races = racy.races()
    assert racy.error is None and {r.index for r in races} == set(range(32))
    assert any(r.index == 31 and {31, 1023} <= set(r.threads) for r in races)
    for n in (1024, 100, 1):
        fixed = trace.record(warp.figure2_block_scan, x[:n], fixed=True)
        assert fixed.error is None and fixed.races() == [] and fixed.uninitialized_reads() == []
        np.testing.assert_array_equal(fixed.result, np.cumsum(x[:n]))
    with pytest.raises(ValueError, match="1 to 1024 elements"):
        warp.figure2_block_scan(np.ones(1025))


def test_figure_2_kernels_compile_to_ptx(ptx_child):
    code = textwrap.dedent("""
        from numba import cuda
        from prefixsum.classroom import lessons
        from prefixsum.scans.tiles import array_type
        from prefixsum.core.numba_gpu import pretend_device
        pretend_device((7, 5))
        for fixed in (False, True):
            kernel = lessons.figure2_kernel("add", "float32", fixed)
            ptx, _ = cuda.compile_ptx(kernel.py_func, (array_type("float32"), array_type("float32")), cc=(7, 5))
            print(fixed, ptx.count("bar.sync"))
    """)
    child = ptx_child(code)
    assert child.returncode == 0, child.stderr[-3000:]
    barriers = dict(line.split() for line in child.stdout.splitlines())
    assert int(barriers["True"]) == int(barriers["False"]) + 1


def test_warp_scan_kernels_compile_to_ptx(ptx_child):
    """The registry's PTX test covers the shuffle scan inside "hierarchical"; these kernels are
    not registered, so compile them here, in the process without the simulator."""
    code = textwrap.dedent("""
        from numba import cuda
        from prefixsum.classroom import lessons as warp
        from prefixsum.scans.tiles import array_type
        from prefixsum.core.numba_gpu import pretend_device
        pretend_device((7, 5))
        for variant in warp.VARIANTS:
            for dtype, inclusive in (("uint64", False), ("float32", True)):
                kernel = warp.warp_scan_kernel(variant, "mul", dtype, inclusive)
                ptx, _ = cuda.compile_ptx(kernel.py_func, (array_type(dtype), array_type(dtype)), cc=(7, 5))
                print(variant, dtype, ptx.count("shfl.sync"), ptx.count("bar.warp.sync"))
    """)
    child = ptx_child(code)
    assert child.returncode == 0, child.stderr[-3000:]
    counts = {tuple(line.split()[:2]): tuple(map(int, line.split()[2:])) for line in child.stdout.splitlines()}
    assert counts[("shfl", "float32")][0] > 0 and counts[("syncwarp", "float32")][1] > 0
    assert counts[("volatile", "float32")] == (0, 0)


def test_unknown_warp_scan_is_refused():
    with pytest.raises(ValueError, match="allowed: volatile, syncwarp, shfl"):
        warp.warp_scan(np.ones(4, np.int32), "lockstep")


@pytest.mark.parametrize("block_size, items_per_thread", list(itertools.product((32, 256), (1, 2, 8))))
def test_hierarchical_options(block_size, items_per_thread, rng):
    """Several tiles, tens of them for the smallest tiles."""
    tile = block_size * items_per_thread
    n = 2 * tile * 32 + 5 if tile <= 64 else 2 * tile + 3
    k = itertools.count()
    for inclusive, reverse in ((True, False), (False, True)):
        op = ps.OPS[(next(k) + items_per_thread) % 4]
        dtype = ps.DTYPES[(next(k) + block_size) % 6]
        run_and_check(
            "hierarchical",
            random_input(n, op, dtype, rng),
            op,
            inclusive,
            reverse,
            block_size=block_size,
            items_per_thread=items_per_thread,
        )


def test_spine_scans_totals_a_tile_at_a_time(rng):
    """The one-block scan of the tile totals, over several of its own tiles."""
    tile = 32 * hierarchical.spine_items(32)
    for op, dtype in (("add", np.uint32), ("max", np.float64)):
        totals = random_input(2 * tile + 9, op, dtype, rng)
        scanned = totals.copy()
        hierarchical.spine_kernel(op, dtype, 32)[1, 32](scanned, len(scanned))
        np.testing.assert_array_equal(scanned, ps.reference.scan(totals, op))


def test_hierarchical_moves_three_words_per_element_and_races_nowhere(rng):
    block_size, items = 32, 2
    n = 64 * 5 + 7  # 6 tiles
    x = random_input(n, "add", np.int64, rng)
    run = trace.record(ps.scan, x, algorithm="hierarchical", block_size=block_size, items_per_thread=items)
    np.testing.assert_array_equal(run.result, np.cumsum(x))
    assert run.races() == [] and run.uninitialized_reads() == []
    counts = run.counts()
    tiles = 6
    # reduce reads n, the spine reads and writes the totals, the rescan reads n, writes n and
    # (every thread of blocks 1..) one carry
    assert [launch.kernel for launch in run.launches] == ["reduce_tiles", "scan_totals", "rescan_tiles"]
    assert counts["global_reads"] == 2 * n + tiles + (tiles - 1) * block_size
    assert counts["global_writes"] == n + 2 * tiles


@pytest.mark.parametrize(
    "options, message",
    [
        ({"items_per_thread": 0}, "items_per_thread=0 must be an integer from 1 to 16"),
        ({"items_per_thread": 17}, "items_per_thread=17"),
        ({"items_per_thread": 2.0}, "items_per_thread=2.0"),
        ({"items_per_thread": True}, "items_per_thread=True"),
        ({"block_size": 48}, "block_size=48 must be a power of two"),
        ({"block_size": 1024, "items_per_thread": 8}, "8192 elements per tile"),
        ({"tile": 4}, "unknown option 'tile'"),
    ],
)
def test_hierarchical_refuses_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        ps.scan(np.ones(4, np.float32), algorithm="hierarchical", **options)


def test_tile_limit_fits_shared_memory():
    staged = hierarchical.MAX_TILE * 33 // 32 * 8 + 32 * 8  # float64 tile with skips, warp totals
    assert staged <= 48 * 1024
