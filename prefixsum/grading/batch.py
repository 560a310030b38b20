"""Grade a class: find the submissions, grade them in parallel (or on a Dask cluster), write the reports."""

import concurrent.futures
import os
import pathlib
import stat
import sys
import time

from ..classroom.cells import first_line
from . import report, sandbox
from .chapters import InvalidSubmission, read_chapter
from .recording import Recording, material_hash
from .runner import Options, Row, close_judges, grade_notebook, instructor_signatures, screen

WORKBOOK_NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
DEFAULT_OPTIONS = Options()
"""The options of :func:`grade` unless given (frozen: one instance serves every call)."""


def default_instructor_notebooks():
    """The workbook's notebooks, ``notebooks/NN_*.ipynb`` of this package's checkout (or, for an
    installed copy, of the current folder)."""
    for folder in (WORKBOOK_NOTEBOOKS, pathlib.Path.cwd() / "notebooks"):
        found = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
        if found:
            return found
    return []


def printable(name):
    """A file name as text: bytes that are not UTF-8 become ``\\xff`` escapes (never an error later)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def collect(paths):
    """The files to grade: ``[(submission, file name, path or None, problem)]``.

    A notebook (or any file) given by itself is a submission named after the file. A folder
    holding files is one student's submission, named after the folder; a folder holding only
    folders holds one submission per sub-folder, hidden ones (a leading dot) included. Inside a
    submission, a hidden file or folder (``.ipynb_checkpoints``) is listed as skipped; a symlink is
    refused, never followed; an empty submission folder gives one entry with no file. ``problem``
    says why an entry is not graded, else it is empty.
    """
    found = []
    for path in map(pathlib.Path, paths):
        if path.is_symlink():
            found.append((printable(path.stem), printable(path.name), None, "a symlink: refused, not followed"))
        elif not path.is_dir():
            found.append((printable(path.stem), printable(path.name), path, ""))
        else:
            entries = sorted(path.iterdir())
            real = [p for p in entries if not p.is_symlink()]
            if any(p.is_file() for p in real) or not entries or not any(p.is_dir() for p in real):
                found.extend(_student(printable(path.name), path))
            else:
                for entry in entries:
                    if entry.is_symlink() or not entry.is_dir():
                        found.append(
                            (
                                printable(entry.name),
                                "",
                                None,
                                "not a submission folder: "
                                + (
                                    "a symlink, refused, not followed"
                                    if entry.is_symlink()
                                    else "a file beside the folders"
                                ),
                            )
                        )
                    else:
                        found.extend(_student(printable(entry.name), entry))
    return found


def _student(name, folder):
    entries = []
    for top, folders, files in os.walk(folder, followlinks=False):
        here = pathlib.Path(top)
        for child in sorted(folders):
            if child.startswith(".") or (here / child).is_symlink():
                entries.append(
                    (
                        here / child,
                        "hidden folder, not graded" if child.startswith(".") else "a symlink: refused, not followed",
                    )
                )
        folders[:] = sorted(f for f in folders if not f.startswith(".") and not (here / f).is_symlink())
        for child in sorted(files):
            path = here / child
            problem = (
                "a symlink: refused, not followed"
                if path.is_symlink()
                else "hidden file, not graded"
                if child.startswith(".")
                else ""
                if path.is_file()
                else "not a regular file"
            )
            entries.append((path, problem))
    entries.sort(key=lambda entry: str(entry[0]))
    return [
        (name, printable(path.relative_to(folder).as_posix()), None if problem else path, problem)
        for path, problem in entries
    ] or [(name, "", None, "the submission holds no file")]


def read_limited(path, limit_mb):
    """``(bytes, "")``, or ``(None, why)`` for a file that is too large or cannot be read (never a symlink's target)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        return None, f"cannot be read: {error.strerror}"
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None, "not a regular file"
        data = handle.read((limit_mb << 20) + 1)
    if len(data) > limit_mb << 20:
        return None, f"larger than the limit of {limit_mb} MiB for a notebook"
    return data, ""


class _Entry:
    """One entry of :func:`collect` on its way: its screen, or the rows that already end it."""

    __slots__ = ("student", "filename", "screened", "rows", "modified")

    def __init__(self, student, filename, screened, rows, modified):
        self.student, self.filename, self.screened, self.rows, self.modified = (
            student,
            filename,
            screened,
            rows,
            modified,
        )


def _screen_file(student, filename, path, problem, chapters, max_notebook_mb, where):
    """``(Screened or None, rows)`` of one entry of :func:`collect`: whatever the file holds, an
    error ends this entry alone, as its ``invalid`` (a file the grader refuses) or ``crashed`` row
    (one it could not read), naming the file."""
    if not problem:
        data, problem = read_limited(path, max_notebook_mb)
    if problem:
        return None, [Row(student, filename, "", 0, 0, "invalid", problem, sandbox=where)]
    try:
        return screen(data, filename, chapters), []
    except InvalidSubmission as error:
        return None, [Row(student, filename, "", 0, 0, "invalid", str(error), sandbox=where)]
    except Exception as error:  # noqa: BLE001  (MemoryError, RecursionError, anything a file makes the reader meet)
        return None, [
            Row(
                student,
                filename,
                "",
                0,
                0,
                "crashed",
                f"the grader could not read {filename}: {first_line(error)}",
                sandbox=where,
            )
        ]


def _screen_all(jobs, chapters, max_notebook_mb, where="bwrap"):
    """Each entry of ``jobs`` (:func:`collect`) screened once (:func:`.runner.screen`), and copies of one
    chapter from one submission reduced to the newest (:func:`_keep_newest`)."""
    entries = []
    for student, filename, path, problem in jobs:
        screened, rows = _screen_file(student, filename, path, problem, chapters, max_notebook_mb, where)
        try:
            modified = os.stat(path, follow_symlinks=False).st_mtime if screened else None
        except OSError:
            modified = None
        entries.append(_Entry(student, filename, screened, rows, modified))
    _keep_newest(entries, where)
    return entries


def _keep_newest(entries, where):
    """Grade one copy of a chapter per submission: the newest by the time its cells record having run
    where every copy records one, else by the file's modification time (then by name). Each other
    copy gets one ``invalid`` row of no points that says which copy was graded instead."""
    copies = {}
    for entry in entries:
        if entry.screened is not None:
            copies.setdefault((entry.student, entry.screened.chapter.name), []).append(entry)
    for (student, chapter), found in copies.items():
        if len(found) < 2:
            continue
        recorded = all(e.screened.recorded is not None for e in found)
        newest = max(
            found,
            key=(lambda e: (e.screened.recorded, e.filename))
            if recorded
            else (lambda e: (e.modified or 0, e.filename)),
        )
        how = "by the time its cells record having run" if recorded else "by the file's modification time"
        for entry in found:
            if entry is not newest:
                entry.rows = [
                    Row(
                        student,
                        entry.filename,
                        "",
                        0,
                        0,
                        "invalid",
                        f"not graded: {newest.filename} is a newer copy of chapter {chapter} in this "
                        "submission "
                        f"({how}), and a chapter is graded once",
                        chapter=chapter,
                        sandbox=where,
                    )
                ]
                entry.screened = None


def _needed(entries):
    """``{chapter name: exercise ids}`` that some screened entry has the grader run: only these of the
    instructor's solutions are checked and recorded."""
    needed = {}
    for entry in entries:
        if entry.screened is not None:
            needed.setdefault(entry.screened.chapter.name, set()).update(entry.screened.accepted)
    return needed


def _grade_file(student, filename, screened, chapters, signatures, options):
    """Rows of one screened file: an error of the grader's own ends this file alone, as its ``crashed`` row."""
    try:
        return grade_notebook(student, filename, None, chapters, signatures, options, screened=screened)
    except Exception as error:  # noqa: BLE001  (whatever one file makes the grader meet, the batch goes on)
        return [
            Row(
                student,
                filename,
                "",
                0,
                screened.chapter.max_score,
                "crashed",
                f"the grader failed on {filename}: {first_line(error)}",
                chapter=screened.chapter.name,
                sandbox="bwrap" if options.isolated else "none",
            )
        ]


class Progress:
    """A one-line progress bar on stderr: done/total, a bar, seconds per submission, time left."""

    def __init__(self, total, stream=sys.stderr, enabled=True):
        self.total, self.done, self.stream, self.enabled = total, 0, stream, enabled
        self.start = time.perf_counter()

    def step(self, label=""):
        self.done += 1
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        each = elapsed / self.done
        left = each * (self.total - self.done)
        self.stream.write(
            f"\rgraded {self.done}/{self.total} [{'#' * filled}{'.' * (width - filled)}] "
            f"{each:.1f} s each, {left:.0f} s left {label[:30]:<30}"
        )
        if self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()


def instructor_chapters(instructor=None, chapters_named=None):
    """``{name: Chapter}`` of the instructor's notebooks that hold an exercise (``instructor``, default
    :func:`default_instructor_notebooks`); ``chapters_named`` must be among them.

    Raises
    ------
    ValueError
        When there is no such notebook, or ``chapters_named`` names a chapter none holds.
    """
    notebooks = list(instructor) if instructor else default_instructor_notebooks()
    if not notebooks:
        raise ValueError(f"no instructor notebooks in {WORKBOOK_NOTEBOOKS} or ./notebooks: name them with --instructor")
    chapters = {}
    for path in notebooks:
        chapter = read_chapter(path)
        if chapter.exercises:
            chapters[chapter.name] = chapter
    if not chapters:
        raise ValueError(f"none of the instructor notebooks has an exercise: {[str(p) for p in notebooks]}")
    unknown = sorted(set(chapters_named or ()) - set(chapters))
    if unknown:
        raise ValueError(
            f"--chapters names {', '.join(unknown)}, which no instructor notebook holds; known: "
            f"{', '.join(sorted(chapters))}"
        )
    return chapters


def _record_chapters(chapters, options, workers, ids=None):
    """``{name: instructor_signatures(chapter, options, ids[name])}`` of ``chapters``, ``workers`` at once
    (``ids`` None: every exercise)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        recorded = {
            name: pool.submit(instructor_signatures, chapter, options, None if ids is None else ids[name])
            for name, chapter in chapters.items()
        }
        return {name: future.result() for name, future in recorded.items()}


def record(instructor=None, options=DEFAULT_OPTIONS, chapters=None, workers=None):
    """Check the instructor's solutions and record them once, for several batches (``grade --record FILE``).

    Parameters
    ----------
    instructor : sequence of path, optional
        The instructor's notebooks (default: the workbook's own).
    options : Options
        The options of the batches that will use it: a recording serves only those
        (:meth:`.Recording.check`).
    chapters : sequence of str, optional
        The chapters to record (default: every chapter of ``instructor`` with an exercise).
    workers : int, optional
        Chapters recorded at once (default: the number of cores).

    Returns
    -------
    Recording
        Every exercise of each chapter, checked together as a submission's cells run; pass it to
        :func:`grade` (``recording=``), or write it (:meth:`.Recording.write`).

    Raises
    ------
    RuntimeError
        When an instructor's solution fails its own check (:func:`.runner.instructor_signatures`).
    bwrap_command.SandboxUnavailable
        When ``options.isolated`` and no sandbox can be made here.
    """
    if options.isolated:
        sandbox.check_available()
    known = instructor_chapters(instructor, chapters)
    chosen = {name: known[name] for name in chapters} if chapters else known
    try:
        recorded = _record_chapters(chosen, options, workers)
    finally:
        close_judges()
    return Recording(
        options,
        {name: {"material": material_hash(chosen[name]), "exercises": recorded[name]} for name in sorted(chosen)},
    )


def grade(
    submissions,
    out,
    *,
    instructor=None,
    workers=None,
    options=DEFAULT_OPTIONS,
    scheduler=None,
    progress=True,
    chapters_named=None,
    max_notebook_mb=16,
    recording=None,
    record_to=None,
):
    """Grade ``submissions`` against the instructor's notebooks; write the reports into ``out``.

    Parameters
    ----------
    submissions : sequence of path
        Notebooks, or folders (see :func:`collect`).
    out : path
        Folder for grades.csv, summary.csv and feedback/.
    instructor : sequence of path, optional
        The instructor's notebooks (default: the workbook's own).
    workers : int, optional
        Submissions graded at once (default: the number of cores).
    options : Options
        Time limit per exercise and the resource limits.
    scheduler : str or distributed.Client, optional
        A Dask distributed scheduler's address (``"tcp://host:8786"``) or a client: the
        submissions are graded by its workers instead of local threads.
    progress : bool
        Draw the progress bar on stderr.
    chapters_named : sequence of str, optional
        The chapters every student owes (``--chapters``): summary.csv then counts a chapter not
        handed in against its full maximum.
    max_notebook_mb : int
        A submitted file larger than this is not read (its row says so).
    recording : Recording, optional
        The instructor's solutions recorded before (:func:`record`, ``--recording FILE``): a
        chapter it records with every exercise that some submission has the grader run is not
        recorded again; any other chapter is recorded as without one (those exercises only).
    record_to : path, optional
        Where to write the recording this batch grades with (``--record FILE`` with submissions),
        before it grades: ``recording``'s chapters and those it recorded itself, the exercises its
        submissions needed. A later batch (``recording=Recording.read(record_to)``) then records
        only what this one did not need.

    Returns
    -------
    list of Row
        Every row of grades.csv, in the order of the submissions.

    Raises
    ------
    bwrap_command.SandboxUnavailable
        When ``options.isolated`` and no sandbox can be made here.
    RecordingError
        When ``recording`` was made with other options, another version of this package, or
        other material of a chapter given now (:meth:`.Recording.check`).
    """
    if options.isolated:
        sandbox.check_available()
    chapters = instructor_chapters(instructor, chapters_named)
    if recording is not None:
        recording.check(chapters, options)
    jobs = collect(submissions)
    try:
        rows = _grade_jobs(jobs, chapters, workers, options, scheduler, progress, max_notebook_mb, recording, record_to)
    finally:
        close_judges()
    runs = {(row.submission, row.exercise): row.traces for row in rows if row.traces}
    report.write_all(rows, out, {name: chapters[name] for name in chapters_named or ()}, runs=runs)
    return rows


def _grade_jobs(jobs, chapters, workers, options, scheduler, progress, max_notebook_mb, recording=None, record_to=None):
    """Every row of ``jobs`` (:func:`collect`): each file screened once, the instructor's solutions
    they need recorded (where ``recording`` lacks them; all written to ``record_to``), then each file graded."""
    entries = _screen_all(jobs, chapters, max_notebook_mb, "bwrap" if options.isolated else "none")
    needed = _needed(entries)
    signatures = {}
    for name in chapters if recording is not None else ():
        found = recording.exercises(name)
        if found is not None and needed.get(name, set()) <= set(found):
            signatures[name] = found
    missing = {name: needed.get(name, set()) for name in chapters if name not in signatures}
    signatures.update(_record_chapters({name: chapters[name] for name in missing}, options, workers, missing))
    if record_to is not None:
        Recording(
            options,
            {
                name: {"material": material_hash(chapters[name]), "exercises": found}
                for name, found in sorted(signatures.items())
                if found
            },
        ).write(record_to)
    bar = Progress(len(entries), enabled=progress)
    results = [entry.rows for entry in entries]
    graded = [k for k, entry in enumerate(entries) if entry.screened is not None]
    for k in set(range(len(entries))) - set(graded):
        bar.step(entries[k].student)
    payloads = {k: (entries[k].student, entries[k].filename, entries[k].screened) for k in graded}
    if scheduler is not None:
        _on_dask(scheduler, payloads, chapters, signatures, options, results, bar)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            futures = {
                pool.submit(_grade_file, *payload, chapters, signatures, options): k for k, payload in payloads.items()
            }
            for future in concurrent.futures.as_completed(futures):
                k = futures[future]
                results[k] = future.result()
                bar.step(entries[k].student)
    return [row for found in results for row in found]


def _on_dask(scheduler, payloads, chapters, signatures, options, results, bar):
    """Grade on a Dask distributed cluster (its workers need this package installed)."""
    try:
        from distributed import Client, as_completed
    except ImportError as error:  # the test extra has it; a plain install need not
        raise RuntimeError("--scheduler needs Dask distributed: pip install 'dask[distributed]'") from error
    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    try:
        futures = {
            k: client.submit(_grade_file, *payload, chapters, signatures, options, pure=False)
            for k, payload in payloads.items()
        }
        index = {future.key: k for k, future in futures.items()}
        for future in as_completed(list(futures.values())):
            k = index[future.key]
            results[k] = future.result()
            bar.step(payloads[k][0])
    finally:
        if client is not scheduler:
            client.close()
