"""The tracer and the checker on blocks that talk to each other: races between blocks, stale
reads, plain-load polls and deadlocks each get their own diagnosis; correct communication passes."""

import csv
import importlib.util
import pathlib
import textwrap

import numpy as np
import pytest
from numba import cuda

import prefixsum
from prefixsum import check, mutants, trace

pytestmark = pytest.mark.skipif(not prefixsum.device_info()["simulator"], reason="simulator only")

# Each cross-block mistake (prefixsum.mutants) and its diagnosis.
CHAINED = {
    "chained_without_flags": (mutants.chained_without_flags_tile, "race-between-blocks"),
    "chained_without_fence": (mutants.chained_without_fence_tile, "stale-read"),
    "chained_waits_for_later_block": (mutants.chained_waits_for_later_block_tile, "deadlock"),
    "chained_plain_poll": (mutants.chained_plain_poll_tile, "plain-load-poll"),
}
SIZES = (1, 33, 100, 257, 1000)
BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def checked(kernel, name):
    return check.scan(lambda x: mutants.chained_scan(kernel, x), name=name, sizes=SIZES)


def between_blocks(kernel, n=300):
    run = trace.record(mutants.chained_scan, kernel, np.ones(n, np.float32))
    return run, [r for r in run.races() if r.between_blocks]


def test_a_chained_scan_with_a_counter_a_fence_and_atomic_flags_passes():
    run, races = between_blocks(mutants.chained_tile)
    assert run.error is None and races == [] and run.stale_reads() == []
    assert len(run.fences) == 5  # one per tile
    assert str(checked(mutants.chained_tile, "chained")) == "PASS chained: 5 sizes from 1 to 1000"


def test_atomics_of_many_blocks_on_one_counter_are_no_race():
    run, races = between_blocks(mutants.chained_tile)
    counter = [r for r in run.records if r.array == "counter"]
    assert len({r.block for r in counter}) == 5 and all(r.atomic and r.write for r in counter)
    assert not any(r.array in ("counter", "flags") for r in run.races())


def test_reading_another_blocks_output_without_a_flag_is_a_race_between_blocks():
    _, races = between_blocks(mutants.chained_without_flags_tile)
    assert {(r.array, r.index) for r in races} == {("out", 63), ("out", 127), ("out", 191), ("out", 255)}
    assert {r.kind for r in races} == {"read-write"}
    assert "with no flag between them" in str(races[0])


def test_a_flag_without_a_fence_is_unfenced_and_reads_stale_data():
    run, races = between_blocks(mutants.chained_without_fence_tile)
    assert {r.array for r in races} == {"prefixes"} and {r.kind for r in races} == {"unfenced"}
    stale = run.stale_reads()
    assert stale and {r.array for r in stale} == {"prefixes"}


def test_polling_with_a_plain_load_is_a_plain_poll():
    _, races = between_blocks(mutants.chained_plain_poll_tile)
    assert {r.kind for r in races if r.array == "flags"} == {"plain-poll"}


@pytest.mark.parametrize("name", sorted(CHAINED))
def test_each_cross_block_mistake_gets_its_own_diagnosis(name):
    kernel, diagnosis = CHAINED[name]
    result = checked(kernel, name)
    assert result.diagnosis == diagnosis, str(result)
    assert "\n" not in str(result)


def test_the_cross_block_diagnoses_are_distinct_and_hinted():
    assert len({diagnosis for _, diagnosis in CHAINED.values()}) == 4
    hints = {name: checked(kernel, name).hint for name, (kernel, _) in CHAINED.items()}
    assert "cuda.threadfence()" in hints["chained_without_fence"]
    assert "atomic" in hints["chained_plain_poll"]
    assert "atomic counter" in hints["chained_waits_for_later_block"]
    assert "flag" in hints["chained_without_flags"]


def test_the_chained_scan_without_flags_passes_only_when_blocks_run_one_after_another():
    with prefixsum.sim.resident_blocks(1):
        x = np.random.default_rng(0).normal(size=1000).astype(np.float32)
        out = mutants.chained_scan(mutants.chained_without_flags_tile, x).copy_to_host()
        np.testing.assert_allclose(out, np.cumsum(x.astype(np.float64)), rtol=1e-4, atol=1e-3)
    # ... and the trace finds the race anyway: it does not depend on the order
    with prefixsum.sim.resident_blocks(1):
        _, races = between_blocks(mutants.chained_without_flags_tile)
    assert {r.kind for r in races} == {"read-write"}


@cuda.jit
def histogram_of_blocks(bins):
    cuda.atomic.add(bins, cuda.threadIdx.x % 4, 1)


def test_atomics_of_threads_of_one_block_in_one_phase_are_no_race():
    run = trace.record(lambda: histogram_of_blocks[3, 64](np.zeros(4, np.int32)))
    assert run.races() == []


def test_the_blocks_stage_runs_and_writes_every_committed_kernel(tmp_path):
    """benchmarks/blocks_gpu.py --quick on the simulator: the rows the committed H100 CSV has."""
    spec = importlib.util.spec_from_file_location("_benchmark_blocks_gpu", BENCHMARKS / "blocks_gpu.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main(["--quick", "--out", str(tmp_path)])
    rows = {row["kernel"]: row for row in csv.DictReader(open(tmp_path / "blocks_gpu.csv", newline=""))}
    committed = [row["kernel"] for row in csv.DictReader(open(BENCHMARKS / "blocks_gpu.csv", newline=""))]
    assert list(rows) == committed
    assert rows["chained"]["wrong_launches"] == "0"
    assert int(rows["chained_waits_for_later_block"]["gave_up"]) > 0


def test_the_chained_kernels_compile_for_a_gpu(ptx_child):
    """The package's chained kernels and the benchmark's bounded variants, on the real CUDA target."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(BENCHMARKS)!r})
        from numba import cuda
        from prefixsum.core.numba_gpu import pretend_device
        pretend_device((9, 0))
        import blocks_gpu
        from prefixsum.classroom import mutants
        arrays = "float32[::1], float32[::1], float32[::1], int32[::1]"
        for kernel in (mutants.chained_tile, mutants.chained_without_flags_tile, mutants.chained_without_fence_tile,
                       mutants.chained_waits_for_later_block_tile, mutants.chained_plain_poll_tile):
            cuda.compile_ptx(kernel.py_func, f"void({{arrays}}, int32[::1], int64)", cc=(9, 0))
        for kernel in blocks_gpu.BOUNDED.values():
            cuda.compile_ptx(kernel.py_func, f"void({{arrays}}, int32[::1], int64, int32[::1], int64)", cc=(9, 0))
        print("compiled 7")
    """)
    child = ptx_child(code)
    assert "compiled 7" in child.stdout, child.stderr[-2000:]
