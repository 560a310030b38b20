"""Grade one submitted notebook: nbval on the assembled notebook, and the grader's own re-check.

Every step that runs code runs in a sandbox of its own (:mod:`.sandbox`) on the classroom
simulator (whatever the machine has), and returns data that :mod:`.results` reads:

1. the allow-list (:mod:`.allowlist`, no process: it only parses);
2. ``trusted ptx``: the accepted kernels compiled to PTX;
3. ``trusted check``: the instructor's checks on the accepted cells, returning observations
   only (:mod:`.observations`); the grader's judge (:mod:`.judge`, a process that never runs
   student code) replays the checks on them and draws each verdict's text, and
   :func:`.results.check_verdict` compares the printed lines with the stored output;
4. ``trusted nbval``: ``pytest --nbval`` on the assembled notebook (:func:`.chapters.assemble`),
   with the cells the allow-list refused replaced by the students' blanks; its verdict per cell
   is read from the junit XML that pytest writes.

No request holds an instructor's solution or a check's expected output, except ``record``'s,
which runs the instructor's solutions alone. :func:`.statuses.combine` turns the four into one status
per exercise.
"""

import dataclasses
import json
import os
import pathlib
import sys
import threading
from typing import NamedTuple

import nbformat

from ..classroom import stepping
from ..classroom.renumbering import renumbered
from ..core.device import device_environment
from . import allowlist, encoding, judging, results, sandbox, statuses
from .chapters import (
    InvalidSubmission,
    assemble,
    chapter_of,
    read_submission,
    recorded_time,
    submitted_sources,
    unsolved,
)
from .limits import Limits

_STARTUP_S = 90  # a fresh Python with numba, a Jupyter kernel, prefixsum: seconds before any exercise runs
_TRUSTED = str(pathlib.Path(__file__).with_name("trusted.py"))
_PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[2]  # the folder holding prefixsum/, for the judge's import
# The judge runs no student code: its CPU limit (judge.CPU_S) stops a runaway, and the wall clock only a
# stuck process, far above its time on a machine as loaded as a 2-core one under 20 processes.
_JUDGE_WALL_S = 1800
# The judge's servers (judging.Judges), one per grading thread, started with the first verdict.
_JUDGES, _JUDGES_LOCK = None, threading.Lock()


@dataclasses.dataclass(frozen=True)
class Options:
    """How to grade: the time limit of one exercise, the limits of each run, and the sandbox."""

    timeout: float = 60.0
    limits: Limits = Limits()
    isolated: bool = True
    """False only with ``--unsafe-no-sandbox``: the runs get limits but no namespaces."""


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
    chapter: str = ""
    sandbox: str = "bwrap"
    """How the submission's code was isolated: ``bwrap``, or ``none`` (``--unsafe-no-sandbox``)."""
    traces: tuple = None
    """``(student trace, reference trace)`` of a failing check on a small n, for the feedback's
    picture of the first step where they differ (not the CSV)."""


def _inside(chapter):
    """The chapter as the sandbox may see it: the setup cells and each exercise's id and check
    sources; no solution, no stored output."""
    return json.dumps(
        {
            "setup": list(chapter.setup),
            "exercises": [{"id": e.id, "checks": [check for check, _ in e.checks]} for e in chapter.exercises],
        }
    )


def _sandboxed(mode, request, wall, options):
    """Run ``trusted.py mode`` in a sandbox with ``request`` on stdin; ``(stdout, Finished)``."""
    env = sandbox.environment(
        device_environment(
            mode != "ptx",
            "the grader runs every submission on the classroom simulator"
            if mode != "ptx"
            else "the grader compiles the submitted kernels to PTX",
        )
    )
    finished = sandbox.run(
        [sys.executable, _TRUSTED, mode],
        limits=options.limits,
        timeout=wall,
        env=env,
        stdin=json.dumps(request).encode(),
        isolated=options.isolated,
    )
    return finished.stdout, finished


def _trusted(mode, chapter, sources, options, signatures=None):
    """Run :mod:`.trusted` in ``mode``; return ``({id: entry}, Finished)`` with entries schema-checked.

    In the ``check`` and ``record`` modes the sandbox returns observations only, and the entries
    are the verdicts that :func:`_judge` draws from them outside.
    """
    request = {
        "chapter": _inside(chapter),
        "sources": sources,
        "timeout": options.timeout,
        "signatures": signatures or {},
    }
    wall = _STARTUP_S + options.timeout * 2 * (len(sources) + 1)
    stdout, finished = _sandboxed(mode, request, wall, options)
    if mode == "ptx":
        return results.parse(stdout, mode, set(sources)), finished
    found, problem = _judge(chapter, stdout, set(sources), options, record=mode == "record")
    if problem:
        finished = dataclasses.replace(finished, stderr=f"{finished.stderr}\nthe judge: {problem}")
    return found, finished


def _judge(chapter, observed, ids, options, record=False):
    """The verdicts of :mod:`.judge` (a process of the grader that never runs student code) on a sandbox's ``observed``
    output.

    Returns ``({id: entry}, problem)``: entries schema-checked, and the end of the judge's
    stderr when it failed (then entries are missing, and the exercises read as ended early).
    """
    request = {
        "chapter": json.loads(_inside(chapter)),
        "observed": observed,
        "ids": sorted(ids),
        "timeout": options.timeout,
        "record": record,
    }
    with _JUDGES_LOCK:
        global _JUDGES
        if _JUDGES is None:
            _JUDGES = judging.Judges(
                {
                    **os.environ,
                    **device_environment(True, "the grader's judge replays the checks on the classroom simulator"),
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH")])),
                }
            )
    returncode, stdout, stderr = _JUDGES.judge(json.dumps(request).encode(), _JUDGE_WALL_S)
    if returncode is None:
        return {}, stderr
    problem = "" if returncode == 0 else f"exit {returncode}: {stderr}"
    return results.parse(stdout, "record" if record else "check", ids), problem


def close_judges():
    """End the judge's servers that this process started (a batch's last step: nothing of it outlives it)."""
    with _JUDGES_LOCK:
        if _JUDGES is not None:
            _JUDGES.close()


def instructor_signatures(chapter, options=Options(), ids=None):
    """Check the instructor's solutions in a sandbox and record their kernels' launches.

    ``ids``: the exercises to check and record (default: every exercise of the chapter); a batch
    records those that some submission has the grader run (:func:`screen`), as the students'
    cells of those exercises run: together, after the setup cells.

    Returns
    -------
    dict
        ``{exercise id: {"signatures": {kernel name: [signature, ...]}, "launches": count, "source":
        the solution, "checked": the judge's entry}}``: what to compile each kernel with, whether
        the exercise's cell launches a kernel of its own, and the check's result, which a
        submission handing in exactly these solutions gets again (:func:`grade_notebook`).

    Raises
    ------
    RuntimeError
        When an instructor's solution does not pass its own check there (the notebook's
        stored outputs or its ``setup`` tags are wrong, and no grade could be trusted).
    """
    sources = {e.id: e.source for e in chapter.exercises if ids is None or e.id in ids}
    if not sources:
        return {}
    found, finished = _trusted("record", chapter, sources, options)
    verdicts = {
        e.id: results.check_verdict(
            e, found.get(e.id, {"status": "crashed", "message": "no result"}), False, chapter.sanitize
        )
        for e in chapter.exercises
        if e.id in sources
    }
    broken = [f"{i}: {v['message'] or 'no result'}" for i, v in verdicts.items() if v["status"] != "pass"]
    if broken:
        raise RuntimeError(
            f"the instructor's solutions of {chapter.name} do not pass the grader's own check "
            f"(are the needed cells tagged setup?): {'; '.join(broken)}; {finished.stderr[-2000:]}"
        )
    return {
        i: {
            "signatures": found[i]["signatures"],
            "launches": found[i]["launches"],
            "source": sources[i],
            "checked": {k: v for k, v in found[i].items() if k != "signatures"},
        }
        for i in sources
    }


def _nbval(chapter, sources, options):
    """Run nbval on the assembled notebook in a sandbox; ``({exercise id: (status, text)}, Finished)``
    (:func:`.statuses.nbval_verdicts`)."""
    notebook, kinds = assemble(chapter, sources)
    request = {"notebook": nbformat.writes(notebook), "timeout": options.timeout, "sanitize": chapter.sanitize}
    stdout, finished = _sandboxed("nbval", request, _STARTUP_S + options.timeout * len(kinds), options)
    report = results.parse(stdout, "nbval").get("nbval")
    return statuses.nbval_verdicts(kinds, report, finished, options.timeout), finished


class Screened(NamedTuple):
    """What :func:`screen` finds in a submitted file."""

    chapter: object
    sources: dict
    """``{exercise id: the submitted cell or None}`` (a cell over the allow-list's size bound cut short, for the
    feedback)."""
    problems: dict
    """``{exercise id: the allow-list's refusals}``."""
    accepted: dict
    """``{exercise id: source}`` of the exercises attempted and accepted."""
    recorded: object
    """The latest time a cell of the notebook records having run (:func:`.chapters.recorded_time`), or None."""


def screen(data, filename, chapters):
    """What of a submitted file the grader runs: a :class:`Screened`.

    ``accepted`` holds the exercises attempted (not still raising the students'
    ``NotImplementedError``: a class's blanks cost nothing) and accepted by the allow-list,
    which sees each cell with the chapter's setup, the instructor's cells and checks, and the
    submission's own cells before it. It only parses: a batch asks it once per file, first, to
    check and record only the instructor's solutions that some submission needs.

    Raises
    ------
    InvalidSubmission
        When the file is no notebook of one of ``chapters``.
    """
    notebook = renumbered(read_submission(data, filename), in_place=True)  # a fresh parse: no copy needed
    chapter = chapter_of(notebook, filename, chapters)
    sources = submitted_sources(notebook, chapter)
    everything = tuple(e.source for e in chapter.exercises)
    checks = tuple(check for e in chapter.exercises for check, _ in e.checks)
    earlier, submitted, problems = [], [], {}
    for exercise in chapter.exercises:
        source = sources[exercise.id]
        problems[exercise.id] = (
            []
            if source is None
            else allowlist.check(
                source,
                instructor_source=exercise.source,
                setup_sources=chapter.setup,
                earlier_sources=earlier,
                exercise_id=exercise.id,
                chapter_sources=everything,
                earlier_submitted=tuple(submitted),
                check_sources=checks,
            )
        )
        earlier.append(exercise.source)
        if source is not None and len(source) <= allowlist.MAX_SOURCE:
            submitted.append(source)
    attempted = {
        e.id: sources[e.id] for e in chapter.exercises if sources[e.id] is not None and not unsolved(sources[e.id], e)
    }
    shown = {
        i: s
        if s is None or len(s) <= allowlist.MAX_SOURCE
        else f"{s[:4096]}\n# ... the grader shows the first 4,096 of the cell's {len(s):,} characters"
        for i, s in sources.items()
    }
    return Screened(
        chapter, shown, problems, {i: s for i, s in attempted.items() if not problems[i]}, recorded_time(notebook)
    )


def grade_notebook(student, filename, data, chapters, signatures, options=Options(), screened=None):
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
        ``{chapter name: instructor_signatures(chapter)}``: the record of every exercise that
        :func:`screen` accepts in ``data``, at least.
    screened : Screened, optional
        :func:`screen` of ``data``, where the batch has it already (``data`` is then not read).

    A notebook of an earlier numbering (:mod:`prefixsum.classroom.renumbering`) is graded by the current names.
    """
    where = "bwrap" if options.isolated else "none"
    if options.isolated:
        sandbox.check_available()  # once per process: a cluster's worker may lack bwrap
    if screened is None:
        try:
            screened = screen(data, filename, chapters)
        except InvalidSubmission as error:
            return [Row(student, filename, "", 0, 0, "invalid", str(error), sandbox=where)]
    chapter, sources, problems, accepted, _ = screened
    recorded = signatures[chapter.name]
    ptx, trusted = {}, {}
    if any(recorded[i]["signatures"] for i in accepted):
        ptx, _ = _trusted("ptx", chapter, accepted, options, {i: recorded[i]["signatures"] for i in accepted})
    checkable = {i: s for i, s in accepted.items() if ptx.get(i, {}).get("status") != "rejected"}
    found, finished = {}, None
    if checkable and checkable == {i: entry.get("source") for i, entry in recorded.items()}:
        # The very request of the batch's own check of the instructor's solutions (the same cells, in
        # the same order, after the same setup): the sandbox and the judge take the same decisions on
        # the same cells (observations.answer), so its verdicts are this one's, without a second run.
        found = {i: recorded[i]["checked"] for i in checkable}
    elif checkable:
        found, finished = _trusted("check", chapter, checkable, options)
    for i in checkable:
        if i in found:
            trusted[i] = results.check_verdict(
                chapter.exercise(i), found[i], recorded[i]["launches"] > 0, chapter.sanitize
            )
            trusted[i]["traces"] = _stepper_traces(found[i])
        else:
            ended = "timeout" if finished.timed_out or finished.over == "cpu" else "crashed"
            why = f", over its {finished.over} limit" if finished.over else ""
            trusted[i] = {
                "status": ended,
                "message": f"the grader's own check ended (exit {finished.returncode}{why}) before this exercise",
            }
    # nbval runs only what the allow-list accepted; a refused cell is the students' blank there.
    # Unsolved cells stay: they may define what later ones use.
    # Without an accepted exercise nbval could not pass anything: it is not run.
    allowed = {i: s for i, s in sources.items() if s is not None and not problems[i]}
    nbval = _nbval(chapter, allowed, options)[0] if accepted else {}
    rows = []
    for exercise in chapter.exercises:
        source = sources[exercise.id]
        status, message = statuses.combine(
            exercise,
            source,
            problems[exercise.id],
            ptx.get(exercise.id, {}),
            trusted.get(exercise.id, {}),
            nbval.get(exercise.id, ("crashed", "no result")),
        )
        rows.append(
            Row(
                student,
                filename,
                exercise.id,
                exercise.points if status == "pass" else 0,
                exercise.points,
                status,
                " ".join(message.split())[:500],
                source or "",
                chapter.name,
                where,
                trusted.get(exercise.id, {}).get("traces") if status == "fail" else None,
            )
        )
    return rows


def _stepper_traces(entry):
    """The judge's ``stepper`` traces of ``entry``, decoded strictly, or None."""
    pair = entry.get("stepper")
    if not pair or len(pair) != 2:
        return None
    try:
        # A picture is drawn of a small failing run (at most 64 elements): a larger trace is kept by no row.
        decoder = encoding.Decoder(records=stepping.PICTURE_RECORDS)
        return tuple(decoder.trace(t) for t in pair)
    except encoding.Malformed:
        return None
