"""The stepper's model (prefixsum.classroom.stepping): every step's state is a replay of the trace,
a broken trace is refused, the marks and the comparison find what the trace shows; a look-back's
timeline (lookback_timeline), and the failing run kept beside its reference (references)."""

import collections
import math
import pathlib

import numpy as np
import pytest
from numba import cuda, float32
from shared_kernels import run_strided

import prefixsum as ps
from prefixsum.classroom import cells, lookback_timeline, mistakes, mutants, mutation, references, stepping, trace


def one_tile(kernel, x, threads):
    out, totals = cuda.device_array(len(x), x.dtype), cuda.device_array(1, x.dtype)
    kernel[1, threads](cuda.to_device(x), out, totals, len(x))
    return out.copy_to_host()


@pytest.fixture(scope="module")
def runs():
    rng = np.random.default_rng(31)
    ladder_x = rng.integers(-9, 10, 30).astype(np.int32)
    return {
        "ladder": (trace.record(ps.scan, ladder_x, algorithm="ladder", block_size=32), ladder_x),
        "ladder tiles": (
            trace.record(ps.scan, np.arange(1, 101, dtype=np.int32), algorithm="ladder", block_size=32),
            None,
        ),
        "hillis-steele in place": (
            trace.record(
                one_tile,
                ps.lessons.hillis_steele_in_place_tile_kernel("add", np.int32, True, False, 32),
                np.ones(32, np.int32),
                32,
            ),
            None,
        ),
        "warp syncwarp": (
            trace.record(ps.lessons.warp_scan, np.arange(64, dtype=np.float32), "syncwarp", threads=64),
            None,
        ),
        "uninitialized": (
            trace.record(mutants._ladder_scan_tiles, mutants.uninitialized_shared_tile, np.ones(40, np.float32)),
            None,
        ),
    }


def replay(run, by, key):
    """The state after the step ``key``, the slow way: for each cell, the last write (in trace
    order) of a step up to ``key``, else the value of a read that came before every write of the launch."""
    state = {}
    first_access = {}
    for r in run.records:
        cell = (stepping._slot(r), r.index)
        first_access.setdefault(cell, r)
    for cell, r in first_access.items():
        if cell[0].launch == key[0]:
            state[cell] = None if r.write else stepping._plain(r.value)
    for r in run.records:
        if r.write and r.launch == key[0] and stepping._key(r, by) <= key:
            state[(stepping._slot(r), r.index)] = stepping._plain(r.value)
    return state


@pytest.mark.parametrize("by", stepping.GRANULARITIES)
@pytest.mark.parametrize("name", ["ladder", "ladder tiles", "hillis-steele in place", "warp syncwarp", "uninitialized"])
def test_every_step_is_a_replay_of_the_trace(runs, name, by):
    run, _ = runs[name]
    model = stepping.model(run, by)
    keys = [s.key for s in model]
    assert keys == sorted({stepping._key(r, by) for r in run.records}), "one step per key, in order"
    for step in model:
        expected = replay(run, by, step.key)
        shown = {(slot, i): value for slot, values in step.values.items() for i, value in enumerate(values)}
        assert set(expected) <= set(shown), step.label
        wrong = [cell for cell, v in expected.items() if not stepping.same(shown[cell], v)]  # NaN is NaN
        assert not wrong, f"{step.label}: {wrong[:3]}"
        assert all(v is None for cell, v in shown.items() if cell not in expected)  # cells never touched
        mine = [r for r in run.records if stepping._key(r, by) == step.key]
        assert step.active == {(r.block, r.thread) for r in mine}
        assert {(s, i) for s, cells in step.written.items() for i in cells} == {
            (stepping._slot(r), r.index) for r in mine if r.write
        }
        assert step.accesses == {(stepping._slot(r), r.index): (r.block, r.thread, r.write, r.line) for r in mine}
        launch = run.launches[step.key[0]]
        assert step.threads == math.prod(launch.grid) * math.prod(launch.block)


def test_the_ladder_phases_hold_its_partial_sums(runs):
    run, x = runs["ladder"]
    model = stepping.model(run, arrays=["rungs"])
    padded = np.concatenate([x, np.zeros(2, np.int32)])
    for step in model:
        phase = step.key[1]
        (rungs,) = step.values.values()
        width = 1 << phase  # after phase p every aligned run of 2^p cells holds its own scan
        expected = [int(padded[i & ~(width - 1) : i + 1].sum()) for i in range(32)]
        assert rungs == expected, step.label
    first = model[1]  # phase 1: the odd lanes add their left neighbour
    (slot,) = first.values
    assert {(a.source[1], a.target[1]) for a in first.arrows if a.source != a.target} == {
        (t - 1, t) for t in range(1, 32, 2)
    }
    assert first.active == {(0, t) for t in range(1, 32, 2)}
    assert any("combine" in text for _, _, text in first.lines)


def test_a_phase_whose_records_were_lost_is_refused_by_the_reads_after_it(runs):
    """An empty phase is a step (two barriers in a row make one); a phase whose accesses were lost
    is not: the next phase's reads find values the replay does not hold."""
    run, _ = runs["ladder"]
    kept = [r for r in run.records if r.phase != 2]
    broken = trace.Trace(kept, run.launches, run.result)
    with pytest.raises(stepping.BrokenTrace, match="phase 3 of launch 0, but the writes"):
        stepping.model(broken)


def test_missing_writes_are_detected_by_the_reads_after_them(runs):
    run, _ = runs["ladder"]
    kept = [r for r in run.records if not (r.phase == 3 and r.write)]
    broken = trace.Trace(kept, run.launches, run.result)
    with pytest.raises(stepping.BrokenTrace, match="writes are missing"):
        stepping.model(broken)
    with pytest.raises(stepping.BrokenTrace, match="no accesses"):
        stepping.model(trace.Trace([], run.launches))


def test_races_uninitialized_reads_and_bank_conflicts_are_marked(runs):
    racy, _ = runs["hillis-steele in place"]
    model = stepping.model(racy)
    raced = collections.defaultdict(set)
    for race in racy.races():
        raced[race.phase].add(race.index)
    assert raced
    for step in model:
        assert {i for _, i in step.races} == raced.get(step.key[1], set()), step.label
    unsafe, _ = runs["uninitialized"]
    expected = {(r.launch, r.phase, r.index) for r in unsafe.uninitialized_reads()}
    assert expected
    found = {(s.key[0], s.key[1], i) for s in stepping.model(unsafe) for _, i in s.uninitialized}
    assert found == expected
    for stride, conflicted in ((1, False), (2, True)):
        steps = stepping.model(trace.record(run_strided, stride))
        assert any(s.conflicts for s in steps) == conflicted
        assert all(slot.array == "cells" for s in steps for slot, _ in s.conflicts)


def test_unknown_arrays_and_granularities_are_refused(runs):
    run, _ = runs["ladder"]
    with pytest.raises(ValueError, match="by='lane'.*phase, warp, thread"):
        stepping.model(run, "lane")
    with pytest.raises(ValueError, match=r"\['rung'\] are not in the trace"):
        stepping.model(run, arrays=["rung"])


def test_a_wrong_kernel_differs_from_the_reference_first_where_it_goes_wrong():
    x = np.arange(1, 41, dtype=np.float32)
    good = trace.record(mutants._ladder_scan_tiles, mutants.correct_tile, x)
    bad = trace.record(mutants._ladder_scan_tiles, mutants.wrong_partner_tile, x)
    reference, student = stepping.model(good), stepping.model(bad)
    assert stepping.first_difference(reference, stepping.model(good)) is None
    k = stepping.first_difference(student, reference)
    assert student[k].key == (0, 1)  # the first phase of the ladder
    cells = stepping.differences(student, reference)[k]
    assert cells
    for slot, i in cells:
        theirs = reference[k].values[slot]
        assert not stepping.same(student[k].values[slot][i], theirs[i] if i < len(theirs) else None)
    assert all(not cells for cells in stepping.differences(student, reference)[:k])


def test_the_look_back_timeline_shows_publications_and_waits():
    x = np.ones(32 * 12, dtype=np.float32)
    with ps.sim.resident_blocks(8):
        run = trace.record(ps.scan, x, algorithm="lookback", block_size=32, items_per_thread=1)
    tiles = lookback_timeline.timeline(run)
    assert [t.tile for t in tiles] == list(range(12))
    assert len(tiles[0].published) >= 1 and all(len(t.published) == 2 for t in tiles[1:])
    for tile in tiles:
        assert tile.start <= min(tile.published) <= max(tile.published) <= tile.end
        assert all(t < tile.tile for _, t in tile.reads) and set(tile.waited_for) <= {t for _, t in tile.reads}
        assert all(run.records[p].block == run.records[tile.published[0]].block for p, _ in tile.reads)
    assert any(t.waited_for for t in tiles)
    with pytest.raises(ValueError, match="no global array called 'flags'"):
        lookback_timeline.timeline(run, "flags")


BLOCK = 64


@cuda.jit
def two_barrier_hs_tile(x, out, totals, n):
    cells = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    cells[t] = x[t] if t < n else float32(0)
    cuda.syncthreads()
    stride = 1
    while stride < BLOCK:
        value = cells[t]
        if t >= stride:
            value += cells[t - stride]
        cuda.syncthreads()  # a phase that only reads: the steps of one buffer count twice the barriers
        cells[t] = value
        cuda.syncthreads()
        stride <<= 1
    if t < n:
        out[t] = cells[t]
    if t == BLOCK - 1:
        totals[0] = cells[t]


@cuda.jit
def hs_reading_the_wrong_buffer_tile(x, out, totals, n):
    cells = cuda.shared.array(2 * BLOCK, float32)
    t = cuda.threadIdx.x
    cells[t] = x[t] if t < n else float32(0)
    cuda.syncthreads()
    src, stride = 0, 1
    while stride < BLOCK:
        if t >= stride:  # the partner from the buffer being written: the exercise's named mistake
            cells[(1 - src) * BLOCK + t] = cells[src * BLOCK + t] + cells[(1 - src) * BLOCK + t - stride]
        else:
            cells[(1 - src) * BLOCK + t] = cells[src * BLOCK + t]
        cuda.syncthreads()
        src, stride = 1 - src, stride << 1
    if t < n:
        out[t] = cells[src * BLOCK + t]
    if t == BLOCK - 1:
        totals[0] = cells[src * BLOCK + t]


def test_steps_are_aligned_by_writes_so_one_buffer_meets_two_buffers_step_for_step():
    x = np.arange(1, 41, dtype=np.float32)
    one = stepping.model(trace.record(one_tile, two_barrier_hs_tile, x, BLOCK))
    two = stepping.model(trace.record(ps.scan, x, algorithm="hillis_steele", block_size=BLOCK))
    beside = stepping.aligned(one, two)
    assert len(one) == 14 and len(two) == 8
    assert beside == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 7]  # each read-only phase beside the write before it
    differing = stepping.differences(one, two)
    assert not any(slot.space == "global" for cells in differing for slot, _ in cells)  # the same scan's out
    assert differing[2]  # the shared cells differ where the layouts do: one buffer, and the other half of two


def test_a_failing_tile_is_stepped_beside_its_own_algorithm_not_the_ladder():
    verdict = ps.check.tiled(hs_reading_the_wrong_buffer_tile, block_size=BLOCK)
    assert not verdict
    student, reference = references.last_failure()
    assert [launch.kernel for launch in reference.launches] == ["hillis_steele_tile"]
    first = stepping.first_difference(stepping.model(student), stepping.model(reference))
    assert first is not None and first < len(stepping.model(student)) - 2  # in the steps, not at the store of out


def test_a_check_that_names_its_exercises_scan_is_stepped_beside_it():
    """Issue 47: one buffer and two barriers a stride reads and writes as the ladder does, so the most
    alike registered scan is the ladder, whose first difference comes at the end; 03.hs-two-barriers'
    check names Hillis-Steele (``reference=``), and the stepper takes it, in the student's tile. The
    student's kernel is the named mistake "no barrier after the store", made in the notebook's cell."""
    notebook = pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "03_hillis_steele_blelloch.ipynb"
    exercise = next(e for e in mutation.exercises([notebook]) if e.id == "03.hs-two-barriers")
    mistake = next(m for m in mistakes.for_exercise(exercise.id) if m.name == "no barrier after the store")
    wrong = mistake.source(exercise.source)
    namespace = dict(mutation.set_up(exercise))
    exec(cells.compiled(wrong, f"<{exercise.id}>"), namespace)  # noqa: S102  (the notebook's cell, as the grader runs it)
    tile = namespace["my_hs_one_buffer_tile"]
    assert not ps.check.tiled(tile, block_size=BLOCK)
    _, guessed = references.last_failure()
    assert [launch.kernel for launch in guessed.launches] == ["ladder_tile"]
    passed, output = mutation.verdict(exercise, wrong)  # the notebook's check cell, which names its scan
    assert not passed and "ps.viz.step_failure()" in output
    student, named = references.last_failure()
    assert [launch.kernel for launch in named.launches] == ["hillis_steele_tile"]
    assert math.prod(named.launches[0].block) == BLOCK
    first = stepping.first_difference(stepping.model(student), stepping.model(named))
    assert first is not None and first <= 3  # at the stride whose store is not waited for, not at the end
    with pytest.raises(ValueError, match=r"reference='hillis-steele' is no registered scan; they are .*hillis_steele"):
        ps.check.tiled(tile, block_size=BLOCK, reference="hillis-steele")


def test_a_check_that_failed_on_many_elements_is_stepped_on_a_small_input_or_says_why_not():
    def wrong_from_40(x):
        result = ps.scan(x, algorithm="ladder", block_size=32)
        if len(x) >= 40:
            result[39:] += 1
        return result

    assert not ps.check.scan(wrong_from_40, dtype=np.int32, sizes=(100,))
    student, reference = references.last_failure()
    assert len({r.index for r in student.records if r.array == "out"}) == 40
    assert not ps.check.scan(lambda x: ps.scan(x, algorithm="ladder") + (len(x) > 64), dtype=np.int32, sizes=(100,))
    with pytest.raises(LookupError, match="failed at n = 100, and no input of 64 elements or fewer fails"):
        references.last_failure()
