"""The grader's pieces, each on its own: the instructor's metadata and the chapters' exercise ids,
the assembly of a submission, the allow-list, the collection of a class, the instructor's
solutions a batch records, the combination of the steps' verdicts, the command's options and
refusals, every chapter graded with its solutions and blank, and the strict reading of results.
The whole batch on every kind of submission is tests/test_grade.py's.
"""

import json
import os
import subprocess
import sys

import nbformat
import pytest
from grading_notebooks import (
    LADDER,
    NOTEBOOKS,
    PASS_LINE,
    REFLECTOR,
    ROOT,
    SOLUTION,
    cell,
    extra_cells,
    instructor,
    ladder,
    with_exercise,
)

from prefixsum import grading
from prefixsum.classroom.student import student_version
from prefixsum.grading import allowlist, batch, chapters, report, results, runner, statuses


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


@pytest.mark.parametrize(
    "code, found",
    [
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
    ],
)
def test_allowlist_refuses(code, found):
    chapter = chapters.read_chapter(LADDER)
    problems = allowlist.check(
        code,
        instructor_source=chapter.exercises[0].source,
        setup_sources=chapter.setup,
        exercise_id=chapter.exercises[0].id,
    )
    assert any(found in p for p in problems), problems


@pytest.mark.parametrize(
    "exercise_id, old, new, found",
    [
        ("11.compact", "return out", "return cuda.to_device(x[mask])", "index by a variable"),
        ("11.compact", "return out", "return cuda.to_device(x[np.nonzero(mask)])", "nonzero is not allowed"),
        (
            "09.rank-two-update",
            "return A",
            "return cuda.to_device(A.copy_to_host() - np.outer(u[0], q[0]))",
            "outer is not allowed",
        ),
        ("09.rank-two-update", "return A", "return cuda.to_device(A.copy_to_host() - u @ q)", "MatMult is not allowed"),
    ],
)
def test_allowlist_refuses_the_library_call_that_does_the_exercise(exercise_id, old, new, found):
    chapter = next(chapters.read_chapter(p) for p in NOTEBOOKS.glob(f"{exercise_id[:2]}_*.ipynb"))
    source = chapter.exercise(exercise_id).source
    assert old in source
    problems = allowlist.check(
        source.replace(old, new), instructor_source=source, setup_sources=chapter.setup, exercise_id=exercise_id
    )
    assert any(found in p for p in problems), problems


def test_allowlist_accepts_every_instructor_solution_and_blank():
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        chapter = chapters.read_chapter(path)
        earlier = []
        for exercise in chapter.exercises:
            for source in (exercise.source, exercise.blank):
                assert (
                    allowlist.check(
                        source,
                        instructor_source=exercise.source,
                        setup_sources=chapter.setup,
                        earlier_sources=earlier,
                        exercise_id=exercise.id,
                    )
                    == []
                ), exercise.id
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
        ("ann", ".ipynb_checkpoints", "hidden folder, not graded"),
        ("ann", "01_ladder.ipynb", ""),
        ("ann", "shadow.ipynb", "a symlink: refused, not followed"),
        ("bob", "", "the submission holds no file"),
        ("single", "single.ipynb", ""),
    ]


def test_a_batch_checks_only_the_instructors_solutions_some_submission_needs(tmp_path):
    """The batch's own check of the instructor's solutions (and the record of their launches)
    covers the exercises that some submission has the grader run: attempted and accepted. A
    class that hands in one exercise of chapter 01 records that one, and nothing of chapter 09."""
    ladder_chapter, reflector_chapter = chapters.read_chapter(LADDER), chapters.read_chapter(REFLECTOR)
    known = {c.name: c for c in (ladder_chapter, reflector_chapter)}
    for name, notebook in {
        "blank": student_version(instructor(), chapter="01_ladder"),
        "step": ladder(SOLUTION),
        "refused": with_exercise(lambda s: "import os\n" + s, exercise_id="01.ladder-max"),
    }.items():
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
    recorded = {
        e.id: {"signatures": {}, "launches": 1, "source": e.source, "checked": {**entry, "id": e.id}}
        for e in chapter.exercises
    }
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
    graded = [
        runner.grade_notebook(
            "ann",
            LADDER.name,
            nbformat.writes(notebook).encode(),
            {chapter.name: chapter},
            {chapter.name: recorded},
            runner.Options(isolated=False),
        )
        for notebook in (instructor(), commented)
    ]
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
    assert statuses.combine(exercise, exercise.source, [], {}, passed, ("pass", "")) == ("pass", "")
    status, message = statuses.combine(exercise, exercise.source, [], {}, failed, ("pass", ""))
    assert status == "tampered" and "printed the stored verdict" in message and "FAIL x" in message
    assert statuses.combine(exercise, exercise.source, [], {}, passed, ("fail", "printed")) == (
        "fail",
        "the grader's own check passes, but nbval's run of the check in the notebook did not: printed",
    )
    assert statuses.combine(exercise, exercise.source, [], {}, failed, ("fail", ""))[0] == "fail"
    assert statuses.combine(exercise, exercise.source, [], rejected, {}, ("fail", ""))[0] == "invalid"
    assert statuses.combine(exercise, exercise.source, [], rejected, passed, ("pass", ""))[0] == "invalid"
    note = {"status": "ok", "message": "kernel my_flags is the submission's own"}
    assert statuses.combine(exercise, exercise.source, [], note, passed, ("pass", "")) == ("pass", note["message"])


def test_grade_help_explains_every_option():
    finished = subprocess.run([sys.executable, "-m", "prefixsum", "grade", "--help"], capture_output=True, text=True)
    for option in (
        "--out",
        "--instructor",
        "--workers",
        "--timeout",
        "--scheduler",
        "--memory",
        "--record ",
        "--recording",
    ):
        assert option in finished.stdout


@pytest.mark.slow  # every chapter graded twice: its solutions and its blank students' version
def test_every_chapter_passes_with_the_instructors_solutions_and_not_blank(tmp_path):
    """Each instructor's notebook, submitted as it is, passes every exercise under the grader
    (its setup tags name every cell the exercises need, and its stored check outputs are right);
    its students' version, submitted blank, passes none."""
    paths = sorted(
        p
        for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")
        if any("exercise" in c.metadata.get("tags", []) for c in nbformat.read(p, 4).cells)
    )
    blank = tmp_path / "blank"
    blank.mkdir()
    for path in paths:
        nbformat.write(student_version(instructor(path), chapter=path.stem), blank / path.name)
    rows = grading.grade(
        [*paths, blank],
        tmp_path / "out",
        instructor=paths,
        workers=2,
        options=runner.Options(timeout=120),
        progress=False,
    )
    every = {e.id for p in paths for e in chapters.read_chapter(p).exercises}
    assert {(r.exercise, r.status) for r in rows if r.submission != "blank"} == {(e, "pass") for e in every}
    assert {(r.exercise, r.status) for r in rows if r.submission == "blank"} == {(e, "not-attempted") for e in every}


def test_grade_refuses_a_malformed_recording_a_command_with_nothing_to_do_and_an_unwritable_record(tmp_path):
    (tmp_path / "recording.json").write_text('{"format": "prefixsum-grading-recording", "version": 1}')
    command = [sys.executable, "-m", "prefixsum", "grade", "--instructor", str(LADDER), "--quiet"]
    finished = subprocess.run(
        [*command, str(tmp_path), "--out", str(tmp_path / "out"), "--recording", str(tmp_path / "recording.json")],
        capture_output=True,
        text=True,
    )
    assert (
        finished.returncode == 2
        and f"grade: the recording {tmp_path / 'recording.json'}: a recording holds exactly" in finished.stderr
    ), finished.stderr
    assert not (tmp_path / "out").exists()
    finished = subprocess.run(command, capture_output=True, text=True)
    assert finished.returncode != 0 and "name at least one SUBMISSION (or only record" in finished.stderr
    finished = subprocess.run(
        [*command, "--record", str(tmp_path / "missing" / "recording.json")], capture_output=True, text=True
    )
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


@pytest.mark.parametrize(
    "line",
    [
        '{"id": "01.serial-scan", "status": "pass", "launches": 0}',  # a verdict the sandbox may not give
        '{"id": "02.other", "status": "ran", "launches": 0}',  # an exercise not asked for
        '{"id": "01.serial-scan", "status": "ran", "launches": 0, "extra": 1}',
        '{"id": "01.serial-scan", "status": "ran", "launches": NaN}',
        '{"id": "01.serial-scan", "status": "ran", "launches": 0, "lines": [1]}',
        "[" * 100000,
        "not json",
    ],
)
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
    row = runner.Row(
        "eve\n# heading",
        "01_ladder.ipynb",
        "01.ladder-step",
        0,
        2,
        "fail",
        "line 2: [x](javascript:y)",
        "a = 1\nb = 2\n",
        "01_ladder",
    )
    page = report.feedback(row.submission, [row])
    assert "\n# heading" not in page and "\\[x\\]" in page and "2 | b = 2" in page
