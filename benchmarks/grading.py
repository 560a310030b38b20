"""Grade 40 mixed submissions of chapter 01 with ``python -m prefixsum grade --workers 2``; time it,
in the bubblewrap sandbox and without it (``--unsafe-no-sandbox``), one run after the other.

The class: correct solutions, blanks, two kinds of wrong answers, forged checks, edited stored
outputs, kernels that never return and a corrupt file, built from the real notebook. The grader
runs as a teacher runs it (its own process, the default limits, ``--timeout``), and every
submission's status is checked against what it should be before the time counts.

The machine is shared: the CSV records the load average before and during the run and the
grader's CPU time, beside the wall-clock time per submission.

The runs alternate in ABBA order (sandbox, none, none, sandbox with ``--repeat 2``; the
``order`` column numbers them), so that a load that rises or falls steadily falls on both arms
alike. ``cpu_s_per_submission`` counts the processes the grader waits for: inside bubblewrap's PID
namespace they are reaped there, so that column does not compare the two arms.

    python benchmarks/grading.py [--timeout 20] [--repeat 1] [--scale 1] [--out benchmarks/grading.csv]
    python benchmarks/grading.py --quick     one right answer, one wrong, one corrupt file: tests the script
"""

import argparse
import collections
import csv
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import nbformat

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prefixsum.classroom.student import student_version  # noqa: E402
from prefixsum.cli.metadata import run_metadata  # noqa: E402  (after the path: this checkout's package)
from prefixsum.cli.results import print_table, write_csv  # noqa: E402

LADDER = ROOT / "notebooks" / "01_ladder.ipynb"
SOLUTION = "rungs[t] += rungs[(t & ~(phase - 1)) - 1]"
EXERCISE = "01.ladder-step"  # the one the mix changes; the chapter's others stay blank (not-attempted)
FORGERY = "\nimport prefixsum as ps\nps.check.tiled = lambda *a, **k: 'PASS my_ladder_tile: 11 sizes from 1 to 2049'\n"


def _cell(notebook, tag):
    return next(
        c for c in notebook.cells if tag in c.metadata.get("tags", []) and c.metadata.get("exercise_id") == EXERCISE
    )


def _exercise(notebook):
    return _cell(notebook, "exercise")


def _with(replace=None, append=""):
    instructor = nbformat.read(LADDER, as_version=4)
    notebook = student_version(instructor, chapter="01_ladder")
    source = _exercise(instructor).source
    _exercise(notebook).source = (source.replace(SOLUTION, replace) if replace else source) + append
    return notebook


def _edited_outputs():
    notebook = _with()
    check = _cell(notebook, "check")
    check.outputs = [nbformat.v4.new_output("stream", name="stdout", text="FAIL edited\n")]
    return notebook


# kind: (how many, build, expected status)
MIX = {
    "solution": (12, _with, "pass"),
    "blank": (8, lambda: student_version(nbformat.read(LADDER, as_version=4), chapter="01_ladder"), "not-attempted"),
    "off by one": (6, lambda: _with("rungs[t] += rungs[(t & ~(phase - 1))]"), "fail"),
    "one-buffer race": (5, lambda: _with("rungs[t] += rungs[t - phase]"), "fail"),
    "forged check": (3, lambda: _with("rungs[t] += rungs[t - phase]", FORGERY), "invalid"),
    "edited outputs": (3, _edited_outputs, "pass"),
    "kernel never returns": (
        2,
        lambda: _with("k = 0\n            while k >= 0:\n                k = (k + 1) % 7"),
        "timeout",
    ),
    "corrupt file": (1, None, "invalid"),
}


QUICK_KINDS = ("solution", "off by one", "corrupt file")
"""The kinds ``--quick`` grades, one submission each: a pass, a fail and an invalid file, the three
ways a row is made (the sandbox's verdict, the judge's, the screening's)."""


def build(folder, scale=1.0, kinds=tuple(MIX)):
    """Write the 40 submissions (``scale`` times each kind's count, at least one; of ``kinds`` only),
    one folder each; return ``{submission: expected status}``."""
    expected = {}
    for kind, (count, make, status) in MIX.items():
        if kind not in kinds:
            continue
        for k in range(max(1, round(count * scale))):
            name = f"{kind.replace(' ', '_')}_{k:02d}"
            (folder / name).mkdir(parents=True)
            if make is None:
                (folder / name / "01_ladder.ipynb").write_text('{"cells": [')
            else:
                nbformat.write(make(), folder / name / "01_ladder.ipynb")
            expected[name] = status
    return expected


class LoadSampler(threading.Thread):
    """The 1-minute load average every few seconds while the grader runs."""

    def __init__(self, every=5.0):
        super().__init__(daemon=True)
        self.every, self.samples, self.stop = every, [], threading.Event()

    def run(self):
        while not self.stop.wait(self.every):
            self.samples.append(os.getloadavg()[0])


def grade_once(folder, expected, args, sandboxed):
    """Grade the class once; return the CSV row (statuses checked before the time counts)."""
    out = folder / ("grades-sandbox" if sandboxed else "grades-none")
    command = [
        sys.executable,
        "-m",
        "prefixsum",
        "grade",
        str(folder / "submissions"),
        "--out",
        str(out),
        "--instructor",
        str(LADDER),
        "--workers",
        str(args.workers),
        "--timeout",
        f"{args.timeout:g}",
        "--quiet",
    ]
    if not sandboxed:
        command.append("--unsafe-no-sandbox")
    load_before = os.getloadavg()[0]
    sampler = LoadSampler()
    sampler.start()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    finished = subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    wall = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler.stop.set()
    if finished.returncode != 0:
        raise SystemExit(f"the grader failed ({finished.returncode}):\n{finished.stderr[-3000:]}")
    with open(out / "grades.csv") as handle:
        rows = list(csv.DictReader(handle))
    shutil.rmtree(out)
    # each submission's status on EXERCISE (a corrupt file has one row, of no exercise)
    graded = {row["submission"]: row["status"] for row in rows if row["exercise"] in (EXERCISE, "")}
    wrong = {name: (graded.get(name), status) for name, status in expected.items() if graded.get(name) != status}
    if wrong:
        raise SystemExit(f"statuses differ from the expected ones (got, expected): {wrong}")
    counts = collections.Counter(graded.values())
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    during = sampler.samples or [os.getloadavg()[0]]
    return {
        "sandbox": "bwrap" if sandboxed else "none",
        "submissions": len(expected),
        "workers": args.workers,
        "timeout_s": args.timeout,
        "cores": os.cpu_count(),
        "wall_s": round(wall, 1),
        "s_per_submission": round(wall / len(expected), 2),
        "cpu_s_per_submission": round(cpu / len(expected), 2),
        "load_1min_before": round(load_before, 2),
        "load_1min_mean_during": round(sum(during) / len(during), 2),
        "load_1min_max_during": round(max(during), 2),
        **{
            f"n_{status}": counts.get(status, 0)
            for status in ("pass", "fail", "not-attempted", "timeout", "tampered", "invalid")
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=20.0, help="the grader's --timeout (default 20)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="pairs of runs, in ABBA order (default 1)")
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="each kind of submission this many times its count (default 1: 40 submissions)",
    )
    parser.add_argument("--quick", action="store_true", help=f"one submission of each of {', '.join(QUICK_KINDS)}")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "grading.csv"))
    args = parser.parse_args(argv)
    meta = run_metadata()
    table = []
    with tempfile.TemporaryDirectory(prefix="prefixsum-grading-bench-") as tmp:
        folder = pathlib.Path(tmp)
        kinds = QUICK_KINDS if args.quick else tuple(MIX)
        expected = build(folder / "submissions", 0 if args.quick else args.scale, kinds)
        for pair in range(args.repeat):
            for sandboxed in (True, False) if pair % 2 == 0 else (False, True):
                table.append({"order": len(table) + 1, **grade_once(folder, expected, args, sandboxed), **meta})
    write_csv(table, args.out)
    print_table(
        table,
        [
            "order",
            "sandbox",
            "submissions",
            "workers",
            "wall_s",
            "s_per_submission",
            "cpu_s_per_submission",
            "load_1min_before",
            "load_1min_mean_during",
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
