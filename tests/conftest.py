"""Test-suite setup: the suite proves correctness on the CUDA simulator (level 1 of the three
levels of proof); PTX compilation (level 2) runs in one child process without the simulator,
started once per session (``ptx_child``).

Tiers (markers, declared in pyproject.toml): ``ptx`` is given here to every test that uses the
compiler, ``heavy`` here to the grader's product and whole-product runs (:func:`is_heavy`), ``slow``
by the tests themselves; ``python -m pytest -m "not slow and not ptx and not heavy" -n auto tests``
is the developer loop (README, "Develop").
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import contextlib  # noqa: E402
import importlib  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402

try:
    import fcntl  # noqa: E402
except ImportError:  # Windows
    fcntl = None

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from ptx_worker import MARK  # noqa: E402  (tests/ is on sys.path, as for notebook_taint)

import prefixsum  # noqa: E402,F401
from prefixsum.core.device import undecided_environment  # noqa: E402

PTX_WORKER = pathlib.Path(__file__).resolve().parent / "ptx_worker.py"
KEEP_ANSWER = pathlib.Path(__file__).resolve().parent / "keep_answer.py"
NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"


HEAVY_MODULES = {
    # the grader's own product: bubblewrap sandboxes, the judge's processes, batches, Dask
    "test_grade",
    "test_grade_attacks",
    "test_grade_batch",
    "test_grade_judge",
    "test_grade_pieces",
    "test_sandbox",
    "test_renumbering",
    # students' versions of every chapter built and executed, notebooks built with their kernels
    "test_student",
    "test_device",
    # benchmark stages run whole, quick, on the simulator
    "test_tridiag_stages",
    # a child process that simulates for a GPU process, per test
    "test_gpu_process",
    # every attempt's verdict drawn as the grader draws it (through a helper of the module)
    "test_attempts",
}
"""Test modules of the ``heavy`` tier, whole: each test starts processes or builds notebooks."""
HEAVY_CALLS = ("isolated_verdict(", "grade_notebook(")
"""A test elsewhere that calls one of these (each runs the grader's sandboxed check of one cell in
processes of its own) is ``heavy`` too: the named mistakes', loopholes' and attempts' verdicts."""


def is_heavy(item):
    """Whether ``item`` belongs to the ``heavy`` tier: its module is in :data:`HEAVY_MODULES`, or
    its function's source calls one of :data:`HEAVY_CALLS`."""
    if pathlib.Path(str(item.fspath)).stem in HEAVY_MODULES:
        return True
    function = getattr(item, "function", None)
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        source = ""
    return any(call in source for call in HEAVY_CALLS)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items):
    """Every test that needs the PTX compiler is a ``ptx`` test, so ``-m "not ptx"`` leaves out all
    of them; every test of the grader's product and of whole-product runs is ``heavy``
    (:func:`is_heavy`), so ``-m "not heavy"`` leaves those out."""
    for item in items:
        if {"ptx_compiler", "ptx_command"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ptx)
        if is_heavy(item):
            item.add_marker(pytest.mark.heavy)


@pytest.fixture(scope="module")
def strict_simulator():
    """The classroom simulator installed and on, negative indices refused, for a module's tests."""
    from prefixsum import sim

    assert sim.install()
    with sim.enabled(True), sim.allow_negative_indices(False):
        yield


@pytest.fixture(scope="session")  # read once for the allow-list's two test modules
def book():
    """``{chapter number: Chapter}`` of every instructor's notebook with exercises (the allow-list's tests)."""
    from prefixsum.grading import chapters

    found = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        chapter = chapters.read_chapter(path)
        if chapter.exercises:
            found[path.stem[:2]] = chapter
    return found


@pytest.fixture(scope="session")
def setups(book):
    """``{chapter number: the namespace its setup cells leave}`` (each chapter's setup run once, on the simulator)."""
    from prefixsum.classroom import cells

    return {number: cells.run_setup({"setup": list(chapter.setup)}) for number, chapter in book.items()}


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: different per test, the same on every run."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def require_ptx_compiler():
    """Require numba-cuda's compiler (libNVVM, NVRTC from ``numba-cuda[cu13]``) for a PTX test.

    Skipped on macOS only, where numba-cuda has no wheels and pyproject.toml leaves it out.
    Everywhere else it is a dependency, so a missing compiler is a broken install: the test fails.
    """
    if sys.platform == "darwin":
        pytest.skip("PTX compilation needs numba-cuda[cu13], which has no macOS wheels")
    try:
        importlib.import_module("cuda.bindings")
    except ImportError as exc:
        pytest.fail(
            f"PTX compilation needs numba-cuda[cu13] (libNVVM, NVRTC), a dependency on "
            f"{sys.platform}, but cuda.bindings does not import ({exc}); pip install 'numba-cuda[cu13]'"
        )


@pytest.fixture
def ptx_compiler():
    """:func:`require_ptx_compiler` for one test."""
    require_ptx_compiler()


@contextlib.contextmanager
def _locked(path):
    """Hold an exclusive lock on ``path`` (the pytest-xdist workers of one session share it)."""
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _ptx_folder(tmp_path_factory):
    """Where ``python -m prefixsum ptx`` keeps its answer and PTX: the session's temporary folder,
    common to the pytest-xdist workers (on Windows, without ``fcntl``, each worker's own)."""
    folder = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER") and fcntl is not None:
        folder = folder.parent
    return folder


@pytest.fixture(scope="session", autouse=True)
def _ptx_command_started(request, tmp_path_factory):
    """Start ``ptx_command``'s compile in the background at the session's first test, when a
    selected test needs it.

    It is the longest single job of the suite (minutes on two cores). pytest-xdist hands out the
    modules with the fewest tests last, test_ptx.py among them: started when its tests came, the
    compile ran alone at the end of the run with a core idle. The first worker to get here starts
    it (a lock and a mark in the common folder); it waits for it at the end of its session, so
    that nothing outlives the run.
    """
    process = None
    if any("ptx_command" in getattr(item, "fixturenames", ()) for item in request.session.items):
        folder = _ptx_folder(tmp_path_factory)
        with _locked(folder / "ptx_command.lock") if fcntl is not None else contextlib.nullcontext():
            started = folder / "ptx_command.started"
            if not started.exists():
                started.touch()
                env = undecided_environment()
                command = [sys.executable, "-m", "prefixsum", "ptx", "--keep", str(folder / "ptx")]
                process = subprocess.Popen(
                    [sys.executable, str(KEEP_ANSWER), str(folder / "ptx_command.json"), *command], env=env
                )
    yield
    if process is not None:
        process.wait()


@pytest.fixture(scope="session")
def ptx_command(tmp_path_factory, _ptx_command_started):
    """``python -m prefixsum ptx`` run as a user types it, once per test session.

    It compiles every registered scan's kernels and every tridiagonal kernel for sm_75 and sm_90;
    ``_ptx_command_started`` started it at the session's first test, and the pytest-xdist workers
    share its answer. Returns the ``subprocess.CompletedProcess``; the PTX it made is kept in the
    folder after ``--keep`` in its ``args`` (see ``python -m prefixsum ptx --help``).
    """
    require_ptx_compiler()
    answer = _ptx_folder(tmp_path_factory) / "ptx_command.json"
    deadline = time.monotonic() + 1800
    while not answer.exists():
        if time.monotonic() > deadline:
            pytest.fail("python -m prefixsum ptx gave no answer in 30 minutes")
        time.sleep(0.5)
    return subprocess.CompletedProcess(*json.loads(answer.read_text()))


class PtxWorker:
    """The client of ``tests/ptx_worker.py``: a process on the real CUDA target that runs programs.

    ``run(source)`` answers as ``subprocess.run([sys.executable, "-c", source], capture_output=True)``
    would, without starting a process per program. A worker that died (or ran past ``timeout``)
    is started anew for the next program.
    """

    def __init__(self):
        self.process = None
        self.stderr = tempfile.TemporaryFile(mode="w+")

    def _start(self):
        env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
        self.process = subprocess.Popen(
            [sys.executable, str(PTX_WORKER)],
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
        )

    def run(self, source, timeout=1800):
        if self.process is None or self.process.poll() is not None:
            self._stop()
            self._start()
        watchdog = threading.Timer(timeout, self.process.kill)
        watchdog.start()
        try:
            self.process.stdin.write(json.dumps(source) + "\n")
            self.process.stdin.flush()
            for line in self.process.stdout:
                if MARK in line:  # after whatever the compiler wrote to the file descriptor itself
                    answer = json.loads(line[line.index(MARK) + len(MARK) :])
                    return subprocess.CompletedProcess(
                        ["ptx_worker"], answer["returncode"], answer["stdout"], answer["stderr"]
                    )
        finally:
            watchdog.cancel()
        returncode = self.process.wait()
        self._stop()
        self.stderr.seek(0)
        raise RuntimeError(
            f"the PTX worker died (exit {returncode}, or killed after {timeout} s): " + self.stderr.read()[-3000:]
        )

    def _stop(self):
        """Kill the worker: it holds nothing to save, and a clean exit of numba-cuda can take seconds."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process.stdin.close()
            self.process.stdout.close()
            self.process = None

    def close(self):
        self._stop()
        self.stderr.close()


@pytest.fixture(scope="session")
def _ptx_worker():
    worker = PtxWorker()
    yield worker
    worker.close()


@pytest.fixture
def ptx_child(ptx_compiler, _ptx_worker):
    """``ptx_child(source)``: run a program on numba's real CUDA target, as ``python -c`` in a child
    with ``NUMBA_ENABLE_CUDASIM=0`` would, in the session's one PTX worker process."""
    return _ptx_worker.run
