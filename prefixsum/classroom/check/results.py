"""Verdicts and budgets: :class:`CheckResult`, :class:`Budget`, poisoned allocations."""

import collections
import os
import pathlib
import re
from dataclasses import dataclass

import numpy as np

from ...core.arithmetic import quiet_arithmetic
from ...core.hardware import WARP_SIZE
from ...core.poison import poison, poison_value
from .. import sim


@dataclass(frozen=True)
class Budget:
    """What the parallel algorithm of an exercise may spend, as the tracer measures it.

    A check given a budget fails a run whose numbers are right but whose kernels spend more:
    one thread scanning the whole tile serially is correct and makes hundreds of accesses
    between two barriers, where a parallel step makes a handful. Every field left ``None`` is
    not checked.

    Attributes
    ----------
    barriers : int
        Most barriers (``cuda.syncthreads()``) one thread may pass in one launch.
    accesses_per_step : int
        Most memory accesses (global and shared, reads and writes) one thread may make between
        two barriers: the work of one thread in one step.
    traffic_per_element : float
        Most global-memory accesses (reads and writes) per input element, over the launches
        of the budgeted kernels, with 2 more per block (a tile's total, a carry).
    bank_conflict_ways : int
        Most passes one warp's shared-memory access may need (1: conflict-free).
    kernels : tuple of str
        The kernels the budget applies to (default: every launch; :func:`tiled` budgets the
        student's tile kernel only).
    look_back : str
        The name of the array of tile states of a decoupled look-back (``"status"``). Each tile
        must publish its own state (its AGGREGATE) before it reads a predecessor's, or the tiles
        wait for each other one by one as in a chained scan; publish again (its inclusive PREFIX)
        at the end, or later tiles look back to tile 0; and no thread may read two
        predecessors' states fewer than 32 tiles apart: a warp looks at 32 predecessors at a
        time, lane l at tile ``end - 32 + l``, where one lane walking back tile by tile is serial.
    host_lines_per_element : float
        The least number of lines of the checked function's own code (``fn`` itself, not what it
        calls) that must run per input element: an exercise that asks for a host loop runs its
        body once per element, where ``np.cumsum(x)`` runs one line in all. A minimum, unlike
        the other fields.
    additions_per_element : float
        The most additions (any arithmetic on the input's elements) the checked host function may
        make per input element, counted on elements that count them (:mod:`.counting`), and at
        most :data:`.counting.PER_LINE` in one execution of one of its own lines: the loop of an
        O(n) scan adds once per element and once per step, where ``x[:i + 1].sum()`` for every
        ``i`` adds O(n^2) times and ``np.dot`` with a triangular matrix or ``np.cumsum`` adds a
        whole array in one line.
    device_work : bool
        The kernels did the work: every element of the result was last written by a thread of a
        budgeted kernel, with the value returned, and every element of the first input was read
        by one, at its own index. Host code that computes the answer and launches a kernel that
        does nothing (or something else) fails it.

    The budget applies to the launches of the kernels named in ``kernels`` and to every launch
    of a kernel of the student's own that is not named (a helper: a kernel whose code lies
    outside this package), so that a helper kernel is allowed as long as it stays within it.
    """

    barriers: int = None
    accesses_per_step: int = None
    traffic_per_element: float = None
    bank_conflict_ways: int = None
    kernels: tuple = None
    look_back: str = None
    host_lines_per_element: float = None
    additions_per_element: float = None
    device_work: bool = False

    def budgeted(self, run):
        """The numbers of ``run``'s launches this budget applies to: the named kernels' and the helpers'."""
        if self.kernels is None:
            return {launch.number for launch in run.launches}
        outside = {r.launch for r in run.records if not _in_package(r.file)}
        return {launch.number for launch in run.launches if launch.kernel in self.kernels or launch.number in outside}

    def undone(self, run, inputs, result):
        """``(diagnosis, index, hint)`` when :attr:`device_work` asks for it and the kernels did not do
        the work (``inputs``: the arrays the check passed, first one first; ``result``: what the
        checked function returned); else None. A check asks it before it compares the result."""
        if not self.device_work:
            return None
        launches = self.budgeted(run)
        return _device_work(
            run, launches, [r for r in run.records if r.launch in launches], inputs, result, self.kernels
        )

    def overspent(self, run, n):
        """``(index, hint)`` for the first limit ``run`` (a :class:`prefixsum.trace.Trace`) exceeds, else None."""
        launches = self.budgeted(run)
        records = [r for r in run.records if r.launch in launches]
        if self.barriers is not None:
            passed = max(
                (phase for (launch, _, _), phase in run.barriers_passed().items() if launch in launches), default=0
            )
            if passed > self.barriers:
                return None, (
                    f"a thread passed {passed} barriers in one launch; the algorithm needs at most "
                    f"{self.barriers}. Is the loop bound right (log2 of the tile, not the tile)?"
                )
        if self.accesses_per_step is not None:
            per_step = collections.Counter((r.launch, r.block, r.thread, r.phase) for r in records)
            if per_step:
                (launch, block, thread, phase), most = per_step.most_common(1)[0]
                if most > self.accesses_per_step:
                    return None, (
                        f"thread {thread} of block {block} made {most} memory accesses between two barriers "
                        f"(step {phase}); the parallel algorithm makes at most {self.accesses_per_step}. "
                        "Share the work: every thread does a few operations per step, a barrier between "
                        "steps."
                    )
        if self.traffic_per_element is not None:
            traffic = sum(1 for r in records if r.space == "global")
            blocks = len({(r.launch, r.block) for r in records})
            if traffic > self.traffic_per_element * n + 2 * blocks:
                return None, (
                    f"{traffic} global-memory accesses for {n} elements in {blocks} blocks, more than the "
                    f"{self.traffic_per_element:g} per element (and 2 per block) the algorithm needs: "
                    "read each input once, keep the tile in shared memory."
                )
        if self.look_back is not None:
            found = _look_back_order([r for r in records if r.array == self.look_back], self.look_back)
            if found is not None:
                return None, found
        if self.bank_conflict_ways is not None:
            worst = [c for c in run.bank_conflicts() if c["launch"] in launches and c["ways"] > self.bank_conflict_ways]
            if worst:
                c = max(worst, key=lambda c: c["ways"])
                return None, (
                    f"a warp's access to {c['array']} (source line {c['line']}) needs {c['ways']} passes of "
                    "the "
                    f"shared-memory banks; at most {self.bank_conflict_ways} allowed. Pad the index so that "
                    "the threads of a warp hit different banks."
                )
        return None


_PACKAGE = str(pathlib.Path(__file__).resolve().parents[2]) + os.sep


def _in_package(file):
    """Whether the source ``file`` of a traced access is this package's (not a student's cell)."""
    return file.startswith(_PACKAGE)


def _kernel_names(run, launches, kernels):
    """How a hint names the budgeted kernels: the named ones, else those that ran."""
    return (
        " or ".join(kernels)
        if kernels
        else " or ".join(sorted({launch.kernel for launch in run.launches if launch.number in launches}))
    )


def _same_values(values, expected):
    """Whether the traced ``values`` (Python numbers) are ``expected``'s elements, compared in its dtype."""
    try:
        got = (
            np.array(values, dtype=expected.dtype)
            if expected.dtype.kind != "f"
            else np.array(values, np.float64).astype(expected.dtype)
        )
    except (OverflowError, TypeError, ValueError):
        return np.zeros(len(values), bool)
    same = got == expected
    if expected.dtype.kind in "fc":
        same |= np.isnan(got) & np.isnan(expected)
    return same


def _device_work(run, launches, records, inputs, result, kernels):
    """``(diagnosis, index, hint)`` when the budgeted kernels did not write every element of ``result`` (last, with
    its value) or read every element of the first of ``inputs``; else None."""
    named = _kernel_names(run, launches, kernels)
    if result is not None:
        expected = np.ravel(np.asarray(result.copy_to_host() if hasattr(result, "copy_to_host") else result))
        last = collections.defaultdict(dict)
        for r in records:
            if r.write and r.space == "global":
                last[(r.launch, r.array)][r.index] = r.value
        best, written = None, -1
        for key, cells in last.items():
            indices = [k for k in range(expected.size) if k in cells]
            same = _same_values([cells[k] for k in indices], expected[indices]) if indices else np.zeros(0, bool)
            covered = np.zeros(expected.size, bool)
            covered[np.array(indices, int)[same]] = True
            if covered.sum() > written:
                best, written = (key, covered), int(covered.sum())
        if written < expected.size:
            first = 0 if best is None else int(np.flatnonzero(~best[1])[0])
            how = (
                f"no thread of {named} stored anything to global memory"
                if best is None
                else f"the threads of {named} stored {written} of its {expected.size} elements, not element {first}"
            )
            return (
                "unwritten-output",
                first,
                (
                    f"The result was not computed by the kernels launched: {how} (the check compares every element of "
                    "the result "
                    "with the last store to it by a thread of the exercise's kernels). Host code cannot stand in "
                    "for the kernel: the kernel must write every element of the result."
                ),
            )
    if len(inputs):
        source = np.ravel(np.asarray(inputs[0]))
        read = collections.defaultdict(dict)
        for r in records:
            if not r.write and r.space == "global" and r.index < source.size:
                read[r.array].setdefault(r.index, r.value)
        best = 0
        for cells in read.values():
            indices = sorted(cells)
            same = _same_values([cells[k] for k in indices], source[indices]) if indices else np.zeros(0, bool)
            best = max(best, int(same.sum()))
        if best < source.size:
            return (
                "over-budget",
                None,
                (
                    f"The threads of {named} read {best} of the input's {source.size} elements: "
                    "the "
                    "kernel must read its input and compute the result from it, not be handed "
                    "the answer."
                ),
            )
    return None


def _look_back_order(states, array):
    """The hint for the first tile whose accesses to ``states`` (records of ``array``) break the look-back, else None.

    A block's tile is the highest state it touches (it reads only predecessors). Accesses are
    in the order they ran; the thread that publishes the tile's state must do so before it
    reads any predecessor's (other lanes may run ahead of it: a GPU does not order a warp's
    lanes after a branch).
    """
    by_block = collections.defaultdict(list)
    for r in states:
        by_block[(r.launch, r.block)].append(r)
    for (_, block), accesses in by_block.items():
        tile = max(r.index for r in accesses)
        if tile == 0:
            continue
        publisher = next(r.thread for r in accesses if r.index == tile)
        first = next(r for r in accesses if r.thread == publisher)
        if first.index != tile:
            return (
                f"tile {tile} (block {block}) read {array}[{first.index}] (line {first.line}) before it published "
                f"its own state {array}[{tile}]: a chained scan, each tile waiting for the one before. Publish the "
                "tile's AGGREGATE first, so that a later tile can add it and look further back instead of waiting."
            )
        if sum(1 for r in accesses if r.index == tile) < 2:
            return (
                f"tile {tile} (block {block}) published its state only once: a tile other than 0 publishes its "
                "AGGREGATE first and its inclusive PREFIX at the end, or every tile after it must look back "
                "past it, all the way to tile 0."
            )
        walked = collections.defaultdict(set)
        for r in accesses:
            if r.index < tile:
                walked[r.thread].add(r.index)
        for thread, indices in sorted(walked.items()):
            seen = sorted(indices)
            if any(b - a < WARP_SIZE for a, b in zip(seen, seen[1:])):
                return (
                    f"thread {thread} of tile {tile} read the states of tiles "
                    f"{', '.join(map(str, seen[-4:][::-1]))}"
                    f"{', ...' if len(seen) > 4 else ''} one after another: a serial walk. Look back {WARP_SIZE} "
                    f"predecessors at a time, lane l reading tile end - {WARP_SIZE} + l, and move the window back "
                    "only when no lane saw a PREFIX."
                )
    return None


@dataclass(frozen=True)
class CheckResult:
    """The verdict of a check; ``str()`` is one deterministic line (safe for nbval)."""

    passed: bool
    diagnosis: str
    name: str
    sizes: tuple
    size: int = None
    index: int = None
    hint: str = ""

    def __str__(self):
        blank = _not_attempted(self)
        if blank:
            return blank
        if self.passed:
            if len(self.sizes) == 1:
                return f"PASS {self.name}: n = {self.sizes[0]}"
            return f"PASS {self.name}: {len(self.sizes)} sizes from {min(self.sizes)} to {max(self.sizes)}"
        if self.size is None:  # a verdict on an operator, not on a run
            return f"FAIL {self.name}: {self.diagnosis}. {self.hint}".rstrip()
        where = f"n={self.size}" + ("" if self.index is None else f", index {self.index}")
        return f"FAIL {self.name}: {self.diagnosis} at {where}. {self.hint}".rstrip()

    __repr__ = __str__

    def __bool__(self):
        return self.passed


_BLANK = re.compile(r"NotImplementedError: (Exercise: [^\n]*)")


def _not_attempted(result):
    """The line of a check on a blank exercise (its cell still raises the students' version's
    NotImplementedError): not attempted, not a failure of the student's code; else ''."""
    if result.diagnosis == "not-attempted":
        return f"NOT ATTEMPTED {result.name}: {result.hint}"
    found = _BLANK.search(result.hint or "")
    if result.passed or found is None:
        return ""
    return f"NOT ATTEMPTED {result.name}: {not_attempted_hint(found.group(1))}"


def not_attempted_hint(todo):
    """What a check says of a blank exercise whose ``NotImplementedError`` asks for ``todo``."""
    return (
        f"not attempted yet: the exercise's cell still raises NotImplementedError ({todo}). Write your code in "
        "place of the raise, run that cell, then this check."
    )


def _poison_fresh(array):
    """An allocation hook: fill a fresh device array with poison, as a GPU leaves garbage there."""
    if array.size:
        array.copy_to_device(poison(np.empty(array.shape, array.dtype)))


def with_poisoned_allocations(fn, *args):
    """``fn(*args)``, every device array it allocates poisoned.

    The hook is registered here, inside the recorded function, so that it acts in the process
    that simulates the run (a child process on a machine with a GPU). Host code of the student
    (a sequential loop on int32, as a GPU would wrap) overflows without a warning.
    """
    with sim.allocation_hook(_poison_fresh), quiet_arithmetic():
        return fn(*args)


def _is_poison(result):
    """Where ``result`` holds the poison of its dtype (NaN for floats; integers only besides)."""
    if result.dtype.kind == "f":
        return np.isnan(result)
    if result.dtype.kind in "iu":
        return result == poison_value(result.dtype)
    return np.zeros(result.shape, bool)


@dataclass(frozen=True)
class _FunctionResult(CheckResult):
    """A :class:`CheckResult` of :func:`function`: ``sizes`` counts cases, ``size`` is the failing case's number."""

    sizes: int = 0

    def __str__(self):
        blank = _not_attempted(self)
        if blank:
            return blank
        if self.passed:
            return f"PASS {self.name}: {self.sizes} cases"
        return f"FAIL {self.name}: {self.diagnosis} at case {self.size}. {self.hint}"

    __repr__ = __str__


def _name(fn, name, default):
    """The name a verdict shows: ``name``, else ``fn``'s own unless it is a lambda, else ``default``."""
    own = getattr(fn, "__name__", default)
    return name or (default if own == "<lambda>" else own)
