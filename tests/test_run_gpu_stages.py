"""Every stage of benchmarks/run_gpu.sh in its quick mode, on the simulator, so that a stage cannot
rot unseen between the GPU runs (issue 46: ``sanitize_tridiag`` crashed at HEAD on an attribute
that had gone, and its committed output described code that no longer existed).

The stages are read from the script's ``STAGES``: a new stage is covered without editing this file.
Each runs as ``QUICK=1 bash benchmarks/run_gpu.sh STAGE`` with this interpreter; the script itself
fails a stage whose command fails or that leaves one of its files unwritten. A benchmark row is
``correct`` only where a check ran: no row a stage writes is wrong, and a row without a check says
so with an empty ``correct``.
"""

import csv
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "run_gpu.sh"


def stages(text=None):
    """The names in run_gpu.sh's ``STAGES=(...)``, in its order."""
    text = SCRIPT.read_text() if text is None else text
    return re.search(r"^STAGES=\(([^)]*)\)", text, re.MULTILINE).group(1).split()


def outputs(stage, text=None):
    """The files run_gpu.sh's ``OUTPUTS`` names for ``stage``."""
    text = SCRIPT.read_text() if text is None else text
    return re.search(rf'^\s*\[{re.escape(stage)}\]="([^"]*)"', text, re.MULTILINE).group(1).split()


SLOW = {"notebooks", "grading"}
"""Stages that take minutes even quick (every notebook under nbval; the grader on a class): the
heavy tier, which CI runs."""


def quick_stage(stage, out):
    """``QUICK=1 bash benchmarks/run_gpu.sh STAGE`` with this interpreter, on the simulator."""
    env = {**os.environ, "QUICK": "1", "OUT": str(out), "PYTHON": sys.executable, "NUMBA_ENABLE_CUDASIM": "1"}
    return subprocess.run(["bash", str(SCRIPT), stage], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)


def test_the_stages_are_read_from_the_script():
    found = stages()
    assert {"scans", "sanitize_tridiag", "scan_calls", "notebooks"} <= set(found)
    assert stages('STAGES=(a b_c)\ndeclare -A OUTPUTS=(\n  [a]="x.csv"\n)') == ["a", "b_c"]
    assert all(outputs(stage) for stage in found)


def check_stage(stage, out):
    """Run ``stage`` quick into ``out``: it passes, writes every file it names, and no row is wrong."""
    run = quick_stage(stage, out)
    assert run.returncode == 0, f"stage {stage}:\n" + run.stdout[-4000:] + run.stderr[-4000:]
    for name in outputs(stage):
        path = out / name
        assert path.stat().st_size, f"stage {stage} wrote an empty {name}"
        lines = path.read_text().splitlines() if name.endswith(".txt") else []
        if lines[:1] == ["quick: no compute-sanitizer"]:  # run_gpu.sh's sanitize(): then the script's last line
            assert len(lines) == 2 and lines[1].startswith("all results right"), f"stage {stage}: {lines}"
        if name.endswith(".csv"):
            with open(path, newline="") as handle:
                rows = list(csv.DictReader(handle))
            wrong = [row for row in rows if row.get("correct") == "False"]
            assert not wrong, f"stage {stage}: wrong rows in {name}: {wrong[:3]}"


def stage_class(stage):
    """A test class of its own for ``stage``: CI's ``--dist loadscope`` spreads classes over the
    workers, where the parameters of one test function would all run on one worker in turn."""

    @(pytest.mark.heavy if stage in SLOW else pytest.mark.slow)
    def test_runs_quick_on_the_simulator(self, tmp_path):
        check_stage(stage, tmp_path)

    return type(
        f"TestStage_{stage}",
        (),
        {
            "test_runs_quick_on_the_simulator": test_runs_quick_on_the_simulator,
            "__doc__": f"run_gpu.sh's stage {stage}, quick, on the simulator.",
        },
    )


for _stage in stages():
    globals()[f"TestStage_{_stage}"] = stage_class(_stage)


@pytest.mark.slow
def test_scan_calls_leaves_correct_empty_where_no_check_ran(tmp_path):
    """An idle synchronize and the pieces of a call check nothing: their ``correct`` is empty, where
    every row that times a scan says True (it was checked)."""
    run = subprocess.run(
        [sys.executable, "benchmarks/scan_calls.py", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with open(tmp_path / "scan_calls.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    unchecked = {row["variant"] for row in rows if row["correct"] == ""}
    checked = {row["variant"] for row in rows if row["correct"] == "True"}
    assert {"cuda.synchronize() idle", "cuda.default_stream().synchronize() idle"} <= unchecked
    assert {"ps.scan + cuda.synchronize", "lookback.run alone (host)"} <= checked
    assert unchecked | checked == {row["variant"] for row in rows}


def test_a_row_without_a_check_is_neither_right_nor_wrong(capsys):
    from prefixsum.cli.results import report_wrong

    rows = [
        {"v": "idle", "correct": None},
        {"v": "read back", "correct": ""},
        {"v": "ok", "correct": True},
        {"v": "bad", "correct": False},
    ]
    assert report_wrong(rows, lambda row: row["v"]) == 1
    assert capsys.readouterr().out == "WRONG: bad\n"
    assert report_wrong(rows[:3], lambda row: row["v"]) == 0
