"""Student versions: solutions stripped, outputs cleared, and the notebook still runs.

Every chapter is turned into its student version and executed top to bottom on the simulator, in
the folder it was written to, outside the checkout: no cell may fail, every check cell must
report the exercise not attempted, the simulator's notice is no error, and no cell prints an
exercise's answer. A chapter whose students' version is its instructor's code cell for cell (00)
is not run again: CI's nbval stage runs that code; of it, the results it reads are looked up
from outside the checkout.
"""

import ast
import contextlib
import difflib
import fnmatch
import inspect
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import nbformat
import pytest
from nbclient import NotebookClient

from prefixsum import student
from prefixsum.apps import onesweep
from prefixsum.cli import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(ROOT.joinpath("notebooks").glob("[0-9][0-9]_*.ipynb"))
WITH_EXERCISES = [
    p for p in NOTEBOOKS if any("exercise" in c.metadata.get("tags", []) for c in nbformat.read(p, 4).cells)
]

# a result's name where a chapter reads it: results.read("x.csv"), results.value("x.csv", ...), results.path(...)
_QUOTED = re.compile(r"""results\.(?:read|value|path)\(\s*["']([^"']+)["']""")


def _code(cells):
    return [c.source for c in cells if c.cell_type == "code"]


# Chapters whose students' version is the instructor's code, cell for cell (00: no exercise, no
# instructor cell): CI's nbval stage runs that very code, so it is not run again here.
AS_WRITTEN = [
    p
    for p in NOTEBOOKS
    if _code(student.student_version(nbformat.read(p, 4)).cells) == _code(nbformat.read(p, 4).cells)
]


def _setup_results():
    """The patterns of benchmark results that setup.py copies into the wheel (its ``RESULTS``)."""
    return ast.literal_eval(re.search(r"^RESULTS = (.*)$", (ROOT / "setup.py").read_text(), re.M).group(1))


def test_markers_are_replaced_by_a_clear_raise():
    source = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    y = x + 1\n    ### END SOLUTION\n    return y\n"
    out = student.strip_solutions(source, "add one to x")
    assert out == "def f(x):\n    y = 1\n    raise NotImplementedError('Exercise: add one to x')\n    return y\n"
    with pytest.raises(ValueError, match="no '### BEGIN SOLUTION' marker"):
        student.strip_solutions("x = 1\n", "")


def test_every_chapter_has_an_exercise_and_a_check():
    # 00 introduces
    for path in (p for p in NOTEBOOKS if p.stem != "00_gpu_basics"):
        tags = [tag for cell in nbformat.read(path, 4).cells for tag in cell.metadata.get("tags", [])]
        assert "exercise" in tags and "check" in tags, path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p not in AS_WRITTEN], ids=lambda p: p.name)
def test_student_version_runs_where_it_was_written_and_reports_the_missing_exercise(path, tmp_path):
    # run in the folder the handout was written to, outside the checkout (as a student does):
    # every file a chapter reads must come from the package, not from the working directory.
    # Under .ci/run (pip install, no PYTHONPATH) the kernel imports the installed wheel, so this
    # also proves the wheel carries the results; in a checkout they come from its benchmarks/.
    assert ROOT not in tmp_path.resolve().parents
    (written,) = student.write_student_versions([path], tmp_path)
    notebook = nbformat.read(written, 4)
    assert "### BEGIN SOLUTION" not in nbformat.writes(notebook)
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    checks = [c for c in notebook.cells if "check" in c.metadata.get("tags", [])]
    assert bool(checks) == (path in WITH_EXERCISES)
    for cell in checks:  # a blank exercise is not attempted, not a failure with a NotImplementedError
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert "NOT ATTEMPTED" in text and "FAIL" not in text and "Exercise:" in text, text
    first = next(c for c in notebook.cells if c.cell_type == "code")
    assert not [o for o in first.outputs if o.get("name") == "stderr"], first.outputs  # the notice is no error
    solutions = _solutions(nbformat.read(path, 4))
    for cell in notebook.cells:
        if cell.cell_type == "code" and "exercise" not in cell.metadata.get("tags", []):
            for exercise, solution in solutions.items():
                assert _shown_share(solution, _printed(cell)) < _ANSWER_SHOWN, (exercise, cell.source[:200])


# Tokens of an exercise's solution that a cell's output may show in runs of at least _RUN tokens
# (a line of its code, not a common word): above this share, the output prints the answer.
_ANSWER_SHOWN = 0.5
_RUN = 8


@pytest.mark.parametrize("path", AS_WRITTEN, ids=lambda p: p.name)
def test_a_chapter_handed_out_as_written_finds_its_results_outside_the_checkout(path, tmp_path, monkeypatch):
    """Its code runs under nbval in the checkout; outside it, only where a committed result comes
    from differs: each one it reads is found from a folder outside the checkout (under .ci/run, in
    the installed wheel), as its run there would find it."""
    assert ROOT not in tmp_path.resolve().parents
    monkeypatch.chdir(tmp_path)
    source = "\n".join(_code(nbformat.read(path, 4).cells))
    assert "open(" not in source  # a committed file is read through results, from anywhere
    for name in _QUOTED.findall(source):
        assert results.path(name).is_file(), name


def _solutions(notebook):
    """``{exercise id: solution}``: the code between the markers of each exercise cell, dedented."""
    found = {}
    for cell in notebook.cells:
        if "exercise" in cell.metadata.get("tags", []):
            span = re.search(r"### BEGIN SOLUTION\n(.*?)\n[ \t]*### END SOLUTION", cell.source, re.S)
            found[cell.metadata["exercise_id"]] = textwrap.dedent(span.group(1))
    return found


def _printed(cell):
    """What a cell shows as text: its printed streams, and the text of a displayed value (a cell
    ending in ``inspect.getsource(f)`` shows the source without printing it, as a string's repr)."""
    return "".join(
        o.get("text", "") if o.get("output_type") == "stream" else _shown_value(o.get("data", {}).get("text/plain", ""))
        for o in cell.get("outputs", [])
    )


def _shown_value(text):
    """A displayed string's own text (its repr read back), any other value's repr as shown."""
    with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
        value = ast.literal_eval(text)
        if isinstance(value, str):
            return value
    return text


def _tokens(text):
    return re.findall(r"\w+|[^\w\s]", re.sub(r"#[^\n]*", "", text))


def _shown_share(solution, text):
    """The share of the solution's tokens that ``text`` shows in runs of at least :data:`_RUN` tokens."""
    mine = _tokens(solution)
    blocks = difflib.SequenceMatcher(None, mine, _tokens(text), autojunk=False).get_matching_blocks()
    return sum(b.size for b in blocks if b.size >= _RUN) / max(1, len(mine))


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.name)
def test_no_students_version_prints_an_exercise_answer(path):
    """A cell the students' version keeps prints no exercise's answer (chapter 11 printed
    inspect.getsource(apps.onesweep.warp_digit_rank), the answer to 11.digit-rank, above it): the
    instructor's stored outputs of those cells, against each solution of the chapter."""
    instructor = nbformat.read(path, 4)
    solutions = _solutions(instructor)
    kept = [
        c
        for c in instructor.cells
        if c.cell_type == "code" and not {"exercise", student.INSTRUCTOR} & set(c.metadata.get("tags", []))
    ]
    for cell in kept:
        for exercise, solution in solutions.items():
            assert _shown_share(solution, _printed(cell)) < _ANSWER_SHOWN, (exercise, cell.source[:200])


def test_the_answer_test_sees_an_answer_printed():
    solution = _solutions(nbformat.read(ROOT / "notebooks" / "11_applications.ipynb", 4))["11.digit-rank"]
    package = inspect.getsource(onesweep.warp_digit_rank)
    assert _shown_share(solution, package) > 0.8 > _ANSWER_SHOWN
    assert _shown_share(solution, inspect.getsource(onesweep.tile_items)) < 0.1
    displayed = nbformat.v4.new_code_cell(
        "inspect.getsource(apps.onesweep.warp_digit_rank)",
        outputs=[nbformat.v4.new_output("execute_result", {"text/plain": repr(package)}, execution_count=1)],
    )
    assert _shown_share(solution, _printed(displayed)) > 0.8  # shown as the cell's value, not printed


def test_the_simulator_notice_is_no_error_in_a_notebook():
    """In a notebook's kernel (its stdout is ipykernel's) the import notice goes to stdout: stderr shows red."""
    program = (
        "import io, sys\n"
        "class OutStream(io.StringIO):\n"
        "    pass\n"
        "OutStream.__module__ = 'ipykernel.iostream'\n"
        "sys.stdout = OutStream()\n"
        "import prefixsum\n"
        "sys.__stdout__.write(sys.stdout.getvalue())\n"
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True)
    assert "prefixsum: running on the CUDA simulator" in done.stdout
    assert "running on the CUDA simulator" not in done.stderr


def test_every_result_a_chapter_quotes_goes_into_the_wheel():
    quoted = {
        name
        for source in (ROOT / "notebooks" / "sources").glob("[0-9][0-9]_*.py")
        for name in _QUOTED.findall(source.read_text())
    }
    assert quoted
    shipped = {name for name in quoted if any(fnmatch.fnmatch(name, pattern) for pattern in _setup_results())}
    assert shipped == quoted
    assert all((ROOT / "benchmarks" / name).is_file() for name in quoted)


def test_results_are_found_in_the_installed_package_outside_a_checkout(tmp_path, monkeypatch):
    installed = tmp_path / "site" / "data"
    installed.mkdir(parents=True)
    (installed / "tiny.csv").write_text("n,median_us\n1,2.5\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(results, "_REPO", tmp_path / "no checkout")
    monkeypatch.setattr(results, "_INSTALLED", installed)
    assert results.value("tiny.csv", "median_us", n=1) == 2.5
    with pytest.raises(FileNotFoundError, match="'absent.csv'"):
        results.path("absent.csv")


def test_a_lead_in_to_a_left_out_cell_goes_with_it():
    assert student.without_lead_in("Some prose.\n\nThe package's two loops, for comparison:") == "Some prose."
    assert (
        student.without_lead_in("A long paragraph that ends by pointing at\nthe package's code here:")
        == "A long paragraph that ends by pointing at\nthe package's code here."
    )
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("The package's loop, for comparison:"),
            nbformat.v4.new_code_cell("print(1)", metadata={"tags": ["instructor"]}),
            nbformat.v4.new_markdown_cell("Next section."),
        ]
    )
    assert [c.source for c in student.student_version(notebook).cells] == ["Next section."]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_students_version_keeps_a_lead_in_without_its_cell(path):
    cells = student.student_version(nbformat.read(path, 4)).cells
    orphans = [
        c.source.rstrip()[-80:]
        for c, after in zip(cells, cells[1:] + [None])
        if c.cell_type == "markdown" and student.lead_in(c.source) and (after is None or after.cell_type != "code")
    ]
    assert orphans == [], path.name
