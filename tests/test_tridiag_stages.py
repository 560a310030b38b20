"""The tridiagonal stages of benchmarks/run_gpu.sh in their quick mode, on the simulator, so that
a stage cannot rot unseen between the GPU runs (issue 46: ``sanitize_tridiag`` crashed at HEAD
on an attribute that had gone from :mod:`prefixsum.tridiag.transfers`)."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def quick_stage(stage, out):
    """``QUICK=1 bash benchmarks/run_gpu.sh STAGE`` with this interpreter, on the simulator."""
    env = {**os.environ, "QUICK": "1", "OUT": str(out), "PYTHON": sys.executable, "NUMBA_ENABLE_CUDASIM": "1"}
    return subprocess.run(["bash", "benchmarks/run_gpu.sh", stage], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)


def test_the_sanitize_tridiag_stage_runs_its_script_quick(tmp_path):
    run = quick_stage("sanitize_tridiag", tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    written = (tmp_path / "sanitize_tridiag.txt").read_text().splitlines()
    assert written == ["quick: no compute-sanitizer", "all results right on CUDA simulator (numba)"]
