"""A recording of the instructor's solutions (``grade --record FILE``, ``--recording FILE``): its JSON
read back exactly and strictly, refused with other notebooks, options or version, and a batch that
records only what its recording lacks. No sandbox runs here (the recording's entries are made up):
tests/test_grade.py and tests/test_grade_attacks.py grade whole batches with real recordings.
"""

import dataclasses
import json
import pathlib
import stat

import nbformat
import pytest

from prefixsum import grading
from prefixsum.grading import batch, chapters, runner
from prefixsum.grading.recording import Recording, RecordingError, material_hash

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
LADDER, REFLECTOR = NOTEBOOKS / "01_ladder.ipynb", NOTEBOOKS / "09_householder.ipynb"
OPTIONS = runner.Options(isolated=False)


@pytest.fixture(scope="module")
def known():
    return {c.name: c for c in map(chapters.read_chapter, (LADDER, REFLECTOR))}


def _entries(chapter, ids=None):
    """Made-up records of ``chapter``'s exercises (``ids``, default all), shaped as a sandbox's."""
    return {
        e.id: {
            "signatures": {"my_kernel": ["void(float32[::1])"]},
            "launches": 1,
            "source": e.source,
            "checked": {"id": e.id, "status": "ran", "message": "", "lines": ["PASS\n"], "launches": 1},
        }
        for e in chapter.exercises
        if ids is None or e.id in ids
    }


def _recording(chapter, ids=None, options=OPTIONS):
    return Recording(options, {chapter.name: {"material": material_hash(chapter), "exercises": _entries(chapter, ids)}})


def test_a_recording_round_trips_through_its_json_and_its_file(known, tmp_path):
    recording = _recording(known["01_ladder"])
    assert Recording.from_json(recording.to_json()) == recording
    recording.write(tmp_path / "recording.json")
    assert stat.S_IMODE((tmp_path / "recording.json").stat().st_mode) == 0o644  # a batch as nobody reads it
    assert Recording.read(tmp_path / "recording.json") == recording
    assert [p.name for p in tmp_path.iterdir()] == ["recording.json"]  # no temporary file left
    recording.check(known, OPTIONS)  # made with these: no error
    assert recording.exercises("01_ladder") == _entries(known["01_ladder"]) and recording.exercises("09_x") is None


def _refusal(recording, chapters_now, options=OPTIONS):
    with pytest.raises(RecordingError) as error:
        recording.check(chapters_now, options)
    return str(error.value)


def test_a_recording_is_refused_with_other_options_material_or_version(known):
    ladder = known["01_ladder"]
    recording = _recording(ladder)
    message = _refusal(recording, known, dataclasses.replace(OPTIONS, timeout=30.0))
    assert "timeout 60.0 (now 30.0)" in message and "--record FILE" in message
    limits = dataclasses.replace(OPTIONS.limits, memory_mb=3072)
    assert "limits.memory_mb 4096 (now 3072)" in _refusal(recording, known, dataclasses.replace(OPTIONS, limits=limits))
    assert "isolated False (now True)" in _refusal(recording, known, runner.Options())
    first = ladder.exercises[0]
    for changed in (
        dataclasses.replace(ladder, setup=(*ladder.setup, "x = 1")),
        dataclasses.replace(ladder, sanitize=ladder.sanitize + "\n[other]\nregex: a\nreplace: b\n"),
        dataclasses.replace(
            ladder,
            exercises=(
                dataclasses.replace(first, checks=tuple((check, "PASS other\n") for check, _ in first.checks)),
                *ladder.exercises[1:],
            ),
        ),
    ):
        message = _refusal(recording, {ladder.name: changed})
        assert "chapter 01_ladder was made from other instructor material" in message
    assert "made by prefixsum 0.0.1" in _refusal(dataclasses.replace(recording, package="0.0.1"), known)
    # Points and the students' todo text change no check: the recording still serves.
    recording.check(
        {
            ladder.name: dataclasses.replace(
                ladder,
                exercises=tuple(dataclasses.replace(e, points=e.points + 1, todo="other") for e in ladder.exercises),
            )
        },
        OPTIONS,
    )
    recording.check({"09_householder": known["09_householder"]}, OPTIONS)  # a chapter not graded is not used
    forged = Recording(
        OPTIONS,
        {
            ladder.name: {
                "material": material_hash(ladder),
                "exercises": {**_entries(ladder), "01.other": _entries(ladder)[first.id]},
            }
        },
    )
    assert "records exercises it does not have (01.other)" in _refusal(forged, known)
    edited = _entries(ladder)
    edited[first.id] = {**edited[first.id], "source": "out[:] = 0"}
    forged = Recording(OPTIONS, {ladder.name: {"material": material_hash(ladder), "exercises": edited}})
    assert f"holds sources other than the solutions of {first.id}" in _refusal(forged, known)


def _edited(recording, edit):
    value = json.loads(recording.to_json())
    edit(value)
    return json.dumps(value)


_FIRST = "01.serial-scan"
MALFORMED = {
    "not JSON": (lambda r: "{'format': 1}", "not JSON"),
    "NaN": (lambda r: r.to_json().replace('"timeout": 60.0', '"timeout": NaN'), "not JSON"),
    "a list": (lambda r: "[]", "its 'format' is not"),
    "another format": (lambda r: _edited(r, lambda v: v.update(format="pickle")), "its 'format' is not"),
    "a newer version": (lambda r: _edited(r, lambda v: v.update(version=2)), "format version 2"),
    "an extra field": (lambda r: _edited(r, lambda v: v.update(code="import os")), "holds exactly"),
    "a text timeout": (lambda r: _edited(r, lambda v: v["options"].update(timeout="60")), "options.timeout"),
    "a limit missing": (lambda r: _edited(r, lambda v: v["options"]["limits"].pop("cpu_s")), "options.limits"),
    "a float limit": (lambda r: _edited(r, lambda v: v["options"]["limits"].update(cpu_s=1.5)), "options.limits"),
    "a short hash": (lambda r: _edited(r, lambda v: v["chapters"]["01_ladder"].update(material="ab")), "SHA-256"),
    "no exercise": (lambda r: _edited(r, lambda v: v["chapters"]["01_ladder"].update(exercises={})), "'exercises'"),
    "an extra entry field": (
        lambda r: _edited(r, lambda v: v["chapters"]["01_ladder"]["exercises"][_FIRST].update(run="x")),
        f"exercise {_FIRST}: must hold exactly",
    ),
    "a verdict the sandbox may not give": (
        lambda r: _edited(
            r, lambda v: v["chapters"]["01_ladder"]["exercises"][_FIRST]["checked"].update(status="pass")
        ),
        "'checked' is not a verdict",
    ),
    "another exercise's verdict": (
        lambda r: _edited(
            r, lambda v: v["chapters"]["01_ladder"]["exercises"][_FIRST]["checked"].update(id="01.ladder-step")
        ),
        "'checked' is not a verdict",
    ),
    "signatures not a list": (
        lambda r: _edited(
            r, lambda v: v["chapters"]["01_ladder"]["exercises"][_FIRST].update(signatures={"k": "void()"})
        ),
        "'signatures'",
    ),
    "negative launches": (
        lambda r: _edited(r, lambda v: v["chapters"]["01_ladder"]["exercises"][_FIRST].update(launches=-1)),
        "'launches'",
    ),
    "deep nesting": (lambda r: "[" * 100000, "not JSON"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_recording_is_refused_naming_what_is_wrong(known, tmp_path, name):
    text = MALFORMED[name][0](_recording(known["01_ladder"]))
    with pytest.raises(RecordingError, match=f".*{MALFORMED[name][1]}"):
        Recording.from_json(text)
    (tmp_path / "recording.json").write_text(text)
    with pytest.raises(RecordingError, match=f"the recording {tmp_path / 'recording.json'}: "):
        Recording.read(tmp_path / "recording.json")


def test_a_recording_file_that_is_no_text_or_no_file_is_refused(tmp_path):
    (tmp_path / "pickled").write_bytes(b"\x80\x04\x95\x00\xff")
    with pytest.raises(RecordingError, match="is not UTF-8 text"):
        Recording.read(tmp_path / "pickled")
    with pytest.raises(RecordingError, match="cannot read the recording .*missing"):
        Recording.read(tmp_path / "missing")


def _submit(folder, student, path):
    (folder / student).mkdir()
    nbformat.write(nbformat.read(path, as_version=4), folder / student / path.name)


def _batch(tmp_path, monkeypatch, known, recording):
    """``(recorded, given, written)`` of a batch of ann (chapter 01's solutions) and bob (09's) with
    ``recording``: the chapters and ids the batch recorded itself, the records each file was graded
    with, and the recording it wrote (``record_to``)."""
    (tmp_path / "class").mkdir()
    for student, path in (("ann", LADDER), ("bob", REFLECTOR)):
        _submit(tmp_path / "class", student, path)
    recorded, given = [], {}

    def instructor_signatures(chapter, options, ids):
        recorded.append((chapter.name, ids))
        return _entries(chapter, ids)

    def grade_notebook(student, filename, data, chapters_given, signatures, options, screened):
        given[student] = signatures[screened.chapter.name]
        return []

    monkeypatch.setattr(batch, "instructor_signatures", instructor_signatures)
    monkeypatch.setattr(batch, "grade_notebook", grade_notebook)
    batch._grade_jobs(
        batch.collect([tmp_path / "class"]), known, 1, OPTIONS, None, False, 16, recording, tmp_path / "written.json"
    )
    return recorded, given, Recording.read(tmp_path / "written.json")


def test_a_batch_records_only_the_chapters_its_recording_lacks_and_writes_them_all(known, tmp_path, monkeypatch):
    ladder, reflector = known["01_ladder"], known["09_householder"]
    recording = _recording(ladder)
    recorded, given, written = _batch(tmp_path, monkeypatch, known, recording)
    assert recorded == [("09_householder", {e.id for e in reflector.exercises})]
    assert given == {"ann": recording.exercises("01_ladder"), "bob": _entries(reflector)}
    assert written == Recording(OPTIONS, {**recording.chapters, **_recording(reflector).chapters})


def test_a_chapter_recorded_without_an_exercise_a_batch_needs_is_recorded_again(known, tmp_path, monkeypatch):
    """The verdicts of cells checked together serve only the same cells: a chapter's record that
    lacks an exercise some submission has the grader run is not patched, but made again."""
    ladder, reflector = known["01_ladder"], known["09_householder"]
    everything = {e.id for e in ladder.exercises}
    recording = Recording(
        OPTIONS,
        {
            ladder.name: {"material": material_hash(ladder), "exercises": _entries(ladder, {"01.ladder-step"})},
            reflector.name: {"material": material_hash(reflector), "exercises": _entries(reflector)},
        },
    )
    recorded, given, written = _batch(tmp_path, monkeypatch, known, recording)
    assert recorded == [("01_ladder", everything)]
    assert set(given["ann"]) == everything and given["bob"] == recording.exercises("09_householder")
    assert set(written.exercises("01_ladder")) == everything


def test_grade_refuses_a_recording_of_other_options_before_anything_runs(known, tmp_path):
    with pytest.raises(RecordingError, match="timeout 60.0 \\(now 30.0\\)"):
        grading.grade(
            [tmp_path],
            tmp_path / "out",
            instructor=[LADDER],
            progress=False,
            options=dataclasses.replace(OPTIONS, timeout=30.0),
            recording=_recording(known["01_ladder"]),
        )
    assert not (tmp_path / "out").exists()


def test_record_checks_every_exercise_of_the_chapters_asked_for(known, monkeypatch):
    asked = []

    def instructor_signatures(chapter, options, ids):
        asked.append((chapter.name, ids, options))
        return _entries(chapter)

    monkeypatch.setattr(batch, "instructor_signatures", instructor_signatures)
    recording = grading.record([LADDER, REFLECTOR], OPTIONS, chapters=["09_householder"])
    assert asked == [("09_householder", None, OPTIONS)]
    assert recording == _recording(known["09_householder"])
    with pytest.raises(ValueError, match="--chapters names 05_kstep"):
        grading.record([LADDER], OPTIONS, chapters=["05_kstep"])
