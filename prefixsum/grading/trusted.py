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
import symtable
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
    package = path.name == "__init__.py"  # a package (numba_gpu) finds its own modules, relative to it
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=[str(path.parent)] if package else None
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


cells = _load(pathlib.Path(__file__).parents[1] / "classroom" / "cells.py", "prefixsum_grading_cells")


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


def _check_one(exercise, source, namespace, setup, timeout, devices=None):
    """What one exercise showed: ``{status, names, observations}``, or the stage and error that stopped it.

    Execs the exercise's cell, then its checks with a :class:`.observations.Recorder` watching
    every run and host call of the student's code; the student's names reach the checks as
    :class:`.observations.Observed` proxies. ``status`` is ``ran``, ``error`` (``error`` is the
    exception as data, ``stage`` says whether the exercise or a check raised) or ``timeout``.
    Nothing here is a verdict: the grader replays the checks on these observations (:mod:`.judge`).
    With ``devices`` (a dict), the argument types of every call of a device function the cell
    defines are noted there while the checks run: the signatures to compile it with.
    """
    from prefixsum.classroom.check import observed
    from prefixsum.grading import encoding, observations

    try:
        with _time_limit(timeout):
            exec(cells.compiled(source, f"<exercise {exercise['id']}>"), namespace)  # noqa: S102  (accepted by the allow-list)
    except _OutOfTime:
        return {"status": "timeout", "stage": "exercise"}
    except Exception as error:  # noqa: BLE001  (the student's error is the result)
        return {"status": "error", "stage": "exercise", "error": encoding.encode_error(error)}
    recorder = observations.Recorder()
    # Setup names stay the instructor's: a submission that redefines ps or np does not change the check.
    mine = {n: namespace[n] for n in sorted(_reads(exercise["checks"])) if n in namespace and n not in setup}
    names = {n: observations.describe(v) for n, v in mine.items()}
    given = {n: observations.Observed(v, recorder) if "callable" in names[n] else v for n, v in mine.items()}
    result = {"status": "ran", "names": names, "observations": recorder.observations}
    with observed.observer(recorder), _observing_device_functions(namespace, source, devices):
        for check in exercise["checks"]:
            scope = {**namespace, **setup, **given, "print": lambda *values, **options: None}
            try:
                with _time_limit(timeout):
                    exec(cells.compiled(check, f"<check {exercise['id']}>"), scope)  # noqa: S102  (the instructor's check)
            except _OutOfTime:
                result.update(status="timeout", stage="check")
                break
            except (Exception, observations.Unreplayable) as error:  # noqa: BLE001  (a run the judge could not replay either)
                result.update(status="error", stage="check", error=encoding.encode_error(error))
                break
    return result


def _host_array(value):
    """The numpy array ``value`` is or wraps (a simulated device array, or one of the classroom's own
    shared, local and traced arrays), else None."""
    import numpy as np

    from prefixsum.classroom.sim import memory, numba_sim

    if isinstance(value, np.ndarray):
        return value
    return np.asarray(value) if isinstance(value, memory.Array) else numba_sim.host_array(value)


def _spell(value):
    """A launch argument's type as numba's signature strings spell it (``float32[::1]``)."""
    from numba import typeof

    array = _host_array(value)
    if array is not None:
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
        found, devices = {}, ({} if record else None)
        with _recording_launches(namespace, found):
            result = _check_one(exercise, sources[exercise["id"]], namespace, setup, request["timeout"], devices)
        result["id"] = exercise["id"]
        # Only kernels that this exercise's cell defines count: a launch of an earlier one is no
        # launch of the student's answer.
        mine = set(_kernels(sources[exercise["id"]]))
        result["launches"] = sum(len(s) for name, s in found.items() if name in mine)
        if record:
            # A kernel of the cell that no check launches (the check launches one of its own) is
            # named with no signature: the grader compiles nothing of it, since nothing runs it.
            launched = {name: sorted(s) for name, s in {**devices, **found}.items()}
            result["signatures"] = {**dict.fromkeys(mine, []), **launched}
        emit(result)


def _kernels(source, device=False):
    """Names of the kernels (``cuda.jit`` functions that are not ``device=True``) a cell defines; with
    ``device``, of its device functions."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                is_device = isinstance(decorator, ast.Call) and any(
                    k.arg == "device" and getattr(k.value, "value", False) is True for k in decorator.keywords
                )
                if is_device == device and (device or _jit_decorator(decorator)):
                    names.append(node.name)
    return names


def _jit_decorator(decorator):
    """Whether a decorator is ``cuda.jit`` (or a call of it): a plain function's decorators are not kernels."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (
        isinstance(target, ast.Attribute)
        and target.attr == "jit"
        or isinstance(target, ast.Name)
        and target.id == "jit"
    )


def _type_spelling(value):
    """A device function's argument as numba's signature strings spell its type (``float32[::1]``,
    ``Tuple((float64, int64))``): the simulator's arrays by the numpy array they hold."""
    from numba import typeof, types

    if isinstance(value, tuple):
        return f"Tuple(({', '.join(_type_spelling(v) for v in value)},))"
    if _host_array(value) is not None:
        return _spell(value)
    kind = typeof(value)
    return "boolean" if kind == types.boolean else str(kind)


@contextlib.contextmanager
def _observing_device_functions(namespace, source, devices):
    """While inside, note in ``devices`` the signature of every call of a device function ``source`` defines.

    A simulated device function calls its Python function ``fn``; it is replaced by one that
    notes the call's argument types first, with the same globals (the simulator points their
    ``cuda`` at the launch's) and ``__wrapped__`` (its source, which the package reads, is the
    student's).
    """
    from prefixsum.classroom.sim import numba_sim

    replaced = {}
    for name in _kernels(source, device=True) if devices is not None else ():
        function = namespace.get(name)
        original = numba_sim.python_function(function)
        if original is not None:
            replaced[name] = (function, original)
            numba_sim.replace_python_function(function, _noting(original, devices.setdefault(name, set())))
    try:
        yield
    finally:
        for function, original in replaced.values():
            numba_sim.replace_python_function(function, original)


def _noting(fn, signatures):
    """``fn``, adding the signature of each call's arguments to ``signatures`` first."""
    import functools
    import types

    spell = _type_spelling  # a closure's: the wrapper's globals are the student's namespace

    def noted(*args):
        signatures.add(f"({''.join(spell(a) + ', ' for a in args).rstrip(' ')})")
        return fn(*args)

    wrapper = types.FunctionType(noted.__code__, fn.__globals__, fn.__name__, None, noted.__closure__)
    return functools.update_wrapper(wrapper, fn)


def _free_names(source):
    """The names a cell's code reads from its module: at the top level and inside its functions."""
    found, tables = set(), [symtable.symtable(source, "<cell>", "exec")]
    while tables:
        table = tables.pop()
        found |= {
            s.get_name()
            for s in table.get_symbols()
            if s.is_referenced() and (s.is_global() or table.get_type() == "module")
        }
        tables.extend(table.get_children())
    return found


def _binds(node):
    """The names a setup statement binds: imports, assignments, definitions; none for anything else."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {n.id for target in node.targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    return set()


def _setup_for(setup, sources):
    """The setup statements the cells ``sources`` need, and those these need, in their order.

    Running every setup cell would import and run the whole workbook for a GPU (seconds, and
    calls that need one); a device function of chapter 10 reads ``publish`` and ``PREFIX``, which
    a setup cell binds from ``lookback``, which another imports.
    """
    statements = [node for cell in setup for node in ast.parse(cell).body]
    needed = set().union(*map(_free_names, sources))
    kept, grown = set(), True
    while grown:
        grown = False
        for k, node in enumerate(statements):
            if k not in kept and _binds(node) & needed:
                kept.add(k)
                needed |= _free_names(ast.unparse(node))
                grown = True
    return ast.Module(body=[statements[k] for k in sorted(kept)], type_ignores=[])


def _compile_problem(kind, name, error):
    """What a compile ``error`` of ``kind`` (kernel, device function) ``name`` says: the line and the cause."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    line = re.search(r'File "[^"]*", line (\d+)|" at [^\n]*\((\d+)\)', text)
    where = f" (line {line.group(1) or line.group(2)})" if line else ""
    held = re.search(r"global\((\w+): ([^\n]{0,60})", text)
    if held:
        cause = (
            f"it reads the module-level {held.group(1)}, a Python object ({held.group(2).rstrip(')')}) that a GPU "
            "cannot hold: a list, dict or set lives in the host's memory. Make it a tuple, or a numpy array "
            "passed to the kernel"
        )
    else:
        informative = [
            line.strip() for line in text.splitlines() if line.strip() and not line.startswith(("Failed in", "During:"))
        ]
        cause = re.sub(r" at 0x[0-9a-f]+", "", informative[0] if informative else "")
    return f"{kind} {name} does not compile for a GPU{where}: {type(error).__name__}: {cause}"


def _ptx(request, emit):
    from numba import cuda

    cc = (7, 5)
    # Device functions ask the current device for its capability; there is none here. The door
    # to numba's internals is loaded by its path: this mode imports nothing of the package.
    _load(pathlib.Path(__file__).parents[1] / "core" / "numba_gpu" / "__init__.py", "numba_gpu").pretend_device(cc)
    chapter = json.loads(request["chapter"])
    namespace = {"__name__": "__grading__"}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        exec(compile(_setup_for(chapter["setup"], request["sources"].values()), "<setup>", "exec"), namespace)  # noqa: S102
    for exercise in chapter["exercises"]:
        source = request["sources"].get(exercise["id"])
        if source is None:
            continue
        signatures = request["signatures"].get(exercise["id"], {})
        problems, notes = [], []
        try:
            exec(cells.compiled(source, f"<exercise {exercise['id']}>"), namespace)  # noqa: S102  (accepted by the allow-list)
            for name in _kernels(source):
                # a helper kernel of the student's own: no launch of the instructor's gives its types
                if name not in signatures:
                    notes.append(
                        f"kernel {name} is the submission's own (the instructor's solution does not launch "
                        "it): "
                        "it ran on the simulator, and was not compiled to PTX"
                    )
                for signature in signatures.get(name, ()):
                    try:
                        cuda.compile_ptx(namespace[name].py_func, signature, cc=cc)
                    except Exception as error:  # noqa: BLE001  (the compiler's complaint is the result)
                        problems.append(_compile_problem("kernel", name, error))
            # A device function the package's kernels call (a look-back, a warp rank) is compiled on
            # its own, for the argument types the instructor's solution was called with.
            for name in _kernels(source, device=True):
                for signature in signatures.get(name, ()):
                    try:
                        cuda.compile_ptx(namespace[name].py_func, signature, device=True, cc=cc)
                    except Exception as error:  # noqa: BLE001  (the compiler's complaint is the result)
                        problems.append(_compile_problem("device function", name, error))
                        break
        except Exception as error:  # noqa: BLE001  (the student's error: the check's run reports it too)
            emit({"id": exercise["id"], "status": "error", "message": cells.first_line(error)})
            continue
        emit(
            {"id": exercise["id"], "status": "rejected" if problems else "ok", "message": "; ".join(problems or notes)}
        )


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
    command = [
        sys.executable,
        "-c",
        _PYTEST_WITHOUT_IRI_GRAMMARS,
        "-p",
        "nbval",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-q",
        "--nbval",
        str(folder / "graded.ipynb"),
        f"--nbval-cell-timeout={request['timeout']:g}",
        f"--junitxml={folder / 'junit.xml'}",
        f"--rootdir={folder}",
    ]
    if request["sanitize"]:
        (folder / "sanitize.cfg").write_text(request["sanitize"])
        command.append(f"--nbval-sanitize-with={folder / 'sanitize.cfg'}")
    # Only nbval's plugin: loading every installed plugin costs seconds per submission.
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    finished = subprocess.run(
        command,
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    report = folder / "junit.xml"
    emit(
        {
            "id": "nbval",
            "returncode": finished.returncode,
            "junit": report.read_text(errors="replace")[: 8 << 20] if report.exists() else "",
        }
    )


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
