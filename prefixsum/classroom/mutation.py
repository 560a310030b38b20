"""Mutation testing of the notebooks' exercises: does each check reject broken solutions?

An exercise is a code cell tagged ``exercise`` (metadata ``exercise_id``, ``todo``, optional
``points`` and ``survivors``) whose solution stands between ``### BEGIN SOLUTION`` and
``### END SOLUTION``; its check is the code cell tagged ``check`` with the same ``exercise_id``.
:func:`mutants` makes one-change copies of the solution, the mistakes a student makes:

* an arithmetic, bitwise or shift operator swapped (``+`` for ``-``, ``&`` for ``|``, ``<<`` for ``>>``);
* a comparison moved by one (``<`` for ``<=``, ``==`` for ``!=``);
* an integer constant off by one, either way;
* a barrier (a ``cuda.syncthreads()`` statement) removed;
* an index, or a slice's bound, shifted by one, either way (``a[i]`` for ``a[i + 1]``);
* a bound dropped (an ``if``'s test or one side of an ``and`` taken as true, a conditional
  expression reduced to its first value), a ``~`` or a unary minus dropped.

:func:`kill_rate` runs the exercise's check cell on every mutant. A mutant the check rejects is
killed. A mutant it passes is run again under :func:`prefixsum.check.thorough` (more sizes,
other inputs): if that fails, the mutant changes an output and survived the real check (a
*survivor*, to be argued in the exercise's ``survivors`` metadata); if it passes too, the
mutant is taken as equivalent to the solution and does not count. A mutant the caller names as
argued equivalent (``argued``: an argument for this very cell and its setup) runs the check
alone: failing it is a change (the mutant is killed), passing it leaves it equivalent, as argued,
without the thorough run. Mutants that make one program
(an index moved by one, ``s[0 - 1]``, and its constant moved by one, ``s[-1]``) are each counted,
from one run of the check.

The cells run as the grader runs them: the notebook's ``setup`` cells before the exercise (its
imports and the helpers it gives), then the exercise, then its check.
``python -m prefixsum.classroom.mutation notebooks/01_ladder.ipynb ...`` prints the table of
kill rates.
"""

import ast
import contextlib
import copy
import io
import multiprocessing
import operator
import pathlib
import random
import resource
from dataclasses import dataclass, field

import nbformat

from . import check
from .cells import compiled
from .student import BEGIN, END, strip_solutions

_BINARY = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.BitXor: ast.BitOr,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.Pow: ast.Mult,
}
_COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}


@dataclass(frozen=True)
class Exercise:
    """One exercise of a notebook, with its check."""

    id: str
    notebook: str
    source: str
    check: str
    todo: str
    points: int = 1
    survivors: dict = field(default_factory=dict)
    setup: str = ""
    """The source of the notebook's ``setup`` cells before the exercise, joined."""


@dataclass(frozen=True)
class Mutant:
    """A one-change copy of an exercise cell: ``description`` names the change, stable across runs."""

    description: str
    source: str


def exercises(paths):
    """Every :class:`Exercise` of the notebooks at ``paths``, in order.

    Raises ValueError for an exercise without an ``exercise_id``, or without a check cell of
    the same id after it.
    """
    found = []
    for path in map(pathlib.Path, paths):
        cells = nbformat.read(path, as_version=4).cells
        for number, cell in enumerate(cells):
            if "exercise" not in cell.metadata.get("tags", []):
                continue
            meta = cell.metadata
            if not meta.get("exercise_id"):
                raise ValueError(f"{path.name}: exercise cell {number} has no exercise_id")
            checks = [
                c
                for c in cells[number + 1 :]
                if "check" in c.metadata.get("tags", []) and c.metadata.get("exercise_id") == meta["exercise_id"]
            ]
            if not checks:
                raise ValueError(f"{path.name}: exercise {meta['exercise_id']} has no check cell of its id after it")
            setup = "\n\n".join(c.source for c in cells[:number] if "setup" in c.metadata.get("tags", []))
            found.append(
                Exercise(
                    meta["exercise_id"],
                    path.name,
                    cell.source,
                    checks[0].source,
                    meta.get("todo", ""),
                    int(meta.get("points", 1)),
                    dict(meta.get("survivors", {})),
                    setup,
                )
            )
    return found


def _solution_lines(source):
    """The first solution marker's 1-based line number, and the line numbers strictly inside every
    solution span (an exercise may leave a kernel's body and its host wrapper to the student)."""
    lines = source.splitlines()
    begins = [k + 1 for k, line in enumerate(lines) if line.strip().startswith(BEGIN)]
    ends = [k + 1 for k, line in enumerate(lines) if line.strip().startswith(END)]
    if (
        not begins
        or len(begins) != len(ends)
        or any(e <= b for b, e in zip(begins, ends))
        or any(b <= e for b, e in zip(begins[1:], ends))
    ):
        raise ValueError(f"an exercise must hold solution spans, each begun and ended once:\n{source[:200]}")
    return begins[0], {k for b, e in zip(begins, ends) for k in range(b + 1, e)}


def _changes(node):
    """``(kind, replacement)`` for each mutation of ``node`` (the replacement replaces the node)."""
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _BINARY:
        new = copy.deepcopy(node)
        new.op = _BINARY[type(node.op)]()
        yield "operator", new
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        new = copy.deepcopy(node)
        new.ops = [_COMPARE[type(node.ops[0])]()]
        yield "comparison", new
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        for delta in (1, -1):
            yield "constant", ast.Constant(node.value + delta)
    elif isinstance(node, ast.Subscript) and not isinstance(node.slice, (ast.Slice, ast.Tuple)):
        for op in (ast.Add(), ast.Sub()):
            new = copy.deepcopy(node)
            new.slice = ast.BinOp(copy.deepcopy(node.slice), op, ast.Constant(1))
            yield "index", new
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        for bound in ("lower", "upper"):
            if getattr(node.slice, bound) is not None:
                for op in (ast.Add(), ast.Sub()):
                    new = copy.deepcopy(node)
                    setattr(new.slice, bound, ast.BinOp(getattr(node.slice, bound), op, ast.Constant(1)))
                    yield "index", new
    elif (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func).endswith("syncthreads")
    ):
        yield "barrier", ast.Pass()
    elif isinstance(node, ast.If):
        new = copy.deepcopy(node)
        new.test = ast.Constant(True)
        yield "bound", new
    elif isinstance(node, ast.IfExp):
        yield "bound", copy.deepcopy(node.body)
    elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        for kept in range(len(node.values)):
            new = copy.deepcopy(node)
            new.values = [v for k, v in enumerate(node.values) if k != kept] or [ast.Constant(True)]
            yield "bound", new if len(new.values) > 1 else new.values[0]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.USub)):
        yield "operator", copy.deepcopy(node.operand)


def _replace(tree, target, replacement):
    """A copy of ``tree`` with the node that is ``target`` (by position in ``ast.walk``) replaced."""
    order = list(ast.walk(tree))
    position = order.index(target)
    new_tree = copy.deepcopy(tree)
    old = list(ast.walk(new_tree))[position]
    for parent in ast.walk(new_tree):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, replacement)
                return new_tree
            if isinstance(value, list) and any(item is old for item in value):
                setattr(parent, name, [replacement if item is old else item for item in value])
                return new_tree
    raise AssertionError("the node to replace is not in the tree")


class _FoldedConstants(ast.NodeTransformer):
    """Integer arithmetic on constants replaced by its value (``s[0 - 1]`` by ``s[-1]``)."""

    _FOLD = {ast.Add: operator.add, ast.Sub: operator.sub}

    @staticmethod
    def _integer(node):
        return isinstance(node, ast.Constant) and type(node.value) is int

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if type(node.op) in self._FOLD and self._integer(node.left) and self._integer(node.right):
            return ast.Constant(self._FOLD[type(node.op)](node.left.value, node.right.value))
        return node

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.USub) and self._integer(node.operand):
            return ast.Constant(-node.operand.value)
        return node


def _program(source):
    """``source`` with its constant integer arithmetic folded: two mutants of one program (an index
    moved by one, ``s[0 - 1]``, and its constant moved by one, ``s[-1]``) give the same text."""
    return ast.unparse(_FoldedConstants().visit(ast.parse(source)))


def mutants(source):
    """Every :class:`Mutant` of the solution span of an exercise cell's ``source``."""
    begin, span = _solution_lines(source)
    tree = ast.parse(source)
    found, seen = [], set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) not in span:
            continue
        text = " ".join((ast.get_source_segment(source, node) or ast.unparse(node)).split())
        for kind, replacement in _changes(node):
            mutated = ast.unparse(ast.fix_missing_locations(_replace(tree, node, replacement)))
            shown = "(removed)" if isinstance(replacement, ast.Pass) else " ".join(ast.unparse(replacement).split())
            description = f"line {node.lineno - begin}:{node.col_offset} {kind}: {text} -> {shown}"
            if mutated in seen or description in {m.description for m in found}:
                continue
            seen.add(mutated)
            found.append(Mutant(description, mutated))
    return found


def set_up(exercise):
    """The namespace of ``exercise``'s setup cells, run once per process (the cells only import and define).

    :func:`verdict` starts from a copy of it; a forked check (:func:`isolated_verdict`) inherits
    it, so that a notebook's setup (imports, kernels it compiles) runs once for all the mutants
    and mistakes of an exercise, not once for each.
    """
    if exercise.id not in _SET_UP:
        namespace = {"__name__": "__exercise__"}
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compiled(exercise.setup, f"<{exercise.id} setup>"), namespace)  # noqa: S102  (the notebook's own cells)
        _SET_UP[exercise.id] = namespace
    return _SET_UP[exercise.id]


_SET_UP = {}


def verdict(exercise, source=None):
    """``(passed, output)``: the exercise's check cell run after ``source`` (default: the solution).

    The cells run in a copy of the namespace the notebook's setup cells left (:func:`set_up`),
    as the grader runs them. The check passes when it prints at least one ``PASS`` line and no
    ``FAIL`` line.
    """
    out = io.StringIO()
    try:
        namespace = dict(set_up(exercise))
        with contextlib.redirect_stdout(out):
            # In linecache, as a notebook's cells are: the simulator reads a kernel's source to run it
            # with numba's integer typing (prefixsum.sim's numba_typing), the tracer to name arrays.
            exec(compiled(exercise.source if source is None else source, f"<{exercise.id}>"), namespace)  # noqa: S102
            exec(compiled(exercise.check, f"<{exercise.id} check>"), namespace)  # noqa: S102
    except Exception as error:  # noqa: BLE001  (a mutant that breaks the cell is rejected)
        return False, f"{type(error).__name__}: {error}"
    lines = out.getvalue().splitlines()
    passed = any(line.startswith("PASS") for line in lines) and not any(line.startswith("FAIL") for line in lines)
    return passed, out.getvalue()


@dataclass
class Report:
    """What :func:`kill_rate` found for one exercise."""

    exercise: str
    mutants: int
    killed: int
    equivalent: list
    survivors: list

    @property
    def rate(self):
        """Killed over the mutants that change an output (1.0 when none does)."""
        changing = self.mutants - len(self.equivalent)
        return self.killed / changing if changing else 1.0


def _limit_memory(extra_bytes):
    """Cap this process's address space at its current size plus ``extra_bytes`` (Linux only)."""
    try:
        import resource

        pages = int(pathlib.Path("/proc/self/statm").read_text().split()[0])
        limit = pages * resource.getpagesize() + extra_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, OSError, ValueError):
        pass


def _judge(connection, exercise, source, thorough, timeout, runaway):
    """In a forked child: :func:`verdict` of ``source``, sent back through ``connection``."""
    _limit_memory(2 << 30)
    try:
        with check.time_limit(timeout, runaway), check.thorough() if thorough else contextlib.nullcontext():
            connection.send(verdict(exercise, source))
    except BaseException as error:  # noqa: BLE001  (out of memory, a hang stopped: the mutant is rejected)
        connection.send((False, f"{type(error).__name__}: {error}"))


def isolated_verdict(exercise, source, *, thorough=False, timeout=5.0, wall=300.0, runaway=None):
    """:func:`verdict` of ``source``, run in a forked child that may use 2 GiB more and ``wall`` seconds.

    A mutant can loop without end on the host (a stride that never shrinks) or grow a list
    until memory runs out; in a child process, either only ends that child (the verdict is then
    a failure that says so). A run that makes no memory accesses stops after ``runaway`` seconds
    of CPU time (default twice ``timeout``, not ten times: mutants hang often, and an honest run of
    an exercise takes under a tenth of it).
    """
    set_up(exercise)  # here, once, for every child to inherit
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(
        target=_judge, args=(sender, exercise, source, thorough, timeout, runaway or 2 * timeout), daemon=True
    )
    child.start()
    sender.close()
    try:
        return receiver.recv() if receiver.poll(wall) else (False, f"no verdict within {wall:g} s")
    except EOFError:  # the child died (killed for memory)
        return False, "the check's process died (out of memory?)"
    finally:
        if child.is_alive():
            child.kill()
        child.join()


def _passes(exercise, source, *, thorough, timeout, wall, runaway):
    """Whether the check passes ``source`` (see :func:`isolated_verdict`)."""
    return bool(isolated_verdict(exercise, source, thorough=thorough, timeout=timeout, wall=wall, runaway=runaway)[0])


def _runaway(exercise, timeout, wall, spent=None):
    """The CPU seconds after which a mutant's run that makes no memory accesses is a hang:
    :data:`RUNAWAY_FACTOR` times the CPU time of the solution's whole check (``spent``, measured
    here in a child when not given; one run of a mutant that does the solution's work takes a
    fraction of it), at least :data:`MIN_RUNAWAY`, at most twice ``timeout``. Most mutants that
    hang spin in a loop of register arithmetic (a stride that stays 0 or 1), and each cost the
    whole bound."""
    if spent is None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        isolated_verdict(exercise, exercise.source, timeout=timeout, wall=wall)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return min(2 * timeout, max(MIN_RUNAWAY, RUNAWAY_FACTOR * spent))


RUNAWAY_FACTOR = 4
MIN_RUNAWAY = 1.0


def kill_rate(exercise, *, sample=None, timeout=5.0, wall=300.0, check_seconds=None, argued=()):
    """Run ``exercise``'s check on its mutants (a deterministic ``sample`` of them if given).

    Each verdict runs in a forked child process (see :func:`_passes`): ``timeout`` seconds per
    traced run, ``wall`` seconds in all. A mutant the check cannot finish on is rejected: the
    student sees the cell fail or hang, not PASS. ``check_seconds``: the CPU time of the
    solution's whole check where the caller has just measured it (:func:`verdict` under
    ``time.process_time``), which sets the bound on a mutant that spins; by default the solution's
    check is run once more, in a child, to measure it. ``argued``: descriptions of mutants argued
    equivalent to this solution, with these setup cells; each runs the check alone, not the
    thorough check after it (the thorough run only tells an equivalent mutant from a survivor,
    which the argument has done): a mutant of one program with an argued one is argued too.

    Returns
    -------
    Report
        How many mutants were made and killed, and the descriptions of the equivalent ones and
        of the survivors.
    """
    every = mutants(exercise.source)
    if sample is not None and len(every) > sample:
        chosen = set(random.Random(exercise.id).sample(range(len(every)), sample))
        every = [m for k, m in enumerate(every) if k in chosen]
    runaway = _runaway(exercise, timeout, wall, check_seconds)
    killed, equivalent, survivors = 0, [], []
    programs = {mutant.description: _program(mutant.source) for mutant in every}
    argued_programs = {programs[description] for description in argued if description in programs}
    outcomes = {}  # by _program: mutants that make one program (s[0 - 1], s[-1]) are judged once
    for mutant in every:
        program = programs[mutant.description]
        if program not in outcomes:
            outcomes[program] = _outcome(
                exercise, mutant.source, timeout=timeout, wall=wall, runaway=runaway, argued=program in argued_programs
            )
        if outcomes[program] == "killed":
            killed += 1
        else:
            (survivors if outcomes[program] == "survivor" else equivalent).append(mutant.description)
    return Report(exercise.id, len(every), killed, equivalent, survivors)


def _outcome(exercise, source, *, timeout, wall, runaway, argued=False):
    """``"killed"`` (the check fails ``source``), ``"survivor"`` (only the thorough check does) or
    ``"equivalent"`` (the thorough check passes it too, or it is ``argued`` equivalent)."""
    if not _passes(exercise, source, thorough=False, timeout=timeout, wall=wall, runaway=runaway):
        return "killed"
    if argued:
        return "equivalent"
    if not _passes(exercise, source, thorough=True, timeout=timeout, wall=wall, runaway=runaway):
        return "survivor"
    return "equivalent"


def blank_fails(exercise):
    """Whether the exercise's check fails on the student's version of the cell."""
    return not verdict(exercise, strip_solutions(exercise.source, exercise.todo))[0]


def table(reports):
    """A markdown table of :class:`Report` s: mutants, equivalent, killed, kill rate, survivors."""
    lines = [
        "| exercise | mutants | equivalent | killed | kill rate | survivors |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in reports:
        lines.append(
            f"| {r.exercise} | {r.mutants} | {len(r.equivalent)} | {r.killed} | {r.rate:.0%} | "
            f"{'; '.join(r.survivors) or 'none'} |"
        )
    return "\n".join(lines)


def main(paths):
    """Print the kill-rate table of every exercise in the notebooks at ``paths`` (every mutant)."""
    print(table(kill_rate(exercise) for exercise in exercises(paths)))


__all__ = [
    "Exercise",
    "Mutant",
    "Report",
    "blank_fails",
    "exercises",
    "isolated_verdict",
    "kill_rate",
    "main",
    "mutants",
    "set_up",
    "table",
    "verdict",
]

if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
