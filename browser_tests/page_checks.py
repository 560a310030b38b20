"""What a notebook's page should show after Run All, read from the instructor's ``.ipynb``, and
every way a snapshot of the page (``labdriver.read_page``) differs from it: pure functions, no
browser, so that tests/ can check them on made-up pages (``test_jupyterlab.py``'s last tests).
"""

import re

import nbformat


def expectations(instructor_ipynb):
    """Per cell of the instructor's notebook: kind, tags, how many figures, how many PASS lines."""
    notebook = nbformat.read(instructor_ipynb, as_version=4)
    cells = []
    for cell in notebook.cells:
        outputs = cell.get("outputs", [])
        text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        steppers = sum(is_stepper(o) for o in outputs)
        cells.append(
            {
                "kind": cell.cell_type,
                "tags": list(cell.metadata.get("tags", [])),
                "first_line": (cell.source.splitlines() or [""])[0],
                "images": sum("image/png" in o.get("data", {}) for o in outputs) - steppers,
                "steppers": steppers,
                "passes": sum(line.startswith("PASS") for line in text.splitlines()),
            }
        )
    return cells


def is_stepper(output):
    """A stored ``ps.viz.step`` output: its picture is the fallback, the live page shows the widget."""
    return output.get("data", {}).get("text/plain", "").startswith("<prefixsum stepper")


_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s*Cell In\[\d+\], line \d+", re.M)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b(:.*)?$")


def is_error(output):
    """An error output: JupyterLab draws it with the stderr mime type, as a traceback ending in
    the exception's line (a stderr stream, such as the simulator's notice, is neither)."""
    if output["mime"] != "application/vnd.jupyter.stderr":
        return False
    lines = [line for line in output["text"].splitlines() if line.strip()]
    return bool(_TRACEBACK.search(output["text"])) or bool(lines and _EXCEPTION_LINE.match(lines[-1].strip()))


def expected_student_exception(text):
    return "NotImplementedError" in text and "Exercise:" in text


def reports_missing_exercise(text):
    """Whether a check's output says, in the checker's words, that its exercise was left as given:
    NOT ATTEMPTED with the exercise quoted, and no FAIL (as tests/test_student.py expects)."""
    return "NOT ATTEMPTED" in text and "FAIL" not in text and "Exercise:" in text


def problems(name, expected, page, student=False):
    """Every way ``page`` (a ``read_page`` snapshot after Run All) differs from ``expected`` (the
    instructor's ``expectations``), one sentence each, naming notebook and cell. A student
    version may show the exercises' NotImplementedError, and its checks must report the exercise
    as not attempted."""

    def where(i):
        cell = page[i] if i < len(page) else expected[i]
        line = (cell.get("first_line") or expected[i]["first_line"]).strip()
        return f"{name} cell {i} ({cell.get('prompt') or expected[i]['kind']} {line[:60]!r})"

    found = []
    if len(page) != len(expected):
        return [f"{name}: the page shows {len(page)} cells, the notebook has {len(expected)}"]
    not_run = [
        i
        for i, (cell, want) in enumerate(zip(page, expected))
        if want["kind"] == "code" and not re.fullmatch(r"\[\d+\]:", cell["prompt"])
    ]
    if not_run:
        found.append(
            f"{where(not_run[0])}: not run (prompt {page[not_run[0]]['prompt']!r})"
            + (f", and {len(not_run) - 1} code cells after it" if len(not_run) > 1 else "")
        )
    for i, (cell, want) in enumerate(zip(page, expected)):
        text = "".join(o["text"] for o in cell["outputs"])
        for output in cell["outputs"]:
            if is_error(output) and not (student and expected_student_exception(output["text"])):
                last = [line for line in output["text"].splitlines() if line.strip()][-1:] or [""]
                found.append(f"{where(i)}: shows an error: {last[0].strip()[:200]}")
        if cell["images"] < want["images"]:
            found.append(
                f"{where(i)}: should draw {want['images']} figure(s), the page shows {cell['images']} image(s)"
            )
        if cell.get("steppers", 0) < want.get("steppers", 0):
            found.append(
                f"{where(i)}: should show {want['steppers']} stepper(s), the page shows {cell.get('steppers', 0)}"
            )
        if "check" in want["tags"]:
            if student:
                if not reports_missing_exercise(text):
                    found.append(
                        f"{where(i)}: a student's check should report the missing exercise "
                        f"(NOT ATTEMPTED ... Exercise: ...), shows {text.strip()[:300]!r}"
                    )
            else:
                passes = sum(line.startswith("PASS") for line in text.splitlines())
                if passes < max(want["passes"], 1):
                    found.append(
                        f"{where(i)}: a check should show {max(want['passes'], 1)} PASS line(s), "
                        f"shows {text.strip()[:300]!r}"
                    )
    total = sum(c["images"] for c in page)
    if total < sum(c["images"] for c in expected) and not any("figure" in p for p in found):
        found.append(f"{name}: {sum(c['images'] for c in expected)} figures expected, the page shows {total}")
    return found
