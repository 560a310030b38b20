"""``.ci/kernel_deaths.py``: which notebooks CI runs again after nbval, from nbval's JUnit report."""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DIED = 'failed on setup with "RuntimeError: Kernel died before replying to kernel_info"'


def _report(tmp_path, cases):
    """A JUnit report of ``cases``: ``(notebook, cell, error message or None)``."""
    rows = "".join(
        f'<testcase classname="notebooks.{notebook}" name="Cell {cell}">'
        + ("" if message is None else f'<error message="{message.replace(chr(34), "&quot;")}">trace</error>')
        + "</testcase>"
        for notebook, cell, message in cases
    )
    path = tmp_path / "nbval.xml"
    path.write_text(f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite>{rows}</testsuite></testsuites>')
    return path


def _run(path):
    return subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "kernel_deaths.py"), str(path)], capture_output=True, text=True
    )


def test_the_notebooks_whose_kernel_died_at_start_are_named_once_each(tmp_path):
    finished = _run(
        _report(
            tmp_path,
            [
                ("01_ladder.ipynb", 0, None),
                ("11_applications.ipynb", 0, DIED),
                ("11_applications.ipynb", 1, DIED),
                ("09_householder.ipynb", 0, DIED),
            ],
        )
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == ["notebooks/09_householder.ipynb", "notebooks/11_applications.ipynb"]


@pytest.mark.parametrize(
    "cases",
    [
        [("11_applications.ipynb", 0, DIED), ("01_ladder.ipynb", 4, "Cell outputs differ")],
        [("01_ladder.ipynb", 0, None)],
    ],
    ids=["another_failure", "no_failure_reported"],
)
def test_any_other_failure_stops_ci(tmp_path, cases):
    finished = _run(_report(tmp_path, cases))
    assert finished.returncode == 1 and not finished.stdout
    assert "another reason" in finished.stderr


def test_ci_runs_nbval_with_a_report_and_the_script_after_it():
    script = (ROOT / ".ci" / "run").read_text()
    assert '--junitxml="$junit" notebooks' in script and '.ci/kernel_deaths.py "$junit"' in script


def test_the_gpu_stage_runs_a_notebook_again_when_its_kernel_died(tmp_path, monkeypatch):
    """benchmarks/notebooks_gpu.py applies the same rule: the dead notebook alone, a second time,
    its cells from the second run; the report names it."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import notebooks_gpu

    runs = []

    def fake_nbval(paths, workers, junit, simulator=False):
        runs.append(([pathlib.Path(p).name for p in paths], workers))
        first = len(runs) == 1
        cases = (
            [("01_ladder.ipynb", 0, None), ("04_blelloch_large.ipynb", 0, DIED), ("04_blelloch_large.ipynb", 1, DIED)]
            if first
            else [("04_blelloch_large.ipynb", 0, None), ("04_blelloch_large.ipynb", 1, None)]
        )
        pathlib.Path(junit).write_text(_report(tmp_path, cases).read_text())
        return 1 if first else 0

    monkeypatch.setattr(notebooks_gpu, "run_nbval", fake_nbval)
    paths = [ROOT / "notebooks" / "01_ladder.ipynb", ROOT / "notebooks" / "04_blelloch_large.ipynb"]
    status, cells, rerun = notebooks_gpu.nbval_run(paths, 11, tmp_path / "run.xml")
    assert runs == [(["01_ladder.ipynb", "04_blelloch_large.ipynb"], 11), (["04_blelloch_large.ipynb"], 1)]
    assert status == 0 and rerun == ["04_blelloch_large.ipynb"]
    assert sorted((name, outcome) for name, _, outcome, _ in cells) == [
        ("01_ladder.ipynb::Cell 0", "passed"),
        ("04_blelloch_large.ipynb::Cell 0", "passed"),
        ("04_blelloch_large.ipynb::Cell 1", "passed"),
    ]
