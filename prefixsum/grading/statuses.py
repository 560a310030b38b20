"""An exercise's status: what nbval's run found of each exercise, and the combination of every step's verdict.

Every step that grades a notebook (:mod:`.runner`) gives a verdict per exercise: the allow-list's
refusals, the PTX compile, the grader's own check (drawn by the judge), and nbval's run of the
assembled notebook, read here from its junit XML (:func:`nbval_verdicts`). :func:`combine` turns
them into one of :data:`STATUSES`.
"""

import re
import xml.etree.ElementTree as ElementTree

from .chapters import EXERCISE, unsolved

STATUSES = ("pass", "fail", "not-attempted", "error", "timeout", "crashed", "tampered", "invalid")

_CELL = re.compile(r"Cell (\d+)")
_ANSI = re.compile(r"#?x1B\[[0-9;]*m|\x1b\[[0-9;]*m")


def _junit(text):
    """``{cell number: (outcome, text)}`` from nbval's junit XML; outcome ``pass``/``fail``/``skip``."""
    cells = {}
    for case in ElementTree.fromstring(text).iter("testcase"):
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


def nbval_verdicts(kinds, report, finished, timeout):
    """``{exercise id: (status, text)}`` of nbval's run of the assembled notebook.

    ``kinds``: the notebook's cells as :func:`.chapters.assemble` lists them; ``report``: what the
    sandbox returned (``{"junit": ...}``, or None); ``finished``: how the run ended; ``timeout``:
    the seconds each cell had. status: ``pass``, ``fail``, ``error`` (the exercise cell raised),
    ``timeout``, ``crashed``.
    """
    cells = {}
    if report and report["junit"] and not finished.timed_out:
        try:
            cells = _junit(report["junit"])
        except ElementTree.ParseError:
            cells = {}
    verdicts = {}
    for number, (kind, exercise_id) in enumerate(kinds):
        if exercise_id is None or verdicts.get(exercise_id, ("pass",))[0] != "pass":
            continue
        outcome, text = cells.get(number, (None, ""))
        if outcome is None:
            why = f", over its {finished.over} limit" if finished.over else ""
            verdicts[exercise_id] = (
                "timeout" if finished.timed_out or finished.over == "cpu" else "crashed",
                f"nbval ended (exit {finished.returncode}{why}) before this cell",
            )
        elif re.search(r"Timeout of [0-9.]+ seconds exceeded", text):
            verdicts[exercise_id] = ("timeout", f"stopped after {timeout:g} s")
        elif re.search(r"[Kk]ernel died|DeadKernelError|Kernel didn't respond", text):
            verdicts[exercise_id] = ("crashed", "the notebook's kernel died")
        elif outcome == "fail":
            verdicts[exercise_id] = ("error" if kind == EXERCISE else "fail", _last_error_line(text))
        else:
            verdicts[exercise_id] = ("pass", "")
    return verdicts


def _last_error_line(text):
    lines = [
        line.strip()
        for line in text.splitlines()
        if re.match(r"\s*[A-Za-z_.]*(Error|Exception|Exit|Interrupt)\b", line)
    ]
    return lines[-1][:300] if lines else ""


def combine(exercise, source, problems, ptx, trusted, nbval):
    """One exercise's ``(status, message)`` from every step's verdict (see the module's docstring).

    * not-attempted: no cell for it, or it still raises the students' ``NotImplementedError``
      (then nothing of it ran);
    * refused by the allow-list or the PTX compiler: ``invalid``, with the reason (nbval ran the
      students' blank in its place);
    * ``timeout``, ``crashed``, ``error`` as the runs found them;
    * ``tampered`` only on evidence of forgery, its message saying what was observed: the
      sandbox's observations do not answer the grader's replay of the checks, or nbval's run of
      the check printed the stored verdict where the grader's own check of the same code found a
      mistake (the simulator is deterministic: only a changed run tells them apart);
    * ``pass`` when nbval's run and the grader's own check both print the stored verdict, and
      ``fail`` when either does not: the grader's diagnosis, or what nbval's run printed
      instead. The student's own prints do not count: the check cells print only the verdict.
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
        return "invalid", f"the grader refuses the exercise's code: {refused}"
    trusted_status, message = (
        trusted.get("status", "crashed"),
        trusted.get("message", "the grader's own check gave no result"),
    )
    if "MemoryError" in f"{message} {nbval_text}" or "over its memory limit" in f"{message} {nbval_text}":
        return "crashed", "ran out of memory (a submission's processes together may hold --memory MiB)"
    for status in ("timeout", "crashed"):
        if status in (nbval_status, trusted_status):
            return status, message if trusted_status == status else nbval_text
    if trusted_status == "tampered":
        return "tampered", message
    if "error" in (nbval_status, trusted_status):
        return "error", message if trusted_status == "error" else nbval_text
    if trusted.get("rule"):
        return "fail", message
    if nbval_status == trusted_status == "pass":
        return "pass", ptx.get("message", "") if ptx.get("status") == "ok" else ""
    if trusted_status != "pass":
        if nbval_status == "pass":
            return "tampered", (
                "nbval's run of the check in the notebook printed the stored verdict, but the grader's "
                "own "
                f"check of the same code found: {message}"
            )
        return "fail", message
    return (
        "fail",
        "the grader's own check passes, but nbval's run of the check in the notebook did not: "
        f"{nbval_text or 'no verdict'}",
    )
