"""Deterministic grades (issue 27, item 3): a check's time limit counts simulated steps, not seconds.

The same submission gets the same verdict on an idle machine and on one whose cores are busy:
the endless loop below stops after exactly ``timeout * STEPS_PER_SECOND`` accesses either way,
and the look-back answer that a loaded grader once stopped at its wall-clock limit fails on what
it does (a chained scan), not on how long it took. A wait counts polls, apart from the steps,
up to a limit of its own whose verdict names the tile that waits and the state it polls; and
one batch graded with one worker and with two gets the same grades.csv.
"""

import contextlib
import csv
import pathlib
import re
import subprocess
import sys

import nbformat
import numpy as np
import pytest
from numba import cuda, float32

from prefixsum import check, lessons, sim, trace
from prefixsum.classroom import mistakes, mutation, student
from prefixsum.classroom.check.mode import POLLS, STEPS_PER_SECOND

BLOCK = 32
NOTEBOOK = pathlib.Path(__file__).resolve().parent.parent / "notebooks" / "10_lookback.ipynb"


@cuda.jit
def endless_tile(x, out, totals, n):
    rungs = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    k = 0
    while k >= 0:  # never ends, touching memory at every turn
        rungs[t] = float32(k)
        k += 1
    out[t] = rungs[t]


@contextlib.contextmanager
def busy_cores(count=2):
    """``count`` processes spinning on the CPU while the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def test_an_endless_loop_stops_after_the_same_number_of_steps_idle_or_loaded():
    idle = check.tiled(endless_tile, block_size=BLOCK, sizes=(1,), timeout=0.2)
    with busy_cores():
        loaded = check.tiled(endless_tile, block_size=BLOCK, sizes=(1,), timeout=0.2)
    assert idle.diagnosis == "timeout" and "simulated steps" in idle.hint, str(idle)
    assert str(idle) == str(loaded)
    assert check.mode.limits(0.2)["steps"] == int(0.2 * STEPS_PER_SECOND)
    with check.time_limit(0.1, 7.0):
        assert check.mode.limits(20.0) == {"steps": int(0.1 * STEPS_PER_SECOND), "timeout": 7.0, "polls": POLLS}
        assert check.mode.limits(20.0, 64)["polls"] == 64


def test_the_look_back_answer_a_loaded_grader_timed_out_gets_one_verdict():
    exercise = {e.id: e for e in mutation.exercises([NOTEBOOK])}["10.lookback-loop"]
    chained = next(m for m in mistakes.MISTAKES if m.exercise == exercise.id and "chained" in m.name)
    idle = mutation.isolated_verdict(exercise, chained.source(exercise.source), timeout=20)
    with busy_cores():
        loaded = mutation.isolated_verdict(exercise, chained.source(exercise.source), timeout=20)
    assert not idle[0] and idle == loaded
    assert "before it published its own state" in idle[1]
    assert np.all([line.startswith("FAIL") for line in idle[1].splitlines() if line.startswith(("PASS", "FAIL"))])


@cuda.jit
def waiting_kernel(flag, counter, rounds):
    if cuda.blockIdx.x == 0:
        for _ in range(rounds):  # changes memory at every turn: no deadlock, a turn for block 1 each time
            cuda.atomic.add(counter, 0, 1)
        cuda.atomic.exch(flag, 0, 1)
    else:
        while cuda.atomic.add(flag, 0, 0) == 0:
            pass


def wait(rounds):
    waiting_kernel[2, 1](np.zeros(1, np.int32), np.zeros(1, np.int32), rounds)


def test_polls_count_apart_from_the_steps_and_have_a_limit_of_their_own():
    whole = trace.record(wait, 200)
    polls = sum(1 for r in whole.records if r.array == "flag" and r.value == 0)
    assert whole.error is None and polls > 150
    # the steps exclude the polls: a step limit below all the accesses but above the others passes
    assert trace.record(wait, 200, steps=len(whole.records) - polls + 5).error is None
    assert isinstance(trace.record(wait, 200, steps=100).error, TimeoutError)
    stopped = trace.record(wait, 200, polls=50).error
    assert isinstance(stopped, sim.PollLimitError)
    assert str(stopped).startswith("block 1 thread 0 of kernel 'waiting_kernel' polled flag[0] (line ")
    assert "51 times, finding 0 each time: past the limit of 50 polls of one wait" in str(stopped).splitlines()[0]


def test_a_look_back_that_waits_for_a_prefix_stops_at_the_poll_limit_naming_the_tile_and_the_state():
    """The slow but right look-back (a lane waits for its predecessor's PREFIX, so the tiles wait
    one after another): its own verdict, in polls, where it used to run for minutes."""
    exercise = {e.id: e for e in mutation.exercises([NOTEBOOK])}["10.lookback-loop"]
    waits = next(m for m in mistakes.MISTAKES if m.exercise == exercise.id and "waits for a PREFIX" in m.name)
    namespace = dict(mutation.set_up(exercise))
    exec(waits.source(exercise.source), namespace)  # noqa: S102  (a named mistake of the workbook)
    with sim.resident_blocks(48):
        result = check.scan(lambda x: lessons.scan_with(x, namespace["my_look_back"]), sizes=(300,), polls=8)
    assert result.diagnosis == "poll-limit", str(result)
    waiter = re.search(
        r"tile (\d+) \(block \d+\) polled status\[(\d+)\] \(line \d+\) 9 times and found (0x\w+) "
        r"\(flag (\d+)[:)].*? each time",
        result.hint,
    )
    assert waiter, result.hint
    tile, polled, _, flag = map(lambda g: int(g, 0), waiter.groups())
    assert polled < tile and flag % 2 == namespace["AGGREGATE"]  # it found an AGGREGATE, and kept waiting
    assert "an AGGREGATE as well as a PREFIX" in result.hint


def graded_rows(submissions, out, workers, *recording):
    """grades.csv's rows of one run of ``python -m prefixsum grade`` with ``workers`` workers (and
    ``recording``: ``--record FILE`` or ``--recording FILE``)."""
    command = [
        sys.executable,
        "-m",
        "prefixsum",
        "grade",
        str(submissions),
        "--out",
        str(out),
        "--workers",
        str(workers),
        "--quiet",
        "--instructor",
        str(NOTEBOOK),
        *recording,
    ]
    finished = subprocess.run(command, capture_output=True, text=True, cwd=out.parent)
    assert finished.returncode == 0, finished.stderr[-3000:]
    with open(out / "grades.csv", newline="") as handle:
        return sorted(tuple(row.items()) for row in csv.DictReader(handle))


@pytest.mark.slow  # the grader's whole run (nbval kernels, sandboxes, PTX) on two look-backs, twice: minutes
def test_one_batch_gets_the_same_grades_with_one_worker_and_with_two(tmp_path):
    """The slow but right look-back that waits for PREFIXes (the kind once graded ``timeout`` under
    load and ``pass`` idle; now stopped by its poll limit) and a chained scan: the same grades.csv,
    row for row, with 1 and 2 workers. The other exercises are blank (``not-attempted``)."""
    exercise = {e.id: e for e in mutation.exercises([NOTEBOOK])}["10.lookback-loop"]
    answers = {
        name: next(m for m in mistakes.MISTAKES if m.exercise == exercise.id and words in m.name).source(
            exercise.source
        )
        for words, name in (("waits for a PREFIX", "waits_for_prefix"), ("a chained scan", "chained"))
    }
    submissions = tmp_path / "submissions"
    for name, source in answers.items():
        notebook = student.student_version(nbformat.read(NOTEBOOK, as_version=4), chapter=NOTEBOOK.stem)
        next(
            c
            for c in notebook.cells
            if c.metadata.get("exercise_id") == exercise.id and "exercise" in c.metadata.get("tags", [])
        ).source = source
        (submissions / name).mkdir(parents=True)
        nbformat.write(notebook, submissions / name / NOTEBOOK.name)
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    # The instructor's solutions are recorded once, by the first batch (--record), for both: the
    # batches differ in how their submissions are graded, which this compares.
    recording = str(tmp_path / "recording.json")
    one = graded_rows(submissions, tmp_path / "one", 1, "--record", recording)
    two = graded_rows(submissions, tmp_path / "two", 2, "--recording", recording)
    assert one == two
    status = {dict(row)["submission"]: dict(row)["status"] for row in one if dict(row)["exercise"] == exercise.id}
    assert status == {"waits_for_prefix": "timeout", "chained": "fail"}, one
    message = {dict(row)["submission"]: dict(row)["message"] for row in one if dict(row)["exercise"] == exercise.id}
    assert "polled status[" in message["waits_for_prefix"] and "before it published" in message["chained"], message
