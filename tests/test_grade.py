"""python -m prefixsum grade: honest, wrong, hanging, crashing and forged submissions, in one batch.

The submissions are built from the real notebooks (the instructor's solutions, the students'
versions) and graded together by one run of the grader with two workers: each must get its own
status and score, and every other grade must come out intact. The grader's pieces (the
allow-list, the assembly, the reports) are tests/test_grade_pieces.py's.
"""

import csv
import linecache
import subprocess
import sys

import nbformat
import numpy as np
import pytest
from grading_notebooks import (
    LADDER,
    NOTEBOOKS,
    PASS_LINE,
    REFLECTOR,
    SOLUTION,
    cell,
    extra_cells,
    instructor,
    ladder,
    reflector,
    with_exercise,
)
from numba import cuda

import prefixsum as ps
from prefixsum import grading
from prefixsum.classroom.student import student_version
from prefixsum.grading import chapters, report, runner


def forged_outputs():
    notebook = ladder(SOLUTION)
    cell(notebook, "01.ladder-step", "check").outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="FAIL forged\n")
    ]
    return notebook


def edited_check():
    notebook = ladder("rungs[t] += rungs[t - phase]")
    check = cell(notebook, "01.ladder-step", "check")
    check.source = f"print({PASS_LINE!r})"
    check.outputs = [nbformat.v4.new_output("stream", name="stdout", text=PASS_LINE + "\n")]
    return notebook


def deleted_check():
    notebook = ladder(SOLUTION)
    notebook.cells = [c for c in notebook.cells if "check" not in c.metadata.get("tags", [])]
    return notebook


def stripped_metadata():
    notebook = ladder(SOLUTION)
    notebook.metadata.pop("prefixsum")
    for c in notebook.cells:
        c.metadata.pop("exercise_id", None)
    return notebook


def wrong(source):
    """The instructor's exercise with a wrong update (a race: Hillis-Steele in one buffer)."""
    return source.replace(SOLUTION, "rungs[t] += rungs[t - phase]")


# name: (notebook, expected status of the exercise it changes, expected score as a share of that
# exercise's points, a word the message must hold). The submissions start from the students'
# version, so the chapter's other exercises are blank: not-attempted.
CASES = {
    "solution": (lambda out: ladder(SOLUTION), "pass", 1, ""),
    "blank": (
        lambda out: student_version(instructor(), chapter="01_ladder"),
        "not-attempted",
        0,
        "NotImplementedError",
    ),
    "off_by_one": (lambda out: ladder("rungs[t] += rungs[(t & ~(phase - 1))]"), "fail", 0, "FAIL my_ladder_tile"),
    "kernel_never_returns": (
        lambda out: ladder("k = 0\n            while k >= 0:\n                k = (k + 1) % 7"),
        "timeout",
        0,
        "",
    ),
    "raises_elsewhere": (
        lambda out: with_exercise(lambda s: s.replace("BLOCK = 64", "BLOCK = 64 // 0")),
        "error",
        0,
        "ZeroDivisionError",
    ),
    "forged_check_function": (
        lambda out: with_exercise(
            lambda s: wrong(s) + f"\nimport prefixsum as ps\nps.check.tiled = lambda *a, **k: {PASS_LINE!r}\n"
        ),
        "invalid",
        0,
        "import of prefixsum",
    ),
    "forged_print": (
        lambda out: with_exercise(
            lambda s: wrong(s) + f"\n\ndef print(*args, **kw):\n    __builtins__.print({PASS_LINE!r})\n"
        ),
        "invalid",
        0,
        "print",
    ),
    "forged_numpy": (
        lambda out: with_exercise(lambda s: wrong(s) + "\nimport numpy\nnumpy.isnan = lambda x: x != x\n"),
        "invalid",
        0,
        "constants",
    ),
    "kernel_prints_pass": (lambda out: ladder(f"print({PASS_LINE!r})"), "fail", 0, "FAIL"),
    "system_exit": (lambda out: ladder("raise SystemExit(0)"), "invalid", 0, "SystemExit"),
    "os_exit": (lambda out: with_exercise(lambda s: "import os\nos._exit(0)\n" + s), "invalid", 0, "import of os"),
    "writes_grades": (
        lambda out: with_exercise(
            lambda s: (
                s + f"\nopen({str(out / 'grades.csv')!r}, "
                "'w').write('forged')\n"
                f"open({str(out / 'summary.csv')!r}, "
                "'w').write('forged')\n"
            )
        ),
        "invalid",
        0,
        "open",
    ),
    "forged_outputs": (lambda out: forged_outputs(), "pass", 1, ""),
    "edited_check": (lambda out: edited_check(), "fail", 0, "FAIL my_ladder_tile"),
    "deleted_check": (lambda out: deleted_check(), "pass", 1, ""),
    "extra_cells": (lambda out: extra_cells(), "fail", 0, "FAIL my_ladder_tile"),
    "stripped_metadata": (lambda out: stripped_metadata(), "pass", 1, ""),
    "reflector": (lambda out: instructor(REFLECTOR), "pass", 1, ""),
    "host_loop": (lambda out: reflector("while True:\n    pass"), "timeout", 0, ""),
    "memory_bomb": (
        lambda out: reflector("hog = []\nwhile True:\n    hog.append(np.zeros(1 << 28))"),
        "crashed",
        0,
        "memory",
    ),
}
# Files that are not a chapter's notebook: (file name, content, message)
BROKEN = {
    "corrupt": ("01_ladder.ipynb", b'{"cells": [{"cell_type": "code", "sour', "not a readable notebook"),
    "not_a_notebook": ("essay.txt", b"I solved it in my head.", "not a notebook"),
    "empty": ("01_ladder.ipynb", nbformat.writes(nbformat.v4.new_notebook()).encode(), "no code cells"),
    "other_chapter": ("02_folding.ipynb", None, "not among the instructor's notebooks"),
}


@pytest.fixture(scope="module")
def reflector_recording(tmp_path_factory):
    """``python -m prefixsum grade --record FILE`` of chapter 09 alone, with the class's options: a
    teacher's recording made before any batch. The graded class reads it (``--recording``) and
    records chapter 01 itself, which it lacks."""
    path = tmp_path_factory.mktemp("recording") / "09.json"
    command = [
        sys.executable,
        "-m",
        "prefixsum",
        "grade",
        "--record",
        str(path),
        "--timeout",
        "12",
        "--memory",
        "3072",
        "--quiet",
        "--instructor",
        str(REFLECTOR),
    ]
    finished = subprocess.run(command, capture_output=True, text=True)
    assert finished.returncode == 0 and f"recorded 1 chapters, 3 exercises: {path}" in finished.stdout, finished.stderr[
        -3000:
    ]
    return path


@pytest.fixture(scope="module")
def class_recording():
    """The recording that the graded class writes (``--record`` with submissions), which the Dask
    cluster's batch reads: ``{"path": path}``, empty until the class was graded in this process (the
    cluster's batch then records its own). test_every_chapter_passes_with_the_instructors_solutions_and_not_blank
    is a batch that records everything itself; tests/test_grade_recording.py tests the recording."""
    return {}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, reflector_recording, class_recording):
    folder = tmp_path_factory.mktemp("class")
    out = folder / "out"
    out.mkdir()  # so that the submissions that write into it find it
    submissions = folder / "submissions"
    for name, (build, *_) in CASES.items():
        (submissions / name).mkdir(parents=True)
        path = REFLECTOR if name in ("reflector", "host_loop", "memory_bomb") else LADDER
        nbformat.write(build(out), submissions / name / path.name)
    for name, (filename, data, _) in BROKEN.items():
        (submissions / name).mkdir(parents=True)
        if data is None:
            data = nbformat.writes(student_version(instructor(NOTEBOOKS / filename), chapter="02_folding")).encode()
        (submissions / name / filename).write_bytes(data)
    command = [
        sys.executable,
        "-m",
        "prefixsum",
        "grade",
        str(submissions),
        "--out",
        str(out),
        "--workers",
        "2",
        "--timeout",
        "12",
        "--memory",
        "3072",
        "--quiet",
        "--instructor",
        str(LADDER),
        str(REFLECTOR),
        "--recording",
        str(reflector_recording),
        "--record",
        str(folder / "recording.json"),
    ]
    finished = subprocess.run(command, capture_output=True, text=True, cwd=folder)
    assert finished.returncode == 0, finished.stderr[-3000:]
    class_recording["path"] = folder / "recording.json"
    with open(out / "grades.csv") as handle:
        rows = list(csv.DictReader(handle))
    with open(out / "summary.csv") as handle:
        summary = list(csv.DictReader(handle))
    by_submission = {}
    for row in rows:
        by_submission.setdefault(row["submission"], {})[row["exercise"]] = row
    return out, by_submission, summary


@pytest.mark.slow  # the graded fixture
def test_the_class_records_only_the_chapter_its_recording_lacks(graded, reflector_recording, class_recording):
    """The class's batch took chapter 09 from the teacher's recording, whole, and recorded of chapter 01
    the exercises its submissions need; it wrote both (``--record``)."""
    given, written = (grading.Recording.read(path) for path in (reflector_recording, class_recording["path"]))
    assert written.chapters["09_householder"] == given.chapters["09_householder"]
    assert set(written.chapters) == {"01_ladder", "09_householder"} and written.options == given.options
    assert "01.ladder-step" in written.exercises("01_ladder")


def target(name):
    """The exercise a case changes."""
    return "09.householder-reflector" if name in ("reflector", "host_loop", "memory_bomb") else "01.ladder-step"


@pytest.mark.slow  # the graded fixture: the grader's whole run (nbval kernels, sandboxes, PTX) on every case
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_submission_gets_its_status_and_score(graded, name):
    _, rows, _ = graded
    _, status, share, word = CASES[name]
    row = rows[name][target(name)]
    assert (row["status"], float(row["score"])) == (status, share * float(row["max_score"])), row
    assert float(row["max_score"]) > 0, row
    assert word.lower() in row["message"].lower(), row
    others = {exercise: r["status"] for exercise, r in rows[name].items() if exercise != target(name)}
    blank = {"not-attempted"} if name != "reflector" else {"pass"}
    assert set(others.values()) <= blank, others


@pytest.mark.slow  # the graded fixture: the grader's whole run (nbval kernels, sandboxes, PTX) on every case
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_files_are_invalid_with_a_clear_message(graded, name):
    _, rows, _ = graded
    (row,) = rows[name].values()
    assert (row["status"], row["score"], row["max_score"]) == ("invalid", "0", "0"), row
    assert BROKEN[name][2] in row["message"], row


@pytest.mark.slow  # the graded fixture: the grader's whole run (nbval kernels, sandboxes, PTX) on every case
def test_reports_are_complete_and_unforged(graded):
    out, rows, summary = graded
    assert set(rows) == set(CASES) | set(BROKEN)
    assert list(next(iter(csv.reader(open(out / "grades.csv"))))) == list(report.GRADE_COLUMNS)
    by_name = {row["submission"]: row for row in summary if row["chapter"] == "all"}
    assert set(by_name) == set(rows)
    solution = rows["solution"]
    assert float(by_name["solution"]["score"]) == float(solution["01.ladder-step"]["max_score"])
    assert by_name["solution"]["pass"] == "1"
    assert int(by_name["solution"]["not-attempted"]) == len(solution) - 1
    assert by_name["memory_bomb"]["crashed"] == "1"
    page = (out / "feedback" / "off_by_one.md").read_text()
    assert "**fail**" in page and "FAIL my\\_ladder\\_tile" in page and "rungs[(t & ~(phase - 1))]" in page
    assert (
        "## Not attempted" in page
        and "- 01\\.serial-scan" not in page
        and "- 01.serial-scan (01\\_ladder): 0 / 1" in page
    )


def _failing_run_here(replacement):
    """The traces of 01.ladder-step's check failing on the ladder with ``replacement``, run in this process as a
    notebook does."""
    from prefixsum.classroom import references

    def run(source, name, namespace):
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)  # as IPython keeps a cell's source
        exec(compile(source, name, "exec"), namespace)  # noqa: S102  (the instructor's cells, and the mistake)

    chapter = chapters.read_chapter(LADDER)
    exercise = chapter.exercise("01.ladder-step")
    namespace = {}
    for k, source in enumerate(chapter.setup):
        run(source, f"<setup {k}>", namespace)
    run(exercise.source.replace(SOLUTION, replacement), "<the mistake>", namespace)
    references.forget_failure()
    run(exercise.checks[0][0], "<check>", {**namespace, "print": lambda *values: None})
    return references.last_failure()


@pytest.mark.slow  # the graded fixture: the grader's whole run (nbval kernels, sandboxes, PTX) on every case
def test_a_failing_ladder_shows_its_first_differing_phase_in_the_feedback(graded):
    from PIL import Image

    from prefixsum.classroom import stepping
    from prefixsum.classroom.viz.step_pictures import difference_caption

    out = graded[0]
    picture = "off_by_one_01.ladder-step.png"
    assert f"]({picture})" in (out / "feedback" / "off_by_one.md").read_text()
    # The picture's model: the first step where the student's run leaves the package's, as the
    # notebook's stepper finds it for the same failing check.
    student, reference = (stepping.model(t) for t in _failing_run_here("rungs[t] += rungs[(t & ~(phase - 1))]"))
    k = stepping.first_difference(student, reference)
    assert k is not None and stepping.differences(student, reference)[k]
    assert Image.open(out / "feedback" / picture).text["Description"] == difference_caption(student, reference, k)
    assert "phase 1" in student[k].label
    assert not list((out / "feedback").glob("solution_*.png"))  # a pass draws nothing


@cuda.jit
def _two_barriers_in_a_row(x):
    i = cuda.threadIdx.x
    x[i] += 1
    cuda.syncthreads()
    cuda.syncthreads()
    x[i] += 2


@cuda.jit
def _one_barrier(x):
    i = cuda.threadIdx.x
    x[i] += 1
    cuda.syncthreads()
    x[i] += 1


def test_two_barriers_in_a_row_are_an_empty_step_and_the_grader_draws_the_difference(tmp_path):
    """Two barriers with no access between them leave a phase empty: the stepper shows it as a step
    where nothing is read or written (the grader once crashed on it, then drew nothing), and the
    feedback picture shows the first step where the run leaves the reference."""
    from prefixsum.classroom import stepping

    student = ps.trace.record(lambda x: _two_barriers_in_a_row[1, 4](x), np.arange(4, dtype=np.int32))
    reference = ps.trace.record(lambda x: _one_barrier[1, 4](x), np.arange(4, dtype=np.int32))
    for by in stepping.GRANULARITIES:
        steps = stepping.model(student, by=by)
        empty = [k for k, step in enumerate(steps) if "no access" in step.label]
        assert len(empty) == 1 and "phase 1" in steps[empty[0]].label, [step.label for step in steps]
        step, before = steps[empty[0]], steps[empty[0] - 1]
        assert not step.read and not step.written and not step.active and step.values == before.values
    model = stepping.model(student)
    assert model[-1].values[next(iter(model[-1].values))] == [3, 4, 5, 6]
    assert stepping.first_difference(model, stepping.model(reference)) is not None
    pictures = report._pictures({("ann", "01.ladder-step"): (student, reference)}, "ann", tmp_path, "ann")
    assert list(pictures) == ["01.ladder-step"] and (tmp_path / pictures["01.ladder-step"]).stat().st_size > 0


@pytest.mark.slow  # a local Dask cluster of two processes, grading a chapter
def test_grade_on_a_dask_cluster_of_two_workers(tmp_path, class_recording):
    distributed = pytest.importorskip("distributed")
    recording = grading.Recording.read(class_recording["path"]) if class_recording else None
    options = recording.options if recording else runner.Options(timeout=30)  # a recording serves only its own
    submissions = tmp_path / "submissions"
    for name, notebook in (
        ("solution", ladder(SOLUTION)),
        ("off_by_one", ladder("rungs[t] += rungs[(t & ~(phase - 1))]")),
    ):
        (submissions / name).mkdir(parents=True)
        nbformat.write(notebook, submissions / name / "01_ladder.ipynb")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        rows = grading.grade(
            [submissions],
            tmp_path / "out",
            instructor=[LADDER],
            scheduler=cluster.scheduler_address,
            options=options,
            progress=False,
            recording=recording,
        )
    ladder_rows = {r.submission: r for r in rows if r.exercise == "01.ladder-step"}
    assert {(s, r.status, r.score == r.max_score > 0) for s, r in ladder_rows.items()} == {
        ("solution", "pass", True),
        ("off_by_one", "fail", False),
    }
    assert {r.status for r in rows if r.exercise != "01.ladder-step"} == {"not-attempted"}
    assert {r.sandbox for r in rows} == {"bwrap"}  # the workers graded in the same sandbox
    assert (tmp_path / "out" / "summary.csv").exists()
