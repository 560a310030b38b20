"""The stepper's model: a traced run, step by step, as plain data (no widgets, no drawing).

:func:`model` replays a :class:`prefixsum.trace.Trace` into :class:`Step` s, one per barrier
phase of each launch (``by="phase"``), or finer, one per warp or thread of a block inside a
phase (``by="warp"``, ``by="thread"``). Each step holds what :mod:`prefixsum.viz`'s stepper
draws: the values of every array the run touched after the step (global arrays of the launch,
each block's shared arrays, each thread's local arrays: registers the tracer sees), the cells
read and written in it, an arrow from each read to the write it may feed, the threads that
were active, the source lines of its accesses, and the races, uninitialized reads and bank
conflicts in it. :func:`differences` compares a student's model with a reference's step by step, the
steps aligned launch by launch and writing step by writing step (:func:`aligned`). A decoupled
look-back on a time axis is :mod:`prefixsum.classroom.lookback_timeline`'s; the failing run a
check keeps for the stepper, and the run it is stepped beside, are :mod:`prefixsum.classroom.references`'.

**The replay.** The tracer records the value of every access. A cell's value before the launch
is the value of a read that came before any write of the launch to it (unknown, ``None``, if it
was written first); the state after step ``k`` applies, in trace order, every write of a step
up to ``k``. The steps of a launch are ordered by their key ((phase), (phase, block, warp) or
(phase, block, thread)), which the barriers make a valid order of the writes within a block.

A phase with no access between two that have some (two barriers in a row, or only arithmetic on
scalars between them) is a step of its own, with nothing read or written and nobody active, so
that the phases of a launch are numbered as its barriers count them.

**A broken trace is refused** (:class:`BrokenTrace`): a read that got a value the replay does not
hold there (writes are missing). Stale reads (another block's store not yet published) are exempt.
"""

import collections
import linecache
import math
from typing import NamedTuple

from ..core.hardware import WARP_SIZE

GRANULARITIES = ("phase", "warp", "thread")
MAX_CELLS = 1 << 22
"""Values a model holds at most, its steps' states together: a run larger than that (a kernel's
huge local array, say) is refused (:class:`BrokenTrace`) before anything is allocated."""
PICTURE_RECORDS = 200_000
"""Memory accesses of a failing run and its reference together that the grader keeps for a feedback
picture (a check failing on at most :data:`prefixsum.classroom.references.FAILING_SIZES` elements
makes a few thousand)."""


class BrokenTrace(ValueError):
    """A trace the stepper cannot replay: a read contradicts the writes, or it is empty or too large."""


class Slot(NamedTuple):
    """One array as the stepper shows it: global arrays per launch, shared per block, local per thread."""

    launch: int
    space: str
    array: str
    owner: tuple
    """``()`` for global memory, ``(block,)`` for shared, ``(block, thread)`` for local."""

    @property
    def label(self):
        where = {0: "", 1: " (block {})", 2: " (block {}, thread {})"}[len(self.owner)].format(*self.owner)
        return f"{self.space} {self.array}{where}"


class Arrow(NamedTuple):
    """A read that may feed a write: the thread read ``source`` since its previous write, then wrote ``target``."""

    source: tuple
    """``(slot, index)``"""
    target: tuple
    block: int
    thread: int


class Step(NamedTuple):
    """The state after one step, and what happened in it."""

    key: tuple
    label: str
    values: dict
    """``{slot: list}`` of every slot of the step's launch; ``None`` where unknown."""
    read: dict
    """``{slot: set of indices}`` read in this step."""
    written: dict
    arrows: tuple
    active: frozenset
    """``(block, thread)`` of each thread that made an access in this step."""
    threads: int
    """Threads in the launch: the others were idle."""
    lines: tuple
    """``(file, line, source text)`` of the step's accesses, in the order first made."""
    accesses: dict
    """``{(slot, index): (block, thread, write, line)}``: the last access of each cell in the step."""
    races: frozenset
    """``(slot, index)`` of cells raced on in this step."""
    uninitialized: frozenset
    conflicts: frozenset
    """Cells accessed by a warp instruction that needed more than one pass of the banks."""


def _slot(r):
    owner = () if r.space == "global" else (r.block,) if r.space == "shared" else (r.block, r.thread)
    return Slot(r.launch, r.space, r.array, owner)


def _key(r, by):
    if by == "phase":
        return (r.launch, r.phase)
    unit = r.thread // WARP_SIZE if by == "warp" else r.thread
    return (r.launch, r.phase, r.block, unit)


_NOBODY = -1
"""The block and thread (or warp) of an empty phase's step when stepping finer than by phase."""


def _label(trace, key, by, empty=False):
    text = f"launch {key[0]} ({trace.kernel(key[0])}), phase {key[1]}"
    if empty:
        return text + ": no access (nothing between two barriers but work on scalars)"
    if by != "phase":
        text += f", block {key[2]}, {by} {key[3]}"
    return text


def _plain(value):
    """A record's value as a Python number (or tuple for a record), comparable and printable."""
    if hasattr(value, "dtype") and getattr(value.dtype, "names", None):
        return tuple(_plain(v) for v in value.tolist())
    return value.item() if hasattr(value, "item") else value


def same(u, v):
    """Whether two replayed values agree (NaN equals NaN; unknown equals only unknown)."""
    if u is None or v is None:
        return u is v
    if isinstance(u, float) and isinstance(v, float) and math.isnan(u) and math.isnan(v):
        return True
    return u == v


def _empty_phases(trace, by):
    """The keys of the steps of phases with no access between two phases of their launch that have some."""
    phases = collections.defaultdict(set)
    for r in trace.records:
        phases[r.launch].add(r.phase)
    nobody = () if by == "phase" else (_NOBODY, _NOBODY)
    return [
        (launch, phase, *nobody)
        for launch, seen in sorted(phases.items())
        for phase in sorted(set(range(min(seen), max(seen) + 1)) - seen)
    ]


def initial_values(trace):
    """``{(slot, index): value}`` of every cell read before any write of its launch to it.

    Also checks that every later (not stale) read got the value the writes before it left there,
    raising :class:`BrokenTrace` where one did not.
    """
    known, initial = {}, {}
    for position, r in enumerate(trace.records):
        cell = (_slot(r), r.index)
        value = _plain(r.value)
        if r.write:
            known[cell] = value
        elif cell not in known:
            known[cell] = initial[cell] = value
        elif not r.stale and not same(known[cell], value):
            raise BrokenTrace(
                f"record {position}: thread {r.thread} of block {r.block} read {value!r} from "
                f"{r.array}[{r.index}] in phase {r.phase} of launch {r.launch}, but the writes "
                f"before it left {known[cell]!r} there: writes are missing from the trace"
            )
    return initial


def _marks(trace):
    """``{position: kinds}`` of the records that take part in a race, an uninitialized read or a bank conflict."""
    marks = collections.defaultdict(set)
    races_within, races_between = set(), set()
    for race in trace.races():
        if race.between_blocks:
            races_between.add((race.launch, race.array, race.index))
        else:
            races_within.add((race.launch, race.block, race.array, race.index, race.phase))
    conflicted = {
        (c["launch"], c["block"], c["warp"], c["array"], c["line"], c["instance"], c["write"])
        for c in trace.bank_conflicts()
        if c["ways"] > 1
    }
    uninitialized = {id(r) for r in trace.uninitialized_reads()}
    for position, r in enumerate(trace.records):
        if (r.launch, r.block, r.array, r.index, r.phase) in races_within or (
            r.space == "global" and (r.launch, r.array, r.index) in races_between
        ):
            marks[position].add("race")
        if id(r) in uninitialized:
            marks[position].add("uninitialized")
        if (
            r.space == "shared"
            and (r.launch, r.block, r.thread // WARP_SIZE, r.array, r.line, r.instance, r.write) in conflicted
        ):
            marks[position].add("conflict")
    return marks


def _source(file, line):
    return linecache.getline(file, line).strip() if file else ""


def no_source(file, line):
    """A model's source lines left empty: for a trace from elsewhere, whose file names are not to be opened."""
    return ""


class Model:
    """A trace replayed step by step (see the module's docstring); index it for :class:`Step` s.

    Parameters
    ----------
    trace : prefixsum.trace.Trace
    by : {"phase", "warp", "thread"}
        One step per barrier phase of a launch, or per warp or thread of a block within one.
    arrays : sequence of str, optional
        Only these arrays (by their names in the kernels); default every array.
    source : callable, optional
        ``(file, line) -> text`` of the source line of an access; default :mod:`linecache` (a
        notebook's cells, the package's files), :func:`no_source` for none.
    max_cells : int
        The most values the model may hold (:data:`MAX_CELLS`).
    """

    def __init__(self, trace, by="phase", arrays=None, source=_source, max_cells=MAX_CELLS):
        if by not in GRANULARITIES:
            raise ValueError(f"by={by!r}: the stepper steps by one of {', '.join(GRANULARITIES)}")
        if not trace.records:
            raise BrokenTrace(
                f"{trace!r} recorded no accesses: nothing to step through"
                + (f" (the run raised {trace.error!r})" if trace.error else "")
            )
        initial = initial_values(trace)
        if arrays is not None:
            unknown = set(arrays) - {r.array for r in trace.records}
            if unknown:
                raise ValueError(
                    f"arrays {sorted(unknown)} are not in the trace; it has {sorted({r.array for r in trace.records})}"
                )
        self.trace, self.by, self.source = trace, by, source
        shown = [(p, r) for p, r in enumerate(trace.records) if arrays is None or r.array in arrays]
        sizes = collections.defaultdict(int)
        for _, r in shown:
            if r.index < 0:
                raise BrokenTrace(f"a record of {r.array}[{r.index}]: an index below 0")
            sizes[_slot(r)] = max(sizes[_slot(r)], r.index + 1)
        self.sizes = dict(sizes)
        grouped = collections.defaultdict(list)
        for position, r in shown:
            grouped[_key(r, by)].append((position, r))
        for key in _empty_phases(trace, by):
            grouped[key] = []
        steps = collections.Counter(key[0] for key in grouped)
        held = sum(size * steps[slot.launch] for slot, size in self.sizes.items())
        if held > max_cells:
            raise BrokenTrace(
                f"the run's arrays hold {held:,} values over its steps, more than the {max_cells:,} "
                "the stepper keeps: too large to step through"
            )
        self.steps = []
        self._build(trace, grouped, initial, _marks(trace))

    def _build(self, trace, grouped, initial, marks):
        state, stamp, launch_of = {}, {}, None
        pending = collections.defaultdict(list)  # (launch, block, thread) -> reads since its last write
        for key in sorted(grouped):
            if key[0] != launch_of:
                launch_of = key[0]
                slots = [s for s in self.sizes if s.launch == launch_of]
                state = {s: [initial.get((s, i)) for i in range(self.sizes[s])] for s in slots}
            read, written = collections.defaultdict(set), collections.defaultdict(set)
            arrows, active, lines, accesses = [], set(), {}, {}
            flagged = {"race": set(), "uninitialized": set(), "conflict": set()}
            for position, r in grouped[key]:
                slot, thread = _slot(r), (r.launch, r.block, r.thread)
                active.add((r.block, r.thread))
                lines.setdefault((r.file, r.line), None)
                accesses[(slot, r.index)] = (r.block, r.thread, r.write, r.line)
                for kind in marks.get(position, ()):
                    flagged[kind].add((slot, r.index))
                if not r.write:
                    read[slot].add(r.index)
                    pending[thread].append((slot, r.index))
                    continue
                written[slot].add(r.index)
                arrows.extend(Arrow(source, (slot, r.index), r.block, r.thread) for source in pending.pop(thread, ()))
                if stamp.get((slot, r.index), -1) < position:  # a later write (in trace order) stays
                    state[slot][r.index] = _plain(r.value)
                    stamp[(slot, r.index)] = position
            launch = trace.launches[key[0]]
            threads = math.prod(launch.grid) * math.prod(launch.block)
            label = _label(trace, key, self.by, empty=not grouped[key])
            self.steps.append(
                Step(
                    key,
                    label,
                    {s: list(v) for s, v in state.items()},
                    dict(read),
                    dict(written),
                    tuple(dict.fromkeys(arrows)),
                    frozenset(active),
                    threads,
                    tuple((f, n, self.source(f, n)) for f, n in lines),
                    accesses,
                    frozenset(flagged["race"]),
                    frozenset(flagged["uninitialized"]),
                    frozenset(flagged["conflict"]),
                )
            )

    def __len__(self):
        return len(self.steps)

    def __getitem__(self, k):
        return self.steps[k]

    def __repr__(self):
        return f"<stepper model: {len(self.steps)} steps by {self.by}, {len(self.sizes)} arrays>"


def model(trace, by="phase", arrays=None, **options):
    """The :class:`Model` of ``trace`` (see :class:`Model`; ``options``: ``source``, ``max_cells``)."""
    return Model(trace, by, arrays, **options)


def comparable(model):
    """``{slot: key}`` by which a slot of ``model`` meets its counterpart in another run: a global array by
    its name (the runs share the host's arrays), a shared or local one by its rank among the arrays of
    its owner, in the order the run first touched them (two kernels of one algorithm name them apart)."""
    keys, ranks = {}, collections.Counter()
    for slot in model.sizes:
        if slot.space == "global":
            keys[slot] = (slot.launch, slot.space, slot.array, slot.owner)
        else:
            owner = (slot.launch, slot.space, slot.owner)
            keys[slot] = owner + (ranks[owner],)
            ranks[owner] += 1
    return keys


def aligned(student, reference):
    """For each step of ``student``, the index of the step of ``reference`` it stands beside, or None.

    Two runs of one algorithm may count their barrier phases differently (a Hillis-Steele step
    on one buffer reads, waits, writes and waits, where two buffers write once per step; a run
    with more launches shifts every step after them), so steps are matched launch by launch, and
    within a launch by the *writing* steps: the k-th step that writes memory beside the
    reference's k-th. A step that writes nothing stands beside the reference step of the last
    write before it. A launch or a writing step the reference lacks stands beside nothing.
    """

    def writes_by_launch(model):
        found = collections.defaultdict(list)
        for k, step in enumerate(model):
            if step.written or not found[step.key[0]]:
                found[step.key[0]].append(k)
        return found

    theirs = writes_by_launch(reference)
    pairs, rank = [], collections.Counter()
    for step in student:
        launch = step.key[0]
        rank[launch] += bool(step.written) or not rank[launch]
        steps = theirs.get(launch, ())
        pairs.append(steps[rank[launch] - 1] if rank[launch] <= len(steps) else None)
    return pairs


def differences(student, reference):
    """Per step of ``student``, the cells where its state differs from the reference step beside it
    (:func:`aligned`).

    Arrays are matched by launch, memory space and owner, global ones by name and shared and
    local ones by the order the run first touched them (:func:`comparable`), over the cells both
    have (a reference with larger tiles has more). A step with nothing beside it differs in every cell.

    Returns
    -------
    list of set
        ``(slot, index)`` of the student's slots.
    """
    found = []
    mine, others = comparable(student), comparable(reference)
    for k, j in enumerate(aligned(student, reference)):
        if j is None:
            found.append({(s, i) for s, values in student[k].values.items() for i in range(len(values))})
            continue
        theirs = {others[s]: v for s, v in reference[j].values.items()}
        cells = set()
        for slot, values in student[k].values.items():
            other = theirs.get(mine[slot])
            if other is None:
                continue
            cells |= {(slot, i) for i in range(min(len(values), len(other))) if not same(values[i], other[i])}
        found.append(cells)
    return found


def first_difference(student, reference):
    """The index of the first step at which the two models differ, or None."""
    return next((k for k, cells in enumerate(differences(student, reference)) if cells), None)


__all__ = [
    "Arrow",
    "BrokenTrace",
    "GRANULARITIES",
    "MAX_CELLS",
    "Model",
    "PICTURE_RECORDS",
    "Slot",
    "Step",
    "aligned",
    "comparable",
    "differences",
    "first_difference",
    "initial_values",
    "model",
    "no_source",
    "same",
]
