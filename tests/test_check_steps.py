"""Deterministic grades (issue 27, item 3): a check's time limit counts simulated steps, not seconds.

The same submission gets the same verdict on an idle machine and on one whose cores are busy:
the endless loop below stops after exactly ``timeout * STEPS_PER_SECOND`` accesses either way,
and the look-back answer that a loaded grader once stopped at its wall-clock limit fails on what
it does (a chained scan), not on how long it took.
"""
import contextlib
import pathlib
import subprocess
import sys

import numpy as np
from numba import cuda, float32

from prefixsum import check
from prefixsum.classroom import mistakes, mutation
from prefixsum.classroom.check.mode import STEPS_PER_SECOND

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
        assert check.mode.limits(20.0) == {"steps": int(0.1 * STEPS_PER_SECOND), "timeout": 7.0}


def test_the_look_back_answer_a_loaded_grader_timed_out_gets_one_verdict():
    exercise = {e.id: e for e in mutation.exercises([NOTEBOOK])}["10.lookback-loop"]
    chained = next(m for m in mistakes.MISTAKES if m.exercise == exercise.id and "chained" in m.name)
    idle = mutation.isolated_verdict(exercise, chained.source(exercise.source), timeout=20)
    with busy_cores():
        loaded = mutation.isolated_verdict(exercise, chained.source(exercise.source), timeout=20)
    assert not idle[0] and idle == loaded
    assert "before it published its own state" in idle[1]
    assert np.all([line.startswith("FAIL") for line in idle[1].splitlines() if line.startswith(("PASS", "FAIL"))])
