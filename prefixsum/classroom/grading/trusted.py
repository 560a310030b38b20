"""The grader's own re-check of a submission, in processes that the submission never touched.

Run as a program by :mod:`.runner`, inside the sandbox (:mod:`.sandbox`), by its file's path
(so that starting it imports nothing of the package: the ``ptx`` mode never needs the simulator)::

    python .../grading/trusted.py check|record|ptx|nbval < REQUEST.json > RESULT.jsonl

The request comes on stdin; a result is one JSON object per line on stdout, written as soon as
it is known, so that a run killed at its time limit still reports the exercises before. The
process's own stdout is put aside first: what the submission prints goes nowhere. No verdict
is drawn here: the grader's judge (:mod:`.judge`) reads what comes back with a strict schema and
replays the checks on it.

* ``check`` (on the classroom simulator): runs the instructor's setup cells, then for each
  exercise the submitted cell (already accepted by :mod:`.allowlist`) and the instructor's check
  cells, with the setup's own names put back. What comes back are observations only
  (:mod:`.observations`): the outputs, trace and changed arguments of every run and host call
  of the student's code, the student's names the checks read (a callable's name and kind, a
  constant's value), an exception as data, and the number of launches of the cell's own
  kernels. The request holds no solution and no expected output.
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


def _load(path, name):
    """The module at ``path`` (a file of the package, loaded by its path: this script imports no package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cells = _load(pathlib.Path(__file__).with_name("cells.py"), "prefixsum_grading_cells")


def _reads(checks):
    """The names the check cells read and do not assign themselves: what they take from the exercise."""
    read, assigned = set(), set()
    for source in checks:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Name):
                (read if isinstance(node.ctx, ast.Load) else assigned).add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.Lambda)):
                assigned.update(a.arg for a in node.args.args)
                assigned.add(getattr(node, "name", ""))
    return read - assigned


def _check_one(exercise, source, namespace, setup, timeout):
    """What one exercise showed: ``{status, names, observations}``, or the stage and error that stopped it.

    Execs the exercise's cell, then its checks with a :class:`.observations.Recorder` watching
    every run and host call of the student's code; the student's names reach the checks as
    :class:`.observations.Observed` proxies. ``status`` is ``ran``, ``error`` (``error`` is the
    exception as data, ``stage`` says whether the exercise or a check raised) or ``timeout``.
    Nothing here is a verdict: the grader replays the checks on these observations (:mod:`.judge`).
    """
    from prefixsum.classroom.check import observed
    from prefixsum.classroom.grading import observations

    try:
        with _time_limit(timeout):
            exec(cells.compiled(source, f"<exercise {exercise['id']}>"), namespace)  # noqa: S102  (accepted by the allow-list)
    except _OutOfTime:
        return {"status": "timeout", "stage": "exercise"}
    except Exception as error:  # noqa: BLE001  (the student's error is the result)
        return {"status": "error", "stage": "exercise", "error": observations.encode_error(error)}
    recorder = observations.Recorder()
    # Setup names stay the instructor's: a submission that redefines ps or np does not change the check.
    mine = {n: namespace[n] for n in sorted(_reads(exercise["checks"])) if n in namespace and n not in setup}
    names = {n: observations.describe(v) for n, v in mine.items()}
    given = {n: observations.Observed(v, recorder) if "callable" in names[n] else v for n, v in mine.items()}
    result = {"status": "ran", "names": names, "observations": recorder.observations}
    with observed.observer(recorder):
        for check in exercise["checks"]:
            scope = {**namespace, **setup, **given, "print": lambda *values, **options: None}
            try:
                with _time_limit(timeout):
                    exec(cells.compiled(check, f"<check {exercise['id']}>"), scope)  # noqa: S102  (the instructor's check)
            except _OutOfTime:
                result.update(status="timeout", stage="check")
                break
            except (Exception, observations.Unreplayable) as error:  # noqa: BLE001  (a run the judge could not replay either)
                result.update(status="error", stage="check", error=observations.encode_error(error))
                break
    return result


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
    namespace = cells.run_setup(chapter)
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
    _load(pathlib.Path(__file__).parents[2] / "core" / "numba_gpu.py", "numba_gpu").pretend_device(cc)
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
        problems, notes = [], []
        try:
            exec(cells.compiled(source, f"<exercise {exercise['id']}>"), namespace)  # noqa: S102  (accepted by the allow-list)
            for name in _kernels(source):
                if name not in signatures:  # a helper kernel of the student's own: no launch of the instructor's gives its types
                    notes.append(f"kernel {name} is the submission's own (the instructor's solution does not launch it): "
                                 "it ran on the simulator, and was not compiled to PTX")
                for signature in signatures.get(name, ()):
                    try:
                        cuda.compile_ptx(namespace[name].py_func, signature, cc=cc)
                    except Exception as error:  # noqa: BLE001  (the compiler's complaint is the result)
                        text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip().splitlines()
                        problems.append(f"kernel {name} does not compile for a GPU: {type(error).__name__}: "
                                        f"{text[0] if text else ''}")
        except Exception as error:  # noqa: BLE001  (the student's error: the check's run reports it too)
            emit({"id": exercise["id"], "status": "error", "message": cells.first_line(error)})
            continue
        emit({"id": exercise["id"], "status": "rejected" if problems else "ok", "message": "; ".join(problems or notes)})


# pytest, as ``python -m pytest`` starts it, with jsonschema's optional IRI format checker left
# out: nbval reads the notebook with nbformat, which imports jsonschema, which imports
# rfc3987_syntax if it is installed (jupyter-events pulls it in), which compiles some 35 Earley
# grammars at import, over a second of every submission's run (jsonschema issue #1428). No
# notebook schema has an IRI field; jsonschema skips the checker when the import fails.
_WITHOUT_IRI_GRAMMARS = "import sys; sys.modules['rfc3987_syntax'] = None"
_PYTEST_WITHOUT_IRI_GRAMMARS = f"{_WITHOUT_IRI_GRAMMARS}; import pytest; sys.exit(pytest.console_main())"


def _nbval(request, emit):
    """Run nbval on the request's notebook in a folder of the sandbox's /tmp; emit its junit XML."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="nbval-"))
    (folder / "graded.ipynb").write_text(request["notebook"])
    command = [sys.executable, "-c", _PYTEST_WITHOUT_IRI_GRAMMARS, "-p", "nbval", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "--nbval",
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
