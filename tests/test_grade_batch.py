"""A batch nothing can stop, and honest code never accused: fast tests of the grader's own stages.

Each file a hostile student hands in ends with that file's row (``invalid``, or ``crashed``
naming it), whatever it holds; copies of one chapter are graded once; the feedback's picture
never opens a path a trace names, nor builds a model without bound; the notebook's check compares
the check's verdict, not the cell's output. No sandbox runs here: tests/test_grade_attacks.py grades
the same attacks in a whole batch.
"""

import contextlib
import io
import json
import os
import pathlib
import threading
import time

import nbformat
import numpy as np
import pytest
from numba import cuda

import prefixsum as ps
from prefixsum.classroom import stepping
from prefixsum.grading import batch, chapters, report, runner

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
LADDER = NOTEBOOKS / "01_ladder.ipynb"


@pytest.fixture(scope="module")
def ladder():
    return {"01_ladder": chapters.read_chapter(LADDER)}


def _with_cell(cell):
    """A notebook of chapter 01 whose first code cell is ``cell`` (a dict, as JSON has it)."""
    notebook = json.loads(LADDER.read_text())
    first = next(k for k, c in enumerate(notebook["cells"]) if c["cell_type"] == "code")
    notebook["cells"][first] = cell
    return json.dumps(notebook).encode()


CODE = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": "x = 1"}
MALFORMED = {
    "exercise_id a list": (
        _with_cell({**CODE, "metadata": {"exercise_id": ["01.serial-scan"]}}),
        "exercise_id is of type list",
    ),
    "source an int": (_with_cell({**CODE, "source": 5}), "source is of type int"),
    "tags an int": (_with_cell({**CODE, "metadata": {"tags": 5}}), "tags are of type int"),
    "tags of numbers": (_with_cell({**CODE, "metadata": {"tags": [1]}}), "not all text"),
    "a code cell without source": (_with_cell({k: v for k, v in CODE.items() if k != "source"}), "without a source"),
    "a cell that is a number": (_with_cell(7), "not a readable notebook"),
    "metadata a list": (_with_cell({**CODE, "metadata": []}), "not a readable notebook"),
    "the stamp a list": (
        json.dumps({**json.loads(LADDER.read_text()), "metadata": {"prefixsum": []}}).encode(),
        "metadata is not an object",
    ),
    "cells a number": (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": 5}', "not a readable notebook"),
    "a list": (b"[1, 2]", "not a readable notebook"),
    "not JSON": (b'{"cells": [', "not a readable notebook"),
    "not UTF-8": (b"\xff\xfe{}", "not a readable notebook"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_notebook_is_invalid_alone_and_named(ladder, tmp_path, name):
    data, word = MALFORMED[name]
    (tmp_path / "eve").mkdir()
    (tmp_path / "eve" / "01_ladder.ipynb").write_bytes(data)
    (tmp_path / "ann").mkdir()
    (tmp_path / "ann" / "01_ladder.ipynb").write_bytes(LADDER.read_bytes())
    ann, eve = batch._screen_all(batch.collect([tmp_path]), ladder, 16)
    (row,) = eve.rows
    assert (
        eve.screened is None and row.status == "invalid" and word in row.message and "01_ladder.ipynb" in row.message
    ), row
    assert ann.screened is not None and ann.rows == []


def test_an_error_of_the_grader_on_one_file_ends_that_file_alone(ladder, tmp_path, monkeypatch):
    (tmp_path / "eve").mkdir()
    (tmp_path / "eve" / "01_ladder.ipynb").write_bytes(LADDER.read_bytes())
    (entry,) = batch._screen_all(batch.collect([tmp_path]), ladder, 16)

    def memory_error(*args, **kwargs):
        raise MemoryError("the reader ran out")

    monkeypatch.setattr(batch, "grade_notebook", memory_error)
    (row,) = batch._grade_file("eve", "01_ladder.ipynb", entry.screened, ladder, {}, runner.Options(isolated=False))
    assert (row.status, row.chapter, row.max_score) == ("crashed", "01_ladder", 5)
    assert "01_ladder.ipynb" in row.message and "MemoryError: the reader ran out" in row.message
    monkeypatch.setattr(batch, "screen", memory_error)
    screened, (row,) = batch._screen_file(
        "eve", "01_ladder.ipynb", tmp_path / "eve" / "01_ladder.ipynb", "", ladder, 16, "none"
    )
    assert screened is None and row.status == "crashed" and "could not read 01_ladder.ipynb" in row.message


def test_a_large_notebook_of_refused_lines_costs_the_grader_seconds(ladder):
    """4 MB in one exercise cell, 150 refused lines at its top: the grader once spent 72 s on it, twice."""
    notebook = nbformat.read(LADDER, as_version=4)
    cell = next(c for c in notebook.cells if c.metadata.get("exercise_id") == "01.serial-scan")
    cell.source = "x = len([1])\n" * 150 + "# padding\n" * ((4 << 20) // 10)
    start = time.perf_counter()
    screened = runner.screen(nbformat.writes(notebook).encode(), "01_ladder.ipynb", ladder)
    assert time.perf_counter() - start < 15
    (problem,) = screened.problems["01.serial-scan"]
    assert "more than the" in problem and len(screened.sources["01.serial-scan"]) < 5000


# -- one chapter, graded once ------------------------------------------------------------------------
def _copy(path, recorded=None, modified=None):
    notebook = nbformat.read(LADDER, as_version=4)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
        if recorded and cell.cell_type == "code":
            cell.metadata["execution"] = {"shell.execute_reply": recorded}
    nbformat.write(notebook, path)
    if modified:
        os.utime(path, (modified, modified))


def test_two_copies_of_a_chapter_are_graded_once_the_newest(ladder, tmp_path, monkeypatch):
    (tmp_path / "ann").mkdir()
    (tmp_path / "bob").mkdir()
    _copy(tmp_path / "ann" / "01_ladder.ipynb", modified=2_000_000_000)
    _copy(tmp_path / "ann" / "01_ladder (copy).ipynb", modified=1_000_000_000)
    _copy(tmp_path / "bob" / "a.ipynb", recorded="2030-01-02T00:00:00Z", modified=1_000_000_000)
    _copy(tmp_path / "bob" / "b.ipynb", recorded="2030-01-01T00:00:00Z", modified=2_000_000_000)
    chapter = ladder["01_ladder"]

    def full_marks(student, filename, data, chapters, signatures, options, screened):
        return [
            runner.Row(student, filename, e.id, e.points, e.points, "pass", "", chapter=chapter.name)
            for e in chapter.exercises
        ]

    monkeypatch.setattr(batch, "grade_notebook", full_marks)
    monkeypatch.setattr(batch, "instructor_signatures", lambda *args: {})
    rows = batch._grade_jobs(batch.collect([tmp_path]), ladder, 1, runner.Options(isolated=False), None, False, 16)
    graded = {(r.submission, r.notebook) for r in rows if r.status == "pass"}
    assert graded == {("ann", "01_ladder.ipynb"), ("bob", "a.ipynb")}  # by file time; by the time the cells record
    skipped = {r.notebook: r for r in rows if r.status == "invalid"}
    assert set(skipped) == {"01_ladder (copy).ipynb", "b.ipynb"}
    assert "01_ladder.ipynb is a newer copy of chapter 01_ladder" in skipped["01_ladder (copy).ipynb"].message
    assert "by the time its cells record" in skipped["b.ipynb"].message
    summary = report.summarize(rows)
    assert {key: (entry["score"], entry["max_score"]) for key, entry in summary.items() if key[1] == "01_ladder"} == {
        ("ann", "01_ladder"): (5, 5),
        ("bob", "01_ladder"): (5, 5),
    }


# -- the feedback's picture --------------------------------------------------------------------------
@cuda.jit
def _add_one(x):
    i = cuda.threadIdx.x
    x[i] += 1


@cuda.jit
def _add_two(x):
    i = cuda.threadIdx.x
    x[i] += 2


def _pair(**changes):
    student = ps.trace.record(lambda x: _add_one[1, 4](x), np.arange(4, dtype=np.int32))
    reference = ps.trace.record(lambda x: _add_two[1, 4](x), np.arange(4, dtype=np.int32))
    student.records[:] = [r._replace(**changes) for r in student.records]
    return student, reference


def _draw(pair, folder):
    """``report._pictures`` of ``pair`` in a thread of its own, for at most 30 s: ``(finished, pictures)``."""
    found = {}
    worker = threading.Thread(
        target=lambda: found.update(report._pictures({("ann", "01.x"): pair}, "ann", folder, "ann")), daemon=True
    )
    worker.start()
    worker.join(30)
    return not worker.is_alive(), found


def test_the_picture_opens_no_path_a_trace_names(tmp_path):
    """A trace comes from a sandbox: its file names (a FIFO, /dev/zero) are never opened."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        finished, pictures = _draw(_pair(file=path, line=1), tmp_path)
        assert finished and pictures == {"01.x": "ann_01.x.png"}, path


def test_the_picture_of_a_huge_array_allocates_nothing(tmp_path):
    """A kernel's huge local array (an index of millions) makes no model: the feedback has no picture."""
    student, reference = _pair()
    student.records[0] = student.records[0]._replace(index=6_000_000)
    with pytest.raises(stepping.BrokenTrace, match="too large to step through"):
        stepping.model(student)
    finished, pictures = _draw((student, reference), tmp_path)
    assert finished and pictures == {} and not list(tmp_path.iterdir())


# -- honest code is never accused --------------------------------------------------------------------
def test_the_notebooks_check_prints_the_verdict_only(ladder):
    """A correct answer with debug prints: the check cell as nbval runs it prints the stored verdict
    alone (the grader's re-check compares the verdict too), so that the prints are no disagreement."""
    chapter = ladder["01_ladder"]
    exercise = chapter.exercise("01.serial-scan")
    source = exercise.source.replace("    return s", "    print('debugging', s[:3])\n    return s")
    notebook, kinds = chapters.assemble(chapter, {exercise.id: source})
    namespace, printed = {}, {}
    for cell, (kind, exercise_id) in zip(notebook.cells, kinds):
        if kind in ("grader", "setup") or exercise_id == exercise.id:
            with contextlib.redirect_stdout(io.StringIO()) as output:
                exec(compile(cell.source, f"<{kind}>", "exec"), namespace)  # noqa: S102  (the assembled notebook)
            printed[kind] = output.getvalue()
    assert printed["check"] == exercise.checks[0][1] and printed["exercise"] == ""
