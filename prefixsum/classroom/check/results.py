"""Verdicts and budgets: :class:`CheckResult`, :class:`Budget`, poisoned allocations."""
import collections
from dataclasses import dataclass

import numpy as np

from .. import sim
from ...core.arithmetic import quiet_arithmetic
from ...core.poison import poison, poison_value


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
    """

    barriers: int = None
    accesses_per_step: int = None
    traffic_per_element: float = None
    bank_conflict_ways: int = None
    kernels: tuple = None

    def overspent(self, run, n):
        """``(index, hint)`` for the first limit ``run`` (a :class:`prefixsum.trace.Trace`) exceeds, else None."""
        launches = {launch.number for launch in run.launches if self.kernels is None or launch.kernel in self.kernels}
        records = [r for r in run.records if r.launch in launches]
        if self.barriers is not None:
            passed = max((phase for (launch, _, _), phase in run.barriers_passed().items() if launch in launches), default=0)
            if passed > self.barriers:
                return None, (f"a thread passed {passed} barriers in one launch; the algorithm needs at most "
                              f"{self.barriers}. Is the loop bound right (log2 of the tile, not the tile)?")
        if self.accesses_per_step is not None:
            per_step = collections.Counter((r.launch, r.block, r.thread, r.phase) for r in records)
            if per_step:
                (launch, block, thread, phase), most = per_step.most_common(1)[0]
                if most > self.accesses_per_step:
                    return None, (f"thread {thread} of block {block} made {most} memory accesses between two barriers "
                                  f"(step {phase}); the parallel algorithm makes at most {self.accesses_per_step}. "
                                  "Share the work: every thread does a few operations per step, a barrier between steps.")
        if self.traffic_per_element is not None:
            traffic = sum(1 for r in records if r.space == "global")
            blocks = len({(r.launch, r.block) for r in records})
            if traffic > self.traffic_per_element * n + 2 * blocks:
                return None, (f"{traffic} global-memory accesses for {n} elements in {blocks} blocks, more than the "
                              f"{self.traffic_per_element:g} per element (and 2 per block) the algorithm needs: "
                              "read each input once, keep the tile in shared memory.")
        if self.bank_conflict_ways is not None:
            worst = [c for c in run.bank_conflicts() if c["launch"] in launches and c["ways"] > self.bank_conflict_ways]
            if worst:
                c = max(worst, key=lambda c: c["ways"])
                return None, (f"a warp's access to {c['array']} (source line {c['line']}) needs {c['ways']} passes of the "
                              f"shared-memory banks; at most {self.bank_conflict_ways} allowed. Pad the index so that "
                              "the threads of a warp hit different banks.")
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
        if self.passed:
            return f"PASS {self.name}: {self.sizes} cases"
        return f"FAIL {self.name}: {self.diagnosis} at case {self.size}. {self.hint}"

    __repr__ = __str__


def _name(fn, name, default):
    """The name a verdict shows: ``name``, else ``fn``'s own unless it is a lambda, else ``default``."""
    own = getattr(fn, "__name__", default)
    return name or (default if own == "<lambda>" else own)
