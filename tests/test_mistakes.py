"""Named student mistakes (issue 27): each fails its exercise's check with a verdict that names it.

:mod:`prefixsum.classroom.mistakes` holds, for every exercise of chapters 01-11, the mistakes
students make on it, as the student wrote them (the lesson's own mistake first: padding with 0,
a chained scan for a look-back, ``np.cumsum`` for the loop), and right answers other than the
solution. Each runs as the grader runs it (:func:`prefixsum.classroom.mutation.isolated_verdict`:
the notebook's setup cells, the cell, its check, in a forked process).
"""

import collections
import pathlib

import pytest

from prefixsum.classroom import mistakes, mutation

GRADED = sorted(
    p
    for p in pathlib.Path(__file__).resolve().parent.parent.joinpath("notebooks").glob("[0-9][0-9]_*.ipynb")
    if p.name[:2] >= "01"
)
EXERCISES = {e.id: e for e in mutation.exercises(GRADED)}


def test_every_exercise_has_named_mistakes_with_distinct_names():
    per_exercise = collections.Counter(m.exercise for m in mistakes.MISTAKES)
    assert set(per_exercise) == set(EXERCISES)
    assert min(per_exercise.values()) >= 3, per_exercise
    names = [(m.exercise, m.name) for m in mistakes.MISTAKES + mistakes.ALTERNATIVES]
    assert len(names) == len(set(names))


def test_a_mistake_whose_text_is_gone_from_the_solution_is_an_error():
    mistake = mistakes.Mistake("01.serial-scan", "stale", (("no such text", "x"),), "FAIL")
    with pytest.raises(ValueError, match="'no such text' is not in the source"):
        mistake.source(EXERCISES["01.serial-scan"].source)


@pytest.mark.parametrize("mistake", mistakes.MISTAKES, ids=lambda m: f"{m.exercise}: {m.name}")
def test_every_named_mistake_fails_its_check_with_a_verdict_that_names_it(mistake):
    exercise = EXERCISES[mistake.exercise]
    passed, output = mutation.isolated_verdict(exercise, mistake.source(exercise.source), timeout=20, wall=240)
    assert not passed, output
    assert mistake.verdict in output, output
    for words in mistake.avoid:
        assert words not in output, output


@pytest.mark.parametrize("answer", mistakes.ALTERNATIVES, ids=lambda m: f"{m.exercise}: {m.name}")
def test_other_right_answers_pass(answer):
    exercise = EXERCISES[answer.exercise]
    passed, output = mutation.isolated_verdict(exercise, answer.source(exercise.source), timeout=20, wall=240)
    assert passed, output
