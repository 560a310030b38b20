"""``.ci/kernel_deaths.py``: which notebooks CI runs again after nbval, from nbval's JUnit report."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DIED = 'failed on setup with "RuntimeError: Kernel died before replying to kernel_info"'


def _report(tmp_path, cases):
    """A JUnit report of ``cases``: ``(notebook, cell, error message or None)``."""
    rows = "".join(f'<testcase classname="notebooks.{notebook}" name="Cell {cell}">'
                   + ("" if message is None else f'<error message="{message.replace(chr(34), "&quot;")}">trace</error>')
                   + "</testcase>" for notebook, cell, message in cases)
    path = tmp_path / "nbval.xml"
    path.write_text(f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite>{rows}</testsuite></testsuites>')
    return path


def _run(path):
    return subprocess.run([sys.executable, str(ROOT / ".ci" / "kernel_deaths.py"), str(path)], capture_output=True, text=True)


def test_the_notebooks_whose_kernel_died_at_start_are_named_once_each(tmp_path):
    finished = _run(_report(tmp_path, [("01_ladder.ipynb", 0, None), ("11_applications.ipynb", 0, DIED),
                                       ("11_applications.ipynb", 1, DIED), ("09_householder.ipynb", 0, DIED)]))
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == ["notebooks/09_householder.ipynb", "notebooks/11_applications.ipynb"]


@pytest.mark.parametrize("cases", [
    [("11_applications.ipynb", 0, DIED), ("01_ladder.ipynb", 4, "Cell outputs differ")],
    [("01_ladder.ipynb", 0, None)],
], ids=["another_failure", "no_failure_reported"])
def test_any_other_failure_stops_ci(tmp_path, cases):
    finished = _run(_report(tmp_path, cases))
    assert finished.returncode == 1 and not finished.stdout
    assert "another reason" in finished.stderr


def test_ci_runs_nbval_with_a_report_and_the_script_after_it():
    script = (ROOT / ".ci" / "run").read_text()
    assert "--junitxml=\"$junit\" notebooks" in script and ".ci/kernel_deaths.py \"$junit\"" in script
