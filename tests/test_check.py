"""The checker against the mutant suite: every mistake gets its own diagnosis, correct kernels pass."""

import numpy as np
import pytest
from numba import cuda
from numba.cuda.simulator.kernel import FakeCUDAKernel

import prefixsum as ps
from prefixsum import check, mutants


@pytest.mark.parametrize("mutant", mutants.MUTANTS, ids=lambda m: m.name)
def test_each_mutant_gets_its_diagnosis(mutant):
    result = check.scan(mutant.run, inclusive=mutant.inclusive, name=mutant.name)
    assert not result.passed
    assert result.diagnosis == mutant.diagnosis, str(result)
    assert str(result).startswith(f"FAIL {mutant.name}: {mutant.diagnosis} at n=")
    assert "\n" not in str(result)


def test_the_mutant_suite_is_large_and_varied():
    assert len(mutants.MUTANTS) >= 12
    assert {m.diagnosis for m in mutants.MUTANTS} >= {
        "race",
        "out-of-bounds",
        "uninitialized-read",
        "wrong-result",
        "barrier-divergence",
        "unwritten-output",
    }


def test_the_correct_tile_kernel_passes():
    result = check.scan(mutants.CORRECT.run, name="ladder_tiles")
    assert result.passed and result.diagnosis == "pass"
    assert str(result) == "PASS ladder_tiles: 11 sizes from 1 to 2049"


@pytest.mark.parametrize("name", tuple(ps.ALGORITHMS))
def test_every_registered_algorithm_passes(name):
    for op, dtype, inclusive, reverse in (("add", np.float32, True, False), ("max", np.int32, False, True)):
        result = check.scan(
            lambda x: ps.scan(x, op, inclusive=inclusive, reverse=reverse, algorithm=name),
            op=op,
            dtype=dtype,
            inclusive=inclusive,
            reverse=reverse,
            sizes=(1, 33, 257, 1000),
        )
        assert result.passed, str(result)


@pytest.mark.slow  # every mutant of chapter 00 run twice on the stock simulator: 8 s
def test_a_single_allclose_misses_mutants_that_the_checker_catches():
    caught = mutants.allclose_catches()
    assert set(caught) == {m.name for m in mutants.MUTANTS}
    assert sum(caught.values()) < len(mutants.MUTANTS)
    one_block = mutants.allclose_catches(n=mutants.BLOCK)
    assert sum(one_block.values()) < sum(caught.values())


def test_tiled_checks_a_student_tile_kernel():
    assert check.tiled(mutants.correct_tile, block_size=mutants.BLOCK).passed
    assert check.tiled(mutants.missing_barrier_tile, block_size=mutants.BLOCK).diagnosis == "race"


@cuda.jit
def endless_tile(x, out, totals, n):
    i = cuda.threadIdx.x
    while i < n + 1:  # a runaway loop, not a wait: each read finds the cell changed since the last
        out[0] += 1


def test_a_hanging_kernel_is_stopped():
    result = check.tiled(endless_tile, block_size=32, timeout=1.0)
    assert result.diagnosis == "timeout", str(result)


def test_a_function_that_raises_is_an_exception_diagnosis():
    def broken(x):
        raise ValueError("no luck")

    result = check.scan(broken)
    assert result.diagnosis == "exception"
    assert str(result) == "FAIL broken: exception at n=1. ValueError: no luck"


def test_a_blank_exercise_is_not_attempted_not_a_failure():
    def not_written_yet(x):
        raise NotImplementedError("Exercise: write the phase update")

    result = check.scan(not_written_yet)
    assert not result and result.diagnosis == "not-attempted"
    assert str(result) == (
        "NOT ATTEMPTED not_written_yet: not attempted yet: the exercise's cell still raises "
        "NotImplementedError (Exercise: write the phase update). Write your code in place of the "
        "raise, run that cell, then this check."
    )


def test_wrong_shape_is_reported():
    result = check.scan(lambda x: x[:-1], name="short")
    assert result.diagnosis == "exception" and "shape" in result.hint


def test_results_are_deterministic():
    first = str(check.scan(mutants.MUTANTS[5].run, name="m"))
    assert first == str(check.scan(mutants.MUTANTS[5].run, name="m"))


def test_checking_patches_nothing_in_numba():
    def entry_points():
        return FakeCUDAKernel.__call__, cuda.device_array, cuda.device_array_like

    before = entry_points()
    during = []

    def scan_and_look(x):
        during.append(entry_points())
        return ps.scan(x, algorithm="ladder")

    assert check.scan(scan_and_look, sizes=(1, 33)).passed
    assert during == [before, before] and entry_points() == before


def test_fresh_arrays_are_poisoned_in_a_child_process_too(monkeypatch):
    """On a GPU machine a check simulates in a child process: the allocation hook acts there."""
    from prefixsum.classroom import child

    mutant = next(m for m in mutants.MUTANTS if m.diagnosis == "unwritten-output")
    here = check.scan(mutant.run, inclusive=mutant.inclusive, name=mutant.name, sizes=(33, 100))
    assert here.diagnosis == "unwritten-output"
    monkeypatch.setattr(child, "simulating", lambda: False)
    there = check.scan(mutant.run, inclusive=mutant.inclusive, name=mutant.name, sizes=(33, 100))
    assert str(there) == str(here)
