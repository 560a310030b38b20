"""Every notebook under nbval on this machine's device and on the simulator, then every chapter's students' version.

Run by ``bash benchmarks/run_gpu.sh notebooks`` on the GPU machine (nbval and the Jupyter kernel it drives come from
``benchmarks/device_wheels.sh --nbval``). The report (``nbval_gpu.txt``) records the GPU and versions, the command,
nbval's pass / fail count with every failing cell, the slowest cells beside the same cells run on the simulator on the
same host, and for each chapter's students' version (``python -m prefixsum student``) whether every cell but the
exercises and checks ran and every check reported the missing exercise, as on the simulator.

    python benchmarks/notebooks_gpu.py --out nbval_gpu.txt [--workers 11] [--quick]

``--quick`` runs :data:`QUICK_CHAPTER` alone (to test the script, on the simulator too).
"""

import argparse
import concurrent.futures
import importlib.util
import multiprocessing
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
sys.path.insert(0, str(ROOT))
_spec = importlib.util.spec_from_file_location("kernel_deaths", ROOT / ".ci" / "kernel_deaths.py")
kernel_deaths = importlib.util.module_from_spec(_spec)  # CI's rule for a Jupyter kernel that died at start
_spec.loader.exec_module(kernel_deaths)
QUICK_CHAPTER = "03_"
"""The chapter ``--quick`` runs: one chapter takes every path of this script (nbval, the report,
a students' version), and chapter 03's take the least time on the simulator (17 s under nbval on
two busy cores, against 35 s for chapters 01 and 10); CI runs every notebook under nbval."""


def run_nbval(paths, workers, junit, simulator=False):
    """nbval over ``paths`` with the project's options, in ``workers`` processes; its exit status.

    ``simulator=True`` runs the same notebooks on the simulator (``NUMBA_ENABLE_CUDASIM=1``), on
    the same host, for the times of the same cells beside the GPU's.
    """
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:benchmark",
        "-q",
        f"--junitxml={junit}",
        # twelve kernels starting at once on a busy host may take over nbval's 60 s to answer
        "--nbval-cell-timeout=300",
        "--nbval-kernel-startup-timeout=300",
        *[str(p) for p in paths],
    ]
    if workers > 1:
        command[3:3] = ["-n", str(workers), "--dist", "loadfile"]
    from prefixsum.core.device import undecided_environment  # the notebooks choose the device themselves

    env = {**undecided_environment(), "PYTHONUNBUFFERED": "1"}
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    return subprocess.run(command, cwd=ROOT, env=env).returncode


def device_is_the_simulator():
    """Whether the notebooks, run as :func:`run_nbval` runs them for the device, land on the
    simulator (no usable GPU here): the simulator's run would then repeat that one."""
    from prefixsum.core.device import undecided_environment

    probe = "import prefixsum; print(prefixsum.device_info()['simulator'])"
    found = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=undecided_environment(), capture_output=True, text=True
    )
    return found.stdout.strip().splitlines()[-1:] == ["True"]


def nbval_run(paths, workers, junit, simulator=False):
    """:func:`run_nbval`, then, as CI does (``.ci/kernel_deaths.py``), the notebooks whose only
    failures are a Jupyter kernel that died at start run again, alone (no cell of theirs ran).

    Returns ``(status, cells, rerun)``: the exit status of the last run, every cell's
    :func:`cells_from_junit` row (a rerun notebook's from its rerun) and the rerun notebooks' names.
    """
    status = run_nbval(paths, workers, junit, simulator)
    cells = cells_from_junit(junit)
    died, other = kernel_deaths.classify(junit)
    if not died or other:
        return status, cells, []
    rerun = sorted(path.name for path in died)
    status = run_nbval([NOTEBOOKS / name for name in rerun], 1, junit, simulator)
    cells = [cell for cell in cells if cell[0].split("::")[0] not in rerun] + cells_from_junit(junit)
    return status, cells, rerun


def cells_from_junit(junit):
    """``[(name, seconds, outcome, message)]`` for every cell nbval ran, from pytest's JUnit XML."""
    cells = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            found = case.find(kind)
            if found is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[kind]
                message = (found.get("message") or found.text or "").strip().splitlines()[:1]
                message = message[0][:160] if message else ""
                break
        name = f"{case.get('classname', '').removeprefix('notebooks.')}::{case.get('name')}"
        cells.append((name, float(case.get("time", 0)), outcome, message))
    return cells


def students_version(path, folder):
    """``path``'s students' version, written to ``folder`` and executed here: ``(report line, ok)``."""
    import nbformat
    from nbclient import NotebookClient

    from prefixsum.classroom import student

    (written,) = student.write_student_versions([path], pathlib.Path(folder))
    start = time.perf_counter()
    retried = ""
    for attempt in range(2):
        notebook = nbformat.read(written, 4)
        try:
            NotebookClient(
                notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
            ).execute()
            error = ""
        except Exception as failure:  # a cell outside the exercises raised: the report names it
            error = f"{type(failure).__name__}: {str(failure).strip().splitlines()[-1][:160]}"
            # Eleven Jupyter kernels starting at once now and then pick the same free port and one
            # dies before it answers: no cell ran, so the notebook is run again, and the line says so.
            if attempt == 0 and kernel_deaths.DIED in error:
                retried = " (its kernel died at start: run again)"
                continue
        break
    checks = [c for c in notebook.cells if "check" in c.metadata.get("tags", [])]
    # a check of an exercise left as its raise says NOT ATTEMPTED and quotes the exercise, as
    # tests/test_student.py expects
    reported = sum(
        "NOT ATTEMPTED" in text and "FAIL" not in text and "Exercise:" in text
        for text in ("".join(o.get("text", "") for o in c.get("outputs", [])) for c in checks)
    )
    ran = sum(1 for c in notebook.cells if c.cell_type == "code" and c.get("execution_count"))
    code = sum(1 for c in notebook.cells if c.cell_type == "code")
    ok = not error and reported == len(checks)
    return (
        f"{path.stem}: {ran}/{code} code cells ran, {reported}/{len(checks)} checks report the missing "
        f"exercise, {time.perf_counter() - start:.1f} s{retried}{'' if ok else '  FAILED ' + error}"
    ), ok


def students_versions(paths, workers):
    """Each chapter's students' version, executed here, ``workers`` at a time: ``[(report line, ok)]``."""
    context = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory() as folder,
        concurrent.futures.ProcessPoolExecutor(max(1, min(workers, len(paths))), mp_context=context) as pool,
    ):
        return list(pool.map(students_version, paths, [folder] * len(paths)))


def environment():
    """The device and the versions, as every benchmark file records them."""
    from prefixsum.cli.metadata import run_metadata

    meta = run_metadata(libraries=("nbval", "ipykernel", "jupyter_client"), command="")
    keys = (
        "device",
        "cc",
        "driver",
        "cuda",
        "cpu",
        "date",
        "python",
        "numpy",
        "numba",
        "numba_cuda",
        "nbval",
        "ipykernel",
        "jupyter_client",
    )
    return ", ".join(f"{key} {meta[key]}" for key in keys)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--workers", type=int, default=max(1, min(11, (os.cpu_count() or 2) - 2)))
    parser.add_argument("--quick", action="store_true", help=f"chapter {QUICK_CHAPTER[:2]} alone")
    args = parser.parse_args(argv)
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if args.quick:
        paths = [p for p in paths if p.name.startswith(QUICK_CHAPTER)]
    seconds = {}
    with tempfile.TemporaryDirectory() as folder:
        junit = pathlib.Path(folder) / "nbval.xml"
        start = time.perf_counter()
        status, cells, rerun = nbval_run(paths, args.workers, junit)
        seconds["device"] = time.perf_counter() - start
        on_simulator = device_is_the_simulator()
        start = time.perf_counter()
        if on_simulator:  # the device's run was the simulator's
            simulator_status, simulated_cells, simulator_rerun = status, cells, rerun
        else:
            simulator_status, simulated_cells, simulator_rerun = nbval_run(paths, args.workers, junit, simulator=True)
        seconds["simulator"] = time.perf_counter() - start
        simulated = {name: (time_, outcome) for name, time_, outcome, _ in simulated_cells}
    students = students_versions([p for p in paths if not p.name.startswith("00_")], args.workers)
    counts = {kind: sum(1 for c in cells if c[2] == kind) for kind in ("passed", "failed", "error", "skipped")}
    lines = [
        "# Every notebook under nbval on this device and on the simulator, then every chapter's students' version",
        f"# {environment()}",
        f"# command: {shlex.join(['python', 'benchmarks/notebooks_gpu.py', *(sys.argv[1:] if argv is None else argv)])}"
        f" (nbval with the project's options, {args.workers} workers)",
        f"nbval: {len(paths)} notebooks, {len(cells)} cells in {seconds['device']:.0f} s: "
        f"{counts['passed']} passed, {counts['failed'] + counts['error']} failed, {counts['skipped']} skipped "
        f"(pytest exit status {status})",
    ]
    lines += [f"  FAILED {name}: {message}" for name, _, outcome, message in cells if outcome in ("failed", "error")]
    lines += [f"  run again, alone, its Jupyter kernel having died at start: {name}" for name in rerun]
    simulator_failed = sum(outcome in ("failed", "error") for _, outcome in simulated.values())
    if on_simulator:
        lines.append("the same notebooks on the simulator: the run above (this host has no usable GPU)")
    else:
        lines.append(
            f"the same notebooks on the simulator, same host: {len(simulated)} cells in "
            f"{seconds['simulator']:.0f} s, {simulator_failed} failed (pytest exit status {simulator_status})"
            + "".join(f"; {name} run again, its kernel having died at start" for name in simulator_rerun)
        )
    lines.append(
        "the 10 slowest cells"
        + ("" if on_simulator else " on this device, beside the same cell on the simulator (same host)")
        + ":"
    )
    for name, time_, _, _ in sorted(cells, key=lambda c: -c[1])[:10]:
        there = simulated.get(name, (float("nan"), ""))[0]
        ratio = time_ / there if there else float("nan")
        beside = "" if on_simulator else f"  simulator {there:7.1f} s  ({ratio:.2f}x)"
        lines.append(f"  {time_:7.1f} s{beside}  {name}")
    lines.append("students' versions (python -m prefixsum student), executed on this device:")
    lines += [f"  {line}" for line, _ in students]
    passed = (
        status == 0
        and counts["failed"] + counts["error"] == 0
        and simulator_status == 0
        and all(ok for _, ok in students)
    )
    lines.append(f"verdict: {'every cell passed' if passed else 'FAILED'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
