"""The grader's own re-check of a submission, in processes that the submission never touched.

Run as a program by :mod:`.runner`, inside the sandbox (:mod:`.sandbox`), by its file's path
(so that starting it imports nothing of the package: the ``ptx`` mode never needs the simulator)::

    python .../grading/trusted.py check|record|ptx|nbval < REQUEST.json > RESULT.jsonl

The request comes on stdin; a result is one JSON object per line on stdout, written as soon as
it is known, so that a run killed at its time limit still reports the exercises before. The
process's own stdout is put aside first: what the submission prints goes nowhere. The grader
parses the results with a strict schema and decides every verdict itself (:mod:`.runner`).

* ``check`` (on the classroom simulator): runs the instructor's setup cells, then for each
  exercise the submitted cell (already accepted by :mod:`.allowlist`) and the instructor's check
  cells. A check cell runs with the setup's own names put back and ``print`` recording what it
  is given; the lines it printed, the first failing verdict's text and the number of launches of
  the cell's own kernels come back. The request holds no solution and no expected output.
* ``record``: the same on the instructor's solutions, also recording the argument types of every
  launch of a kernel that the exercise cell defines: the signatures to compile with.
* ``ptx`` (with ``NUMBA_ENABLE_CUDASIM=0``, no GPU needed): loads each submitted cell after the
  setup cells' imports and compiles each kernel it defines to PTX, for the signatures recorded
  from the instructor's solution.
* ``nbval``: writes the assembled notebook into the sandbox's /tmp, runs ``pytest --nbval`` on
  it and returns nbval's junit XML.
"""
import ast
import contextlib
import importlib.util
import io
import json
import linecache
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile


class _OutOfTime(BaseException):
    """Raised by the alarm; a BaseException, so that the checker's ``except Exception`` lets it through."""


@contextlib.contextmanager
def _time_limit(seconds):
    def ring(signum, frame):
        raise _OutOfTime()

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _compiled(source, filename):
    """``compile``, with the source put where ``inspect`` finds it (the tracer names shared arrays
    by their source line, as it does in a notebook)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec")


def _first_line(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def _run_setup(chapter):
    namespace = {"__name__": "__grading__"}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for source in chapter["setup"]:
            exec(compile(source, "<setup>", "exec"), namespace)  # noqa: S102  (the instructor's own cells)
    return namespace


def _check_one(exercise, source, namespace, setup, timeout):
    """``{status, message, lines, failed}`` of one exercise: exec its cell, then its checks.

    ``status`` is ``ran`` (the grader compares ``lines`` with the expected output), ``error`` or
    ``timeout``; ``failed`` is the text of the first verdict that did not pass, or empty.
    """
    try:
        with _time_limit(timeout):
            exec(_compiled(source, f"<exercise {exercise['id']}>"), namespace)  # noqa: S102  (accepted by the allow-list)
    except _OutOfTime:
        return {"status": "timeout", "message": f"loading the exercise took more than {timeout:g} s"}
    except Exception as error:  # noqa: BLE001  (the student's error is the result)
        return {"status": "error", "message": _first_line(error)}
    printed, verdicts = [], []

    def record(*values, **_):
        verdicts.extend(v for v in values if hasattr(v, "passed") and hasattr(v, "diagnosis"))
        printed.append(" ".join(str(v) for v in values) + "\n")

    for check in exercise["checks"]:
        names = {**namespace, **setup, "print": record}
        try:
            with _time_limit(timeout):
                exec(_compiled(check, f"<check {exercise['id']}>"), names)  # noqa: S102  (the instructor's check)
        except _OutOfTime:
            return {"status": "timeout", "message": f"the check ran for more than {timeout:g} s", "lines": printed}
        except Exception as error:  # noqa: BLE001
            return {"status": "error", "message": f"the check failed: {_first_line(error)}", "lines": printed}
    failed = next((v for v in verdicts if not v.passed), None)
    if failed is not None and failed.diagnosis in ("timeout", "poll-limit"):  # both counted, not clocked
        return {"status": "timeout", "message": str(failed), "lines": printed}
    return {"status": "ran", "message": str(failed) if failed is not None else "", "lines": printed}


def _spell(value):
    """A launch argument's type as numba's signature strings spell it (``float32[::1]``)."""
    import numpy as np
    from numba import typeof

    array = value if isinstance(value, np.ndarray) else getattr(value, "_ary", None)
    if isinstance(array, np.ndarray):
        kind = typeof(array)
        dims = [":"] * kind.ndim
        if kind.layout == "C" and dims:
            dims[-1] = "::1"
        return f"{kind.dtype}[{', '.join(dims)}]"
    return str(typeof(value))


def _recording_launches(namespace, found):
    """Record ``{kernel name: {signature}}`` for every launch of a kernel defined in ``namespace``
    (a launch hook of the classroom simulator, which hands it the launch's arguments)."""
    from prefixsum.classroom.sim import hooks

    def record(launch):
        if launch.function.__globals__ is namespace:
            found.setdefault(launch.kernel, set()).add(f"void({', '.join(_spell(a) for a in launch.arguments)})")

    return hooks.launch_hook(record)


def _check(request, emit, record=False):
    chapter = json.loads(request["chapter"])
    namespace = _run_setup(chapter)
    setup = dict(namespace)
    sources = request["sources"]
    for exercise in chapter["exercises"]:
        if exercise["id"] not in sources:
            continue
        found = {}
        with _recording_launches(namespace, found):
            result = _check_one(exercise, sources[exercise["id"]], namespace, setup, request["timeout"])
        result["id"] = exercise["id"]
        # Only kernels that this exercise's cell defines count: a launch of an earlier one is no
        # launch of the student's answer.
        mine = set(_kernels(sources[exercise["id"]]))
        result["launches"] = sum(len(s) for name, s in found.items() if name in mine)
        if record:
            result["signatures"] = {name: sorted(s) for name, s in found.items()}
        emit(result)


def _kernels(source):
    """Names of the kernels (``cuda.jit`` functions that are not ``device=True``) a cell defines."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                device = isinstance(decorator, ast.Call) and any(
                    k.arg == "device" and getattr(k.value, "value", False) is True for k in decorator.keywords)
                if not device:
                    names.append(node.name)
    return names


def _ptx(request, emit):
    from numba import cuda

    cc = (7, 5)
    # Device functions ask the current device for its capability; there is none here. The door
    # to numba's internals is loaded by its path: this mode imports nothing of the package.
    door = importlib.util.spec_from_file_location("numba_gpu", pathlib.Path(__file__).parents[2] / "core" / "numba_gpu.py")
    numba_gpu = importlib.util.module_from_spec(door)
    door.loader.exec_module(numba_gpu)
    numba_gpu.pretend_device(cc)
    chapter = json.loads(request["chapter"])
    namespace = {"__name__": "__grading__"}
    used = {n.id for source in request["sources"].values() for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for source in chapter["setup"]:
            # only the imports the cells use: importing the whole workbook for a GPU costs seconds
            imports = [n for n in ast.parse(source).body if isinstance(n, (ast.Import, ast.ImportFrom))
                       and {(a.asname or a.name).split(".")[0] for a in n.names} & used]
            exec(compile(ast.Module(body=imports, type_ignores=[]), "<setup imports>", "exec"), namespace)  # noqa: S102
    for exercise in chapter["exercises"]:
        source = request["sources"].get(exercise["id"])
        if source is None:
            continue
        signatures = request["signatures"].get(exercise["id"], {})
        problems = []
        try:
            exec(_compiled(source, f"<exercise {exercise['id']}>"), namespace)  # noqa: S102  (accepted by the allow-list)
            for name in _kernels(source):
                if name not in signatures:
                    problems.append(f"kernel {name} is not one the exercise launches, so the grader cannot compile it "
                                    f"(the exercise's kernels: {', '.join(sorted(signatures)) or 'none'})")
                for signature in signatures.get(name, ()):
                    try:
                        cuda.compile_ptx(namespace[name].py_func, signature, cc=cc)
                    except Exception as error:  # noqa: BLE001  (the compiler's complaint is the result)
                        text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip().splitlines()
                        problems.append(f"kernel {name} does not compile for a GPU: {type(error).__name__}: "
                                        f"{text[0] if text else ''}")
        except Exception as error:  # noqa: BLE001  (the student's error: the check's run reports it too)
            emit({"id": exercise["id"], "status": "error", "message": _first_line(error)})
            continue
        emit({"id": exercise["id"], "status": "rejected" if problems else "ok", "message": "; ".join(problems)})


def _nbval(request, emit):
    """Run nbval on the request's notebook in a folder of the sandbox's /tmp; emit its junit XML."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="nbval-"))
    (folder / "graded.ipynb").write_text(request["notebook"])
    command = [sys.executable, "-m", "pytest", "-p", "nbval", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "--nbval",
               str(folder / "graded.ipynb"), f"--nbval-cell-timeout={request['timeout']:g}", f"--junitxml={folder / 'junit.xml'}",
               f"--rootdir={folder}"]
    if request["sanitize"]:
        (folder / "sanitize.cfg").write_text(request["sanitize"])
        command.append(f"--nbval-sanitize-with={folder / 'sanitize.cfg'}")
    # Only nbval's plugin: loading every installed plugin costs seconds per submission.
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    finished = subprocess.run(command, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, check=False)
    report = folder / "junit.xml"
    emit({"id": "nbval", "returncode": finished.returncode,
          "junit": report.read_text(errors="replace")[:8 << 20] if report.exists() else ""})


def main(argv):
    (mode,) = argv
    request = json.load(sys.stdin)
    # The results' own channel: what the submission prints (to fd 1) goes to /dev/null instead.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (for the process's lifetime)

    def emit(result):
        out.write(json.dumps(result) + "\n")
        out.flush()

    if mode == "ptx":
        _ptx(request, emit)
    elif mode == "nbval":
        _nbval(request, emit)
    else:
        _check(request, emit, record=mode == "record")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
