"""Grade a class: find the submissions, grade them in parallel (or on a Dask cluster), write the reports."""
import concurrent.futures
import os
import pathlib
import sys
import time

from . import report
from .chapters import read_chapter
from .runner import Options, Row, grade_notebook, instructor_signatures

WORKBOOK_NOTEBOOKS = pathlib.Path(__file__).resolve().parents[3] / "notebooks"


def default_instructor_notebooks():
    """The workbook's notebooks, ``notebooks/NN_*.ipynb`` of this package's checkout (or, for an
    installed copy, of the current folder)."""
    for folder in (WORKBOOK_NOTEBOOKS, pathlib.Path.cwd() / "notebooks"):
        found = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
        if found:
            return found
    return []


def collect(paths):
    """The files to grade: ``[(submission, file name, path or None)]``.

    A notebook (or any file) given by itself is a submission named after the file. A folder
    holding files is one student's submission, named after the folder; a folder holding only
    folders holds one submission per sub-folder. Hidden files and folders (``.ipynb_checkpoints``)
    are left out; an empty submission folder gives one entry with no file.
    """
    found = []
    for path in map(pathlib.Path, paths):
        if not path.is_dir():
            found.append((path.stem, path.name, path))
            continue
        entries = sorted(p for p in path.iterdir() if not p.name.startswith("."))
        files = [p for p in entries if p.is_file()]
        if files or not entries:
            found.extend(_student(path.name, path))
        else:
            for folder in (p for p in entries if p.is_dir()):
                found.extend(_student(folder.name, folder))
    return found


def _student(name, folder):
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    return [(name, f.relative_to(folder).as_posix(), f) for f in files] or [(name, "", None)]


def _grade_file(student, filename, data, chapters, signatures, options):
    if data is None:
        return [Row(student, filename, "", 0, 0, "invalid", "the submission holds no file")]
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


def grade(submissions, out, *, instructor=None, workers=None, options=Options(), scheduler=None, progress=True):
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

    Returns
    -------
    list of Row
        Every row of grades.csv, in the order of the submissions.
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
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        recorded = {name: pool.submit(instructor_signatures, chapter, options) for name, chapter in chapters.items()}
        signatures = {name: future.result() for name, future in recorded.items()}
    jobs = collect(submissions)
    bar = Progress(len(jobs), enabled=progress)
    results = [None] * len(jobs)
    payloads = [(student, filename, path.read_bytes() if path is not None else None) for student, filename, path in jobs]
    if scheduler is not None:
        _on_dask(scheduler, payloads, chapters, signatures, options, results, bar)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            futures = {pool.submit(_grade_file, *payload, chapters, signatures, options): k for k, payload in enumerate(payloads)}
            for future in concurrent.futures.as_completed(futures):
                k = futures[future]
                results[k] = future.result()
                bar.step(jobs[k][0])
    rows = [row for found in results for row in found]
    report.write_all(rows, out)
    return rows


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
