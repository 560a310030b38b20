"""Notebooks of the earlier numbering keep their grades and hints (``classroom/renumbering.py``).

Chapter 07 was split in two and the chapters after it moved up by one. A student's notebook made
before that carries the old chapter name (its stamp, its file name) and the old exercise ids; the
grader must grade each of its exercises as the exercise it now is, in the chapter that now holds
it. The routing is tested here without a sandbox: the grading of one chapter is replaced by a
record of what it was given.
"""
import pathlib

import nbformat
import pytest

from prefixsum.classroom import hints, renumbering
from prefixsum.classroom.grading import chapters, runner
from prefixsum.classroom.student import student_version

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
CHAPTERS = {p.stem: chapters.read_chapter(p) for p in PATHS}
CURRENT = {e.id for c in CHAPTERS.values() for e in c.exercises}
OLD_BY_NEW = {new: old for old, new in renumbering.EXERCISES.items()}


def test_every_old_id_leads_to_a_current_exercise_and_none_is_current_itself():
    assert set(renumbering.EXERCISES.values()) <= CURRENT
    assert not set(renumbering.EXERCISES) & CURRENT
    assert set(renumbering.CHAPTERS.values()) <= set(CHAPTERS)
    assert not [name for name in CHAPTERS if name != renumbering.chapter_name(name)]  # no current name reads as an old one


def old_notebook(old_name, *current_names, stamped=True):
    """The students' version of an old chapter: the current chapters' cells under their old ids."""
    cells = []
    for name in current_names:
        cells += student_version(nbformat.read(NOTEBOOKS / f"{name}.ipynb", 4), chapter=name).cells
    for number, cell in enumerate(cells):
        cell.id = f"cell-{number:03d}"  # two chapters' cells in one notebook: ids must stay unique
        if cell.metadata.get("exercise_id") in OLD_BY_NEW:
            cell.metadata["exercise_id"] = OLD_BY_NEW[cell.metadata["exercise_id"]]
    notebook = nbformat.v4.new_notebook(cells=cells)
    if stamped:
        notebook.metadata["prefixsum"] = {"chapter": old_name, "exercises": [
            c.metadata["exercise_id"] for c in cells if "exercise" in c.metadata.get("tags", [])]}
    return notebook


def routed(notebook, filename, monkeypatch):
    """``{chapter name: {exercise id: source}}`` that grade_notebook hands to each chapter's grading."""
    given = {}

    def record(student, filename, notebook, chapter, signatures, options, where):
        given[chapter.name] = chapters.submitted_sources(notebook, chapter)
        return []

    monkeypatch.setattr(runner, "_grade_chapter", record)
    runner.grade_notebook("ann", filename, nbformat.writes(notebook).encode(), CHAPTERS, {},
                          runner.Options(isolated=False))
    return given


OLD_CHAPTERS = [(old, (new,)) for old, new in renumbering.CHAPTERS.items()] + [
    ("07_tridiagonal_pcr", ("07_tridiagonal_pcr", "08_tridiagonal_hybrid"))]


@pytest.mark.parametrize("stamped", [True, False], ids=["stamped", "by-file-name"])
@pytest.mark.parametrize("old, now", OLD_CHAPTERS, ids=[old for old, _ in OLD_CHAPTERS])
def test_an_old_notebook_is_graded_as_the_exercises_it_now_holds(old, now, stamped, monkeypatch):
    notebook = old_notebook(old, *now, stamped=stamped)
    assert any(c.metadata.get("exercise_id") in renumbering.EXERCISES for c in notebook.cells)
    given = routed(notebook, f"{old}.ipynb", monkeypatch)
    assert sorted(given) == sorted(now)
    for name in now:
        for exercise in CHAPTERS[name].exercises:
            assert given[name][exercise.id] == exercise.blank  # the student's own cell, under its current id


def test_a_current_notebook_is_graded_by_its_own_chapter_only(monkeypatch):
    name = "08_tridiagonal_hybrid"
    notebook = student_version(nbformat.read(NOTEBOOKS / f"{name}.ipynb", 4), chapter=name)
    assert sorted(routed(notebook, f"{name}.ipynb", monkeypatch)) == [name]


def test_a_hint_answers_to_the_old_id():
    for old, new in renumbering.EXERCISES.items():
        assert hints.hint(old, 1) == hints.hint(new, 1)
