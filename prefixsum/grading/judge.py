"""The grader's judge: the verdicts of a submission's checks, drawn from its sandbox's observations.

A process of the grader's own, forked for each submission (and for the instructor's solutions)
by :mod:`.judging`'s server, that never runs student code: it gets the instructor's setup and check
cells and the sandbox's output (:mod:`.trusted`'s ``check`` mode), reads that output with a
strict schema (:mod:`.observations`), runs the setup cells and then each check cell with the
student's names as stand-ins and a :class:`.observations.Replayer` answering every run of the
student's code. The references, the comparisons, the diagnoses and the verdict's text are all
computed here, on inputs that the checks draw here. It runs on the classroom simulator (the
reference trace of the feedback's picture needs it) and bounds its address space, CPU time and
open files (:func:`.limits.limit_process`) before it reads anything. On its own::

    python -m prefixsum.grading.judge < REQUEST.json > VERDICTS.jsonl

The request: ``{"chapter": {"setup": [...], "exercises": [{"id", "checks"}]}, "observed": the
sandbox's stdout, "ids": [...], "timeout": seconds}``. Each verdict is one JSON line:
``{id, status, message, lines, launches[, signatures][, stepper]}``, read by :func:`.results.parse`;
``stepper`` holds, for a failing check on a small n that offers the stepper, the student's trace
of that run and the package's reference trace on the same input (computed here), for the
feedback's picture of the first step where they differ.
"""

import io
import json
import sys

from ..classroom import cells
from . import encoding, limits, observations, results

MAX_REQUEST = 160 << 20
"""Bytes of a request read at most (the sandbox's output is bounded below this, :class:`.limits.Limits`)."""
MAX_LINE = 96 << 20
# The judge's own limits: it parses what a sandbox wrote, so it is bounded as a sandboxed run is.
ADDRESS_SPACE_MB = 6144
CPU_S = 600
OPEN_FILES = 256


def _entries(text, ids, record):
    """``{id: entry}``: the sandbox's lines that follow the schema of :mod:`.trusted`'s ``check`` output."""
    found = {}
    for entry in results.json_lines(text, MAX_LINE):
        if not isinstance(entry, dict) or entry.get("id") not in ids or entry["id"] in found:
            continue
        allowed = {"id", "status", "stage", "error", "names", "observations", "launches"} | (
            {"signatures"} if record else set()
        )
        if (
            set(entry) - allowed
            or entry.get("status") not in ("ran", "error", "timeout")
            or entry.get("stage", "check") not in ("exercise", "check")
            or type(entry.get("launches")) is not int
            or type(entry.get("observations", [])) is not list
            or (record and not results.valid_signatures(entry.get("signatures")))
        ):
            continue
        found[entry["id"]] = entry
    return found


def verdict(exercise, entry, setup, timeout, decoder):
    """``{status, message, lines}`` of one exercise from its sandbox ``entry`` (see the module's docstring).

    ``status``: ``ran`` (the grader compares ``lines`` with the stored output), ``error``,
    ``timeout`` (also a check whose verdict is a timeout), or ``tampered`` when the
    observations do not answer the grader's checks.
    """
    from ..classroom import references
    from ..classroom.check import observed

    stage = entry.get("stage", "check")
    if entry["status"] == "timeout":
        return {
            "status": "timeout",
            "message": f"loading the exercise took more than {timeout:g} s"
            if stage == "exercise"
            else f"the check ran for more than {timeout:g} s",
            "lines": [],
        }
    if entry["status"] == "error":
        error = cells.first_line(decoder.error(entry.get("error")))
        return {
            "status": "error",
            "message": error if stage == "exercise" else f"the check failed: {error}",
            "lines": [],
        }
    names = observations.stand_ins(entry.get("names", {}), decoder)
    replayer = observations.Replayer([decoder.observation(o) for o in entry.get("observations", [])])
    printed, verdicts = [], []
    references.forget_failure()

    def record(*values, **_):
        verdicts.extend(v for v in values if hasattr(v, "passed") and hasattr(v, "diagnosis"))
        printed.append(" ".join(str(v) for v in values) + "\n")

    with observed.observer(replayer):
        for check in exercise["checks"]:
            # The setup's names are the instructor's, whatever the sandbox's report says of them.
            scope = {**names, **setup, "print": record}
            try:
                exec(cells.compiled(check, f"<check {exercise['id']}>"), scope)  # noqa: S102  (the instructor's check)
            except observations.Unreplayable as error:
                return {
                    "status": "tampered",
                    "message": f"the sandbox's observations do not answer the grader's check: {error}",
                    "lines": printed,
                }
            except Exception as error:  # noqa: BLE001  (a constant of the student's the check cannot use, say)
                return {"status": "error", "message": f"the check failed: {cells.first_line(error)}", "lines": printed}
    failed = next((v for v in verdicts if not v.passed), None)
    if failed is not None and failed.diagnosis in ("timeout", "poll-limit"):  # both counted, not clocked
        return {"status": "timeout", "message": str(failed), "lines": printed}
    found = {"status": "ran", "message": str(failed) if failed is not None else "", "lines": printed}
    if failed is not None:
        found.update(_stepper())
    return found


def _stepper():
    """``{"stepper": [student trace, reference trace]}`` (encoded) of a failing check that offered
    the stepper (a data-flow diagnosis on a small n), else ``{}``.

    The student's trace is the replayed observation of the failing run; the reference is the
    package's scan traced here, on the same input.
    """
    from ..classroom import references, stepping

    try:
        student, reference = references.last_failure()
    except LookupError:
        return {}
    except stepping.BrokenTrace:
        # A trace the stepper cannot draw (a barrier phase with no access: a kernel that only
        # prints, or a trace forged in the sandbox): the verdict stands, without the picture.
        return {}
    return {"stepper": [encoding.encode_trace(student), encoding.encode_trace(reference)]}


def judge(request, emit):
    """Emit the verdict of every exercise of ``request`` that its sandbox reported."""
    chapter, record = request["chapter"], request.get("record", False)
    wanted = set(request["ids"])
    entries = _entries(request["observed"], wanted, record)
    setup = cells.run_setup(chapter)
    for exercise in chapter["exercises"]:
        entry = entries.get(exercise["id"])
        if entry is None:
            continue
        try:
            found = verdict(exercise, entry, setup, request["timeout"], encoding.Decoder())
        except encoding.Malformed as error:
            found = {
                "status": "crashed",
                "message": f"the sandbox's report does not follow the schema: {error}",
                "lines": [],
            }
        found.update(id=exercise["id"], launches=entry["launches"])
        if record:
            found["signatures"] = entry["signatures"]
        emit(found)


def main():
    limits.limit_process(address_space_mb=ADDRESS_SPACE_MB, cpu_s=CPU_S, open_files=OPEN_FILES)
    request = json.loads(sys.stdin.read(MAX_REQUEST))
    out = sys.stdout
    # What the checks print besides the verdicts (the package's notices) is not the judge's output.
    sys.stdout = io.StringIO()
    judge(request, lambda found: (out.write(json.dumps(found) + "\n"), out.flush()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
