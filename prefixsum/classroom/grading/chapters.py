"""The instructor's chapters, and the notebook the grader assembles from a submission.

An instructor's notebook marks its exercises with cell metadata (``notebooks/EXERCISES.md``):

* an exercise is a code cell tagged ``exercise`` with ``exercise_id`` (``"NN.short-name"``,
  stable across versions), ``todo`` and optional ``points`` (default 1);
* its check is the code cell (or cells) tagged ``check`` with the same ``exercise_id``; the
  check prints the checker's verdict, whose stored output is the expected one;
* the cells that exercises need first (imports, a helper) are tagged ``setup``. Every other cell
  (explanations, pictures, benchmarks, other checks) is not run by the grader.

The graded notebook is the instructor's setup cells, then for each exercise, in the
instructor's order, the submission's source of that exercise and the instructor's check cells
with their stored outputs. Nothing else of the submission is used: its check cells, stored
outputs, extra and re-ordered cells change nothing.
"""
import ast
import dataclasses
import pathlib

import nbformat

from ..renumbering import chapter_name
from ..student import strip_solutions

SETUP, EXERCISE, CHECK = "setup", "exercise", "check"


class InvalidSubmission(Exception):
    """A submission the grader cannot grade: not a notebook, empty, or of no known chapter."""


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One exercise of an instructor's notebook."""

    id: str
    points: float
    todo: str
    source: str
    """The instructor's exercise cell, with its solution."""
    checks: tuple
    """The check cells: ``(source, expected stdout)`` each."""

    @property
    def blank(self):
        """The exercise cell as the students receive it (the solution replaced by a raise)."""
        return strip_solutions(self.source, self.todo)

    @property
    def unsolved_message(self):
        """The message of the ``NotImplementedError`` that the students' version raises."""
        return f"Exercise: {self.todo}" if self.todo else "Exercise: write the missing code here"


@dataclasses.dataclass(frozen=True)
class Chapter:
    """An instructor's notebook, reduced to what grading needs (picklable, for other processes)."""

    name: str
    """The instructor's file name without ``.ipynb`` (``"01_ladder"``)."""
    setup: tuple
    """Sources of the cells tagged ``setup``, in order."""
    exercises: tuple
    sanitize: str = ""
    """nbval's sanitize file beside the instructor's notebook (its text), or empty."""

    def exercise(self, exercise_id):
        return next(e for e in self.exercises if e.id == exercise_id)

    @property
    def max_score(self):
        return sum(e.points for e in self.exercises)


def _text_output(cell):
    """The stdout that a check cell stored (what nbval compares; checks print, they draw nothing)."""
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream" and o.get("name") == "stdout")


def read_chapter(path):
    """Read an instructor's notebook into a :class:`Chapter`.

    Raises
    ------
    ValueError
        When the exercise metadata is inconsistent: an exercise without ``exercise_id``, an id
        used twice, a check cell of no exercise above it, an exercise without a check.
    """
    path = pathlib.Path(path)
    notebook = nbformat.read(path, as_version=4)
    setup, exercises, checks = [], {}, {}
    for number, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        tags, meta = cell.metadata.get("tags", []), cell.metadata
        where = f"{path.name}, cell {number}"
        if SETUP in tags:
            setup.append(cell.source)
        if EXERCISE in tags:
            exercise_id = meta.get("exercise_id")
            if not isinstance(exercise_id, str) or not exercise_id:
                raise ValueError(f"{where}: an exercise cell needs the metadata exercise_id (\"NN.short-name\")")
            if exercise_id in exercises:
                raise ValueError(f"{where}: exercise_id {exercise_id!r} is used twice")
            points = meta.get("points", 1)
            if not isinstance(points, (int, float)) or isinstance(points, bool) or points <= 0:
                raise ValueError(f"{where}: points must be a positive number; got {points!r}")
            exercises[exercise_id] = (points, meta.get("todo", ""), cell.source)
            checks[exercise_id] = []
        elif CHECK in tags:
            exercise_id = meta.get("exercise_id")
            if exercise_id not in exercises:
                raise ValueError(f"{where}: a check cell needs the exercise_id of an exercise above it; got {exercise_id!r}"
                                 f" (exercises so far: {sorted(exercises)})")
            checks[exercise_id].append((cell.source, _text_output(cell)))
    for exercise_id, found in checks.items():
        if not found:
            raise ValueError(f"{path.name}: exercise {exercise_id!r} has no check cell")
    sanitize = path.parent / "sanitize.cfg"
    return Chapter(
        name=path.stem, setup=tuple(setup),
        exercises=tuple(Exercise(i, p, t, s, tuple(checks[i])) for i, (p, t, s) in exercises.items()),
        sanitize=sanitize.read_text() if sanitize.exists() else "")


def read_submission(data, filename):
    """Parse a submitted file (bytes) as a notebook, or raise :class:`InvalidSubmission`."""
    if not filename.endswith(".ipynb"):
        raise InvalidSubmission(f"{filename} is not a notebook (.ipynb)")
    try:
        notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception as error:  # noqa: BLE001  (any parse failure is the same verdict for the teacher)
        raise InvalidSubmission(f"{filename} is not a readable notebook: {type(error).__name__}: {str(error)[:200]}") from None
    if not any(cell.get("cell_type") == "code" for cell in notebook.get("cells", [])):
        raise InvalidSubmission(f"{filename} has no code cells")
    return notebook


def chapter_of(notebook, filename, chapters):
    """The chapter a submission belongs to: by the metadata ``python -m prefixsum student`` stamps,
    else by its exercise ids, else by its file name; :class:`InvalidSubmission` when none fits."""
    known = ", ".join(sorted(chapters)) or "none"
    stamp = notebook.metadata.get("prefixsum", {})
    named = stamp.get("chapter") if isinstance(stamp, dict) else None
    if isinstance(named, str):
        if named in chapters:
            return chapters[named]
        raise InvalidSubmission(f"the notebook is chapter {named}, which is not among the instructor's notebooks ({known})")
    ids = {cell.metadata.get("exercise_id") for cell in notebook.cells} - {None}
    for chapter in chapters.values():
        if ids & {e.id for e in chapter.exercises}:
            return chapter
    stem = chapter_name(pathlib.PurePath(filename).stem)  # a file of an earlier numbering by its current name
    matches = [c for name, c in chapters.items() if stem.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    raise InvalidSubmission(f"{filename} matches none of the instructor's notebooks ({known}) by its metadata, "
                            "exercise ids or file name")


def submitted_sources(notebook, chapter):
    """``{exercise id: source or None}``: the submission's cell of each exercise.

    A cell is matched by its ``exercise_id``; where the metadata was stripped, the k-th cell
    tagged ``exercise`` (then the k-th code cell whose first line is the instructor's first line)
    stands for the k-th exercise.
    """
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    by_id = {}
    for cell in code:
        by_id.setdefault(cell.metadata.get("exercise_id"), cell.source)
    tagged = [cell.source for cell in code if EXERCISE in cell.metadata.get("tags", []) and "exercise_id" not in cell.metadata]
    found = {}
    for k, exercise in enumerate(chapter.exercises):
        if exercise.id in by_id:
            found[exercise.id] = by_id[exercise.id]
        elif k < len(tagged):
            found[exercise.id] = tagged[k]
        else:
            first = exercise.source.strip().splitlines()[0]
            found[exercise.id] = next((c.source for c in code if c.source.strip().splitlines()[:1] == [first]), None)
    return found


def unsolved(source, exercise):
    """Whether ``source`` still raises the students' version's ``NotImplementedError``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, UnicodeError, RecursionError, MemoryError):
        return repr(exercise.unsolved_message) in source
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            func, first = node.exc.func, node.exc.args[0]
            if getattr(func, "id", None) == "NotImplementedError" and isinstance(first, ast.Constant) and first.value == exercise.unsolved_message:
                return True
    return False


def assemble(chapter, sources):
    """The notebook nbval runs, and what each of its cells is.

    Parameters
    ----------
    chapter : Chapter
    sources : dict
        ``{exercise id: source}``; a missing or None source is replaced by the students' blank.

    Returns
    -------
    (nbformat.NotebookNode, list of (kind, exercise id or None))
        Setup and exercise cells keep no expected output (``nbval-ignore-output``); check cells
        carry the instructor's stored stdout.
    """
    cells, kinds = [], []
    for source in chapter.setup:
        cells.append(nbformat.v4.new_code_cell(source, metadata={"tags": ["nbval-ignore-output"]}))
        kinds.append((SETUP, None))
    for exercise in chapter.exercises:
        source = sources.get(exercise.id)
        cells.append(nbformat.v4.new_code_cell(exercise.blank if source is None else source,
                                               metadata={"tags": ["nbval-ignore-output"]}))
        kinds.append((EXERCISE, exercise.id))
        for check, expected in exercise.checks:
            cell = nbformat.v4.new_code_cell(check, execution_count=len(cells) + 1)  # nbval skips unrun cells
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=expected)]
            cells.append(cell)
            kinds.append((CHECK, exercise.id))
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook, kinds

