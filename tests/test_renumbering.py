"""Notebooks of the earlier numbering keep their grades and hints (``classroom/renumbering.py``).

Chapter 07 was split in two and the chapters after it moved up by one. A student's notebook made
before that carries the old chapter name (its stamp, its file name) and the old exercise ids; the
grader must grade each of its exercises as the exercise it now is, in the chapter that now holds
it. The routing is tested here without a sandbox: the grader is stopped where it has matched the
submission's cells to the chapter's exercises, and what it matched is compared.
"""

import pathlib

import nbformat
import pytest

from prefixsum import grading
from prefixsum.classroom import hints, renumbering
from prefixsum.classroom.student import student_version
from prefixsum.grading import chapters, runner

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
CHAPTERS = {p.stem: chapters.read_chapter(p) for p in PATHS}
CURRENT = {e.id for c in CHAPTERS.values() for e in c.exercises}
OLD_BY_NEW = {new: old for old, new in renumbering.EXERCISES.items()}


def test_every_old_id_leads_to_a_current_exercise_and_none_is_current_itself():
    assert set(renumbering.EXERCISES.values()) <= CURRENT
    assert not set(renumbering.EXERCISES) & CURRENT
    assert set(renumbering.CHAPTERS.values()) <= set(CHAPTERS)
    # no current name reads as an old one
    assert not [name for name in CHAPTERS if name != renumbering.chapter_name(name)]


def old_notebook(old_name, current_name, stamped=True):
    """The students' version of an old chapter: the current chapter's cells under their old ids."""
    notebook = student_version(nbformat.read(NOTEBOOKS / f"{current_name}.ipynb", 4), chapter=current_name)
    for cell in notebook.cells:
        if cell.metadata.get("exercise_id") in OLD_BY_NEW:
            cell.metadata["exercise_id"] = OLD_BY_NEW[cell.metadata["exercise_id"]]
    notebook.metadata.pop("prefixsum")
    if stamped:
        notebook.metadata["prefixsum"] = {
            "chapter": old_name,
            "exercises": [
                c.metadata["exercise_id"] for c in notebook.cells if "exercise" in c.metadata.get("tags", [])
            ],
        }
    return notebook


class Matched(Exception):
    """Stops the grader once it has matched a submission's cells to a chapter's exercises."""


def routed(notebook, filename, monkeypatch):
    """``(chapter name, {exercise id: source})`` as grade_notebook matched the submission."""

    def record(notebook, chapter):
        raise Matched(chapter.name, chapters.submitted_sources(notebook, chapter))

    monkeypatch.setattr(runner, "submitted_sources", record)
    with pytest.raises(Matched) as matched:
        runner.grade_notebook(
            "ann", filename, nbformat.writes(notebook).encode(), CHAPTERS, {}, runner.Options(isolated=False)
        )
    return matched.value.args


@pytest.mark.parametrize("stamped", [True, False], ids=["stamped", "unstamped"])
@pytest.mark.parametrize("old, now", sorted(renumbering.CHAPTERS.items()))
def test_an_old_notebook_is_graded_as_the_exercises_it_now_holds(old, now, stamped, monkeypatch):
    notebook = old_notebook(old, now, stamped=stamped)
    assert all(
        c.metadata["exercise_id"] in renumbering.EXERCISES for c in notebook.cells if "exercise_id" in c.metadata
    )
    name, sources = routed(notebook, f"{old}.ipynb", monkeypatch)
    assert name == now
    # each the student's own cell, under its current id
    assert sources == {e.id: e.blank for e in CHAPTERS[now].exercises}


@pytest.mark.parametrize("old, now", sorted(renumbering.CHAPTERS.items()))
def test_an_old_file_name_alone_finds_the_chapter(old, now, monkeypatch):
    notebook = old_notebook(old, now, stamped=False)
    for cell in notebook.cells:
        cell.metadata.pop("exercise_id", None)  # metadata stripped: only the file name is left
    name, sources = routed(notebook, f"{old}-ann.ipynb", monkeypatch)
    assert name == now
    assert sources == {e.id: e.blank for e in CHAPTERS[now].exercises}


def test_a_current_notebook_is_graded_by_its_own_ids():
    for name, chapter in CHAPTERS.items():
        notebook = student_version(nbformat.read(NOTEBOOKS / f"{name}.ipynb", 4), chapter=name)
        assert renumbering.renumbered(notebook) == notebook
        assert chapters.chapter_of(notebook, f"{name}.ipynb", CHAPTERS) is chapter


def test_a_hint_answers_to_the_old_id():
    for old, new in renumbering.EXERCISES.items():
        assert hints.hint(old, 1) == hints.hint(new, 1)


@pytest.mark.slow  # one chapter graded for real: the instructor's signatures, the sandboxed checks, nbval
def test_an_old_notebook_passes_under_the_grader(tmp_path):
    """The instructor's Householder chapter under its old name and ids, graded end to end."""
    notebook = nbformat.read(NOTEBOOKS / "09_householder.ipynb", 4)
    for cell in notebook.cells:
        if cell.metadata.get("exercise_id") in OLD_BY_NEW:
            cell.metadata["exercise_id"] = OLD_BY_NEW[cell.metadata["exercise_id"]]
    notebook.metadata["prefixsum"] = {"chapter": "08_householder"}
    (tmp_path / "ann").mkdir()
    nbformat.write(notebook, tmp_path / "ann" / "08_householder.ipynb")
    rows = grading.grade(
        [tmp_path / "ann"],
        tmp_path / "out",
        instructor=[NOTEBOOKS / "09_householder.ipynb"],
        workers=2,
        options=runner.Options(timeout=120),
        progress=False,
    )
    assert {(r.chapter, r.exercise, r.status) for r in rows} == {
        ("09_householder", e.id, "pass") for e in CHAPTERS["09_householder"].exercises
    }


@pytest.mark.parametrize("stamped", [True, False], ids=["stamped", "unstamped"])
def test_chapter_08s_own_exercises_are_not_taken_for_the_old_08(stamped, monkeypatch):
    """08.* once named the Householder exercises (now 09.*); the new chapter 08's ids must stay its own."""
    mine = {e.id for e in CHAPTERS["08_tridiagonal_hybrid"].exercises}
    assert mine and all(i.startswith("08.") and renumbering.exercise_id(i) == i for i in mine)
    assert all(hints.hint(i, 1).startswith(f"Hint 1 of {len(hints.HINTS[i])} for {i}") for i in mine)
    notebook = student_version(
        nbformat.read(NOTEBOOKS / "08_tridiagonal_hybrid.ipynb", 4), chapter="08_tridiagonal_hybrid"
    )
    if not stamped:
        notebook.metadata.pop("prefixsum")
    name, sources = routed(notebook, "08_tridiagonal_hybrid-ann.ipynb", monkeypatch)
    assert name == "08_tridiagonal_hybrid"
    assert sources == {e.id: e.blank for e in CHAPTERS["08_tridiagonal_hybrid"].exercises}
