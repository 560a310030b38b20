"""Grade one submitted notebook: nbval on the assembled notebook, and the grader's own re-check.

Each step runs in a fresh process under :mod:`.sandbox` limits, in a fresh temporary folder, on
the classroom simulator (whatever the machine has):

1. the allow-list (:mod:`.allowlist`, no process: it only parses);
2. ``trusted ptx``: the accepted kernels compiled to PTX;
3. ``trusted check``: the instructor's checks on the accepted cells, in the grader's process;
4. ``pytest --nbval`` on the assembled notebook (:func:`.chapters.assemble`), its verdict per
   cell read from the junit XML that pytest writes.

:func:`combine` turns the four into one status per exercise.
"""
import dataclasses
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ElementTree

import nbformat

from ...core.device import device_environment
from . import allowlist, sandbox
from .chapters import EXERCISE, InvalidSubmission, assemble, chapter_of, read_submission, submitted_sources, to_json, unsolved

STATUSES = ("pass", "fail", "not-attempted", "error", "timeout", "crashed", "tampered", "invalid")
_STARTUP_S = 90  # a fresh Python with numba, a Jupyter kernel, prefixsum: seconds before any exercise runs


@dataclasses.dataclass(frozen=True)
class Options:
    """How to grade: the time limit of one exercise, and the limits of every process."""

    timeout: float = 60.0
    limits: sandbox.Limits = sandbox.Limits()


@dataclasses.dataclass
class Row:
    """One line of grades.csv."""

    submission: str
    notebook: str
    exercise: str
    score: float
    max_score: float
    status: str
    message: str
    code: str = ""
    """The student's cell (for the feedback, not the CSV)."""


def _environment(folder):
    return {**os.environ, **device_environment(True, "the grader runs every submission on the classroom simulator"),
            "HOME": str(folder), "JUPYTER_RUNTIME_DIR": str(folder / ".jupyter"), "MPLBACKEND": "Agg",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def _trusted(mode, chapter, sources, options, folder, signatures=None):
    """Run :mod:`.trusted` in ``mode``; return ``({id: result}, Finished)``."""
    request, result = folder / f"{mode}-request.json", folder / f"{mode}-result.jsonl"
    request.write_text(json.dumps({"chapter": to_json(chapter), "sources": sources, "timeout": options.timeout,
                                   "signatures": signatures or {}}))
    env = _environment(folder)
    if mode == "ptx":
        env.update(device_environment(False, "the grader compiles the submitted kernels to PTX"))
    wall = _STARTUP_S + options.timeout * 2 * (len(sources) + 1)
    finished = sandbox.run([sys.executable, str(pathlib.Path(__file__).with_name("trusted.py")), mode, str(request), str(result)],
                           limits=options.limits, timeout=wall, cwd=folder, env=env)
    results = {}
    if result.exists():
        for line in result.read_text().splitlines():
            entry = json.loads(line)
            results[entry["id"]] = entry
    return results, finished


def instructor_signatures(chapter, options=Options()):
    """Check the instructor's solutions in the trusted process and record their kernels' signatures.

    Returns
    -------
    dict
        ``{exercise id: {kernel name: [signature, ...]}}``.

    Raises
    ------
    RuntimeError
        When an instructor's solution does not pass its own check there (the notebook's
        stored outputs or its ``setup`` tags are wrong, and no grade could be trusted).
    """
    with tempfile.TemporaryDirectory(prefix="prefixsum-instructor-") as folder:
        sources = {e.id: e.source for e in chapter.exercises}
        results, finished = _trusted("record", chapter, sources, options, pathlib.Path(folder))
    broken = [f"{i}: {results.get(i, {}).get('message') or 'no result'}" for i in sources if results.get(i, {}).get("status") != "pass"]
    if broken:
        raise RuntimeError(f"the instructor's solutions of {chapter.name} do not pass the grader's own check "
                           f"(are the needed cells tagged setup?): {'; '.join(broken)}; {finished.stderr[-2000:]}")
    return {i: results[i]["signatures"] for i in sources}


_CELL = re.compile(r"Cell (\d+)")
_ANSI = re.compile(r"#?x1B\[[0-9;]*m|\x1b\[[0-9;]*m")


def _junit(path):
    """``{cell number: (outcome, text)}`` from nbval's junit XML; outcome ``pass``/``fail``/``skip``."""
    cells = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        match = _CELL.fullmatch(case.get("name", ""))
        if not match:
            continue
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        if problem is not None:
            text = _ANSI.sub("", (problem.get("message") or "") + "\n" + (problem.text or ""))
            cells[int(match.group(1))] = ("fail", text)
        elif case.find("skipped") is not None:
            cells[int(match.group(1))] = ("skip", "")
        else:
            cells[int(match.group(1))] = ("pass", "")
    return cells


def _nbval(chapter, sources, options, folder):
    """Run nbval on the assembled notebook; ``({exercise id: (status, text)}, Finished)``.

    status: ``pass``, ``fail``, ``error`` (the exercise cell raised), ``timeout``, ``crashed``.
    """
    notebook, kinds = assemble(chapter, sources)
    folder.mkdir()
    path = folder / f"{chapter.name}.ipynb"
    nbformat.write(notebook, path)
    report = folder / "junit.xml"
    # Only nbval's plugin: loading every installed plugin costs seconds per submission.
    command = [sys.executable, "-m", "pytest", "-p", "nbval", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "--nbval", str(path),
               f"--nbval-cell-timeout={options.timeout:g}", f"--junitxml={report}", f"--rootdir={folder}"]
    if chapter.sanitize:
        (folder / "sanitize.cfg").write_text(chapter.sanitize)
        command.append(f"--nbval-sanitize-with={folder / 'sanitize.cfg'}")
    wall = _STARTUP_S + options.timeout * len(kinds)
    env = {**_environment(folder), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    finished = sandbox.run(command, limits=options.limits, timeout=wall, cwd=folder, env=env)
    cells = _junit(report) if report.exists() and not finished.timed_out else {}
    verdicts = {}
    for number, (kind, exercise_id) in enumerate(kinds):
        if exercise_id is None or verdicts.get(exercise_id, ("pass",))[0] != "pass":
            continue
        outcome, text = cells.get(number, (None, ""))
        if outcome is None:
            verdicts[exercise_id] = ("timeout" if finished.timed_out else "crashed", f"nbval ended (exit {finished.returncode}) before this cell")
        elif re.search(r"Timeout of [0-9.]+ seconds exceeded", text):
            verdicts[exercise_id] = ("timeout", f"stopped after {options.timeout:g} s")
        elif re.search(r"[Kk]ernel died|DeadKernelError|Kernel didn't respond", text):
            verdicts[exercise_id] = ("crashed", "the notebook's kernel died")
        elif outcome == "fail":
            verdicts[exercise_id] = ("error" if kind == EXERCISE else "fail", _last_error_line(text))
        else:
            verdicts[exercise_id] = ("pass", "")
    return verdicts, finished


def _last_error_line(text):
    lines = [line.strip() for line in text.splitlines() if re.match(r"\s*[A-Za-z_.]*(Error|Exception|Exit|Interrupt)\b", line)]
    return lines[-1][:300] if lines else ""


def combine(exercise, source, problems, ptx, trusted, nbval):
    """One exercise's ``(status, message)`` from every step's verdict (see the module's docstring).

    * not-attempted: no cell for it, or it still raises the students' ``NotImplementedError``
      (then nothing of it ran);
    * refused by the allow-list or the PTX compiler: ``tampered`` when nbval nonetheless passed
      the check (a forgery), else ``invalid``, with the reason;
    * ``timeout``, ``crashed``, ``error`` as the runs found them;
    * ``pass`` only when nbval and the trusted check both pass; ``fail`` when both fail (the
      checker's diagnosis); any other disagreement is ``tampered``.
    """
    nbval_status, nbval_text = nbval
    if source is None:
        return "not-attempted", "no cell of this exercise in the submission"
    if unsolved(source, exercise):
        return "not-attempted", f"still raises NotImplementedError: {exercise.todo}"
    if problems and problems[0].startswith("syntax error"):
        return "error", problems[0]
    refused = "; ".join(problems) or (ptx.get("message") if ptx.get("status") == "rejected" else "")
    if refused:
        if nbval_status == "pass":
            return "tampered", f"the notebook's check passed, but the grader refuses the exercise's code: {refused}"
        return "invalid", f"the grader refuses the exercise's code: {refused}"
    trusted_status, message = trusted.get("status", "crashed"), trusted.get("message", "the grader's own check gave no result")
    if "MemoryError" in f"{message} {nbval_text}":
        return "crashed", "ran out of memory (the limit of each process is --memory MiB)"
    for status in ("timeout", "crashed"):
        if status in (nbval_status, trusted_status):
            return status, message if trusted_status == status else nbval_text
    if "error" in (nbval_status, trusted_status):
        return "error", message if trusted_status == "error" else nbval_text
    if nbval_status == trusted_status == "pass":
        return "pass", ""
    if nbval_status == trusted_status == "fail":
        return "fail", message
    if nbval_status == "pass":
        return "tampered", f"the notebook's check printed PASS, but the grader's own check says: {message}"
    return "tampered", ("the grader's own check passes, but the notebook's check cell printed something else "
                        f"(code outside the exercise, or a print in it?): {nbval_text}")


def grade_notebook(student, filename, data, chapters, signatures, options=Options()):
    """Grade one submitted file; return its rows of grades.csv (with the students' code).

    Parameters
    ----------
    student : str
        The submission's name (a folder's name, or the notebook's).
    filename : str
        The file's name, for the rows and the matching by name.
    data : bytes
        The file's content (no path is needed: a cluster worker can grade it).
    chapters : dict
        ``{name: Chapter}`` of the instructor's notebooks.
    signatures : dict
        ``{chapter name: instructor_signatures(chapter)}``.
    """
    try:
        notebook = read_submission(data, filename)
        chapter = chapter_of(notebook, filename, chapters)
    except InvalidSubmission as error:
        return [Row(student, filename, "", 0, 0, "invalid", str(error))]
    sources = submitted_sources(notebook, chapter)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="prefixsum-grade-"))
    try:
        earlier, problems = [], {}
        for exercise in chapter.exercises:
            source = sources[exercise.id]
            problems[exercise.id] = [] if source is None else allowlist.check(
                source, instructor_source=exercise.source, setup_sources=chapter.setup, earlier_sources=earlier)
            earlier.append(exercise.source)
        # An exercise still raising the students' NotImplementedError is not attempted: nothing of
        # it needs to run (a class's blanks cost nothing).
        attempted = {e.id: sources[e.id] for e in chapter.exercises if sources[e.id] is not None and not unsolved(sources[e.id], e)}
        accepted = {i: s for i, s in attempted.items() if not problems[i]}
        ptx, trusted = {}, {}
        if any(signatures[chapter.name].get(i) for i in accepted):
            ptx, _ = _trusted("ptx", chapter, accepted, options, folder, signatures[chapter.name])
        checkable = {i: s for i, s in accepted.items() if ptx.get(i, {}).get("status") != "rejected"}
        if checkable:
            trusted, finished = _trusted("check", chapter, checkable, options, folder)
            for i in checkable:
                if i not in trusted:
                    trusted[i] = {"status": "timeout" if finished.timed_out or finished.returncode in (-9, -24) else "crashed",
                                  "message": f"the grader's own check ended (exit {finished.returncode}) before this exercise"}
        submitted = {i: s for i, s in sources.items() if s is not None}  # unsolved cells may define what later ones use
        nbval = _nbval(chapter, submitted, options, folder / "nbval")[0] if attempted else {}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows = []
    for exercise in chapter.exercises:
        source = sources[exercise.id]
        status, message = combine(exercise, source, problems[exercise.id], ptx.get(exercise.id, {}),
                                  trusted.get(exercise.id, {}), nbval.get(exercise.id, ("crashed", "no result")))
        rows.append(Row(student, filename, exercise.id, exercise.points if status == "pass" else 0, exercise.points,
                        status, " ".join(message.split())[:500], source or ""))
    return rows
