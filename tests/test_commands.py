"""Smoke tests of what the README tells a user to type: each command exits 0 and prints what it
promises, and the README's Python sample runs.

Where another test file already runs a command as typed, this one does not run it again:
``python -m prefixsum ptx`` is tests/test_ptx.py's (``ptx_command``, once per session),
``python -m prefixsum demo -n 100 --algorithm folding`` tests/test_demo.py's and
``python -m prefixsum grade --help`` tests/test_grade.py's. ``python -m prefixsum`` itself, every
registered scan, op and dtype at n = 1000, is the README's first command, typed before the tests,
and CI's first stage (.ci/run), outside the checkout: it exits 1 when a row fails
(tests/test_demo.py), which stops CI.
"""

import argparse
import pathlib
import re
import subprocess
import sys

import nbformat
import pytest

from prefixsum.cli import main as cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def python_m_prefixsum(*args, timeout=600):
    child = subprocess.run([sys.executable, "-m", "prefixsum", *args], capture_output=True, text=True, timeout=timeout)
    assert child.returncode == 0, (
        f"python -m prefixsum {' '.join(args)} exited {child.returncode}:\n{child.stdout[-3000:]}{child.stderr[-3000:]}"
    )
    return child.stdout


def test_the_readme_documents_every_command_and_no_other():
    first_cells = [line.split("|")[1] for line in README.splitlines() if line.startswith("| `python -m prefixsum")]
    documented = {name for cell in first_cells for name in re.findall(r"`python -m prefixsum ?(\w*)", cell)}
    parser = cli._parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    assert documented == {""} | set(commands.choices), "the README's table of commands against python -m prefixsum's"


@pytest.mark.slow  # every scan timed at a few tiny sizes: the script's whole path on the simulator
def test_bench_quick_runs_every_scan_on_the_simulator(tmp_path):
    csv = tmp_path / "scan_throughput.csv"
    out = python_m_prefixsum("bench", "--quick", "--csv", str(csv))
    rows = csv.read_text().splitlines()
    for name in ("ladder", "blelloch", "lookback"):
        assert any(row.startswith(name + ",") for row in rows), f"no row of {name} in {csv.name}:\n{out}"


def test_student_writes_a_version_without_solutions(tmp_path):
    out = python_m_prefixsum("student", str(ROOT / "notebooks" / "01_ladder.ipynb"), "--out", str(tmp_path))
    written = tmp_path / "01_ladder.ipynb"
    assert f"wrote {written}" in out
    cells = nbformat.read(written, 4).cells
    assert any("NotImplementedError" in cell.source for cell in cells)
    assert not any(cell.get("outputs") for cell in cells if cell.cell_type == "code")


def test_the_readme_python_sample_runs():
    (sample,) = re.findall(r"```python\n(.*?)```", README, re.S)
    namespace = {}
    exec(compile(sample, "README.md", "exec"), namespace)
    assert namespace["ps"].exclusive_scan(namespace["x"]).tolist() == [0, 3, 5, 6, 8, 9, 13, 16, 18, 22]
