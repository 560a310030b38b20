"""Make the student's version of an instructor's notebook.

In the instructor's notebook each exercise is a code cell tagged ``exercise`` whose solution
stands between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (the markers nbgrader uses). The
student's version replaces that span with ``raise NotImplementedError(...)`` at the same
indentation, saying what to write (the cell's ``todo`` metadata), and clears every output, so
the notebook opens clean and every check cell reports the missing exercise instead of a result.

The cells keep their metadata (``exercise_id``, ``todo``, ``points``), and the notebook's own metadata gets ``prefixsum:
{chapter: "01_ladder", exercises: ["01.ladder-step", ...]}`` (the instructor's file name and the exercise ids in order),
by which ``python -m prefixsum grade`` matches a submission to its instructor's notebook. Cells tagged ``instructor``
(the package's own solution, shown for comparison after an exercise's check) are left out of the student's version, and
so is the sentence that led in to them (a markdown cell ending with ':' right before one).
"""

import pathlib
import re

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
INSTRUCTOR = "instructor"
_SPAN = re.compile(r"^([ \t]*)" + re.escape(BEGIN) + r".*?^[ \t]*" + re.escape(END) + r"[^\n]*\n?", re.M | re.S)


def strip_solutions(source, todo):
    """Replace every solution span in ``source`` by a ``raise NotImplementedError(todo)``."""
    if BEGIN not in source:
        raise ValueError(f"an exercise cell has no {BEGIN!r} marker:\n{source[:200]}")
    message = f"Exercise: {todo}" if todo else "Exercise: write the missing code here"
    return _SPAN.sub(lambda m: f"{m.group(1)}raise NotImplementedError({message!r})\n", source)


def student_version(notebook, chapter=None):
    """Return a new notebook: solutions stripped from ``exercise`` cells, ``instructor`` cells left out, outputs
    cleared.

    Parameters
    ----------
    notebook : nbformat.NotebookNode
        The instructor's notebook (not modified).
    chapter : str, optional
        The chapter's name, the instructor's file name without ``.ipynb`` (``"01_ladder"``):
        stamped with the exercise ids into the notebook's metadata, for the grader.
    """
    student = nbformat.reads(nbformat.writes(notebook), as_version=4)
    kept = []
    for cell in student.cells:
        if INSTRUCTOR not in cell.metadata.get("tags", []):
            kept.append(cell)
        elif kept and kept[-1].cell_type == "markdown" and lead_in(kept[-1].source):
            kept[-1].source = without_lead_in(kept[-1].source)
            if not kept[-1].source.strip():
                kept.pop()
    student.cells = kept
    exercises = [
        cell.metadata["exercise_id"]
        for cell in student.cells
        if "exercise" in cell.metadata.get("tags", []) and "exercise_id" in cell.metadata
    ]
    stamp = {"exercises": exercises}
    if chapter is not None:
        stamp["chapter"] = chapter
    student.metadata["prefixsum"] = stamp
    for cell in student.cells:
        if cell.cell_type != "code":
            continue
        if "exercise" in cell.metadata.get("tags", []):
            cell.source = strip_solutions(cell.source, cell.metadata.get("todo", ""))
        cell.outputs = []
        cell.execution_count = None
    return student


def lead_in(markdown):
    """Whether ``markdown`` ends by leading in to the cell after it (its text ends with ':')."""
    return markdown.rstrip().endswith(":")


def without_lead_in(markdown):
    """``markdown`` without the lead-in to a cell the student's version leaves out.

    A last paragraph of one line ("The package's two loops, for comparison:") goes; a longer
    one ends with a full stop instead of the colon.
    """
    text = markdown.rstrip()
    head, _, last = text.rpartition("\n\n")
    if "\n" not in last.strip():
        return head.rstrip()
    return text[:-1] + "."


def write_student_versions(paths, out_dir):
    """Write the student version of each notebook in ``paths`` into ``out_dir``; return the new paths."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in map(pathlib.Path, paths):
        notebook = nbformat.read(path, as_version=4)
        target = out_dir / path.name
        nbformat.write(student_version(notebook, chapter=path.stem), target)
        written.append(target)
    return written
