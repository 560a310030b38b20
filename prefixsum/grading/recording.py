"""A recording of the instructor's solutions, made once and used by several batches (docs/teaching.md).

Before it grades anything, a batch checks the instructor's solutions in a sandbox and records
what grading needs of them (:func:`.runner.instructor_signatures`): the signatures to compile
each kernel with, whether an exercise's cell launches a kernel, and the check's verdict, which a
submission of exactly those cells gets again. :func:`.batch.record` makes that record for whole
chapters (``python -m prefixsum grade --record FILE``), a batch writes the one it grades with
(``grade(..., record_to=FILE)``, ``--record FILE`` with submissions), and :class:`Recording`
holds it, so that a class graded in several batches (late submissions, a re-grade) pays for it
once: ``--recording FILE``.

A recording is valid only with what it was made with, and says so itself: each chapter's
*material* (:func:`material_hash`: the setup cells, every exercise's id, solution and checks with
their stored outputs, and the sanitize rules, the whole of what the trusted check reads), the
:class:`.runner.Options` (time limit, resource limits, sandbox) and the package's version. A
batch refuses one that differs in any of them (:meth:`Recording.check`), naming the chapter and
what differs, rather than recording that chapter again: the file is the teacher's own choice, and
one that no longer fits the notebooks is a stale file to replace, not a cache to mend quietly.

The file is JSON read strictly (:meth:`Recording.from_json`): nothing in it is executed or
unpickled, every field is checked against its schema (the verdicts with the sandbox's own,
:data:`.results.SCHEMAS`), and a malformed file is refused with the field that is wrong.
"""

import dataclasses
import hashlib
import json
import os
import pathlib
import re
import sys
import tempfile

from . import results
from .limits import Limits
from .runner import Options

FORMAT = "prefixsum-grading-recording"
FORMAT_VERSION = 1
MAX_BYTES = 64 << 20
"""The largest recording read (a whole workbook's is some hundreds of KiB)."""
_SHA256 = re.compile(r"[0-9a-f]{64}")


def package_version():
    """The version of the prefixsum that runs: read from its top package, which Python loaded before
    this module (a layer imports no facade, ARCHITECTURE.md)."""
    return sys.modules[__name__.partition(".")[0]].__version__


class RecordingError(ValueError):
    """A recording that cannot be used: malformed, or made with other notebooks, options or version."""


def material_hash(chapter):
    """SHA-256 (hex) of what the grader's check of ``chapter``'s solutions depends on: its name,
    setup cells, sanitize rules and, in order, each exercise's id, solution and checks with their
    stored outputs. Points and the students' ``todo`` text are left out: they change a grade's
    arithmetic, not what the check observes."""
    material = {
        "name": chapter.name,
        "setup": list(chapter.setup),
        "sanitize": chapter.sanitize,
        "exercises": [
            {"id": e.id, "source": e.source, "checks": [list(check) for check in e.checks]} for e in chapter.exercises
        ],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def options_dict(options):
    """``options`` as the recording stores them: ``{"timeout", "limits": {...}, "isolated"}``."""
    return dataclasses.asdict(options)


def _options(value):
    """:class:`.runner.Options` from :func:`options_dict`'s form, every field present and of its type."""
    fields = {f.name for f in dataclasses.fields(Options)}
    limit_fields = {f.name for f in dataclasses.fields(Limits)}
    if not isinstance(value, dict) or set(value) != fields:
        raise RecordingError(f"'options' must hold exactly {sorted(fields)}")
    limits = value["limits"]
    if (
        not isinstance(limits, dict)
        or set(limits) != limit_fields
        or not all(type(v) is int and v > 0 for v in limits.values())
    ):
        raise RecordingError(f"'options.limits' must hold exactly {sorted(limit_fields)}, each a positive integer")
    if type(value["timeout"]) not in (int, float) or not value["timeout"] > 0 or type(value["isolated"]) is not bool:
        raise RecordingError("'options.timeout' must be a positive number and 'options.isolated' true or false")
    return Options(timeout=value["timeout"], limits=Limits(**limits), isolated=value["isolated"])


def _entry(name, exercise_id, entry):
    """One exercise's record, checked field by field (as :func:`.runner.instructor_signatures` returns it)."""
    where = f"chapter {name}, exercise {exercise_id}"
    if not isinstance(entry, dict) or set(entry) != {"signatures", "launches", "source", "checked"}:
        raise RecordingError(f"{where}: must hold exactly 'signatures', 'launches', 'source' and 'checked'")
    if not results.valid_signatures(entry["signatures"]):
        raise RecordingError(f"{where}: 'signatures' must map kernel names to lists of signatures")
    if type(entry["launches"]) is not int or entry["launches"] < 0 or type(entry["source"]) is not str:
        raise RecordingError(f"{where}: 'launches' must be a count and 'source' the solution's text")
    if not results.valid_entry(entry["checked"], "check", {exercise_id}):
        raise RecordingError(f"{where}: 'checked' is not a verdict of the grader's check")
    return entry


def _chapter(name, value):
    if not isinstance(value, dict) or set(value) != {"material", "exercises"}:
        raise RecordingError(f"chapter {name}: must hold exactly 'material' and 'exercises'")
    if not isinstance(value["material"], str) or not _SHA256.fullmatch(value["material"]):
        raise RecordingError(f"chapter {name}: 'material' must be a SHA-256 in hex")
    if not isinstance(value["exercises"], dict) or not value["exercises"]:
        raise RecordingError(f"chapter {name}: 'exercises' must map exercise ids to their records")
    return {
        "material": value["material"],
        "exercises": {i: _entry(name, i, entry) for i, entry in value["exercises"].items()},
    }


@dataclasses.dataclass(frozen=True)
class Recording:
    """The instructor's solutions checked and recorded, chapter by chapter (:func:`.batch.record`).

    Its JSON form (:meth:`to_json`, written by ``grade --record FILE``)::

        {"format": "prefixsum-grading-recording", "version": 1, "package": "0.3.0",
         "options": {"timeout": 60.0, "limits": {"cpu_s": ..., "memory_mb": ..., ...}, "isolated": true},
         "chapters": {"01_ladder": {"material": "<SHA-256 of material_hash>",
                                    "exercises": {"01.serial-scan": {"signatures": {kernel: [signature, ...]},
                                                                     "launches": 0, "source": "<the solution>",
                                                                     "checked": {<the judge's verdict>}}, ...}}}}

    :func:`.batch.record` records every exercise of a chapter; a recording may hold fewer (those a
    batch needed), checked together as the students' cells run, and serves a batch's chapter only
    where it holds every exercise that some submission there has the grader run (else the batch
    records that chapter's again: the verdicts of cells checked together are reused only for the
    same cells).
    """

    options: Options
    chapters: dict
    """``{chapter name: {"material": material_hash(chapter), "exercises": instructor_signatures(chapter)}}``."""
    package: str = dataclasses.field(default_factory=package_version)

    def to_json(self):
        """The recording as JSON text (:class:`Recording`'s docstring shows the form)."""
        return json.dumps(
            {
                "format": FORMAT,
                "version": FORMAT_VERSION,
                "package": self.package,
                "options": options_dict(self.options),
                "chapters": self.chapters,
            },
            indent=1,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text):
        """Read :meth:`to_json`'s text strictly.

        Raises
        ------
        RecordingError
            When ``text`` is not such a recording (not JSON, NaN, another format or version, a
            field missing, extra or of the wrong type); the message names the field.
        """
        try:
            value = json.loads(text, parse_constant=results.not_json)
        except (ValueError, RecursionError) as error:
            raise RecordingError(f"not a recording: not JSON ({error})") from None
        if not isinstance(value, dict) or value.get("format") != FORMAT:
            raise RecordingError(f"not a recording: its 'format' is not {FORMAT!r}")
        if set(value) != {"format", "version", "package", "options", "chapters"}:
            raise RecordingError("a recording holds exactly 'format', 'version', 'package', 'options' and 'chapters'")
        if value["version"] != FORMAT_VERSION:
            raise RecordingError(
                f"a recording of format version {value['version']!r}; this grader reads version "
                f"{FORMAT_VERSION}: record again"
            )
        if not isinstance(value["package"], str) or not isinstance(value["chapters"], dict):
            raise RecordingError("'package' must be a version and 'chapters' map chapter names to their records")
        return cls(
            _options(value["options"]),
            {name: _chapter(name, chapter) for name, chapter in value["chapters"].items()},
            value["package"],
        )

    def write(self, path):
        """Write :meth:`to_json` to ``path``, readable by everyone (a batch may run as another user),
        whole or not at all (a temporary file renamed over it)."""
        path = pathlib.Path(path)
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(self.to_json())
            os.chmod(temporary, 0o644)
            os.replace(temporary, path)
        except BaseException:
            pathlib.Path(temporary).unlink(missing_ok=True)
            raise

    @classmethod
    def read(cls, path):
        """:meth:`from_json` of the file at ``path`` (at most :data:`MAX_BYTES`); a :class:`RecordingError`
        names the file."""
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_BYTES + 1)
        except OSError as error:
            raise RecordingError(f"cannot read the recording {path}: {error.strerror}") from None
        if len(data) > MAX_BYTES:
            raise RecordingError(f"the recording {path} is larger than {MAX_BYTES >> 20} MiB")
        try:
            return cls.from_json(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise RecordingError(f"the recording {path} is not UTF-8 text") from None
        except RecordingError as error:
            raise RecordingError(f"the recording {path}: {error}") from None

    def check(self, chapters, options):
        """Refuse this recording for grading ``chapters`` (``{name: Chapter}``) with ``options``
        unless it was made with the same: the package's version, the options, and the material of
        every chapter it records that ``chapters`` holds too (one it records that is not among
        them is not used).

        Raises
        ------
        RecordingError
            Naming what differs (the option, or the chapter), and saying to record again.
        """
        again = "record again with 'python -m prefixsum grade --record FILE'"
        if self.package != package_version():
            raise RecordingError(
                f"the recording was made by prefixsum {self.package}, this is {package_version()}: {again}"
            )
        made, now = options_dict(self.options), options_dict(options)
        differ = [f"{key} {made[key]!r} (now {now[key]!r})" for key in now if key != "limits" and made[key] != now[key]]
        differ += [
            f"limits.{key} {made['limits'][key]!r} (now {value!r})"
            for key, value in now["limits"].items()
            if made["limits"][key] != value
        ]
        if differ:
            raise RecordingError(
                f"the recording was made with other grading options: {', '.join(differ)}; grade with those, or {again}"
            )
        for name in sorted(set(self.chapters) & set(chapters)):
            if self.chapters[name]["material"] != material_hash(chapters[name]):
                raise RecordingError(
                    f"the recording's chapter {name} was made from other instructor material (its "
                    "setup cells, solutions, checks, stored outputs or sanitize rules differ from "
                    f"those of the notebook given now): {again}"
                )
            solutions = {e.id: e.source for e in chapters[name].exercises}
            unknown = set(self.chapters[name]["exercises"]) - set(solutions)
            if unknown:
                raise RecordingError(
                    f"the recording's chapter {name} records exercises it does not have "
                    f"({', '.join(sorted(unknown))}): {again}"
                )
            # A submission of exactly the recorded sources takes the recorded verdicts: they must be the solutions.
            edited = sorted(
                i for i, entry in self.chapters[name]["exercises"].items() if entry["source"] != solutions[i]
            )
            if edited:
                raise RecordingError(
                    f"the recording's chapter {name} holds sources other than the solutions of "
                    f"{', '.join(edited)}: {again}"
                )

    def exercises(self, name):
        """The record of chapter ``name`` (:func:`.runner.instructor_signatures` of the exercises it
        records), or None."""
        chapter = self.chapters.get(name)
        return None if chapter is None else chapter["exercises"]
