"""The workbook in a real JupyterLab, driven by headless Chromium as a student would (issue 18).

For every instructor notebook and one student version: open it, Run > Run All Cells, wait for
the kernel to go idle, and check the page: every code cell ran, no cell shows an error (but the
student version's expected NotImplementedError), every figure the instructor's notebook stores
is an image on the page, and the check cells show their PASS lines. Then the student's path:
paste a solution into the exercise cell, run it and its check (PASS), then a wrong one (the
checker's diagnosis). Last, the test of the test: a notebook with a broken cell fails it.
"""
import re

import nbformat
import pytest

import labdriver
from conftest import NOTEBOOKS, STUDENT
from prefixsum.classroom.student import INSTRUCTOR


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_instructor_notebook_runs_in_jupyterlab(path, lab, driver, on_failure):
    expected = labdriver.expectations(path)
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
    # the students' version leaves out the cells tagged instructor (the package's solution)
    kept = [INSTRUCTOR not in c.metadata.get("tags", []) for c in nbformat.read(STUDENT, as_version=4).cells]
    expected = [e for e, keep in zip(labdriver.expectations(STUDENT), kept) if keep]
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
        assert "NotImplementedError: Exercise:" in check_text(driver, check)

        # a correct solution, pasted into the exercise cell: Shift+Enter twice, PASS
        solution = solution_of(cells[exercise].source)
        labdriver.type_into_cell(driver, exercise, solution)
        labdriver.run_cell_and_next(driver, exercise, relpath)
        text = check_text(driver, check)
        assert text.startswith("PASS") and "FAIL" not in text, f"{name} cell {check}: the correct solution should PASS, shows {text!r}"
        assert not any(labdriver.is_error(o) for o in labdriver.read_page(driver)[exercise]["outputs"])

        # a wrong one (off by one: each element adds the first of its own run, not the last of
        # the run before): the checker's diagnosis, not PASS
        wrong = solution.replace("rungs[(t & ~(phase - 1)) - 1]", "rungs[t & ~(phase - 1)]")
        assert wrong != solution, f"{STUDENT.name}: the exercise changed; update the wrong solution of this test"
        labdriver.type_into_cell(driver, exercise, wrong)
        labdriver.run_cell_and_next(driver, exercise, relpath)
        text = check_text(driver, check)
        assert text.startswith("FAIL") and "PASS" not in text and "NotImplementedError" not in text, \
            f"{name} cell {check}: the wrong solution should get the checker's diagnosis, shows {text!r}"
        print(f"\nthe checker on the wrong solution: {text.strip()}")


# ---------------------------------------------------------------------------------------------
# The test of the test: notebooks broken on purpose must fail the checks above, by name and cell


def raising_cell(notebook):
    """01 with a cell that raises after the imports: Run All stops there."""
    notebook.cells.insert(2, nbformat.v4.new_code_cell('raise RuntimeError("broken on purpose")'))
    return notebook, 2


def figure_not_drawn(notebook):
    """01 up to its first figure, whose cell computes the trace but draws nothing."""
    first = next(i for i, c in enumerate(notebook.cells) if any("image/png" in o.get("data", {}) for o in c.get("outputs", [])))
    notebook.cells = notebook.cells[:first + 1]
    notebook.cells[first].source = notebook.cells[first].source.splitlines()[0]  # the trace, not the picture
    return notebook, first


@pytest.mark.parametrize("breakage", [raising_cell, figure_not_drawn], ids=lambda f: f.__name__)
def test_a_broken_notebook_fails_the_browser_check(breakage, lab, driver, tmp_path):
    notebook, bad = breakage(nbformat.read(STUDENT, as_version=4))
    source = tmp_path / f"broken_{breakage.__name__}.ipynb"
    nbformat.write(notebook, source)
    labdriver.lay_out(lab.root, notebooks=[source])
    expected = labdriver.expectations(source)
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
    expected = [{"kind": "code", "tags": [], "first_line": "x = 1", "images": 1, "passes": 0},
                {"kind": "code", "tags": ["check"], "first_line": "print(check())", "images": 0, "passes": 1}]
    good = [{"kind": "code", "prompt": "[1]:", "first_line": "x = 1", "images": 1,
             "outputs": [{"mime": "application/vnd.jupyter.stderr", "text": "prefixsum: running on the CUDA simulator"}]},
            {"kind": "code", "prompt": "[2]:", "first_line": "print(check())", "images": 0,
             "outputs": [{"mime": "application/vnd.jupyter.stdout", "text": "PASS f: 3 sizes\n"}]}]
    assert labdriver.problems("nb", expected, good) == []
    bad = [dict(good[0], images=0, outputs=[{"mime": "application/vnd.jupyter.stderr",
                                              "text": "Traceback (most recent call last)\nValueError: no"}]),
           dict(good[1], prompt="[ ]:", outputs=[])]
    found = labdriver.problems("nb", expected, bad)
    assert any("cell 0" in f and "ValueError: no" in f for f in found)
    assert any("cell 0" in f and "figure" in f for f in found)
    assert any("cell 1" in f and "not run" in f for f in found)
    assert any("cell 1" in f and "PASS" in f for f in found)
    student = [good[0], dict(good[1], outputs=[{"mime": "application/vnd.jupyter.stdout",
                                                "text": "FAIL f: NotImplementedError: Exercise: write it"}])]
    assert labdriver.problems("nb", expected, student, student=True) == []
    assert labdriver.problems("nb", expected, student)  # an instructor's check must PASS
