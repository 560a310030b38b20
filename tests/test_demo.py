"""``python -m prefixsum``: the table, its verdict, and the same rows whether worker processes share them."""

import subprocess
import sys

import numpy as np

from prefixsum.cli import demo


def table(**kw):
    lines = []
    status = demo.main(n=300, algorithms=["ladder"], out=lines.append, **kw)
    return status, lines


def test_every_op_and_dtype_passes_in_order():
    status, lines = table()
    assert status == 0
    rows = lines[1:-1]
    assert len(rows) == 4 * 6 and all(" PASS " in row for row in rows)
    assert [row.split()[2:4] for row in rows[:7]] == [
        ["add", d] for d in ("int32", "uint32", "int64", "uint64", "float32", "float64")
    ] + [["mul", "int32"]]
    assert lines[-1] == "all passed on simulator"


def test_worker_processes_give_the_same_table():
    _, alone = table()
    _, shared = table(workers=2)
    strip = lambda lines: [line.rsplit(None, 1)[0] if "PASS" in line else line for line in lines]  # noqa: E731  (times differ)
    assert strip(shared[:-1]) == strip(alone[:-1])
    assert shared[-1] == "all passed on simulator (2 worker processes)"


def test_a_wrong_algorithm_fails_the_command(monkeypatch):
    ladder = demo.ps.ALGORITHMS["ladder"]

    def off_by_one(x, out, op, inclusive, reverse, **options):
        ladder.run(x, out, op, inclusive, reverse, **options)
        wrong = out[5:6].copy_to_host()
        with np.errstate(over="ignore"):
            out[5:6] = wrong + wrong.dtype.type(1)  # off by one: exact for integers, far past any float tolerance

    fake = type(ladder)(**{**ladder.__dict__, "run": off_by_one})
    monkeypatch.setitem(demo.ps.ALGORITHMS._items, "ladder", fake)
    status, lines = table()
    assert status == 1
    assert all(" FAIL " in row and "wrong, first at index 5" in row for row in lines[1:-1])
    assert lines[-1] == "24 FAILED on simulator"


def test_the_command_line_exits_with_the_verdict():
    child = subprocess.run(
        [sys.executable, "-m", "prefixsum", "demo", "-n", "100", "--algorithm", "folding"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stdout + child.stderr
    assert child.stdout.count(" PASS ") == 24
