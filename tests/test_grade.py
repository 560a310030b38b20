"""python -m prefixsum grade: honest, wrong, hanging, crashing and forged submissions, in one batch.

The submissions are built from the real notebooks (the instructor's solutions, the students'
versions) and graded together by one run of the grader with two workers: each must get its own
status and score, and every other grade must come out intact. The allow-list, the assembly and
the reports have fast tests of their own.
"""
import csv
import json
import linecache
import os
import pathlib
import subprocess
import sys

import nbformat
import numpy as np
import pytest
from numba import cuda

import prefixsum as ps
from prefixsum import grading
from prefixsum.classroom.student import student_version
from prefixsum.grading import allowlist, batch, chapters, report, results, runner

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
LADDER, REFLECTOR = NOTEBOOKS / "01_ladder.ipynb", NOTEBOOKS / "09_householder.ipynb"
SOLUTION = "rungs[t] += rungs[(t & ~(phase - 1)) - 1]"
PASS_LINE = "PASS my_ladder_tile: 11 sizes from 1 to 2049"


def instructor(path=LADDER):
    return nbformat.read(path, as_version=4)


def cell(notebook, exercise_id, kind="exercise"):
    return next(
        c for c in notebook.cells if c.metadata.get("exercise_id") == exercise_id and kind in c.metadata.get("tags", [])
    )


def with_exercise(transform, path=LADDER, exercise_id="01.ladder-step"):
    """The student's version of ``path`` with the exercise cell's source replaced by ``transform(solution)``."""
    notebook = student_version(instructor(path), chapter=path.stem)
    cell(notebook, exercise_id).source = transform(cell(instructor(path), exercise_id).source)
    return notebook


def ladder(replacement):
    """Notebook 01 with the solution's line replaced (indented as it is, inside ``if t & phase:``)."""
    return with_exercise(lambda source: source.replace(SOLUTION, replacement))


def reflector(body):
    """Notebook 08 with my_reflector's body (between the markers) replaced by ``body``."""
    def transform(source):
        head, rest = source.split("    ### BEGIN SOLUTION\n")
        return head + "".join(f"    {line}\n" for line in body.splitlines()) + rest.split("    ### END SOLUTION\n")[1]
    return with_exercise(transform, REFLECTOR, "09.householder-reflector")


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


def extra_cells():
    notebook = ladder("rungs[t] += rungs[t - phase]")
    notebook.cells.insert(0, nbformat.v4.new_code_cell("import prefixsum as ps\nps.check.tiled = lambda *a, **k: "
                                                       f"{PASS_LINE!r}"))
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
    command = [sys.executable, "-m", "prefixsum", "grade", "--record", str(path), "--timeout", "12", "--memory", "3072",
               "--quiet", "--instructor", str(REFLECTOR)]
    finished = subprocess.run(command, capture_output=True, text=True)
    assert finished.returncode == 0 and f"recorded 1 chapters, 3 exercises: {path}" in finished.stdout, (
        finished.stderr[-3000:])
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
    command = [sys.executable, "-m", "prefixsum", "grade", str(submissions), "--out", str(out), "--workers", "2",
               "--timeout", "12", "--memory", "3072", "--quiet", "--instructor", str(LADDER), str(REFLECTOR),
               "--recording", str(reflector_recording), "--record", str(folder / "recording.json")]
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
    from prefixsum.classroom import stepping

    def run(source, name, namespace):
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)  # as IPython keeps a cell's source
        exec(compile(source, name, "exec"), namespace)  # noqa: S102  (the instructor's cells, and the mistake)

    chapter = chapters.read_chapter(LADDER)
    exercise = chapter.exercise("01.ladder-step")
    namespace = {}
    for k, source in enumerate(chapter.setup):
        run(source, f"<setup {k}>", namespace)
    run(exercise.source.replace(SOLUTION, replacement), "<the mistake>", namespace)
    stepping.forget_failure()
    run(exercise.checks[0][0], "<check>", {**namespace, "print": lambda *values: None})
    return stepping.last_failure()


@pytest.mark.slow  # the graded fixture: the grader's whole run (nbval kernels, sandboxes, PTX) on every case
def test_a_failing_ladder_shows_its_first_differing_phase_in_the_feedback(graded):
    from PIL import Image

    from prefixsum.classroom import stepping
    from prefixsum.classroom.viz.stepper import difference_caption

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


def test_a_run_the_stepper_cannot_replay_gets_its_feedback_without_a_picture(tmp_path):
    """Two barriers with no access between them leave a phase empty: the grader crashed in CI
    when it drew the first differing phase of such a submission."""
    from prefixsum.classroom import stepping

    student = ps.trace.record(lambda x: _two_barriers_in_a_row[1, 4](x), np.arange(4, dtype=np.int32))
    reference = ps.trace.record(lambda x: _one_barrier[1, 4](x), np.arange(4, dtype=np.int32))
    with pytest.raises(stepping.BrokenTrace, match="a phase is missing"):
        stepping.model(student)
    assert report._pictures({("ann", "01.ladder-step"): (student, reference)}, "ann", tmp_path, "ann") == {}
    assert not list(tmp_path.iterdir())


def test_instructor_metadata_errors_are_named(tmp_path):
    notebook = instructor()
    cell(notebook, "01.ladder-step").metadata.pop("exercise_id")
    nbformat.write(notebook, tmp_path / "01_ladder.ipynb")
    with pytest.raises(ValueError, match="needs the metadata exercise_id"):
        chapters.read_chapter(tmp_path / "01_ladder.ipynb")


def test_every_chapter_has_exercise_ids_and_setup_cells():
    # all but 00 (the introduction)
    for path in sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if p.stem != "00_gpu_basics"):
        chapter = chapters.read_chapter(path)
        assert chapter.exercises and chapter.setup, path.name
        for exercise in chapter.exercises:
            assert exercise.id.startswith(path.name[:3].replace("_", ".")), exercise.id


def test_assembly_takes_only_the_exercise_from_the_submission():
    chapter = chapters.read_chapter(LADDER)
    submission = extra_cells()
    notebook, kinds = chapters.assemble(chapter, chapters.submitted_sources(submission, chapter))
    assert [kind for kind, _ in kinds] == ["grader", "setup"] + ["exercise", "check"] * len(chapter.exercises)
    assert "ps.check.tiled = " not in nbformat.writes(notebook)
    ladder_check = kinds.index(("check", "01.ladder-step"))
    assert notebook.cells[ladder_check].outputs[0]["text"] == PASS_LINE + "\n"


def test_student_versions_are_stamped_with_chapter_and_ids():
    original = instructor(NOTEBOOKS / "06_hierarchical.ipynb")
    ids = [c.metadata["exercise_id"] for c in original.cells if "exercise" in c.metadata.get("tags", [])]
    stamped = student_version(original, chapter="06_hierarchical")
    assert stamped.metadata["prefixsum"] == {"chapter": "06_hierarchical", "exercises": ids}
    assert {"06.warp-shuffle-scan", "06.block-combine"} <= set(ids)
    assert cell(stamped, "06.block-combine").metadata["todo"]


@pytest.mark.parametrize("code, found", [
    ("import subprocess", "import of subprocess"),
    ("from numba import cuda\nfrom os import path", "from os import"),
    ("x = len([1])", "only constants"),
    ("def f():\n    global ps\n    ps = 1", "global is not allowed"),
    ("def f(x):\n    return x.__class__", ".__class__"),
    ("def f(x):\n    return getattr(x, 'y')", "getattr"),
    ("def f(x):\n    return eval('1')", "eval"),
    ("def f(x):\n    x.shape = (1,)", "assigning or deleting the attribute"),
    ("def f(x):\n    return ps.sim.allow_negative_indices()", "ps.sim.allow_negative_indices"),
    ("def f(x):\n    p = ps\n    return p", "may only be used as ps.<attribute>"),
    ("def f(x):\n    np.save('x', x)", ".save"),
    ("def f():\n    return get_ipython()", "get_ipython"),
    ("def np():\n    pass", "rebinds np"),
    ("@staticmethod\ndef f():\n    pass", "decorator"),
    ("from numpy.ctypeslib import ctypes", "import ctypes"),
    ("from numpy import __builtins__", "import __builtins__"),
    ("from numba.cuda.core.config import ENABLE_CUDASIM", "import ENABLE_CUDASIM"),
    ("import numpy.testing", "import of numpy.testing"),
    ("def f(x):\n    return np.fromfile(x)", "np.fromfile is not among the names"),
    ("from numba import cuda\n\n\ndef f(x):\n    return cuda.libdevice", "cuda.libdevice is not among the names"),
    ("def f(x: print(1)):\n    pass", "annotations are not allowed"),
    ("def f(x) -> print(1):\n    pass", "annotations are not allowed"),
    ("x: print(1) = 2", "not allowed at the top"),
    ("def f(x):\n    return '{0.__class__}'.format(x)", ".format"),
    ("def f(x):\n    @print\n    def g():\n        pass", "the only decorator allowed"),
    ("def my_partial_sums(x):\n    return np.cumsum(x)", "cumsum is not allowed in 01.serial-scan"),
    ("def my_partial_sums(x):\n    return np.add.accumulate(x)", "accumulate is not allowed in 01.serial-scan"),
    ("x = '\ud800'", "cannot be parsed"),
])
def test_allowlist_refuses(code, found):
    chapter = chapters.read_chapter(LADDER)
    problems = allowlist.check(code, instructor_source=chapter.exercises[0].source, setup_sources=chapter.setup,
                               exercise_id=chapter.exercises[0].id)
    assert any(found in p for p in problems), problems


@pytest.mark.parametrize("exercise_id, old, new, found", [
    ("11.compact", "return out", "return cuda.to_device(x[mask])", "index by a variable"),
    ("11.compact", "return out", "return cuda.to_device(x[np.nonzero(mask)])", "nonzero is not allowed"),
    ("09.rank-two-update", "return A", "return cuda.to_device(A.copy_to_host() - np.outer(u[0], q[0]))", "outer is not "
                                                                                                         "allowed"),
    ("09.rank-two-update", "return A", "return cuda.to_device(A.copy_to_host() - u @ q)", "MatMult is not allowed"),
])
def test_allowlist_refuses_the_library_call_that_does_the_exercise(exercise_id, old, new, found):
    chapter = next(chapters.read_chapter(p) for p in NOTEBOOKS.glob(f"{exercise_id[:2]}_*.ipynb"))
    source = chapter.exercise(exercise_id).source
    assert old in source
    problems = allowlist.check(source.replace(old, new), instructor_source=source, setup_sources=chapter.setup,
                               exercise_id=exercise_id)
    assert any(found in p for p in problems), problems


def test_allowlist_accepts_every_instructor_solution_and_blank():
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        chapter = chapters.read_chapter(path)
        earlier = []
        for exercise in chapter.exercises:
            for source in (exercise.source, exercise.blank):
                assert allowlist.check(source, instructor_source=exercise.source, setup_sources=chapter.setup,
                                       earlier_sources=earlier, exercise_id=exercise.id) == [], exercise.id
            earlier.append(exercise.source)


def test_collect_names_submissions_by_folder_or_file(tmp_path):
    (tmp_path / "class" / "ann").mkdir(parents=True)
    (tmp_path / "class" / "ann" / "01_ladder.ipynb").write_text("{}")
    (tmp_path / "class" / "ann" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "class" / "ann" / ".ipynb_checkpoints" / "x.ipynb").write_text("{}")
    (tmp_path / "class" / "bob").mkdir()
    (tmp_path / "single.ipynb").write_text("{}")
    (tmp_path / "class" / "ann" / "shadow.ipynb").symlink_to("/etc/shadow")
    found = grading.collect([tmp_path / "class", tmp_path / "single.ipynb"])
    assert [(s, f, why) for s, f, _, why in found] == [
        ("ann", ".ipynb_checkpoints", "hidden folder, not graded"), ("ann", "01_ladder.ipynb", ""),
        ("ann", "shadow.ipynb", "a symlink: refused, not followed"), ("bob", "", "the submission holds no file"),
        ("single", "single.ipynb", "")]


def test_a_batch_checks_only_the_instructors_solutions_some_submission_needs(tmp_path):
    """The batch's own check of the instructor's solutions (and the record of their launches)
    covers the exercises that some submission has the grader run: attempted and accepted. A
    class that hands in one exercise of chapter 01 records that one, and nothing of chapter 09."""
    ladder_chapter, reflector_chapter = chapters.read_chapter(LADDER), chapters.read_chapter(REFLECTOR)
    known = {c.name: c for c in (ladder_chapter, reflector_chapter)}
    for name, notebook in {"blank": student_version(instructor(), chapter="01_ladder"), "step": ladder(SOLUTION),
                           "refused": with_exercise(lambda s: "import os\n" + s, exercise_id="01.ladder-max")}.items():
        (tmp_path / name).mkdir()
        nbformat.write(notebook, tmp_path / name / LADDER.name)
    (tmp_path / "essay").mkdir()
    (tmp_path / "essay" / "essay.txt").write_text("I solved it in my head.")
    needed = batch._needed(batch._screen_all(grading.collect([tmp_path]), known, 16))
    assert needed == {ladder_chapter.name: {"01.ladder-step"}}
    assert runner.instructor_signatures(reflector_chapter, ids=set()) == {}  # nothing to record: no process at all


def test_a_submission_of_exactly_the_recorded_solutions_takes_their_verdicts(monkeypatch):
    """The batch's own check of the instructor's solutions is the check of a submission that hands
    in exactly those cells: its verdicts are reused (the checks are deterministic); a submission
    that differs by a comment gets its own sandboxed check."""
    chapter = chapters.read_chapter(LADDER)
    entry = {"status": "ran", "message": "", "lines": [], "launches": 1}
    recorded = {e.id: {"signatures": {}, "launches": 1, "source": e.source, "checked": {**entry, "id": e.id}}
                for e in chapter.exercises}
    modes = []

    def trusted(mode, chapter, sources, options, signatures=None):
        modes.append((mode, sorted(sources)))
        return {i: {**entry, "id": i} for i in sources}, None

    monkeypatch.setattr(runner, "_trusted", trusted)
    monkeypatch.setattr(runner, "_nbval", lambda chapter, sources, options: ({i: ("pass", "") for i in sources}, None))
    monkeypatch.setattr(
        results, "check_verdict", lambda exercise, found, launches, sanitize: {"status": "pass", "message": ""}
    )
    commented = instructor()
    cell(commented, "01.ladder-step").source += "\n# mine\n"
    graded = [runner.grade_notebook("ann", LADDER.name, nbformat.writes(notebook).encode(), {chapter.name: chapter},
                                    {chapter.name: recorded}, runner.Options(isolated=False))
              for notebook in (instructor(), commented)]
    assert [{r.status for r in rows} for rows in graded] == [{"pass"}, {"pass"}]
    assert modes == [("check", sorted(recorded))]  # the second submission's only


def test_combine_reports_only_evidence_of_forgery_as_tampering():
    """A PASS that the notebook's run printed and the grader's own check did not find is forgery;
    the other disagreement, and a refusal, are not: the grader's own check passing where nbval's
    run did not is a ``fail`` that says what nbval printed, and a kernel the PTX compiler refuses is
    ``invalid`` even where nbval's run of the simulator passed it."""
    exercise = chapters.read_chapter(LADDER).exercises[0]
    passed, failed = {"status": "pass"}, {"status": "fail", "message": "FAIL x"}
    rejected = {"status": "rejected", "message": "kernel k does not compile for a GPU"}
    assert runner.combine(exercise, exercise.source, [], {}, passed, ("pass", "")) == ("pass", "")
    status, message = runner.combine(exercise, exercise.source, [], {}, failed, ("pass", ""))
    assert status == "tampered" and "printed the stored verdict" in message and "FAIL x" in message
    assert runner.combine(exercise, exercise.source, [], {}, passed, ("fail", "printed")) == (
        "fail", "the grader's own check passes, but nbval's run of the check in the notebook did not: printed")
    assert runner.combine(exercise, exercise.source, [], {}, failed, ("fail", ""))[0] == "fail"
    assert runner.combine(exercise, exercise.source, [], rejected, {}, ("fail", ""))[0] == "invalid"
    assert runner.combine(exercise, exercise.source, [], rejected, passed, ("pass", ""))[0] == "invalid"
    note = {"status": "ok", "message": "kernel my_flags is the submission's own"}
    assert runner.combine(exercise, exercise.source, [], note, passed, ("pass", "")) == ("pass", note["message"])


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
        rows = grading.grade([submissions], tmp_path / "out", instructor=[LADDER], scheduler=cluster.scheduler_address,
                             options=options, progress=False, recording=recording)
    ladder_rows = {r.submission: r for r in rows if r.exercise == "01.ladder-step"}
    assert {(s, r.status, r.score == r.max_score > 0) for s, r in ladder_rows.items()} == {
        ("solution", "pass", True), ("off_by_one", "fail", False)}
    assert {r.status for r in rows if r.exercise != "01.ladder-step"} == {"not-attempted"}
    assert {r.sandbox for r in rows} == {"bwrap"}  # the workers graded in the same sandbox
    assert (tmp_path / "out" / "summary.csv").exists()


def test_grade_help_explains_every_option():
    finished = subprocess.run([sys.executable, "-m", "prefixsum", "grade", "--help"], capture_output=True, text=True)
    for option in ("--out", "--instructor", "--workers", "--timeout", "--scheduler", "--memory", "--record ",
                   "--recording"):
        assert option in finished.stdout


@pytest.mark.slow  # every chapter graded twice: its solutions and its blank students' version
def test_every_chapter_passes_with_the_instructors_solutions_and_not_blank(tmp_path):
    """Each instructor's notebook, submitted as it is, passes every exercise under the grader
    (its setup tags name every cell the exercises need, and its stored check outputs are right);
    its students' version, submitted blank, passes none."""
    paths = sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if any(
        "exercise" in c.metadata.get("tags", []) for c in nbformat.read(p, 4).cells))
    blank = tmp_path / "blank"
    blank.mkdir()
    for path in paths:
        nbformat.write(student_version(instructor(path), chapter=path.stem), blank / path.name)
    rows = grading.grade([*paths, blank], tmp_path / "out", instructor=paths, workers=2,
                         options=runner.Options(timeout=120), progress=False)
    every = {e.id for p in paths for e in chapters.read_chapter(p).exercises}
    assert {(r.exercise, r.status) for r in rows if r.submission != "blank"} == {(e, "pass") for e in every}
    assert {(r.exercise, r.status) for r in rows if r.submission == "blank"} == {(e, "not-attempted") for e in every}


def test_grade_refuses_a_malformed_recording_a_command_with_nothing_to_do_and_an_unwritable_record(tmp_path):
    (tmp_path / "recording.json").write_text('{"format": "prefixsum-grading-recording", "version": 1}')
    command = [sys.executable, "-m", "prefixsum", "grade", "--instructor", str(LADDER), "--quiet"]
    finished = subprocess.run([*command, str(tmp_path), "--out", str(tmp_path / "out"), "--recording",
                               str(tmp_path / "recording.json")], capture_output=True, text=True)
    assert finished.returncode == 2 and f"grade: the recording {tmp_path / 'recording.json'}: a recording holds " \
                                       "exactly" in finished.stderr, finished.stderr
    assert not (tmp_path / "out").exists()
    finished = subprocess.run(command, capture_output=True, text=True)
    assert finished.returncode != 0 and "name at least one SUBMISSION (or only record" in finished.stderr
    finished = subprocess.run([*command, "--record", str(tmp_path / "missing" / "recording.json")],
                              capture_output=True, text=True)
    assert finished.returncode == 2 and f"cannot write into {tmp_path / 'missing'}" in finished.stderr


def test_grade_refuses_without_a_sandbox_unless_told(tmp_path):
    (tmp_path / "ann").mkdir()
    env = {**os.environ, "PATH": str(tmp_path), "PYTHONPATH": str(ROOT)}  # no bwrap on the PATH
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "prefixsum",
            "grade",
            str(tmp_path / "ann"),
            "--out",
            str(tmp_path / "out"),
            "--instructor",
            str(LADDER),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert finished.returncode == 2 and "--unsafe-no-sandbox" in finished.stderr, finished.stderr
    assert not (tmp_path / "out").exists()
    _, (row,) = batch._screen_file("ann", "", None, "the submission holds no file", {}, 16, "none")
    assert (row.status, row.sandbox) == ("invalid", "none")


@pytest.mark.parametrize("line", [
    '{"id": "01.serial-scan", "status": "pass", "launches": 0}',  # a verdict the sandbox may not give
    '{"id": "02.other", "status": "ran", "launches": 0}',  # an exercise not asked for
    '{"id": "01.serial-scan", "status": "ran", "launches": 0, "extra": 1}',
    '{"id": "01.serial-scan", "status": "ran", "launches": NaN}',
    '{"id": "01.serial-scan", "status": "ran", "launches": 0, "lines": [1]}',
    '[' * 100000,
    "not json",
])
def test_results_from_a_sandbox_are_read_strictly(line):
    assert results.parse(line, "check", {"01.serial-scan"}) == {}


def test_a_check_passes_only_with_the_stored_output_and_a_launch():
    exercise = chapters.read_chapter(LADDER).exercise("01.ladder-step")
    printed = {"id": exercise.id, "status": "ran", "message": "", "lines": [PASS_LINE + "\n"], "launches": 3}
    assert results.parse(json.dumps(printed), "check", {exercise.id})[exercise.id] == printed
    assert results.check_verdict(exercise, printed, True, "")["status"] == "pass"
    assert results.check_verdict(exercise, {**printed, "launches": 0}, True, "")["status"] == "fail"
    assert results.check_verdict(exercise, {**printed, "lines": ["PASS\n"]}, False, "")["status"] == "fail"


def test_csv_cells_and_feedback_are_escaped():
    assert [report.cell(v) for v in ("=1+1", "+x", "-x", "@x", "ann")] == ["'=1+1", "'+x", "'-x", "'@x", "ann"]
    row = runner.Row("eve\n# heading", "01_ladder.ipynb", "01.ladder-step", 0, 2, "fail", "line 2: [x](javascript:y)",
                     "a = 1\nb = 2\n", "01_ladder")
    page = report.feedback(row.submission, [row])
    assert "\n# heading" not in page and "\\[x\\]" in page and "2 | b = 2" in page
