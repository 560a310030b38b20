"""benchmarks/tridiag.py's pivoting comparison, quick, on the simulator (every stage of run_gpu.sh
runs quick in tests/test_run_gpu_stages.py; this is the one option set its quick mode leaves out)."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_tridiag_benchmark_runs_the_pivoting_comparison_quick(tmp_path):
    """benchmarks/tridiag.py's pivoting comparison with its sweep, on one small case: every row of
    ours right, both families, every variant (the stage's own quick mode runs the full set, slower)."""
    run = subprocess.run(
        [
            sys.executable,
            "benchmarks/tridiag.py",
            "--quick",
            "--only-pivoting",
            "--sweep",
            "--case",
            "3x40",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    import csv

    with open(tmp_path / "tridiag.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    seen = {(row["method"], row["kind"], row["family"], row["dtype"]) for row in rows}
    for dtype in ("float32", "float64"):
        assert {
            ("hybrid", "ours (kernels)", "dominant", dtype),
            ("auto", "ours (kernels)", "indefinite", dtype),
            ("pivoting:pairs=4", "ours (kernels)", "indefinite", dtype),
            ("pivoting:one_thread", "ours (kernels)", "indefinite", dtype),
            ("auto", "ours (whole call)", "dominant", dtype),
        } <= seen
    assert all(row["correct"] == "True" for row in rows)
