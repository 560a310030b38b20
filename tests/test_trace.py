"""The tracer: what it records and what it finds in a trace."""

import numpy as np
from numba import cuda, float32, float64
from numba.cuda.simulator.kernel import FakeCUDAKernel
from shared_kernels import run_strided

import prefixsum as ps
from prefixsum import trace


def test_bank_conflicts_follow_the_stride():
    ways = {}
    for stride in (1, 2, 4, 32, 33):
        found = trace.record(run_strided, stride, raise_errors=True).bank_conflicts()
        assert len(found) == 2  # one write and one read instruction of one warp
        ways[stride] = max(f["ways"] for f in found)
    assert ways == {1: 1, 2: 2, 4: 4, 32: 32, 33: 1}


def test_eight_byte_words_are_served_by_half_warps():
    assert trace.record(run_strided, 1, float64).conflict_summary()["worst"] == 1
    assert trace.record(run_strided, 2, float64).conflict_summary()["worst"] == 2


def test_broadcast_is_no_conflict():
    assert trace.record(run_strided, 0).conflict_summary()["worst"] == 1


@cuda.jit
def late_joiner(out):
    cells = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    cells[t] = t
    cells[t + 32] = t
    cuda.syncthreads()
    total = float32(0)
    for step in range(2):
        if step == 1 or t == 0:  # thread 0 reads word 1 alone; then every thread t reads word 32 + t
            total += cells[(1 - step) + step * (32 + t)]
        cuda.syncthreads()
    out[t] = total


def run_late_joiner():
    out = cuda.device_array(32, np.float32)
    late_joiner[1, 32](out)
    return out


def test_bank_conflicts_by_phase_pair_the_accesses_of_one_phase():
    run = trace.record(run_late_joiner, raise_errors=True)
    # over the launch, thread 0's read of word 1 (phase 1) and thread 1's of word 33 (phase 2)
    # are both each thread's first access of the line: one instruction, two words on bank 1
    assert run.conflict_summary()["worst"] == 2
    assert run.conflict_summary(by_phase=True)["worst"] == 1
    reads = [f for f in run.bank_conflicts(by_phase=True) if not f["write"]]
    assert sorted(f["threads"] for f in reads) == [1, 32]


@cuda.jit
def racy_neighbours(x):
    cells = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    cells[t] = x[t]
    cuda.syncthreads()
    if t > 0:
        cells[t] += cells[t - 1]
    cuda.syncthreads()
    x[t] = cells[t]


def test_a_race_inside_one_phase_is_found():
    run = trace.record(lambda x: racy_neighbours[1, 64](x), np.arange(64, dtype=np.float32), raise_errors=True)
    races = [race for race in run.races() if race.array == "cells"]
    assert races and not races[0].between_blocks
    assert races[0].phase == 1 and races[0].threads[:2] == (races[0].index, races[0].index + 1)
    assert "race on cells[" in str(races[0])


def test_a_correct_scan_has_no_race_and_no_uninitialized_read():
    run = trace.record(ps.scan, np.arange(1, 300, dtype=np.int64), algorithm="ladder", block_size=64)
    assert run.error is None
    assert run.races() == [] and run.uninitialized_reads() == []
    np.testing.assert_array_equal(run.result, np.cumsum(np.arange(1, 300)))


def test_counts_of_the_ladder_match_its_formula():
    n, b = 256, 256
    run = trace.record(ps.scan, np.arange(n, dtype=np.int32), algorithm="ladder", block_size=b)
    counts = run.counts()
    assert counts["launches"] == 1
    assert counts["combines"] == b // 2 * 8  # n/2 combines in each of log2(b) phases
    assert counts["barriers"] == 1 + 8  # after the load, then after each phase
    assert counts["global_reads"] == n and counts["global_writes"] == n + 1  # + the tile total
    assert counts["global_bytes_read"] == 4 * n


def test_launches_are_recorded_with_their_configuration():
    run = trace.record(ps.scan, np.arange(100, dtype=np.float32), algorithm="ladder", block_size=32)
    kernels = [launch.kernel for launch in run.launches]
    assert kernels == ["ladder_tile", "ladder_tile", "carry_into_tile"]
    assert run.launches[0].grid == (4, 1, 1) and run.launches[0].block == (32, 1, 1)


def test_an_error_is_kept_with_the_trace_before_it():
    def broken(x):
        racy_neighbours[1, 64](x[:10])

    run = trace.record(broken, np.arange(64, dtype=np.float32))
    assert isinstance(run.error, IndexError)
    assert run.records


@cuda.jit
def early_return(x):
    t = cuda.threadIdx.x
    if t == 3:
        return
    cuda.syncthreads()
    x[t] = t


def test_barrier_divergence_is_reported():
    run = trace.record(lambda x: early_return[1, 8](x), np.zeros(8, np.float32))
    assert run.barrier_divergence() and "thread" in run.barrier_divergence()
    assert trace.record(lambda x: racy_neighbours[1, 64](x), np.zeros(64, np.float32)).barrier_divergence() == ""


def _child_process_trace(x):
    """Record as a GPU machine does: in a spawned child process that simulates."""
    from prefixsum.classroom import child as _child

    simulating = _child.simulating
    _child.simulating = lambda: False
    try:
        return trace.record(ps.scan, x, algorithm="ladder", block_size=32)
    finally:
        _child.simulating = simulating


def test_recording_in_a_child_process_gives_the_same_trace():
    x = np.arange(1, 70, dtype=np.int32)
    here = trace.record(ps.scan, x, algorithm="ladder", block_size=32)
    there = _child_process_trace(x)
    assert there.records == here.records
    np.testing.assert_array_equal(there.result, here.result)


def numba_entry_points():
    """What a tool that patched numba would replace: the launch and the device-array constructors."""
    return FakeCUDAKernel.__call__, cuda.device_array, cuda.device_array_like


def test_recording_patches_nothing_in_numba():
    before = numba_entry_points()
    during = []

    def scan_and_look(x):
        during.append(numba_entry_points())
        return ps.scan(x, algorithm="ladder", block_size=32)

    run = trace.record(scan_and_look, np.arange(40, dtype=np.int32), raise_errors=True)
    assert run.launches and during == [before] and numba_entry_points() == before
