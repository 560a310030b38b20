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
import datetime
import json
import pathlib
import re

import nbformat

from ..classroom.renumbering import chapter_name
from ..classroom.student import strip_solutions
from .whitelist import MAX_SOURCE

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
    return "".join(
        o.get("text", "")
        for o in cell.get("outputs", [])
        if o.get("output_type") == "stream" and o.get("name") == "stdout"
    )


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
                raise ValueError(f'{where}: an exercise cell needs the metadata exercise_id ("NN.short-name")')
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
                raise ValueError(
                    f"{where}: a check cell needs the exercise_id of an exercise above it; got "
                    f"{exercise_id!r}"
                    f" (exercises so far: {sorted(exercises)})"
                )
            checks[exercise_id].append((cell.source, _text_output(cell)))
    for exercise_id, found in checks.items():
        if not found:
            raise ValueError(f"{path.name}: exercise {exercise_id!r} has no check cell")
    sanitize = path.parent / "sanitize.cfg"
    return Chapter(
        name=path.stem,
        setup=tuple(setup),
        exercises=tuple(Exercise(i, p, t, s, tuple(checks[i])) for i, (p, t, s) in exercises.items()),
        sanitize=sanitize.read_text() if sanitize.exists() else "",
    )


def read_submission(data, filename):
    """Parse a submitted file (bytes) as a notebook, or raise :class:`InvalidSubmission`.

    Beyond JSON, the notebook must have the shape grading reads (:func:`_shape_problem`): a
    malformed one (a cell's source an int, its ``exercise_id`` a list, ``tags`` not a list of
    strings) is refused whole, with the cell and the field named.
    """
    if not filename.endswith(".ipynb"):
        raise InvalidSubmission(f"{filename} is not a notebook (.ipynb)")
    try:
        text = data.decode("utf-8")
        # A version 4 notebook is read without nbformat's schema validation, which costs seconds on
        # a file of many cells and tells nothing _shape_problem does not check; older ones are converted.
        raw = json.loads(text)
        notebook = nbformat.v4.to_notebook_json(raw) if raw.get("nbformat") == 4 else nbformat.reads(text, as_version=4)
    except Exception as error:  # noqa: BLE001  (any parse failure is the same verdict for the teacher)
        raise InvalidSubmission(
            f"{filename} is not a readable notebook: {type(error).__name__}: {str(error)[:200]}"
        ) from None
    problem = _shape_problem(notebook)
    if problem:
        raise InvalidSubmission(f"{filename} is not a notebook the grader can read: {problem}")
    for part in [notebook, *notebook.cells]:
        part.setdefault("metadata", nbformat.NotebookNode())
    if not any(cell.get("cell_type") == "code" for cell in notebook.cells):
        raise InvalidSubmission(f"{filename} has no code cells")
    return notebook


def _shape_problem(notebook):
    """What in ``notebook`` (as nbformat read it, which keeps malformed fields) is not what grading reads, or ``""``."""
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return "it has no list of cells"
    if not isinstance(notebook.get("metadata", {}), dict) or not isinstance(
        notebook.get("metadata", {}).get("prefixsum", {}), dict
    ):
        return "its metadata is not an object"
    for number, cell in enumerate(notebook["cells"]):
        where = f"cell {number}"
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            return f"{where} is not a cell"
        metadata = cell.get("metadata", {})
        if not isinstance(metadata, dict):
            return f"{where}: its metadata is not an object"
        tags = metadata.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            what = "not all text" if isinstance(tags, list) else f"of type {type(tags).__name__}"
            return f"{where}: its tags are {what}, not a list of text"
        if "exercise_id" in metadata and not isinstance(metadata["exercise_id"], str):
            return f"{where}: its exercise_id is of type {type(metadata['exercise_id']).__name__}, not text"
        if cell["cell_type"] == "code" and not isinstance(cell.get("source"), str):
            return (
                f"{where} is a code cell without a source text"
                if "source" not in cell
                else f"{where}: its source is of type {type(cell['source']).__name__}, not text"
            )
    return ""


def recorded_time(notebook):
    """The latest time a cell of ``notebook`` records having run (JupyterLab's ``execution`` metadata, where
    its cell timing is on), as an aware datetime, or None."""
    latest = None
    for cell in notebook.cells:
        execution = cell.get("metadata", {}).get("execution")
        for value in execution.values() if isinstance(execution, dict) else ():
            try:
                when = datetime.datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None
            except ValueError:
                continue
            if when is not None and when.tzinfo is not None and (latest is None or when > latest):
                latest = when
    return latest


def chapter_of(notebook, filename, chapters):
    """The chapter a submission belongs to: by the metadata ``python -m prefixsum student`` stamps,
    else by its exercise ids, else by its file name; :class:`InvalidSubmission` when none fits."""
    known = ", ".join(sorted(chapters)) or "none"
    stamp = notebook.metadata.get("prefixsum", {})
    named = stamp.get("chapter") if isinstance(stamp, dict) else None
    if isinstance(named, str):
        if named in chapters:
            return chapters[named]
        raise InvalidSubmission(
            f"the notebook is chapter {named}, which is not among the instructor's notebooks ({known})"
        )
    ids = {cell.metadata.get("exercise_id") for cell in notebook.cells} - {None}
    for chapter in chapters.values():
        if ids & {e.id for e in chapter.exercises}:
            return chapter
    stem = chapter_name(pathlib.PurePath(filename).stem)  # a file of an earlier numbering by its current name
    matches = [c for name, c in chapters.items() if stem.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    raise InvalidSubmission(
        f"{filename} matches none of the instructor's notebooks ({known}) by its metadata, exercise ids or file name"
    )


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
    tagged = [
        cell.source for cell in code if EXERCISE in cell.metadata.get("tags", []) and "exercise_id" not in cell.metadata
    ]
    found = {}
    for k, exercise in enumerate(chapter.exercises):
        if exercise.id in by_id:
            found[exercise.id] = by_id[exercise.id]
        elif k < len(tagged):
            found[exercise.id] = tagged[k]
        else:
            first = _first_line(exercise.source)
            found[exercise.id] = next((c.source for c in code if _first_line(c.source) == first), None)
    return found


_FIRST_LINE = re.compile(r"\s*([^\r\n]*)")


def _first_line(source):
    """The first line of ``source`` that is not blank, without the spaces around it (reads no further)."""
    return _FIRST_LINE.match(source).group(1).strip()


def unsolved(source, exercise):
    """Whether ``source`` still raises the students' version's ``NotImplementedError``."""
    if len(source) > MAX_SOURCE:  # no blank is that long, and the allow-list refuses it unparsed
        return False
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, UnicodeError, RecursionError, MemoryError):
        return repr(exercise.unsolved_message) in source
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            func, first = node.exc.func, node.exc.args[0]
            if (
                getattr(func, "id", None) == "NotImplementedError"
                and isinstance(first, ast.Constant)
                and first.value == exercise.unsolved_message
            ):
                return True
    return False


# The grader's first cell of the assembled notebook. A check cell runs as ``_grading_check(its
# source, its name)``: the check's own prints are kept and printed after it, and what else is
# printed meanwhile (the student's debug prints, a kernel's, warnings) goes nowhere, so that nbval
# compares the check's verdict with the stored one, as the grader's re-check does, and not the
# cell's whole output. The check runs in a copy of the notebook's namespace, as the re-check's does.
GRADING_CELL = """\
def _grading_check(source, name):
    import contextlib, linecache, os
    printed = []

    def keep(*values, sep=" ", end="\\n", file=None, flush=False):
        printed.append((" " if sep is None else sep).join(map(str, values)) + ("\\n" if end is None else end))

    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    try:
        with open(os.devnull, "w") as nowhere, contextlib.redirect_stdout(nowhere), contextlib.redirect_stderr(nowhere):
            exec(compile(source, name, "exec"), {**globals(), "print": keep})
    finally:
        print("".join(printed), end="")
"""
GRADER = "grader"


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
        The grader's cell (:data:`GRADING_CELL`), setup and exercise cells keep no expected output
        (``nbval-ignore-output``); check cells carry the instructor's stored stdout, and run
        through the grader's cell.
    """
    cells = [nbformat.v4.new_code_cell(GRADING_CELL, metadata={"tags": ["nbval-ignore-output"]})]
    kinds = [(GRADER, None)]
    for source in chapter.setup:
        cells.append(nbformat.v4.new_code_cell(source, metadata={"tags": ["nbval-ignore-output"]}))
        kinds.append((SETUP, None))
    for exercise in chapter.exercises:
        source = sources.get(exercise.id)
        cells.append(
            nbformat.v4.new_code_cell(
                exercise.blank if source is None else source, metadata={"tags": ["nbval-ignore-output"]}
            )
        )
        kinds.append((EXERCISE, exercise.id))
        for number, (check, expected) in enumerate(exercise.checks):
            run = f"_grading_check({check!r}, {f'<check {exercise.id} {number}>'!r})"
            cell = nbformat.v4.new_code_cell(run, execution_count=len(cells) + 1)  # nbval skips unrun cells
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=expected)]
            cells.append(cell)
            kinds.append((CHECK, exercise.id))
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook, kinds
