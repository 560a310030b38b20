"""A student's attempts (:mod:`prefixsum.classroom.attempts`) get the verdicts that name them.

Each runs as the grader runs it (:func:`prefixsum.classroom.mutation.isolated_verdict`: the
notebook's setup cells, the cell, its check, in a forked process): every right answer passes,
every mistake fails with the words of its verdict and none of the advice that points away from
it, within :data:`~prefixsum.classroom.attempts.SECONDS` of CPU time (a look-back that walks
below tile 0 without end used to run to the CPU limit, 505 s).
"""

import pathlib
import resource

import pytest

from prefixsum.classroom import attempts, mutation

NOTEBOOKS = sorted(pathlib.Path(__file__).resolve().parent.parent.joinpath("notebooks").glob("[01][0-9]_*.ipynb"))
EXERCISES = {e.id: e for e in mutation.exercises(NOTEBOOKS)}


def _graded(attempt):
    """``(passed, output, cpu seconds)`` of the attempt's check, as the grader runs it."""
    exercise = EXERCISES[attempt.exercise]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    passed, output = mutation.isolated_verdict(exercise, attempt.source(exercise.source), timeout=20, wall=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return passed, output, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def test_attempts_are_of_the_chapters_and_named_once():
    names = [(a.exercise, a.name) for a in attempts.RIGHT + attempts.WRONG]
    assert len(names) == len(set(names))
    assert {a.exercise[:2] for a in attempts.WRONG} == {"01", "07", "10", "11"}
    for attempt in attempts.RIGHT + attempts.WRONG:
        attempt.source(EXERCISES[attempt.exercise].source)  # every replaced text is still there


@pytest.mark.parametrize("attempt", attempts.RIGHT, ids=lambda a: f"{a.exercise}: {a.name}")
def test_a_right_answer_passes(attempt):
    passed, output, _ = _graded(attempt)
    assert passed, output


@pytest.mark.parametrize("attempt", attempts.WRONG, ids=lambda a: f"{a.exercise}: {a.name}")
def test_a_mistake_gets_a_verdict_that_names_it_within_a_minute(attempt):
    passed, output, seconds = _graded(attempt)
    assert not passed, output
    assert attempt.verdict in output, output
    for words in attempt.avoid:
        assert words not in output, output
    assert seconds < attempts.SECONDS, f"{seconds:.0f} s of CPU time"


def test_the_verdict_table_lists_every_attempt():
    table = pathlib.Path(__file__).resolve().parent.parent.joinpath("notebooks", "verdicts.md").read_text()
    for attempt in attempts.RIGHT + attempts.WRONG:
        row = f"| {attempt.exercise} | {attempt.name.replace('|', chr(92) + '|')} | "
        assert row in table, row
        verdict = table.split(row, 1)[1].split("\n", 1)[0]
        assert verdict.startswith("PASS") == (attempt in attempts.RIGHT), verdict
