"""What the grader writes: grades.csv, summary.csv and a feedback page per submission.

Every file is written under a temporary name and renamed into place at the end (a reader never
sees half a file), grades.csv last but one and summary.csv last, whose final line is the
SHA-256 of grades.csv: a later edit of the grades is visible. A cell that a spreadsheet would
read as a formula (``=``, ``+``, ``-``, ``@``, a tab or a carriage return first) is quoted with a
leading ``'``; feedback pages escape Markdown in names and messages.
"""

import csv
import hashlib
import io
import os
import pathlib
import re

from .statuses import STATUSES

GRADE_COLUMNS = ("submission", "chapter", "notebook", "exercise", "score", "max_score", "status", "message", "sandbox")
SUMMARY_COLUMNS = ("submission", "chapter", "score", "max_score", *STATUSES)
CHECKSUM = "# sha256 of grades.csv"
_EXPLAINED = {
    "pass": "passed: the notebook's check and the grader's own check agree",
    "fail": "the check found a mistake",
    "not-attempted": "not attempted: the exercise still raises NotImplementedError",
    "error": "the exercise raised an error",
    "timeout": "stopped at the time limit",
    "crashed": "the run crashed",
    "tampered": "the notebook's check and the grader's own check disagree",
    "invalid": "the grader could not accept this code or file",
}
_LINE = re.compile(r"\bline (\d+)")


def _number(value):
    return f"{value:g}"


def cell(value):
    """A CSV cell that no spreadsheet runs: text starting ``=+-@``, a tab or a CR gets a leading ``'``."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _csv(rows):
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for row in rows:
        writer.writerow([cell(value) for value in row])
    return buffer.getvalue()


def _write_atomically(path, text):
    temporary = path.with_name(f".{path.name}.partial")
    # a lone surrogate (from a notebook's JSON escape) is written as its escape, not an error
    temporary.write_bytes(text.encode("utf-8", "backslashreplace"))
    os.replace(temporary, path)


def grades_text(rows):
    return _csv(
        [
            GRADE_COLUMNS,
            *(
                [
                    r.submission,
                    r.chapter,
                    r.notebook,
                    r.exercise,
                    _number(r.score),
                    _number(r.max_score),
                    r.status,
                    r.message,
                    r.sandbox,
                ]
                for r in rows
            ),
        ]
    )


def summarize(rows, owed=None):
    """``{(submission, chapter): {"score", "max_score", status: count}}`` with ``(submission, "all")`` totals.

    ``owed`` (``{chapter name: Chapter}``, from ``--chapters``) adds, for each submission, every
    owed chapter it did not hand in, at its full maximum and with each exercise not attempted.
    """
    summary = {}

    def add(key, score, best, status, count=1):
        entry = summary.setdefault(key, {"score": 0, "max_score": 0, **{s: 0 for s in STATUSES}})
        entry["score"] += score
        entry["max_score"] += best
        entry[status] += count

    students = list(dict.fromkeys(r.submission for r in rows))
    for row in rows:
        add((row.submission, row.chapter or "none"), row.score, row.max_score, row.status)
    for student in students:
        for name, chapter in (owed or {}).items():
            if (student, name) not in summary:
                add((student, name), 0, chapter.max_score, "not-attempted", len(chapter.exercises))
        for (who, chapter), entry in list(summary.items()):
            if who == student and chapter != "all":
                for key in ("score", "max_score", *STATUSES):
                    summary.setdefault((student, "all"), {"score": 0, "max_score": 0, **{s: 0 for s in STATUSES}})[
                        key
                    ] += entry[key]
    order = {student: k for k, student in enumerate(students)}
    return dict(sorted(summary.items(), key=lambda item: (order[item[0][0]], item[0][1] == "all", item[0][1])))


def summary_text(rows, grades, owed=None):
    lines = [
        SUMMARY_COLUMNS,
        *(
            [who, chapter, _number(e["score"]), _number(e["max_score"]), *(e[s] for s in STATUSES)]
            for (who, chapter), e in summarize(rows, owed).items()
        ),
    ]
    return _csv(lines) + _csv([[CHECKSUM, hashlib.sha256(grades.encode("utf-8")).hexdigest()]])


def safe_name(name):
    """A file name for a submission's feedback: letters, digits, ``._-`` (others become ``_``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "submission"


def markdown(text):
    """``text`` on one line, with Markdown's and HTML's special characters escaped."""
    return re.sub(r"([\\`*_\[\]#!|<>])", r"\\\1", " ".join(str(text).split()))


def _numbered(code):
    width = len(str(code.count("\n") + 1))
    return "\n".join(f"{k:>{width}} | {line}" for k, line in enumerate(code.rstrip("\n").split("\n"), 1))


def feedback(submission, rows, pictures=None):
    """A Markdown page for one student: each exercise, its status, the diagnosis, a picture
    (``pictures``: ``{exercise: file name beside the page}``), their code.

    The code is numbered where the message cites a line; exercises not attempted take one line each.
    """
    total = sum(r.score for r in rows)
    best = sum(r.max_score for r in rows)
    lines = [f"# Feedback for {markdown(submission)}", "", f"Score: **{_number(total)} / {_number(best)}**", ""]
    blank = [r for r in rows if r.status == "not-attempted"]
    for row in (r for r in rows if r.status != "not-attempted"):
        title = row.exercise or row.notebook
        lines += [
            f"## {markdown(title)} ({markdown(row.chapter or row.notebook)})",
            "",
            f"- status: **{row.status}** ({_EXPLAINED[row.status]})",
            f"- score: {_number(row.score)} / {_number(row.max_score)}",
        ]
        if row.message:
            lines.append(f"- diagnosis: {markdown(row.message)}")
        if pictures and row.exercise in pictures:
            lines += ["", f"![the first step where your run leaves the reference]({pictures[row.exercise]})"]
        if row.code:
            fence = "```"
            while fence in row.code:
                fence += "`"
            code = _numbered(row.code) if _LINE.search(row.message) else row.code.rstrip("\n")
            lines += ["", "Your code:", "", f"{fence}python", code, fence]
        lines.append("")
    if blank:
        lines += ["## Not attempted", ""]
        lines += [f"- {markdown(r.exercise)} ({markdown(r.chapter)}): 0 / {_number(r.max_score)}" for r in blank]
        lines.append("")
    return "\n".join(lines)


def write_all(rows, out, owed=None, runs=None):
    """Write feedback/<submission>.md, grades.csv and summary.csv under ``out``; return their paths.

    ``owed``: see :func:`summarize`. ``runs``: ``{(submission, exercise): (student trace,
    reference trace)}`` of failing exercises; each gets a PNG of the first step where the
    student's run leaves the reference's (:func:`prefixsum.viz.difference_png`) beside its page,
    shown under the diagnosis.
    """
    out = pathlib.Path(out)
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    pages, used = [], set()
    for submission in dict.fromkeys(r.submission for r in rows):
        name = safe_name(submission)
        while name.lower() in used:  # "ann b" and "ann_b" both become ann_b
            name += "_"
        used.add(name.lower())
        page = out / "feedback" / f"{name}.md"
        pictures = _pictures(runs or {}, submission, out / "feedback", name)
        _write_atomically(page, feedback(submission, [r for r in rows if r.submission == submission], pictures))
        pages.append(page)
    grades = grades_text(rows)
    _write_atomically(out / "grades.csv", grades)
    _write_atomically(
        out / "summary.csv", summary_text(rows, grades.encode("utf-8", "backslashreplace").decode(), owed)
    )
    return [out / "grades.csv", out / "summary.csv", *pages]


def _pictures(runs, submission, folder, name):
    """``{exercise: file name}`` of the first-difference PNGs drawn for ``submission``'s failing runs."""
    pictures = {}
    for (who, exercise), (student, reference) in runs.items():
        if who == submission:
            # matplotlib, only where there is a picture to draw
            from ..classroom import stepping
            from ..classroom.viz.step_pictures import difference_png

            path = folder / f"{name}_{safe_name(exercise)}.png"
            try:
                drawn = difference_png(student, reference, path)
            except stepping.BrokenTrace:
                # A run the stepper cannot replay (a read the writes before it do not explain), or
                # one too large to draw, gets its verdict without a picture.
                drawn = None
            except Exception:  # noqa: BLE001  (a picture is an extra: whatever it meets, the grades are written)
                path.unlink(missing_ok=True)
                drawn = None
            if drawn is not None:
                pictures[exercise] = path.name
    return pictures
