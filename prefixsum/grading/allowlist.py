"""What a submitted exercise cell may name, decided by parsing it, before any process runs it.

The grader runs a submission in sandboxes whose processes also run the instructor's checks
and its tracer: code that reaches Python's machinery there (``exec``, a module's internals)
could forge what they observe. So a cell is accepted only when everything it names is on a
**whitelist**, resolved through every binding of Python (:mod:`.scopes`) to what the chapter binds it to
(:mod:`.bindings`), by a walk of the cell (:mod:`.cell_walk`):

* **names**: a function's locals (parameters, assignments, tuple unpacking, ``for`` and
  ``with`` targets, comprehension variables, the walrus, ``except ... as``, closures); the
  cell's own top-level names; the names of the exercises before it; the harmless builtins of
  :data:`SAFE_BUILTINS`; what the chapter's setup binds by an import; and of what the setup
  binds otherwise (a device function, a constant), only the names an instructor's exercise
  cell of the chapter reads (chapter 10's ``publish``, ``PREFIX``). Any other name (``exec``,
  ``getattr``, ``vars``, ``globals``, ``__builtins__``, IPython's ``get_ipython``, a check
  cell's names) is refused.
* **modules are never values**: a name bound to a module (``np``, ``cuda``, ``math``,
  ``numba``, and the workbook's ``ps``, ``kstep``, ...) may only stand at the root of an
  attribute path; ``K = numba``, ``def f(m=np)``, ``[m for m in (np,)]``, ``(m := cuda)``,
  ``return ps``, ``f(np)`` are refused wherever they are, and so is any binding that would
  shadow such a name. A path from ``numpy``, ``numba``, ``numba.cuda`` or ``math`` follows
  :data:`NAMES` (``cuda.shared.array``, ``np.float32``; not ``np.cumsum``, ``cuda.utils``); a
  path from a workbook module is one an instructor's exercise cell of the chapter writes
  (``ps.scans.blelloch.blelloch_tile_kernel``).
* **attributes of values** (a local, a result, a kernel) are those of :data:`VALUE_ATTRIBUTES`
  (``x.shape``, ``a.astype``, ``d.copy_to_host``): no ``__class__``, ``__dict__``, ``format``,
  ``gi_frame``, ``py_func``, ``ctypes``; no attribute is assigned or deleted.
* **statements**: at the top, imports of the names of :data:`NAMES`, assignments of constants,
  function definitions (decorated with ``cuda.jit`` only, defaults constant, no annotation),
  and any statement of the instructor's own cell, word for word; no ``global``, ``nonlocal``,
  class, generator, ``async`` or ``match``; no top-level name that rebinds a builtin, a name
  of the setup or of an earlier exercise to something else; a cell of at most
  :data:`MAX_SOURCE` characters; none of the library calls that do an exercise's work for it
  (:data:`EXERCISE_FORBIDS`).

``tests/test_allowlist.py`` walks the attribute graph from every name a submission can reach
(a bounded breadth-first search over :data:`NAMES`, :data:`VALUE_ATTRIBUTES` and the setups'
exposed values) and finds no path to ``exec``, ``eval``, ``open``, ``compile``,
``__import__``, ``os``, ``sys``, ``importlib``, ``builtins``, ``ctypes`` or ``subprocess``.
The check is linear in the cell's size: the source is split into lines once, and every node
is visited a bounded number of times.

**Why not RestrictedPython.** RestrictedPython guards attribute access at run time: it
compiles a cell into code that calls ``_getattr_(obj, "name")``, ``_getitem_``, ``_write_`` and
``_getiter_`` guards. That does not fit a cell of this workbook: (1) the same cell runs three
ways, as the student wrote it in nbval's Jupyter kernel, in the re-check, and through numba's
CUDA compiler for the PTX check, and a cell rewritten with guards runs in only one of them;
(2) inside a ``cuda.jit`` kernel the guards cannot exist: ``cuda.threadIdx.x`` and
``rows[t]`` must stay static attribute and index operations that numba types at compile time,
and a call of a Python guard function there is refused by the GPU compiler; (3) its default
guard (``safer_getattr``) refuses names that begin with ``_`` and ``str.format``, and would
let ``K.cuda.utils.builtins.exec`` through: the guard would need this whitelist anyway. A
static whitelist holds in all three places at once, costs no run time, and names the line.
"""

import ast

from .bindings import ChapterNames, chapter_names, top_level_kinds
from .cell_walk import CellWalk
from .whitelist import ALLOWED_MODULES, EXERCISE_FORBIDS, MAX_SOURCE, NAMES, SAFE_BUILTINS, VALUE_ATTRIBUTES


def check(
    source,
    *,
    instructor_source,
    setup_sources,
    earlier_sources=(),
    exercise_id="",
    chapter_sources=None,
    earlier_submitted=(),
    check_sources=(),
):
    """Problems that keep ``source`` (a submitted exercise cell) out of every run.

    Parameters
    ----------
    source : str
        The submitted cell.
    instructor_source : str
        The instructor's cell of the same exercise (its statements are trusted as written).
    setup_sources : sequence of str
        The setup cells the exercise runs after.
    earlier_sources : sequence of str
        The instructor's cells of the exercises before this one (what they bind may be used).
    exercise_id : str
        The exercise, for the library calls it forbids (:data:`EXERCISE_FORBIDS`).
    chapter_sources : sequence of str, optional
        Every instructor's exercise cell of the chapter, in order (default: the earlier ones and
        this one): the setup's names they read, and the workbook paths they write, are what
        the chapter gives its exercises.
    earlier_submitted : sequence of str
        The submission's own cells of the exercises before this one (what they bind may be used).
    check_sources : sequence of str
        The chapter's check cells: what they bind (in nbval's notebook, where they run in the
        exercises' namespace) may not be used.

    Returns
    -------
    list of str
        ``"line N: what"``, empty when the cell is accepted. A cell that does not parse gives
        one problem beginning ``"syntax error"``.
    """
    if len(source) > MAX_SOURCE:
        return [f"line 1: the cell holds {len(source):,} characters, more than the {MAX_SOURCE:,} an exercise may hold"]
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return [f"syntax error at line {error.lineno}: {error.msg}"]
    except (ValueError, UnicodeError, RecursionError, MemoryError) as error:  # a lone surrogate, a null byte, depth
        return [f"syntax error at line 1: the cell cannot be parsed ({type(error).__name__}: {str(error)[:100]})"]
    chapter = tuple(chapter_sources) if chapter_sources is not None else (*earlier_sources, instructor_source)
    try:
        problems = CellWalk(
            source,
            tree,
            chapter_names(tuple(setup_sources), chapter),
            instructor_source,
            earlier_sources,
            earlier_submitted,
            exercise_id,
            check_sources,
        ).problems()
    except RecursionError:
        return ["line 1: the cell is nested too deeply for the grader to read"]
    return [f"line {line}: {what}" for line, what in sorted(set(problems))]


__all__ = [
    "ALLOWED_MODULES",
    "ChapterNames",
    "EXERCISE_FORBIDS",
    "MAX_SOURCE",
    "NAMES",
    "SAFE_BUILTINS",
    "VALUE_ATTRIBUTES",
    "chapter_names",
    "check",
    "top_level_kinds",
]
