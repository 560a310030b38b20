"""Helpers of the grader's tests: the real notebooks, an exercise cell, and submissions built from
the students' version with one exercise's source changed."""

import pathlib

import nbformat

from prefixsum.classroom.student import student_version

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
LADDER, REFLECTOR = NOTEBOOKS / "01_ladder.ipynb", NOTEBOOKS / "09_householder.ipynb"
SOLUTION = "rungs[t] += rungs[(t & ~(phase - 1)) - 1]"
PASS_LINE = "PASS my_ladder_tile: 11 sizes from 1 to 2049"


def instructor(path=LADDER):
    return nbformat.read(path, as_version=4)


def cell(notebook, exercise_id, kind="exercise"):
    return next(
        c for c in notebook.cells if c.metadata.get("exercise_id") == exercise_id and kind in c.metadata.get("tags", [])
    )


def with_exercise(transform, path=LADDER, exercise_id="01.ladder-step"):
    """The student's version of ``path`` with the exercise cell's source replaced by ``transform(solution)``."""
    notebook = student_version(instructor(path), chapter=path.stem)
    cell(notebook, exercise_id).source = transform(cell(instructor(path), exercise_id).source)
    return notebook


def ladder(replacement):
    """Notebook 01 with the solution's line replaced (indented as it is, inside ``if t & phase:``)."""
    return with_exercise(lambda source: source.replace(SOLUTION, replacement))


def reflector(body):
    """Notebook 08 with my_reflector's body (between the markers) replaced by ``body``."""

    def transform(source):
        head, rest = source.split("    ### BEGIN SOLUTION\n")
        return head + "".join(f"    {line}\n" for line in body.splitlines()) + rest.split("    ### END SOLUTION\n")[1]

    return with_exercise(transform, REFLECTOR, "09.householder-reflector")


def extra_cells():
    notebook = ladder("rungs[t] += rungs[t - phase]")
    notebook.cells.insert(
        0, nbformat.v4.new_code_cell(f"import prefixsum as ps\nps.check.tiled = lambda *a, **k: {PASS_LINE!r}")
    )
    return notebook
