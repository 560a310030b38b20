"""Student versions: solutions stripped, outputs cleared, and the notebook still runs.

Every chapter is turned into its student version and executed top to bottom on the simulator, in
the folder it was written to, outside the checkout: no cell may fail, and every check cell must
report the missing exercise.
"""
import ast
import fnmatch
import pathlib
import re

import nbformat
import pytest
from nbclient import NotebookClient

from prefixsum import student
from prefixsum.cli import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(ROOT.joinpath("notebooks").glob("[0-9][0-9]_*.ipynb"))
WITH_EXERCISES = [p for p in NOTEBOOKS if any("exercise" in c.metadata.get("tags", []) for c in nbformat.read(p, 4).cells)]

# a result's name where a chapter reads it: results.read("x.csv"), results.value("x.csv", ...), results.path(...)
_QUOTED = re.compile(r"""results\.(?:read|value|path)\(\s*["']([^"']+)["']""")


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
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
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
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    checks = [c for c in notebook.cells if "check" in c.metadata.get("tags", [])]
    assert bool(checks) == (path in WITH_EXERCISES)
    for cell in checks:
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert "FAIL" in text and "NotImplementedError: Exercise:" in text, text


def test_every_result_a_chapter_quotes_goes_into_the_wheel():
    quoted = {name for source in (ROOT / "notebooks" / "sources").glob("[0-9][0-9]_*.py")
              for name in _QUOTED.findall(source.read_text())}
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
    assert student.without_lead_in("A long paragraph that ends by pointing at\nthe package's code here:") == \
        "A long paragraph that ends by pointing at\nthe package's code here."
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("The package's loop, for comparison:"),
        nbformat.v4.new_code_cell("print(1)", metadata={"tags": ["instructor"]}),
        nbformat.v4.new_markdown_cell("Next section."),
    ])
    assert [c.source for c in student.student_version(notebook).cells] == ["Next section."]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_students_version_keeps_a_lead_in_without_its_cell(path):
    cells = student.student_version(nbformat.read(path, 4)).cells
    orphans = [c.source.rstrip()[-80:] for c, after in zip(cells, cells[1:] + [None])
               if c.cell_type == "markdown" and student.lead_in(c.source) and (after is None or after.cell_type != "code")]
    assert orphans == [], path.name
