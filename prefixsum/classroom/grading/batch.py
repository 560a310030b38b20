"""Grade a class: find the submissions, grade them in parallel (or on a Dask cluster), write the reports."""
import concurrent.futures
import os
import pathlib
import stat
import sys
import time

from . import report, sandbox
from .chapters import InvalidSubmission, read_chapter
from .runner import Options, Row, close_judges, grade_notebook, instructor_signatures, screen

WORKBOOK_NOTEBOOKS = pathlib.Path(__file__).resolve().parents[3] / "notebooks"


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
                        found.append((printable(entry.name), "", None, "not a submission folder: "
                                      + ("a symlink, refused, not followed" if entry.is_symlink() else "a file beside the folders")))
                    else:
                        found.extend(_student(printable(entry.name), entry))
    return found


def _student(name, folder):
    entries = []
    for top, folders, files in os.walk(folder, followlinks=False):
        here = pathlib.Path(top)
        for child in sorted(folders):
            if child.startswith(".") or (here / child).is_symlink():
                entries.append((here / child, "hidden folder, not graded" if child.startswith(".") else "a symlink: refused, not followed"))
        folders[:] = sorted(f for f in folders if not f.startswith(".") and not (here / f).is_symlink())
        for child in sorted(files):
            path = here / child
            problem = ("a symlink: refused, not followed" if path.is_symlink() else "hidden file, not graded" if child.startswith(".")
                       else "" if path.is_file() else "not a regular file")
            entries.append((path, problem))
    entries.sort(key=lambda entry: str(entry[0]))
    return [(name, printable(path.relative_to(folder).as_posix()), None if problem else path, problem)
            for path, problem in entries] or [(name, "", None, "the submission holds no file")]


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


def _needed(jobs, chapters, max_notebook_mb):
    """``{chapter name: exercise ids}`` that some submission of ``jobs`` has the grader run
    (:func:`.runner.screen`, which grading asks again): only these of the instructor's solutions
    are checked and recorded. A file that is no chapter's notebook needs none."""
    needed = {name: set() for name in chapters}
    for _, filename, path, problem in jobs:
        data, problem = (None, problem) if problem else read_limited(path, max_notebook_mb)
        if problem:
            continue
        try:
            chapter, _, _, accepted = screen(data, filename, chapters)
        except InvalidSubmission:
            continue
        needed[chapter.name].update(accepted)
    return needed


def _grade_file(student, filename, data, problem, chapters, signatures, options, max_notebook_mb=16):
    """Rows of one entry of :func:`collect`; ``data`` is the file's bytes or its path (read here, bounded)."""
    if isinstance(data, pathlib.Path):
        data, problem = read_limited(data, max_notebook_mb)
    if problem:
        return [Row(student, filename, "", 0, 0, "invalid", problem, sandbox="bwrap" if options.isolated else "none")]
    return grade_notebook(student, filename, data, chapters, signatures, options)


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
        self.stream.write(f"\rgraded {self.done}/{self.total} [{'#' * filled}{'.' * (width - filled)}] "
                          f"{each:.1f} s each, {left:.0f} s left {label[:30]:<30}")
        if self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()


def grade(submissions, out, *, instructor=None, workers=None, options=Options(), scheduler=None, progress=True,
          chapters_named=None, max_notebook_mb=16):
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

    Returns
    -------
    list of Row
        Every row of grades.csv, in the order of the submissions.

    Raises
    ------
    sandbox.SandboxUnavailable
        When ``options.isolated`` and no sandbox can be made here.
    """
    if options.isolated:
        sandbox.check_available()
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
        raise ValueError(f"--chapters names {', '.join(unknown)}, which no instructor notebook holds; known: {', '.join(sorted(chapters))}")
    jobs = collect(submissions)
    try:
        rows = _grade_jobs(jobs, chapters, workers, options, scheduler, progress, max_notebook_mb)
    finally:
        close_judges()
    runs = {(row.submission, row.exercise): row.traces for row in rows if row.traces}
    report.write_all(rows, out, {name: chapters[name] for name in chapters_named or ()}, runs=runs)
    return rows


def _grade_jobs(jobs, chapters, workers, options, scheduler, progress, max_notebook_mb):
    """Every row of ``jobs`` (:func:`collect`): the instructor's solutions they need recorded, then each file graded."""
    needed = _needed(jobs, chapters, max_notebook_mb)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        recorded = {name: pool.submit(instructor_signatures, chapter, options, needed[name]) for name, chapter in chapters.items()}
        signatures = {name: future.result() for name, future in recorded.items()}
    bar = Progress(len(jobs), enabled=progress)
    results = [None] * len(jobs)
    # Files are read when graded, one per worker at a time; a cluster's workers get the bytes.
    payloads = jobs if scheduler is None else [(student, filename, *(read_limited(path, max_notebook_mb) if path else (None, why)))
                                               for student, filename, path, why in jobs]
    if scheduler is not None:
        _on_dask(scheduler, payloads, chapters, signatures, options, results, bar)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            futures = {pool.submit(_grade_file, *payload, chapters, signatures, options, max_notebook_mb): k for k, payload in enumerate(payloads)}
            for future in concurrent.futures.as_completed(futures):
                k = futures[future]
                results[k] = future.result()
                bar.step(jobs[k][0])
    return [row for found in results for row in found]


def _on_dask(scheduler, payloads, chapters, signatures, options, results, bar):
    """Grade on a Dask distributed cluster (its workers need this package installed)."""
    try:
        from distributed import Client, as_completed
    except ImportError as error:  # the test extra has it; a plain install need not
        raise RuntimeError("--scheduler needs Dask distributed: pip install 'dask[distributed]'") from error
    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    try:
        futures = [client.submit(_grade_file, *payload, chapters, signatures, options, pure=False) for payload in payloads]
        index = {future.key: k for k, future in enumerate(futures)}
        for future in as_completed(futures):
            k = index[future.key]
            results[k] = future.result()
            bar.step(payloads[k][0])
    finally:
        if client is not scheduler:
            client.close()
