"""The workbook in a real JupyterLab, driven by headless Chromium as a student would (issue 18).

For every instructor notebook and one student version: open it, Run > Run All Cells, wait for
the kernel to go idle, and check the page: every code cell ran, no cell shows an error (but the
student version's expected NotImplementedError), every figure the instructor's notebook stores
is an image on the page (a stepper's stored picture: the stepper), and the check cells show their
PASS lines. Then the student's path: paste a solution into the exercise cell, run it and its
check (PASS), then a wrong one (the checker's diagnosis), and open the stepper the diagnosis
offers. The stepper (issue 31): chapter 01's stepper cell, its slider moved phase by phase, the
values drawn checked against the ladder's definition. Last, the tests of the tests: a notebook
with a broken cell, and a stepper on a trace whose records of a phase were lost, fail them.
"""

import re

import labdriver
import nbformat
import page_checks
import pytest

from conftest import NOTEBOOKS, STUDENT
from prefixsum.classroom.student import student_version


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_instructor_notebook_runs_in_jupyterlab(path, lab, driver, on_failure):
    expected = page_checks.expectations(path)
    relpath = f"notebooks/{path.name}"
    with on_failure(driver, path.stem):
        labdriver.open_notebook(driver, lab, relpath, len(expected))
        labdriver.run_all(driver, relpath)
        found = labdriver.page_problems(driver, path.name, expected)
        assert not found, "\n".join(found)


def solution_of(cell_source):
    """The exercise cell as the instructor wrote it, markers taken out: what a student would type."""
    return re.sub(r"^[ \t]*### (BEGIN|END) SOLUTION[^\n]*\n", "", cell_source, flags=re.M)


def check_text(driver, index):
    return "".join(o["text"] for o in labdriver.read_page(driver)[index]["outputs"])


def test_student_path_in_jupyterlab(lab, driver, on_failure):
    # the students' version leaves out the cells tagged instructor (the package's solution) and a
    # lead-in left with nothing to lead into: which cells, the package's own conversion says
    students_ids = {c.id for c in student_version(nbformat.read(STUDENT, as_version=4)).cells}
    kept = [c.id in students_ids for c in nbformat.read(STUDENT, as_version=4).cells]
    expected = [e for e, keep in zip(page_checks.expectations(STUDENT), kept) if keep]
    cells = [c for c, keep in zip(nbformat.read(STUDENT, as_version=4).cells, kept) if keep]
    exercise = next(i for i, c in enumerate(cells) if c.metadata.get("exercise_id") == "01.ladder-step")
    check = exercise + 1
    assert "check" in cells[check].metadata.get("tags", []), f"{STUDENT.name}: no check cell after the exercise"
    relpath = f"students/{STUDENT.name}"
    name = f"student {STUDENT.name}"
    with on_failure(driver, f"student_{STUDENT.stem}"):
        # the student version opens, runs top to bottom, and its check reports the missing exercise
        labdriver.open_notebook(driver, lab, relpath, len(expected))
        labdriver.run_all(driver, relpath)
        found = labdriver.page_problems(driver, name, expected, student=True)
        assert not found, "\n".join(found)
        assert page_checks.reports_missing_exercise(check_text(driver, check))

        # a correct solution, pasted into the exercise cell: Shift+Enter twice, PASS
        solution = solution_of(cells[exercise].source)
        labdriver.type_into_cell(driver, exercise, solution)
        labdriver.run_cell_and_next(driver, exercise, relpath)
        text = check_text(driver, check)
        assert text.startswith("PASS") and "FAIL" not in text, (
            f"{name} cell {check}: the correct solution should PASS, shows {text!r}"
        )
        assert not any(page_checks.is_error(o) for o in labdriver.read_page(driver)[exercise]["outputs"])

        # a wrong one (off by one: each element adds the first of its own run, not the last of
        # the run before): the checker's diagnosis, not PASS
        wrong = solution.replace("rungs[(t & ~(phase - 1)) - 1]", "rungs[t & ~(phase - 1)]")
        assert wrong != solution, f"{STUDENT.name}: the exercise changed; update the wrong solution of this test"
        labdriver.type_into_cell(driver, exercise, wrong)
        labdriver.run_cell_and_next(driver, exercise, relpath)
        text = check_text(driver, check)
        assert text.startswith("FAIL") and "PASS" not in text and "NotImplementedError" not in text, (
            f"{name} cell {check}: the wrong solution should get the checker's diagnosis, shows {text!r}"
        )
        print(f"\nthe checker on the wrong solution: {text.strip()}")

        # the verdict's hint opens the stepper on that run, beside the package's scan, at the
        # first phase where the two differ
        assert "ps.viz.step_failure()" in text, f"{name} cell {check}: the verdict should offer the stepper: {text!r}"
        labdriver.type_into_cell(driver, check, "ps.viz.step_failure(block_size=BLOCK)")
        labdriver.run_cell(driver, check, relpath)
        shown = labdriver.wait(
            driver,
            lambda d: labdriver.read_stepper(d, check),
            30,
            f"{name} cell {check}: ps.viz.step_failure() drew no stepper",
        )
        assert "phase 1" in shown["label"] and shown["differing"] > 0, shown["label"]


# ---------------------------------------------------------------------------------------------
# The stepper: chapter 01's stepper cell, its slider moved, the values drawn those of each phase

STEPPER_CELL = "ps.viz.step(seed_trace"  # chapter 01's stepper cell (the ladder on 30 twos)


def ladder_after(x, phase, width=32):
    """The ladder's shared array after ``phase`` phases, from its definition: every aligned run
    of 2^phase cells holds the scan of its inputs (lanes past the input hold the identity, 0)."""
    cells = list(x) + [0] * (width - len(x))
    run = 1 << phase
    return [sum(cells[i & ~(run - 1) : i + 1]) for i in range(width)]


def ladder_stepper_problems(driver, index, phases=3):
    """Move the stepper in cell ``index`` through ``phases`` phases of the ladder; one sentence
    for each way the page's drawing is not the ladder's (or the cell shows no stepper)."""
    shown = labdriver.read_stepper(driver, index)
    if shown is None:
        text = " ".join(o["text"] for o in labdriver.read_page(driver)[index]["outputs"]).strip()
        return [f"cell {index}: no stepper on the page; the cell shows {text[-300:]!r}"]
    x = labdriver.drawn_values(shown, "x")
    found = []
    for phase in range(phases + 1):
        if phase:
            labdriver.move_slider(driver, index)
            shown = labdriver.read_stepper(driver, index)
        rungs = labdriver.drawn_values(shown, "rungs")
        if f"phase {phase}" not in shown["label"] or rungs != ladder_after(x, phase):
            found.append(
                f"cell {index} at slider step {phase}: the page shows {shown['label']!r} with rungs "
                f"{rungs}; the ladder's phase {phase} gives {ladder_after(x, phase)}"
            )
    return found


def open_and_step(driver, lab, relpath, source):
    """Open ``relpath``, run its first code cell and its stepper cell (as in ``source``, the
    notebook laid out), and return the stepper's problems."""
    cells = nbformat.read(source, as_version=4).cells
    setup = next(i for i, c in enumerate(cells) if c.cell_type == "code")
    stepper = next(i for i, c in enumerate(cells) if STEPPER_CELL in c.source)
    labdriver.open_notebook(driver, lab, relpath, len(cells))
    labdriver.run_cell(driver, setup, relpath)
    labdriver.run_cell(driver, stepper, relpath)
    return ladder_stepper_problems(driver, stepper)


def test_the_stepper_moves_through_the_ladder_phases(lab, driver, on_failure, screenshot_dir):
    with on_failure(driver, "stepper_01_ladder"):
        found = open_and_step(driver, lab, f"notebooks/{STUDENT.name}", STUDENT)
        print(f"\nthe stepper after three phases: {labdriver.screenshot(driver, screenshot_dir, 'stepper_01_ladder')}")
        assert not found, "\n".join(found)


def test_a_trace_with_a_phase_lost_fails_the_stepper_check(lab, driver, tmp_path):
    """The records of phase 2 dropped: the stepper refuses the trace at the first read they fed."""
    notebook = nbformat.read(STUDENT, as_version=4)
    cell = next(c for c in notebook.cells if STEPPER_CELL in c.source)
    cell.source = cell.source.replace(
        STEPPER_CELL,
        "seed_trace = ps.trace.Trace([r for r in seed_trace.records "
        "if r.phase != 2], seed_trace.launches)  # broken on purpose\n" + STEPPER_CELL,
    )
    source = tmp_path / "broken_stepper.ipynb"
    nbformat.write(notebook, source)
    labdriver.lay_out(lab.root, notebooks=[source])
    found = open_and_step(driver, lab, f"notebooks/{source.name}", source)
    print("\n".join(found))
    assert found and "writes are missing" in found[0] and "BrokenTrace" in found[0]


def test_the_stepper_check_reads_a_page():
    """``ladder_after`` and ``drawn_values`` without a browser: a drawing one phase ahead is wrong."""
    x = [2] * 30
    assert ladder_after(x, 1)[:4] == [2, 4, 2, 4] and ladder_after(x, 5)[29:] == [60, 60, 60]
    cells = [["x", "", i, "2"] for i in range(30)] + [
        ["rungs", "0", i, str(v)] for i, v in enumerate(ladder_after(x, 2))
    ]
    shown = {"label": "phase 1", "cells": cells, "differing": 0}
    assert labdriver.drawn_values(shown, "x") == x
    assert labdriver.drawn_values(shown, "rungs") != ladder_after(x, 1)


# ---------------------------------------------------------------------------------------------
# The test of the test: notebooks broken on purpose must fail the checks above, by name and cell


def raising_cell(notebook):
    """01 with a cell that raises after the imports: Run All stops there."""
    notebook.cells.insert(2, nbformat.v4.new_code_cell('raise RuntimeError("broken on purpose")'))
    return notebook, 2


def figure_not_drawn(notebook):
    """01 up to its first figure, whose cell computes the trace but draws nothing."""
    first = next(
        i
        for i, c in enumerate(notebook.cells)
        if any("image/png" in o.get("data", {}) and not page_checks.is_stepper(o) for o in c.get("outputs", []))
    )
    notebook.cells = notebook.cells[: first + 1]
    notebook.cells[first].source = notebook.cells[first].source.splitlines()[0]  # the trace, not the picture
    return notebook, first


@pytest.mark.parametrize("breakage", [raising_cell, figure_not_drawn], ids=lambda f: f.__name__)
def test_a_broken_notebook_fails_the_browser_check(breakage, lab, driver, tmp_path):
    notebook, bad = breakage(nbformat.read(STUDENT, as_version=4))
    source = tmp_path / f"broken_{breakage.__name__}.ipynb"
    nbformat.write(notebook, source)
    labdriver.lay_out(lab.root, notebooks=[source])
    expected = page_checks.expectations(source)
    relpath = f"notebooks/{source.name}"
    labdriver.open_notebook(driver, lab, relpath, len(expected))
    labdriver.run_all(driver, relpath)
    found = labdriver.page_problems(driver, source.name, expected, grace=3)
    print("\n".join(found))
    assert found and all(source.name in line for line in found)
    assert any(line.startswith(f"{source.name} cell {bad} ") for line in found), found
    if breakage is raising_cell:
        assert any("shows an error: RuntimeError: broken on purpose" in line for line in found)
        assert any("not run" in line for line in found)
        assert any("a check should show" in line for line in found)
    else:
        assert any("should draw 1 figure(s), the page shows 0 image(s)" in line for line in found)


def test_problems_reads_a_page():
    """``problems`` without a browser, on hand-made snapshots (the same checks, in milliseconds)."""
    expected = [
        {"kind": "code", "tags": [], "first_line": "x = 1", "images": 1, "passes": 0},
        {"kind": "code", "tags": ["check"], "first_line": "print(check())", "images": 0, "passes": 1},
    ]
    good = [
        {
            "kind": "code",
            "prompt": "[1]:",
            "first_line": "x = 1",
            "images": 1,
            "outputs": [{"mime": "application/vnd.jupyter.stderr", "text": "prefixsum: running on the CUDA simulator"}],
        },
        {
            "kind": "code",
            "prompt": "[2]:",
            "first_line": "print(check())",
            "images": 0,
            "outputs": [{"mime": "application/vnd.jupyter.stdout", "text": "PASS f: 3 sizes\n"}],
        },
    ]
    assert page_checks.problems("nb", expected, good) == []
    bad = [
        dict(
            good[0],
            images=0,
            outputs=[
                {"mime": "application/vnd.jupyter.stderr", "text": "Traceback (most recent call last)\nValueError: no"}
            ],
        ),
        dict(good[1], prompt="[ ]:", outputs=[]),
    ]
    found = page_checks.problems("nb", expected, bad)
    assert any("cell 0" in f and "ValueError: no" in f for f in found)
    assert any("cell 0" in f and "figure" in f for f in found)
    assert any("cell 1" in f and "not run" in f for f in found)
    assert any("cell 1" in f and "PASS" in f for f in found)
    student = [
        good[0],
        dict(
            good[1], outputs=[{"mime": "application/vnd.jupyter.stdout", "text": "NOT ATTEMPTED f: Exercise: write it"}]
        ),
    ]
    assert page_checks.problems("nb", expected, student, student=True) == []
    assert page_checks.problems("nb", expected, student)  # an instructor's check must PASS
