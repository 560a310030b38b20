"""A race in the trace of a run, as the checker words it: within a block, what the accesses say
about the fix (a barrier missing after a load or a store, two threads storing to one place,
walks that meet, a read and a write in one step); between blocks, by kind
(:attr:`prefixsum.classroom.trace.Race.kind`)."""

import collections


def race_diagnosis(run, races, cell):
    """``(diagnosis, index, hint)`` for the most telling of ``races`` (:func:`_race_rank`), found in the trace
    ``run``; ``cell(array, index)`` names an element in the hint."""
    race = min(races, key=_race_rank)
    if race.between_blocks:
        return _between_blocks(run, race)
    return (
        "race",
        None,
        (
            f"{cell(race.array, race.index)} in kernel '{race.kernel}': threads {race.threads[0]} "
            f"and {race.threads[1]} of block {race.block} touch it in one barrier phase. "
            f"{_within_block_advice(run, race)}"
        ),
    )


def _accesses(run, race):
    """The records of ``race`` (within a block): its cell, block and barrier phase."""
    key = (race.launch, race.block, race.array, race.index, race.phase)
    return [r for r in run.records if (r.launch, r.block, r.array, r.index, r.phase) == key]


# A thread that touches more cells of one array than this in one barrier phase walks through them (a serial loop).
_OWN_CELLS = 8


def _within_block_advice(run, race):
    """What a race within a block says about the fix: both write, a barrier missing after a store, or within one step.

    * Two threads write it: they store to one place; a barrier cannot help, the places must differ.
    * Both threads walk through many cells in the phase (serial loops whose cells overlap): each
      thread must keep to its own cells.
    * A thread reads the cell after its own store to it in this phase, at the store's line or
      above (it went round the loop), or ran a racing line twice in the phase: the loop went
      round without a barrier after the store.
    * Otherwise the read and the write lie in one step: a barrier between steps cannot help.
    """
    accesses = _accesses(run, race)
    writes = [r for r in accesses if r.write and not r.atomic]
    reads = [r for r in accesses if not r.write]
    if not reads or len({r.thread for r in writes}) > 1:
        lines = sorted({r.line for r in writes})
        return (
            f"Both write it (line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}): two threads store "
            "to one place, and no barrier can fix that. Each thread must write only its own cells (its own "
            "rows, its own place in the output): check the index of the store."
        )
    where = (race.launch, race.block, race.array, race.phase)
    walk = collections.defaultdict(set)
    for r in run.records:
        if (r.launch, r.block, r.array, r.phase) == where and r.thread in race.threads[:2]:
            walk[r.thread].add(r.index)
    if min(len(cells) for cells in walk.values()) > _OWN_CELLS:
        return (
            f"Threads {race.threads[0]} and {race.threads[1]} each walk through {min(map(len, walk.values()))} or "
            "more cells in this phase, and their walks meet here: each thread must touch only its own cells (its "
            "own rows: first, first + step, ...), never a cell another thread works on."
        )
    loaded = _read_during_load(run, race)
    if loaded is not None:
        w, r = loaded
        return (
            f"Thread {r.thread} reads it (line {r.line}) before any barrier, while thread {w.thread} stores it in "
            f"the load (line {w.line}): nothing orders the load before the first step. A cuda.syncthreads() is "
            "missing after the load, so that every cell is filled before any thread reads another's."
        )
    wrapped = _read_after_own_store(run, race)
    if wrapped is not None:
        w, r = wrapped
        return (
            f"Thread {r.thread} stores it (line {w.line}) and reads it again (line {r.line}) in the next "
            "iteration of the loop, with no barrier between, while another thread touches it: a "
            "cuda.syncthreads() is missing after the store, so that every thread has stored before any "
            "thread reads in the next step."
        )
    if _spans_several_steps(run, race):
        return (
            "Its thread went round the loop more than once in this phase: a cuda.syncthreads() is missing "
            "after the store, so that every thread has stored before any thread reads in the next step."
        )
    return (
        "Both touch it in the same step of the loop, one reading what the other writes: a barrier between "
        "steps cannot help. Check the index read against the invariant (a step should read only cells no "
        "thread writes in that step), or read into a register, cuda.syncthreads(), then write."
    )


def _read_during_load(run, race):
    """``(store, read)``: in the block's first barrier phase, a thread's first store to ``race``'s cell (its
    load: each thread stores its own cell first) and another thread's read of it at another line; else None."""
    if not race.phase == min(
        r.phase for r in run.records if (r.launch, r.block, r.array) == (race.launch, race.block, race.array)
    ):
        return None
    accesses = _accesses(run, race)
    first = {}
    for r in run.records:
        if (r.launch, r.block, r.array) == (race.launch, race.block, race.array):
            first.setdefault(r.thread, r)
    store = next((r for r in accesses if r.write and not r.atomic and first.get(r.thread) is r), None)
    if store is None:
        return None
    read = next((r for r in accesses if not r.write and r.thread != store.thread and r.line != store.line), None)
    return None if read is None else (store, read)


def _read_after_own_store(run, race):
    """``(store, read)``: a thread's store to ``race``'s cell and its later read of it, in one phase, the read at
    the store's line or above; else None.

    Such a read belongs to the next iteration of the loop (the thread went round it), so no
    barrier stood between the iterations.
    """
    stores = {}
    for r in _accesses(run, race):
        if r.write and not r.atomic:
            stores.setdefault(r.thread, r)
        elif not r.write and r.thread in stores and stores[r.thread].line >= r.line:
            return stores[r.thread], r
    return None


def _spans_several_steps(run, race):
    """Whether a thread of ``race``'s block ran a racing source line more often than another thread, in the race's
    phase.

    Then loop iterations ran without a barrier between them: the barrier between steps is
    missing (the ladder without its barrier: ``a[t] += a[p]`` twice in one phase).
    """
    where = (race.launch, race.block, race.array, race.phase)
    lines = {r.line for r in run.records if (r.launch, r.block, r.array, r.phase) == where and r.index == race.index}
    runs = collections.Counter(
        (r.line, r.write, r.thread)
        for r in run.records
        if (r.launch, r.block, r.array, r.phase) == where and r.line in lines
    )
    # How many accesses one execution of a line makes is not known (``a[t] += a[p]`` reads twice, a
    # tuple of four reads four times); a thread that made more than another on the same line ran it again.
    per_line = collections.defaultdict(list)
    for (line, write, _), count in runs.items():
        per_line[(line, write)].append(count)
    return any(max(counts) > min(counts) for counts in per_line.values())


def _between_blocks(run, race):
    """``(diagnosis, index, hint)`` for a race between blocks, naming the line of the access it is about.

    The poll's line for a plain-load poll (not the flag's store); for two blocks that "both
    write" a cell where one only reads it with an atomic (an atomic read counts as a write),
    the plain store's line and the advice to store it with an atomic.
    """
    accesses = [
        r
        for r in run.records
        if (r.launch, r.array, r.index) == (race.launch, race.array, race.index) and r.block in race.threads[:2]
    ]
    line = race.line
    kind = race.kind
    if kind == "plain-poll":
        line = next((r.line for r in accesses if not r.write and not r.atomic), line)
    if kind == "both-write":
        plain = [r for r in accesses if r.write and not r.atomic]
        if plain and any(r.atomic for r in accesses):
            kind, line = "plain-store", plain[0].line
    diagnosis, hint = _BLOCK_RACES[kind]
    return (
        diagnosis,
        None,
        hint.format(
            cell=f"{race.array}[{race.index}]",
            kernel=race.kernel,
            first=race.threads[0],
            second=race.threads[1],
            line=line,
        ),
    )


# Races between blocks, by kind (prefixsum.trace.Race.kind): the diagnosis and the hint.
_BLOCK_RACES = {
    "both-write": (
        "race",
        "{cell} in kernel '{kernel}': blocks {first} and {second} both write it. No barrier "
        "orders blocks: give each block its own cells.",
    ),
    "plain-store": (
        "race",
        "{cell} in kernel '{kernel}': a plain store (line {line}) writes it while another block "
        "reads it with an atomic (an atomic read is not a write). A plain store of a 64-bit state "
        "may "
        "be seen half written, and stays in the writer's cache: publish it with one atomic, "
        "cuda.atomic.exch, so that every SM sees all of the new state or none of it.",
    ),
    "plain-poll": (
        "plain-load-poll",
        "{cell} in kernel '{kernel}': block {second} polls it with plain loads (line "
        "{line}) while block {first} writes it. Compiled, a plain load in a loop may be "
        "read once and the loop never ends: poll with an atomic, e.g. "
        "cuda.atomic.add(flags, j, 0).",
    ),
    "unfenced": (
        "stale-read",
        "{cell} in kernel '{kernel}': block {second} waits for block {first}'s flag, then "
        "reads it (line {line}), but nothing kept the store ahead of the flag: it may read "
        "stale data. Call cuda.threadfence() between storing the data and raising the flag.",
    ),
    "read-write": (
        "race-between-blocks",
        "{cell} in kernel '{kernel}': block {first} and block {second} both touch "
        "it in one launch, one writing, and nothing orders them (read at line "
        "{line}). Blocks run in any order: publish the value behind a "
        "cuda.threadfence() and an atomic flag, and wait for the flag with an "
        "atomic, or carry it in a second launch.",
    ),
}


def _race_rank(race):
    """Races within a block first, then between blocks by how telling their kind is."""
    if not race.between_blocks:
        return 0
    return 1 + ("plain-poll", "unfenced", "read-write", "both-write").index(race.kind)


__all__ = ["race_diagnosis"]
