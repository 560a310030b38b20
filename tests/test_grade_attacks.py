"""Issue 26's attacks on the grader, each a named submission in tests/attacks/, graded in one batch
with honest classmates, as root and as an unprivileged user.

A ``.cell`` file is the exercise cell a hostile student hands in; its header names the exercise,
the statuses it may get and a word its message must hold. Cells marked ``# hole`` are let
through the allow-list (tests/attacks/grade_with_hole.py), so that they run inside the sandboxes
and show what the sandbox alone holds. Beside them: files and names that once broke the batch.

Beside them (issue 43): honest answers that were once accused (``attacks/honest/*.cell``: debug
prints, a helper kernel of the student's own), whole files that once stopped the batch
(``attacks/files.py``: malformed notebooks, megabytes of refused lines) and an older second copy of a
chapter, which is graded once.

As root the whole class is graded twice: as root, and as nobody. The second batch grades the attacks
that run in the sandbox (``# hole``), every honest classmate and answer and every odd file: an attack
the allow-list refuses or a check fails is judged by code that does not ask who runs the grader.
The root batch records the instructor's solutions itself and writes the recording (``--record``);
the batch as nobody reads it (``--recording``), as a teacher grading late submissions would.

After the batch: no attacker earned a pass, every honest classmate kept full marks, no process
of the batch is left and nothing new listens, and nothing outside the sandboxes changed (the
instructor's notebooks, the classmates' folders, the environment, the package, ``--out`` but
for the grader's own files, whose checksum holds).
"""

import csv
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import nbformat
import pytest
from attacks import files  # tests/ is on sys.path, as for notebook_taint
from attacks.hole import let_through
from grader_users import AS_NOBODY, is_a_run_uid, nobody_cannot_run

from prefixsum.classroom.student import student_version
from prefixsum.grading import bwrap_command, read_chapter, sandbox

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
ATTACKS = pathlib.Path(__file__).resolve().parent / "attacks"
CHAPTERS = ("01_ladder", "09_householder", "11_applications")
HONEST = ("ann", "bob")
ODD_NAMES = {
    "not_utf8": os.fsdecode(b"student_\xff"),
    "formula": '=HYPERLINK("evil.example","x")',
    "newline": "eve\n# Injected heading",
    "dot_folder": ".hidden_student",
}
MARK = "prefixsum-attack"
# Two batches (as root, 50 submissions, and as nobody, 29: 97 s and about half as long on an idle
# 2-core machine with a 30 s limit): CI runs them, the developer loop not.
pytestmark = pytest.mark.slow
# The batches' time limit of one exercise: an honest exercise here takes at most 4 s on an idle
# machine, and the attacks that sleep or spin until stopped cost the limit in each of their runs.
TIMEOUT_S = 15


def attacks(folder=ATTACKS):
    """``{name: (exercise id, allowed statuses, word, source)}`` from ``folder``/*.cell (tests/attacks/)."""
    found = {}
    for path in sorted(folder.glob("*.cell")):
        source = path.read_text()
        header = dict(line[2:].split(": ", 1) for line in source.splitlines()[:2])
        statuses, _, word = header["expect"].partition(" ")
        found[path.stem] = (header["exercise"], set(statuses.split("|")), word, source)
    return found


def _chapter_of(exercise_id):
    return next(c for c in CHAPTERS if c.startswith(exercise_id[:2]))


def _notebook(chapter, replace=None):
    """The students' version of ``chapter``, with ``{exercise id: source}`` put in."""
    notebook = student_version(nbformat.read(NOTEBOOKS / f"{chapter}.ipynb", as_version=4), chapter=chapter)
    for cell in notebook.cells:
        if "exercise" in cell.metadata.get("tags", []) and cell.metadata.get("exercise_id") in (replace or {}):
            cell.source = replace[cell.metadata["exercise_id"]]
    return notebook


def build(folder, everyone=True):
    """The instructor's notebooks and the class under ``folder``; every path readable by anyone.

    ``everyone=False``: of the attacks only those that run in the sandbox (marked ``# hole``).
    """
    (folder / "instructor").mkdir()
    for chapter in CHAPTERS:
        shutil.copy(NOTEBOOKS / f"{chapter}.ipynb", folder / "instructor")
    shutil.copy(NOTEBOOKS / "sanitize.cfg", folder / "instructor")
    students = folder / "class"
    for name in HONEST:
        (students / name).mkdir(parents=True)
        # The solutions with a comment of their own: not the instructor's very cells, whose verdicts
        # the grader takes from its own check of them, so that their re-checks run in sandboxes
        # beside the attackers'.
        honest = nbformat.read(NOTEBOOKS / "01_ladder.ipynb", as_version=4)
        for cell in honest.cells:
            if "exercise" in cell.metadata.get("tags", []):
                cell.source += f"\n# {name}'s answer\n"
        nbformat.write(honest, students / name / "01_ladder.ipynb")
    # ann hands in chapter 01 twice: the older copy (no cell records a time: by the file's) is not graded.
    older = students / "ann" / "01_ladder (older).ipynb"
    shutil.copy(students / "ann" / "01_ladder.ipynb", older)
    copy = nbformat.read(older, as_version=4)
    for cell in copy.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(copy, older)
    os.utime(older, (time.time() - 86400, time.time() - 86400))
    honest = attacks(ATTACKS / "honest")
    for name, (exercise_id, _, _, source) in {**attacks(), **honest}.items():
        if not (everyone or let_through(source) or name in honest):
            continue
        (students / name).mkdir()
        chapter = _chapter_of(exercise_id)
        nbformat.write(_notebook(chapter, {exercise_id: source}), students / name / f"{chapter}.ipynb")
    blank = json.loads(nbformat.writes(_notebook("01_ladder")))
    for name, (data, _) in files.malformed(blank).items():
        (students / f"malformed_{name}").mkdir()
        (students / f"malformed_{name}" / "01_ladder.ipynb").write_bytes(data)
    (students / "refused_lines").mkdir()  # under the batch's --max-size 2 (MiB)
    (students / "refused_lines" / "01_ladder.ipynb").write_bytes(
        files.refused_lines(blank, "01.serial-scan", size=3 << 19)
    )
    for name in ODD_NAMES.values():
        (students / name).mkdir()
        nbformat.write(_notebook("01_ladder"), students / name / "01_ladder.ipynb")
    (students / "symlink_shadow").mkdir()
    (students / "symlink_shadow" / "01_ladder.ipynb").symlink_to("/etc/shadow")
    (students / "huge").mkdir()
    huge = _notebook("01_ladder")
    huge.cells.append(nbformat.v4.new_markdown_cell("x" * (3 << 20)))
    nbformat.write(huge, students / "huge" / "01_ladder.ipynb")
    # A lone surrogate in a comment: valid JSON (an escape), but no UTF-8 and no ast.parse.
    surrogate = json.loads(nbformat.writes(_notebook("01_ladder")))
    cell = next(c for c in surrogate["cells"] if c.get("metadata", {}).get("exercise_id") == "01.serial-scan")
    cell["source"] = "# \ud800\n" + read_chapter(NOTEBOOKS / "01_ladder.ipynb").exercise("01.serial-scan").source
    (students / "surrogate").mkdir()
    (students / "surrogate" / "01_ladder.ipynb").write_text(json.dumps(surrogate))
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return students


def _tree_hash(path):
    digest = hashlib.sha256()
    for item in sorted(pathlib.Path(path).rglob("*")):
        digest.update(os.fsencode(item))
        if item.is_symlink():
            digest.update(os.fsencode(os.readlink(item)))
        elif item.is_file() and "__pycache__" not in item.parts:
            digest.update(item.read_bytes())
    return digest.hexdigest()


def _listing(path):
    """Names, sizes and times of a large tree (the environment): a new or changed file shows."""
    return {
        (str(p), p.stat().st_size, p.stat().st_mtime_ns)
        for p in pathlib.Path(path).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _listening():
    """Listening TCP sockets of this network namespace: ``{(address:port in hex, uid)}``."""
    found = set()
    for name in ("tcp", "tcp6"):
        with open(f"/proc/net/{name}") as table:
            found |= {(line.split()[1], int(line.split()[7])) for line in list(table)[1:] if line.split()[3] == "0A"}
    return found


def _temporary():
    """What a run's uid owns in the machine's temporary folder (a sandbox that could write there)."""
    folder = pathlib.Path(tempfile.gettempdir())
    return {p.name for p in folder.iterdir() if is_a_run_uid(p.lstat().st_uid)}


def _processes():
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                found[int(pid)] = handle.read().replace(b"\0", b" ").decode(errors="replace")
            found[int(pid)] += " uid=run" if is_a_run_uid(os.stat(f"/proc/{pid}").st_uid) else ""
        except OSError:
            continue
    return found


def _parent(pid):
    """The parent of ``pid`` (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _held_by(pid, earlier):
    """Whether ``pid`` descends from a live process other than init that is not a run's: a sandbox
    of another test, whose grader ran before this batch began or began during it (CI runs two test
    workers), hangs from that grader or from its test. What outlives a batch has lost its parents
    and hangs from init, through nothing but processes of a run's uid (a daemon and what it forked)."""
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        pid = _parent(pid)
        if pid > 1 and (pid in earlier or not _of_a_run(pid)):
            return True
    return False


def _of_a_run(pid):
    """Whether ``pid`` has a run's uid (True once it has gone: it holds nothing)."""
    try:
        return is_a_run_uid(os.stat(f"/proc/{pid}").st_uid)
    except OSError:
        return True


@pytest.fixture(scope="module")
def recording():
    """The root batch's recording of the instructor's solutions (``--record``), which the batch as
    nobody, made with the same notebooks and options, reads (``--recording``): ``{"text": JSON}``,
    empty until the root batch ran in this process (else the batch as nobody records its own)."""
    return {}


@pytest.fixture(scope="module", params=["root", "unprivileged"])
def batch(request, recording):
    if os.getuid() != 0 and request.param == "root":
        pytest.skip("the root run needs root (CI runs as root)")
    sandbox.check_available()
    folder = pathlib.Path(tempfile.mkdtemp(prefix="psattack-"))
    try:
        yield _run(folder, request.param, recording)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(folder, user, recording):
    prefix, everyone = [], True
    if user == "unprivileged":
        if os.getuid() == 0:  # the root batch grades the whole class
            everyone = False
            reason = nobody_cannot_run()
            if reason:
                pytest.skip(reason)
            prefix = AS_NOBODY
    folder.chmod(0o755)
    students = build(folder, everyone)
    out = folder / "out"
    out.mkdir()
    if prefix:
        os.chown(out, bwrap_command.NOBODY, bwrap_command.NOBODY)
    recorded = folder / "recording.json"  # beside the class, readable by nobody (the folder is 0755)
    if "text" in recording:
        recorded.write_text(recording["text"])
        recorded.chmod(0o644)
        reuse = ["--recording", str(recorded)]
    else:
        reuse = [] if prefix else ["--record", str(recorded)]  # nobody may not write into the folder
    venv, package = pathlib.Path(sys.prefix), ROOT / "prefixsum"
    before = {
        "instructor": _tree_hash(folder / "instructor"),
        "class": _tree_hash(students),
        "package": _tree_hash(package),
        "venv": _listing(venv),
    }
    processes, listening = _processes(), _listening()
    temporary = _temporary()
    command = [
        *prefix,
        sys.executable,
        str(ATTACKS / "grade_with_hole.py"),
        str(students),
        "--out",
        str(out),
        "--instructor",
        *(str(folder / "instructor" / f"{c}.ipynb") for c in CHAPTERS),
        "--chapters",
        *CHAPTERS,
        "--workers",
        "2",
        "--timeout",
        str(TIMEOUT_S),
        "--memory",
        "3072",
        "--max-size",
        "2",
        "--quiet",
        *reuse,
    ]
    start = time.perf_counter()
    finished = subprocess.run(
        command, capture_output=True, text=True, cwd="/", env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    seconds = time.perf_counter() - start
    time.sleep(2)  # a daemon that outlived the batch would now rewrite the grades
    after = {
        "instructor": _tree_hash(folder / "instructor"),
        "class": _tree_hash(students),
        "package": _tree_hash(package),
        "venv": _listing(venv),
    }
    left = {
        pid: line
        for pid, line in _processes().items()
        if pid not in processes and (MARK in line or "uid=run" in line) and not _held_by(pid, processes)
    }
    if reuse[:1] == ["--record"] and recorded.exists():
        recording["text"] = recorded.read_text()
    rows = []
    if (out / "grades.csv").exists():
        with open(out / "grades.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
    print(f"\nthe attack batch as {user}: {seconds:.0f} s, {len({r['submission'] for r in rows})} submissions")
    return {
        "finished": finished,
        "out": out,
        "rows": rows,
        "before": before,
        "after": after,
        "left": left,
        "new_listening": _listening() - listening,
        "new_temporary": _temporary() - temporary,
        "seconds": seconds,
        "everyone": everyone,
    }


def _rows(batch, submission):
    return {r["exercise"]: r for r in batch["rows"] if r["submission"] == submission}


def test_the_batch_ends_well(batch):
    assert batch["finished"].returncode == 0, batch["finished"].stderr[-3000:]


@pytest.mark.parametrize("name", sorted(attacks()))
def test_attack_earns_nothing(batch, name):
    exercise_id, statuses, word, source = attacks()[name]
    if not (batch["everyone"] or let_through(source)):
        pytest.skip("refused by the allow-list or failed by a check: graded in the root batch")
    rows = _rows(batch, name)
    assert {r["status"] for e, r in rows.items() if e != exercise_id} <= {"not-attempted"}, rows
    row = rows[exercise_id]
    assert row["status"] in statuses and float(row["score"]) == 0, row
    assert word.lower() in row["message"].lower(), row
    assert row["sandbox"] == "bwrap"


def test_honest_classmates_keep_full_marks(batch):
    for name in HONEST:
        rows = {exercise: row for exercise, row in _rows(batch, name).items() if exercise}  # not ann's older copy
        assert {r["status"] for r in rows.values()} == {"pass"} and len(rows) == 3, rows


@pytest.mark.parametrize("name", sorted(attacks(ATTACKS / "honest")))
def test_honest_answers_are_not_accused(batch, name):
    """A right answer that prints while it works, or computes a part with a kernel of its own, passes."""
    exercise_id, _, _, _ = attacks(ATTACKS / "honest")[name]
    rows = _rows(batch, name)
    assert (rows[exercise_id]["status"], rows[exercise_id]["score"]) == ("pass", rows[exercise_id]["max_score"]), rows[
        exercise_id
    ]
    assert {r["status"] for e, r in rows.items() if e != exercise_id} <= {"not-attempted"}


def test_a_file_that_once_stopped_the_batch_ends_with_its_own_row(batch):
    blank = json.loads(nbformat.writes(_notebook("01_ladder")))
    for name, (_, word) in files.malformed(blank).items():
        (row,) = _rows(batch, f"malformed_{name}").values()
        assert row["status"] == "invalid" and word in row["message"] and "01_ladder.ipynb" in row["message"], row
    refused = _rows(batch, "refused_lines")
    assert refused["01.serial-scan"]["status"] == "invalid" and "more than the" in refused["01.serial-scan"]["message"]


def test_a_chapter_handed_in_twice_is_graded_once(batch):
    (older,) = [r for r in batch["rows"] if r["submission"] == "ann" and r["notebook"] == "01_ladder (older).ipynb"]
    assert (older["status"], older["score"], older["max_score"]) == ("invalid", "0", "0"), older
    assert "01_ladder.ipynb is a newer copy of chapter 01_ladder" in older["message"]


def test_nothing_outlives_the_batch(batch):
    assert batch["left"] == {}
    # The machine may run other work (Jupyter kernels listen on loopback): what the attacks would
    # leave is a socket of a run's uid, or one on the listener attack's port (47123, hex B813).
    assert {
        (address, uid) for address, uid in batch["new_listening"] if is_a_run_uid(uid) or address.endswith(":B813")
    } == set()
    assert batch["new_temporary"] == set()


def test_nothing_outside_the_sandboxes_changed(batch):
    for key in ("instructor", "class", "package"):
        assert batch["before"][key] == batch["after"][key], key
    assert batch["after"]["venv"] - batch["before"]["venv"] == set()
    out = batch["out"]
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert {"grades.csv", "summary.csv"} <= names and all(
        n.startswith("feedback/") for n in names - {"grades.csv", "summary.csv"}
    )
    last = (out / "summary.csv").read_text().splitlines()[-1].split(",")
    assert last == ["# sha256 of grades.csv", hashlib.sha256((out / "grades.csv").read_bytes()).hexdigest()]


def test_odd_files_and_names_each_get_a_row(batch):
    submissions = {r["submission"] for r in batch["rows"]}
    assert {"student_\\xff", "'" + ODD_NAMES["formula"], "eve\n# Injected heading", ".hidden_student"} <= submissions
    (shadow,) = _rows(batch, "symlink_shadow").values()
    assert shadow["status"] == "invalid" and "symlink" in shadow["message"]
    (huge,) = _rows(batch, "huge").values()
    assert huge["status"] == "invalid" and "larger than" in huge["message"]
    surrogate = _rows(batch, "surrogate")
    assert surrogate and all(r["status"] != "pass" for r in surrogate.values())
    text = "\n".join(p.read_text(errors="replace") for p in batch["out"].rglob("*") if p.is_file())
    if os.access("/etc/shadow", os.R_OK):
        with open("/etc/shadow", errors="replace") as shadow_file:
            assert shadow_file.readline().strip()[:12] not in text
    pages = "\n".join(p.read_text() for p in (batch["out"] / "feedback").iterdir())
    assert not any(line.startswith("# Injected") for line in pages.splitlines())


def test_summary_counts_chapters_not_handed_in(batch):
    with open(batch["out"] / "summary.csv", newline="") as handle:
        summary = {
            (r["submission"], r["chapter"]): r for r in csv.DictReader(handle) if not r["submission"].startswith("#")
        }
    assert summary[("ann", "01_ladder")]["score"] == summary[("ann", "01_ladder")]["max_score"] == "5"
    assert summary[("ann", "09_householder")]["score"] == "0"
    assert float(summary[("ann", "all")]["max_score"]) > 5
