"""What the grader writes: grades.csv, summary.csv and a feedback page per submission."""
import csv
import pathlib
import re

from .runner import STATUSES

GRADE_COLUMNS = ("submission", "notebook", "exercise", "score", "max_score", "status", "message")
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


def _number(value):
    return f"{value:g}"


def write_grades(rows, path):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(GRADE_COLUMNS)
        for row in rows:
            writer.writerow([row.submission, row.notebook, row.exercise, _number(row.score), _number(row.max_score),
                             row.status, row.message])


def summarize(rows):
    """``{submission: {"score", "max_score", status: count, ...}}``, in the order of ``rows``."""
    summary = {}
    for row in rows:
        entry = summary.setdefault(row.submission, {"score": 0, "max_score": 0, **{s: 0 for s in STATUSES}})
        entry["score"] += row.score
        entry["max_score"] += row.max_score
        entry[row.status] += 1
    return summary


def write_summary(rows, path):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["submission", "score", "max_score", *STATUSES])
        for submission, entry in summarize(rows).items():
            writer.writerow([submission, _number(entry["score"]), _number(entry["max_score"]), *(entry[s] for s in STATUSES)])


def safe_name(name):
    """A file name for a submission's feedback: letters, digits, ``._-`` (others become ``_``)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "submission"


def feedback(submission, rows, pictures=None):
    """A Markdown page for one student: each exercise, its status, the diagnosis and hint, a
    picture (``pictures``: ``{exercise: file name beside the page}``), their code."""
    total = sum(r.score for r in rows)
    best = sum(r.max_score for r in rows)
    lines = [f"# Feedback for {submission}", "", f"Score: **{_number(total)} / {_number(best)}**", ""]
    for row in rows:
        title = row.exercise or row.notebook
        lines += [f"## {title} ({row.notebook})", "",
                  f"- status: **{row.status}** ({_EXPLAINED[row.status]})",
                  f"- score: {_number(row.score)} / {_number(row.max_score)}"]
        if row.message:
            lines.append(f"- diagnosis: {row.message}")
        if pictures and row.exercise in pictures:
            lines += ["", f"![the first step where your run leaves the reference]({pictures[row.exercise]})"]
        if row.code:
            fence = "```"
            while fence in row.code:
                fence += "`"
            lines += ["", "Your code:", "", f"{fence}python", row.code.rstrip("\n"), fence]
        lines.append("")
    return "\n".join(lines)


def write_all(rows, out, runs=None):
    """Write grades.csv, summary.csv and feedback/<submission>.md under ``out``; return their paths.

    ``runs``: ``{(submission, exercise): (student trace, reference trace)}`` of failing exercises;
    each gets a PNG of the first step where the student's run leaves the reference's
    (:func:`prefixsum.viz.difference_png`) beside its page, shown under the diagnosis.
    """
    out = pathlib.Path(out)
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    write_grades(rows, out / "grades.csv")
    write_summary(rows, out / "summary.csv")
    pages, used = [], set()
    for submission in summarize(rows):
        name = safe_name(submission)
        while name.lower() in used:  # "ann b" and "ann_b" both become ann_b
            name += "_"
        used.add(name.lower())
        page = out / "feedback" / f"{name}.md"
        pictures = _pictures(runs or {}, submission, out / "feedback", name)
        page.write_text(feedback(submission, [r for r in rows if r.submission == submission], pictures))
        pages.append(page)
    return [out / "grades.csv", out / "summary.csv", *pages]


def _pictures(runs, submission, folder, name):
    """``{exercise: file name}`` of the first-difference PNGs drawn for ``submission``'s failing runs."""
    pictures = {}
    for (who, exercise), (student, reference) in runs.items():
        if who == submission:
            from ..viz.stepper import difference_png  # matplotlib, only where there is a picture to draw

            path = folder / f"{name}_{safe_name(exercise)}.png"
            if difference_png(student, reference, path) is not None:
                pictures[exercise] = path.name
    return pictures
