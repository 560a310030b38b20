"""The grader's allow-list, from the other side: no path through the attribute graph leads from a name
a submission can reach (each chapter's setup and instructor's cells, numpy, math, numba, numba.cuda,
values of every kind) to Python's machinery (``exec``, ``open``, ``os``, ...), and the walk that
proves it finds a path where there is one.

Fast: one walk from every name a submission can reach (each chapter's setup and instructor's cells
run once, on the simulator).
"""

import builtins
import collections
import types
import warnings

import numpy as np
import pytest
from numba import cuda

from prefixsum.classroom import cells
from prefixsum.grading import allowlist, whitelist

FORBIDDEN = {
    id(getattr(builtins, name)): name
    for name in (
        "exec",
        "eval",
        "open",
        "compile",
        "__import__",
        "getattr",
        "setattr",
        "delattr",
        "vars",
        "globals",
        "locals",
        "breakpoint",
        "input",
        "type",
        "object",
    )
}
FORBIDDEN_MODULES = (
    "os",
    "posix",
    "sys",
    "importlib",
    "builtins",
    "ctypes",
    "_ctypes",
    "subprocess",
    "io",
    "shutil",
    "socket",
)
_GRABBED = []


@cuda.jit
def _grab_cuda(x):
    _GRABBED.append(cuda)  # on the simulator: the kernel's cuda, as a submission's kernel sees it


def _namespaces():
    """``[(object, NAMES path)]``: each namespace of :data:`NAMES`, on the host and inside a simulated kernel."""
    import math

    import numba

    _grab_cuda[1, 1](np.zeros(1))
    found = [(np, "numpy"), (math, "math"), (numba, "numba"), (cuda, "numba.cuda"), (_GRABBED[-1], "numba.cuda")]
    return found


def _samples():
    """Values of every kind a submission can make: numbers, containers, arrays, device arrays, kernels, generators."""

    @cuda.jit
    def kernel(x):
        x[0] = 1

    @cuda.jit(device=True)
    def device(a):
        return a

    def plain(a):
        return a

    device_array = cuda.to_device(np.arange(6, dtype=np.float32))
    values = [
        1,
        2.5,
        1j,
        True,
        "text",
        b"bytes",
        (1, 2),
        [1, 2],
        {"k": 1},
        {1, 2},
        frozenset({1}),
        range(3),
        slice(1, 2),
        None,
        np.arange(6, dtype=np.int32).reshape(2, 3),
        np.zeros(3, np.float64),
        np.float32(1),
        np.int64(2),
        np.dtype(np.float32),
        np.iinfo(np.int32),
        np.finfo(np.float64),
        device_array,
        device_array[1:3],
        cuda.device_array((2, 2), np.int32),
        kernel,
        device,
        plain,
        lambda: 1,
        (i for i in range(2)),
        zip([1], [2]),
        enumerate([1]),
        reversed([1]),
        map(abs, [1]),
        iter([1]),
        ValueError("x"),
        np.add,
        np.float32,
    ]
    return values + [getattr(builtins, n) for n in allowlist.SAFE_BUILTINS if n not in ("True", "False", "None")]


def _chapter_roots(chapter, setup):
    """The values a submission of ``chapter`` can name: the setup's exposed names, the workbook
    paths of the instructor's cells, the names those cells bind, and what their workbook calls return."""
    namespace = dict(setup)
    for exercise in chapter.exercises:
        exec(cells.compiled(exercise.source, f"<roots {exercise.id}>"), namespace)  # noqa: S102  (the instructor's cells)
    names = allowlist.chapter_names(tuple(chapter.setup), tuple(e.source for e in chapter.exercises))
    roots = [(namespace[name], name) for name in names.exposed]
    for path in names.paths:
        root, *parts = path.split(".")
        value = namespace[root]
        for part in parts:
            value = getattr(value, part)
        roots.append((value, path))
    roots += [
        (namespace[name], name) for name, kind in names.exercises.items() if kind[0] == "value" and name in namespace
    ]
    if "kstep" in namespace:
        roots.append((namespace["kstep"].levels(10, 3), "kstep.levels(10, 3)"))
    return roots


def _forbidden(value):
    if isinstance(value, types.ModuleType):
        return f"the module {value.__name__}"
    if id(value) in FORBIDDEN:
        return FORBIDDEN[id(value)]
    if isinstance(value, (types.FrameType, types.CodeType, types.TracebackType)):
        return f"a {type(value).__name__}"
    module = getattr(value, "__module__", None) if callable(value) else None
    if isinstance(module, str) and module.split(".")[0] in FORBIDDEN_MODULES and module != "builtins":
        return f"{module}.{getattr(value, '__name__', '?')}"
    return None


def walk(roots, depth=4, budget=60000, shared=False):
    """Breadth-first over :data:`NAMES` from namespaces and :data:`VALUE_ATTRIBUTES` from values
    (and the items of containers); ``{path: what}`` of every forbidden object reached, and with
    ``shared`` (roots that live in the modules: state of the package's, not a fresh value) of every
    container or array reached, which a submission could change under the checker's feet."""
    queue = collections.deque((value, label, where, 0) for value, label, where in roots)
    seen, kept, found = set(), [], {}
    while queue and budget:
        value, label, where, level = queue.popleft()
        budget -= 1
        if id(value) in seen:
            continue
        seen.add(id(value))
        kept.append(value)  # keep it alive: ids are not reused
        if where is None and _forbidden(value):
            found[label] = _forbidden(value)
            continue
        if shared and where is None and isinstance(value, (dict, list, set, bytearray, np.ndarray)):
            found[label] = f"shared state: a {type(value).__name__}"
            continue
        if level == depth:
            continue
        names = whitelist.NAMES[where] if where is not None else allowlist.VALUE_ATTRIBUTES
        for name in sorted(names):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    child = getattr(value, name)
            except Exception:  # noqa: BLE001  (no such attribute here, or a property that raises)
                continue
            inner = f"{where}.{name}" if where is not None and f"{where}.{name}" in whitelist.NAMES else None
            queue.append((child, f"{label}.{name}", inner, level + 1))
        if where is None and isinstance(value, (list, tuple, dict, set, frozenset)):
            items = list(value.values() if isinstance(value, dict) else value)[:16]
            queue.extend((item, f"{label}[{k}]", None, level + 1) for k, item in enumerate(items))
    assert budget, "the walk did not end within its budget: raise it, or bound the graph"
    return found


def test_no_path_from_a_name_a_submission_can_reach_leads_to_pythons_machinery(book, setups):
    """From the listed modules and every chapter's names: no module, no exec, no shared state; from
    every kind of value a submission makes: no module, no exec."""
    roots = [(value, path, path) for value, path in _namespaces()]
    for number, chapter in book.items():
        roots += [(value, f"{chapter.name}: {label}", None) for value, label in _chapter_roots(chapter, setups[number])]
    assert walk(roots, shared=True) == {}
    assert walk([(value, f"<{type(value).__name__}>", None) for value in _samples()]) == {}


def test_the_walk_finds_a_path_where_there_is_one():
    """The walk can fail: an array's ``ctypes`` leads to the ctypes module, a function's ``__globals__`` to builtins."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(allowlist, "VALUE_ATTRIBUTES", allowlist.VALUE_ATTRIBUTES | {"ctypes", "_ctypes", "__builtins__"})
        found = walk([(np.zeros(2), "x", None), (_samples, "f", None)])
    assert set(found.values()) & {"the module ctypes", "the module builtins"}
