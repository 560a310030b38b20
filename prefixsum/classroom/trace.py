"""Record every memory access of a real kernel run, and find what a GPU would punish.

``trace.record(fn, *args, **kwargs)`` calls ``fn`` (host code that launches one or more kernels)
on the classroom simulator (:mod:`prefixsum.sim`) and records every element read and written in
global, shared and local memory: launch, block, thread, array, index, read or write, the barrier
phase of the thread, and the kernel source line. From the resulting :class:`Trace`:

* :meth:`Trace.races`: two threads of one block touching one shared or global address in one
  barrier phase, at least one writing (atomics among themselves never race); and two blocks
  touching one global address in one launch, at least one writing, without synchronisation
  between them (see below). The simulator runs the threads of a phase one after another, so it
  never *shows* a race inside a block; the trace finds it anyway.
* :meth:`Trace.stale_reads`: global reads that got the old contents of an element another
  block had stored to but not yet published (:mod:`prefixsum.sim`'s memory model).
* :meth:`Trace.uninitialized_reads`: shared memory read before any thread of the block wrote it.
* :meth:`Trace.barrier_divergence`: threads of a block that reached different barriers.
* :meth:`Trace.bank_conflicts`: for each warp and each shared-memory access instruction, how many
  passes 32 banks of 4 bytes need.
* :meth:`Trace.counts`: operator calls, barriers (steps), shared and global traffic.

**Between blocks** nothing orders two accesses but a release and an acquire: block A's access
is ordered before block B's when A's access is an atomic, or is followed by a
``cuda.threadfence()`` of the same thread (or of a thread of A in a later barrier phase) and
then an atomic by the fencing thread on some flag (the release), and a thread of B made an
atomic on that flag after the release (the acquire), before B's access (in the same thread or
an earlier barrier phase). Atomics among themselves never race: many blocks adding to one
counter is right. An unordered pair is a race of one of four kinds (:class:`Race`'s ``kind``):
``"plain-poll"`` (a thread reads, again and again with plain loads, an element another block
writes, or reads with a plain load an element another block writes with atomics, a flag: a
compiled loop may read it once and hang; poll with an atomic), ``"unfenced"`` (the
reader acquired a flag the writer raised after its store, but no fence kept the store ahead of
the flag: the reader may see stale data), ``"read-write"`` (no flag at all), ``"both-write"``.
Only direct release/acquire pairs count, not chains through a third block.

Out-of-bounds and negative indices stop the launch with an error from :mod:`prefixsum.sim`
(numba's own simulator wraps negative indices silently); :attr:`Trace.error` keeps it.

On a machine with a GPU the notebook's own CUDA session must stay intact, so ``record`` then runs
``fn`` in the simulating worker process (:mod:`.child`; ``fn`` and its arguments must be picklable
by cloudpickle: functions of a module, lambdas, notebook functions and kernels are).
"""

import collections
import contextlib
import signal
import threading
import time
from typing import NamedTuple

from ..core.hardware import WARP_SIZE
from . import block_order, child as _child
from .recorder import Recorder
from .records import FenceRecord, Launch, Record


class Race(NamedTuple):
    """Conflicting accesses to one address with no barrier between them."""

    launch: int
    kernel: str
    array: str
    index: int
    block: int
    threads: tuple
    """The threads involved (for a race between blocks: the two blocks, the earlier access's first)."""
    phase: int
    between_blocks: bool
    kind: str = ""
    """Between blocks: ``"both-write"``, ``"read-write"``, ``"unfenced"`` or ``"plain-poll"``
    (see the module's docstring); within a block ``""``."""
    line: int = None
    """Between blocks: the source line of the later access (the read, if one reads)."""

    def __str__(self):
        if not self.between_blocks:
            return (
                f"race on {self.array}[{self.index}] in kernel '{self.kernel}' (launch {self.launch}, "
                f"phase {self.phase}): block {self.block} threads {', '.join(map(str, self.threads[:6]))} "
                "touch it, at least one writing"
            )
        what = block_order.DESCRIPTIONS[self.kind]
        return (
            f"race on {self.array}[{self.index}] in kernel '{self.kernel}' (launch {self.launch}): "
            f"blocks {', '.join(map(str, self.threads[:6]))} {what}"
        )


class Trace:
    """The accesses of one :func:`record` run, and the analyses on them."""

    def __init__(self, records, launches, result=None, error=None, fences=(), idle=None):
        self.records = records
        self.launches = launches
        self.fences = list(fences)
        """Every ``cuda.threadfence()`` of the run, as :class:`FenceRecord` s."""
        self.result = result
        self.error = error
        self.shapes = {}
        """``{(launch, space, array): shape}`` of every array the run touched, as its kernel saw it."""
        self.scalars = {}
        """``{launch: {name: value}}``: the numbers the host passed to each launch (``n``, a look-back's ``epoch``)."""
        self.idle = dict(idle or {})
        """``{(launch, block, thread): (calls, kind, line)}``: the barriers and warp-level calls each
        thread made since its last memory access (or its start), the last one's name and line; a
        loop that reads nothing shows here."""

    def __repr__(self):
        return f"<Trace: {len(self.launches)} launches, {len(self.records)} accesses{', error' if self.error else ''}>"

    def kernel(self, launch):
        return self.launches[launch].kernel

    def select(self, *, launch=None, array=None, space=None, block=None):
        """The records matching every given field."""
        return [
            r
            for r in self.records
            if (launch is None or r.launch == launch)
            and (array is None or r.array == array)
            and (space is None or r.space == space)
            and (block is None or r.block == block)
        ]

    def races(self):
        """Every :class:`Race`: within a block at most one per address and phase, between blocks
        one per address (the first unordered pair of the most telling kind)."""
        found = []
        within = collections.defaultdict(list)
        cells = collections.defaultdict(list)
        for position, r in enumerate(self.records):
            if r.space == "local":
                continue
            within[(r.launch, r.block, r.space, r.array, r.index, r.phase)].append(r)
            if r.space == "global":
                cells[(r.launch, r.array, r.index)].append((position, r))
        for (launch, block, _, array, index, phase), rs in within.items():
            threads = sorted({r.thread for r in rs})
            if len(threads) > 1 and any(r.write for r in rs) and not all(r.atomic for r in rs):
                found.append(Race(launch, self.kernel(launch), array, index, block, tuple(threads), phase, False))
        order = block_order.Order(self.records, self.fences)
        for (launch, array, index), accesses in cells.items():
            race = block_order.race_between_blocks(accesses, order)
            if race is not None:
                kind, blocks, line = race
                found.append(Race(launch, self.kernel(launch), array, index, min(blocks), blocks, -1, True, kind, line))
        return sorted(found, key=lambda race: (race.launch, race.array, race.index, race.phase))

    def stale_reads(self):
        """Global reads that got the old contents of an element another block had stored to but
        not yet published (no fence, atomic or retirement in between)."""
        return [r for r in self.records if r.stale]

    def uninitialized_reads(self):
        """Shared-memory reads of cells no thread of the block had written before."""
        written = set()
        found = []
        for r in self.records:
            if r.space != "shared":
                continue
            key = (r.launch, r.block, r.array, r.index)
            if r.write:
                written.add(key)
            elif key not in written:
                found.append(r)
        return found

    def barriers_passed(self):
        """``{(launch, block, thread): barriers}``: the highest phase each thread made an access in."""
        passed = {}
        for r in self.records:
            key = (r.launch, r.block, r.thread)
            passed[key] = max(passed.get(key, 0), r.phase)
        return passed

    def barrier_divergence(self):
        """Which threads of a block reached which barrier, when not all reached the same one.

        The classroom simulator stops a launch at the first barrier that some live threads of a
        block wait at while others returned or wait elsewhere; this is its report ("" if none).
        """
        from .sim import BarrierDivergenceError

        return str(self.error) if isinstance(self.error, BarrierDivergenceError) else ""

    def bank_conflicts(self, banks=32, bank_bytes=4, by_phase=False):
        """Passes needed by each warp-wide shared-memory access instruction.

        The threads of a warp issue one instruction together; the tracer takes the ``k``-th access
        of each thread to one array from one source line as that instruction.

        Parameters
        ----------
        by_phase : bool
            Count ``k`` within each barrier phase instead of over the whole launch. Over the
            launch is right when the threads of a warp run each line equally often (a scan's
            steps); where they join a loop at different barrier phases (one owner thread per
            step, a triangle of columns) it pairs accesses of different phases and over-counts.

        Returns
        -------
        list of dict
            One per (launch, block, warp, array, line, instance, read/write): ``ways`` (passes:
            1 = conflict-free; threads reading one word share it by broadcast) and ``threads``.
        """
        groups = collections.defaultdict(list)
        in_phase = collections.Counter()
        for r in self.records:
            if r.space == "shared":
                instance = r.instance
                if by_phase:
                    key = (r.launch, r.block, r.thread, r.array, r.line, r.phase)
                    instance = (r.phase, in_phase[key])
                    in_phase[key] += 1
                groups[(r.launch, r.block, r.thread // WARP_SIZE, r.array, r.line, instance, r.write)].append(r)
        found = []
        for (launch, block, warp, array, line, instance, write), rs in groups.items():
            words_per_bank = collections.defaultdict(set)
            for r in rs:
                first = r.index * r.itemsize // bank_bytes
                for word in range(first, first + max(1, r.itemsize // bank_bytes)):
                    words_per_bank[word % banks].add(word)
            ways = max(len(words) for words in words_per_bank.values())
            if rs[0].itemsize > bank_bytes:  # 8-byte words: the hardware serves half a warp per pass
                ways = max(1, ways // (rs[0].itemsize // bank_bytes))
            found.append(
                {
                    "launch": launch,
                    "block": block,
                    "warp": warp,
                    "array": array,
                    "line": line,
                    "instance": instance,
                    "write": write,
                    "ways": ways,
                    "threads": len(rs),
                }
            )
        return found

    def conflict_summary(self, **kw):
        """``{"instructions", "passes", "extra_passes", "worst"}`` over every warp access (``kw``: as
        :meth:`bank_conflicts`)."""
        found = self.bank_conflicts(**kw)
        passes = sum(f["ways"] for f in found)
        return {
            "instructions": len(found),
            "passes": passes,
            "extra_passes": passes - len(found),
            "worst": max((f["ways"] for f in found), default=0),
        }

    def fan_out(self, space="shared"):
        """The most threads of one block that read one cell of ``space`` memory in one barrier phase.

        A prefix network's fan-out: the ladder (Sklansky) has one cell read by half the tile in
        its last phase, Hillis-Steele (Kogge-Stone) at most two readers per cell.
        """
        readers = collections.defaultdict(set)
        for r in self.records:
            if r.space == space and not r.write:
                readers[(r.launch, r.block, r.array, r.index, r.phase)].add(r.thread)
        return max((len(threads) for threads in readers.values()), default=0)

    def counts(self):
        """Totals over the run: launches, operator calls, barriers, shared and global traffic."""
        global_reads = [r for r in self.records if r.space == "global" and not r.write]
        global_writes = [r for r in self.records if r.space == "global" and r.write]
        passed = self.barriers_passed()
        per_launch = collections.defaultdict(int)
        for (launch, _, _), phase in passed.items():
            per_launch[launch] = max(per_launch[launch], phase)
        return {
            "launches": len(self.launches),
            "combines": sum(launch.combines for launch in self.launches),
            "barriers": sum(per_launch.values()),
            "steps": sum(per_launch.values()) + len(self.launches),
            "shared_reads": sum(1 for r in self.records if r.space == "shared" and not r.write),
            "shared_writes": sum(1 for r in self.records if r.space == "shared" and r.write),
            "global_reads": len(global_reads),
            "global_writes": len(global_writes),
            "global_bytes_read": sum(r.itemsize for r in global_reads),
            "global_bytes_written": sum(r.itemsize for r in global_writes),
        }


@contextlib.contextmanager
def time_limit(timeout):
    """Raise TimeoutError after ``timeout`` seconds of this process's CPU time, where a signal can
    (the main thread, not Windows).

    The recorder's deadline acts only at memory accesses; a loop that only passes barriers (a
    phase that never advances) makes none, and this stops it. The simulator runs every thread
    of a launch as a greenlet of the calling thread, so the signal interrupts the kernel itself.
    CPU time, not the wall clock: a loaded machine does not stop an honest run sooner, so the
    bound can sit close above the honest runs. A wait that burns no CPU (a lock) is left to the
    caller's wall clock.
    """
    if timeout is None or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise TimeoutError("the kernel ran past the time limit (an endless loop?)")

    previous = signal.signal(signal.SIGPROF, stop)
    signal.setitimer(signal.ITIMER_PROF, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _record_here(fn, args, kwargs, timeout, steps=None, polls=None):
    from . import sim

    deadline = None if timeout is None else time.process_time() + timeout
    recorder = Recorder(deadline, steps, polls)
    result = error = None
    try:
        with (
            time_limit(timeout),
            sim.enabled(True),
            sim.launch_hook(recorder.start_launch),
            sim.call_hook(recorder.count_call),
            sim.access_hook(recorder),
            sim.fence_hook(recorder.fence),
            sim.wait_hook(recorder.wait),
        ):
            result = fn(*args, **kwargs)
    except Exception as exc:  # the trace up to the failure is the point
        error = exc
    trace = Trace(
        recorder.records, recorder.launches_recorded(), result, error, recorder.fences, recorder.idle_threads()
    )
    trace.shapes = dict(recorder.shapes)
    trace.scalars = dict(enumerate(recorder.scalars))
    return trace


def _record_portable(fn, args, kwargs, timeout, steps=None, polls=None):
    """:func:`_record_here`, with the error and result made safe to send to another process."""
    trace = _record_here(fn, args, kwargs, timeout, steps, polls)
    if trace.error is not None:
        trace.error = _child.portable_error(trace.error)
    if hasattr(trace.result, "copy_to_host"):
        trace.result = trace.result.copy_to_host()
    return trace


def record(fn, *args, timeout=None, steps=None, polls=None, raise_errors=False, **kwargs):
    """Run ``fn(*args, **kwargs)`` on the simulator and record every memory access.

    Parameters
    ----------
    fn : callable
        Host code that launches kernels (``prefixsum.scan``, a student's function, ...).
    *args, **kwargs
        Passed to ``fn``.
    timeout : float, optional
        Seconds of CPU time after which a running kernel is stopped with TimeoutError: a bound
        for a runaway, which depends on the machine's speed, not on its load.
    steps : int, optional
        Steps (memory accesses, barriers and warp-level calls) after which the run is stopped with
        TimeoutError: the same for the same run on any machine, under any load. Polls do not
        count (see ``polls``), and each first access of a thread to a global cell adds
        :data:`prefixsum.classroom.polls.PROGRESS_CREDIT` steps to the budget: a slow kernel that
        keeps reading new elements runs on, a loop over the same cells does not.
    polls : int, optional
        The most polls of one wait: a global read or atomic by a thread that finds a cell, of an
        array some thread of the launch writes, as it found it the time before is a poll, counted
        per thread and cell, apart from the steps; one more stops the run with
        :class:`prefixsum.sim.PollLimitError`, naming the thread, the cell and what it found. A
        thread that waits long for another block costs no steps; re-reading the input or a
        constant table is never a poll.
    raise_errors : bool, default False
        Re-raise an exception from ``fn``; by default it is kept in :attr:`Trace.error` with the
        accesses made before it.

    Returns
    -------
    Trace
        With ``fn``'s return value in :attr:`Trace.result`.
    """
    if _child.simulating():
        trace = _record_here(fn, args, kwargs, timeout, steps, polls)
    else:
        trace = _child.on_simulator(_record_portable, fn, args, kwargs, timeout, steps, polls)
    if raise_errors and trace.error is not None:
        raise trace.error
    return trace


__all__ = ["FenceRecord", "Launch", "Race", "Record", "Trace", "record", "time_limit"]
