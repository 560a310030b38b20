"""The grader's allow-list: a whitelist no alias escapes, Python's own scoping, the attribute graph it
opens, and its cost, linear in the cell's size.

Fast: parsing only, plus one walk of the attribute graph from every name a submission can reach
(each chapter's setup and instructor's cells run once, on the simulator).
"""

import ast
import collections
import symtable
import time
import types

import pytest

from prefixsum.grading import allowlist, cell_walk, scopes


def refusals(book, exercise_id, source, earlier_submitted=()):
    """The allow-list's problems with ``source`` as the submission's cell of ``exercise_id``, as the grader asks."""
    chapter = book[exercise_id[:2]]
    ids = [e.id for e in chapter.exercises]
    earlier = [e.source for e in chapter.exercises[: ids.index(exercise_id)]]
    return allowlist.check(
        source,
        instructor_source=chapter.exercise(exercise_id).source,
        setup_sources=chapter.setup,
        earlier_sources=earlier,
        exercise_id=exercise_id,
        chapter_sources=[e.source for e in chapter.exercises],
        earlier_submitted=earlier_submitted,
        check_sources=[check for e in chapter.exercises for check, _ in e.checks],
    )


LADDER_MAX = """from numba import cuda, int32

BLOCK = 64
{top}

@cuda.jit
def my_max_tile(x, out, totals, n):
    {body}
"""
SERIAL = """def my_partial_sums(x):
    {body}
    return x
"""
# name: (exercise, cell, a word of the refusal). Every way of binding a module to another name,
# and every way around a name: each is a cell a hostile student hands in.
# fmt: off
ALIASES = {
    "assigned at the top": ("01.ladder-max", LADDER_MAX.format(top="import numba\nK = numba", body="K.cuda.utils.builtins.exec('1')"),
                            "numba may only be used as numba.<attribute>"),
    "assigned in the kernel": ("01.ladder-max", LADDER_MAX.format(top="", body="C = cuda\n    "
                                                                               "C.utils.builtins.exec('1')"),
                               "cuda may only be used"),
    "numpy under another name": ("01.serial-scan", SERIAL.format(body="NP = np\n    x = NP.convolve(x, x)"), "np may only be used"),
    "tuple unpacking": ("01.serial-scan", SERIAL.format(body="a, M = 1, np\n    x = M.convolve(x, x)"), "np may only "
                                                                                                        "be used"),
    "starred unpacking": ("01.serial-scan", SERIAL.format(body="*M, = [np]\n    x = M[0].convolve(x, x)"), "np may only be used"),
    "default argument": ("01.serial-scan", "def my_partial_sums(x, M=np):\n    return M.convolve(x, x)\n", "np may only be used"),
    "lambda default": ("01.serial-scan", SERIAL.format(body="f = lambda M=np: M.convolve(x, x)"), "np may only be used"),
    "closure": ("01.serial-scan", SERIAL.format(body="M = np\n    def inner():\n        return M.convolve(x, x)\n    x "
                                                     "= inner()"),
                "np may only be used"),
    "comprehension variable": ("01.serial-scan", SERIAL.format(body="x = [M.convolve(x, x) for M in (np,)][0]"), "np may only be used"),
    "walrus": ("01.serial-scan", SERIAL.format(body="x = (M := np).convolve(x, x)"), "np may only be used"),
    "walrus in a comprehension": ("01.serial-scan", SERIAL.format(body="[(M := np) for _ in (1,)]\n    x = "
                                                                       "M.convolve(x, x)"),
                                  "np may only be used"),
    "returned": ("01.serial-scan", "def numpy_module():\n    return np\n\n\ndef my_partial_sums(x):\n    return x\n",
                 "np may only be used"),
    "passed as an argument": ("01.serial-scan", SERIAL.format(body="x = max(np, key=len)"), "np may only be used"),
    "in a container": ("01.serial-scan", SERIAL.format(body="x = {0: np}[0].convolve(x, x)"), "np may only be used"),
    "f-string": ("01.serial-scan", SERIAL.format(body="s = f'{np}'"), "np may only be used"),
    "global": ("01.serial-scan", SERIAL.format(body="global K\n    K = np"), "global is not allowed"),
    "nonlocal": ("01.serial-scan", "def my_partial_sums(x):\n    M = 1\n    def inner():\n        nonlocal M\n        "
                                   "M = 2\n"
                                   "    return x\n", "nonlocal is not allowed"),
    "a loop variable shadowing a module": ("01.serial-scan", SERIAL.format(body="for np in (1,):\n        pass"), "hiding the module np"),
    "an except name shadowing a module": ("01.serial-scan", SERIAL.format(body="try:\n        pass\n    except "
                                                                               "ValueError as np:\n"
                                                                               "        pass"), "hiding the module np"),
    "a nested def shadowing a module": ("01.serial-scan", SERIAL.format(body="def np():\n        pass"), "hiding the module np"),
    "a namespace as a value": ("01.ladder-max", LADDER_MAX.format(top="", body="s = cuda.shared\n    s.array(4, int32)"),
                               "cuda.shared may only be used as cuda.shared.<attribute>"),
    "a path that is not listed": ("01.ladder-max", LADDER_MAX.format(top="", body="cuda.utils.builtins.exec('1')"),
                                  "cuda.utils is not among the names"),
    "numba's submodule": ("01.ladder-max", LADDER_MAX.format(top="import numba", body="numba.core.config.ENABLE_CUDASIM"),
                          "numba.core is not among the names"),
    "a workbook module, half a path": ("04.blelloch-carry", None, "ps.scans is not used by the exercise"),
    "a workbook path, then a function's internals": ("04.blelloch-carry", None, ".py_func is not among those"),
    "an alias from an earlier cell": ("01.ladder-max", LADDER_MAX.format(top="", body="K.cuda.utils.builtins.exec('1')"),
                                      "K.cuda.utils is not among the names"),
    "a setup helper no exercise uses": ("10.publish", "@cuda.jit(device=True)\ndef my_publish(status, values, tile, "
                                                      "flag, value):\n"
                                                      "    chained(0, 0)\n", "chained is a name of the chapter's setup"),
    "a check cell's name": ("07.pcr-step", "def f():\n    return residual_reference\n", "residual_reference is a name"),
    "getattr": ("01.serial-scan", SERIAL.format(body="x = getattr(np, 'cum' + 'sum')(x)"), "getattr"),
    "vars": ("01.serial-scan", SERIAL.format(body="vars(x)"), "vars"),
    "globals": ("01.serial-scan", SERIAL.format(body="globals()['np']"), "globals"),
    "__builtins__": ("01.serial-scan", SERIAL.format(body="__builtins__['exec']('1')"), "__builtins__"),
    "dunder walk": ("01.serial-scan", SERIAL.format(body="x.__class__.__mro__[-1].__subclasses__()"), ".__class__"),
    "a function's globals": ("01.serial-scan", "def my_partial_sums(x):\n    return my_partial_sums.__globals__\n", "__globals__"),
    "__dict__": ("01.serial-scan", SERIAL.format(body="np.__dict__"), "__dict__"),
    "a generator's frame": ("01.serial-scan", SERIAL.format(body="g = (i for i in x)\n    g.gi_frame.f_globals"), ".gi_frame"),
    "str.format": ("01.serial-scan", SERIAL.format(body="'{0.__class__}'.format(x)"), ".format"),
    "an array's ctypes": ("01.serial-scan", SERIAL.format(body="x.ctypes.data_as"), ".ctypes"),
    "a kernel's Python function": ("01.ladder-max", LADDER_MAX.format(top="", body="pass") + "\n\ndef f():\n    return "
                                                                                             "my_max_tile.py_func\n",
                                   ".py_func"),
    "IPython's shell": ("01.serial-scan", SERIAL.format(body="get_ipython()"), "get_ipython"),
    "the last output": ("01.serial-scan", SERIAL.format(body="x = _"), "the name _ is not allowed"),
    "an underscore name at the top": ("01.serial-scan", "__builtins__ = {}\n" + SERIAL.format(body="pass"), "names beginning with _"),
    "an import rebinding a setup name": ("01.serial-scan", "from numpy import zeros as ps\n" + SERIAL.format(body="pass"), "rebinds ps"),
    "an import rebinding an earlier constant": ("01.ladder-max", "import numba as BLOCK\n" + LADDER_MAX.format(top="", body="pass"),
                                               "rebinds BLOCK"),
    "a class": ("01.serial-scan", "class Scan:\n    pass\n", "classdef is not allowed"),
    "a generator": ("01.serial-scan", SERIAL.format(body="yield x"), "yield is not allowed"),
    "a match statement": ("01.serial-scan", SERIAL.format(body="match x:\n        case np:\n            pass"), "match is not allowed"),
    "too large": ("01.serial-scan", SERIAL.format(body="pass") + "#" * allowlist.MAX_SOURCE, "more than the"),
}
# fmt: on
def _carry(book, line):
    source = book["04"].exercise("04.blelloch-carry").source
    return source.replace(
        "    out = cuda.device_array(len(x), x.dtype)\n", f"    out = cuda.device_array(len(x), x.dtype)\n    {line}\n"
    )


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_every_alias_and_escape_is_refused_naming_its_line(book, name):
    exercise_id, source, word = ALIASES[name]
    if name == "a workbook module, half a path":
        source = _carry(book, "s = ps.scans")
    elif name == "a workbook path, then a function's internals":
        source = _carry(book, "f = ps.scans.blelloch.blelloch_tile_kernel.py_func")
    earlier = (
        ["from numba import cuda, float32\nimport numba as K\n"] if name == "an alias from an earlier cell" else ()
    )
    problems = refusals(book, exercise_id, source, earlier)
    assert any(word in problem for problem in problems), problems
    assert all(problem.startswith(("line ", "syntax error at line ")) for problem in problems)


def test_a_module_a_setup_binds_by_assignment_is_no_name_of_an_exercise(book):
    """Chapter 09's setup once bound ``hh = importlib.import_module(...)``: a module the allow-list
    cannot see by parsing. Such a name is given to no exercise that does not read it itself."""
    chapter = book["09"]
    setup = [*chapter.setup, 'import importlib\nhh = importlib.import_module("prefixsum.tridiag.householder")\n']
    problems = allowlist.check(
        "def my_reflector(x):\n    hh.cuda.utils.builtins.exec('1')\n",
        instructor_source=chapter.exercises[0].source,
        setup_sources=setup,
        exercise_id=chapter.exercises[0].id,
    )
    assert any("hh is a name of the chapter's setup" in p for p in problems), problems


def test_a_module_imported_in_a_compound_statement_is_still_a_module(book):
    chapter = book["01"]
    setup = [*chapter.setup, "try:\n    import scipy as sp\nexcept ImportError:\n    sp = None\n"]
    problems = allowlist.check(
        "def my_partial_sums(x):\n    return sp.linalg\n",
        instructor_source=chapter.exercises[0].source,
        setup_sources=setup,
        exercise_id=chapter.exercises[0].id,
    )
    assert any("sp.linalg is not used by the exercise" in p for p in problems), problems


def test_no_setup_binds_a_module_but_by_an_import(book, setups):
    """What a setup binds otherwise than by an import is a value, never a module (the allow-list lets
    an exercise read it where an instructor's exercise cell does)."""
    for number, chapter in book.items():
        namespace = setups[number]
        names = allowlist.chapter_names(tuple(chapter.setup), tuple(e.source for e in chapter.exercises))
        modules = {
            name
            for name, kind in names.setup.items()
            if kind[0] == "hidden" and isinstance(namespace[name], types.ModuleType)
        }
        assert modules == set(), chapter.name


# fmt: off
HONEST = {
    "locals named like a setup's values": ("11.compact", "@cuda.jit\ndef my_scatter(x, flags, places, out):\n    i = "
                                                         "cuda.grid(1)\n"
                                                         "    n = x.shape[0]\n    if i < n and flags[i]:\n        "
                                                         "out[places[i]] = x[i]\n"),
    "a throwaway and a closure": ("01.serial-scan", "def my_partial_sums(x):\n    s = np.zeros_like(x)\n    total = "
                                                    "0\n\n"
                                                    "    def add(i):\n        return total + x[i]\n\n"
                                                    "    for i, _ in enumerate(x):\n        total = add(i)\n        "
                                                    "s[i] = total\n"
                                                    "    return s\n"),
    "comprehensions, the walrus, unpacking": ("02.prefix-fold", "def prefix_fold(cells):\n    m = len(cells)\n    out "
                                                                "= list(cells)\n"
                                                                "    for i in range(1, m):\n        out[i] = (s := "
                                                                "out[i - 1] + out[i])\n"
                                                                "    a, b = [v for v in out], {k: v for k, v in "
                                                                "enumerate(out)}\n"
                                                                "    return [b[k] for k in range(m)] if a else out\n"),
    "numba.cuda.jit through numba": ("01.ladder-max", "import numba\nfrom numba import int32\n\nBLOCK = "
                                                      "64\n\n\n@numba.cuda.jit\n"
                                                      "def my_max_tile(x, out, totals, n):\n"
                                                      "    rungs = numba.cuda.shared.array(BLOCK, int32)\n    t = "
                                                      "numba.cuda.threadIdx.x\n"
                                                      "    rungs[t] = x[t]\n"),
    "a helper of an earlier own cell": ("01.ladder-max", "from numba import cuda, int32\n\nBLOCK = 64\n\n\n@cuda.jit\n"
                                                         "def my_max_tile(x, out, totals, n):\n    out[0] = "
                                                         "bigger(x[0], x[1])\n"),
    "values' attributes": ("01.serial-scan", "def my_partial_sums(x):\n    s = np.zeros(x.shape, dtype=x.dtype)\n"
                                             "    s[0] = x[0]\n    for i in range(1, x.size):\n        s[i] = s[i - 1] "
                                             "+ x[i]\n"
                                             "    return s.astype(x.dtype).reshape(x.shape)\n"),
}
# fmt: on


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_code_is_accepted(book, name):
    exercise_id, source = HONEST[name]
    earlier = (
        ["from numba import cuda\n\n\n@cuda.jit(device=True)\ndef bigger(a, b):\n    return max(a, b)\n"]
        if name == "a helper of an earlier own cell"
        else ()
    )
    assert refusals(book, exercise_id, source, earlier) == []


# -- Python's own scoping -------------------------------------------------------------------------
# fmt: off
SCOPING = [
    "def f(a, b=c):\n    d = a\n    return [d for d in b] + [e for e in d if g]\n",
    "def f():\n    x = 1\n    def g(y=x):\n        return x + y + z\n    return g\n",
    "def f():\n    [(w := i) for i in range(3)]\n    return w, lambda q: q + w\n",
    "def f(x):\n    try:\n        pass\n    except ValueError as e:\n        return e\n    for i, (j, k) in x:\n       "
    " del i\n",
    "def f():\n    global g\n    g = 1\n    def h():\n        nonlocal_name = g\n        return nonlocal_name\n",
    "def f():\n    v = 1\n    def g():\n        nonlocal v\n        v = 2\n    return {k: v for k in (lambda: v)()}\n",
    "x = [a for a in range(3) for b in range(a) if (c := b)]\ndef f(p=[q for q in r]):\n    return p, c, x\n",
    "def f(*args, k, **kw):\n    with open(k) as h, open(kw) as (i, j):\n        return h, i, j, args\n",
]
# fmt: on


def _symtable_scopes(table):
    yield table
    for child in table.get_children():
        yield from _symtable_scopes(child)


@pytest.mark.parametrize("source", SCOPING)
def test_scopes_resolve_names_as_python_does(source):
    """Each scope's local names, and the names it reads from the globals, are symtable's (CPython's own)."""
    resolution = scopes.Resolution(ast.parse(source))
    mine = collections.Counter()
    for scope in resolution.scopes[1:]:
        reads = {n.id for n in scope.reads if resolution.resolve(n) is None}
        mine[(frozenset(scope.bound - scope.declared_global), frozenset(reads))] += 1
    python = collections.Counter()
    for table in list(_symtable_scopes(symtable.symtable(source, "<cell>", "exec")))[1:]:
        local = {
            s.get_name()
            for s in table.get_symbols()
            if s.is_local() and not s.is_global() and not s.get_name().startswith(".")
        }
        read = {s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced()}
        python[(frozenset(local), frozenset(read))] += 1
    assert mine == python


# -- cost: linear in the cell's size ---------------------------------------------------------------
def _refused_cell(lines, padding):
    refused = "    y = np.ctypeslib  # refused\n" * lines
    return "def my_partial_sums(x):\n" + refused + "    s = x\n" * padding + "    return x\n"


def test_the_check_is_linear_in_the_cell(book, monkeypatch):
    """The source is split once per check whatever the number of refused lines, and every node is
    visited a bounded number of times: the work per node stays the same from 10 to 2,000 refusals."""
    splits, visits = [], []
    split, children = cell_walk._source_lines, ast.iter_child_nodes
    monkeypatch.setattr(cell_walk, "_source_lines", lambda source: splits.append(1) or split(source))
    monkeypatch.setattr(ast, "iter_child_nodes", lambda node: visits.append(1) or children(node))
    per_node = []
    for lines in (10, 200, 2000):
        splits.clear(), visits.clear()
        cell = _refused_cell(lines, 5 * lines)
        problems = refusals(book, "01.serial-scan", cell)
        nodes = sum(1 for _ in ast.walk(ast.parse(cell)))
        assert len(problems) == lines and len(splits) == 1
        per_node.append(len(visits) / nodes)
    assert max(per_node) < 1.2 * min(per_node) + 2, per_node


def test_a_cell_of_the_largest_size_costs_seconds(book):
    """A cell at the size bound, its every line refused, is checked in seconds (the grader once spent
    72 s on a 4 MB notebook of 150 refused lines, and hours on 16 MiB of 2,000); above it, nothing is parsed."""
    cell = _refused_cell(2000, 0)
    cell += "    s = x\n" * ((allowlist.MAX_SOURCE - len(cell)) // 10)
    start = time.perf_counter()
    assert len(refusals(book, "01.serial-scan", cell)) == 2000
    assert time.perf_counter() - start < 20
    start = time.perf_counter()
    assert "more than the" in refusals(book, "01.serial-scan", cell + "#" * (16 << 20))[0]
    assert time.perf_counter() - start < 2
