"""What the trace of a run shows: errors, races within and between blocks, uninitialized reads."""
import collections
import re

from .. import sim


def _hint_for_error(error, run=None):
    """``(diagnosis, hint)`` for an error that stopped a run; ``run`` (its trace) names what a hung block polled."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    if isinstance(error, sim.PollLimitError):
        return "poll-limit", _poll_limit_hint(text, run)
    polled = None if run is None else _polled(run)
    if isinstance(error, TimeoutError):
        limit = "the limit of simulated steps" if "simulated steps" in text else "the time limit"
        if polled is not None:
            return "timeout", f"Stopped at {limit}: {polled}"
        return "timeout", f"Stopped at {limit}: does every loop advance (phase <<= 1, stride *= 2)?"
    if isinstance(error, sim.DeadlockError):
        if polled is not None:
            return "deadlock", f"Every resident block waits: {polled}"
        polls = [re.sub(r" \(\d+ threads?\) poll ", " polls ", line.strip())
                 for line in str(error).splitlines() if " poll " in line]
        where = f" ({polls[0]})" if polls else ""
        return "deadlock", (f"Every resident block waits{where}: a block waits for a block that is not running. "
                            "Blocks start in blockIdx order, a few at a time: wait only for tiles taken earlier "
                            "(take tile ids from an atomic counter) and never for a block that starts later.")
    if isinstance(error, sim.WarpDivergenceError):
        return "barrier-divergence", _warp_divergence_hint(str(error))
    if isinstance(error, sim.BarrierDivergenceError):
        return "barrier-divergence", ("Not every thread reached the same cuda.syncthreads(): "
                                      "a barrier inside an if, or threads returning early. Move the barrier out of the branch.")
    if isinstance(error, IndexError):
        at = re.findall(r"\n\s+at [^\n]*:(\d+) in \w+", str(error))
        text += f" (line {at[-1]})" if at else ""
        if "negative index" in text:
            return "out-of-bounds", (f"{text} An index computed below 0: check the partner's formula (t - 2^d, "
                                     "t - phase, ...) at the smallest thread and level that use it.")
        return "out-of-bounds", f"{text} Guard every access with i < n, and check each index at the largest thread."
    return "exception", f"{type(error).__name__}: {text}"


def _warp_divergence_hint(text):
    """The hint of lanes of one mask at different warp-level calls, naming the calls and their lines."""
    waits = re.findall(r"wait at (\w+)\(\) with mask \w+\n\s+at [^:\n]*:(\d+)", text)
    where = "; ".join(f"{call} at line {line}" for call, line in waits) or "different calls"
    return (f"The lanes of one warp wait at different warp-level calls ({where}): a shuffle inside an if, which "
            "only some lanes reach. Every lane named in the mask must make each call: shuffle in every lane, "
            "then choose what to keep.")


# A block that read one global cell this often, in the last accesses of a run that hung, was polling it.
_POLLS = 8
_LAST_ACCESSES = 4000


def _polled(run):
    """What the blocks of a hung run waited for: the cell polled most, by whom, at which line; None if none was polled.

    A block's tile is taken as the highest cell of that array it touched (a look-back publishes
    its own tile's state and reads its predecessors').
    """
    last = [r for r in run.records[-_LAST_ACCESSES:] if r.space == "global"]
    touched = collections.defaultdict(set)
    for r in run.records:
        if r.space == "global":
            touched[(r.launch, r.block, r.array)].add(r.index)
    polls = collections.Counter((r.launch, r.block, r.array, r.index, r.line) for r in last
                                if not r.write or r.atomic)
    for (launch, block, array, index, line), count in polls.most_common():
        if count < _POLLS:
            return None
        own = max(touched[(launch, block, array)])
        if index == own:
            continue  # its own state, not a wait
        tile = f" (tile {own})" if own > index else ""
        return (f"block {block}{tile} polls {array}[{index}] (line {line}), {count} times in its last accesses, and "
                f"the state it waits for never comes. Is it published on every path (an AGGREGATE first, the PREFIX "
                "at the end, by every tile), and by a block that is running? Blocks start in blockIdx order: wait "
                "only for tiles taken earlier, from an atomic counter.")
    return None


_POLL_LIMIT = re.compile(r"block (\d+) thread \d+ of kernel '[^']*' polled (\w+)\[(\d+)\] \(line (\d+)\) (\d+) times, "
                         r"finding (.*) each time: past the limit of (\d+) polls")


def _poll_limit_hint(text, run):
    """The verdict of a run stopped by its poll limit: the tile that waits, the state it polls, where."""
    found = _POLL_LIMIT.match(text)
    if found is None:
        return text
    block, array, index, line, count, state, limit = found.groups()
    block, index = int(block), int(index)
    # A tile reads only its predecessors' states: its own is the highest it touched, or, before
    # it published anything, above every state it read.
    own = max((r.index for r in run.records if r.block == block and r.array == array), default=index) if run else index
    waiter = (f"tile {own} (block {block})" if own > index
              else f"tile {index + 1} (block {block}, which has published no state of its own yet)")
    return (f"{waiter} polled {array}[{index}] (line {line}) {count} times and found {state} each time: a wait longer "
            f"than the {limit} polls the check allows, for a state that comes late or never. Is every state published "
            "on every path (an AGGREGATE first, the PREFIX at the end, by every tile), and does the wait end at any "
            "state of this call that lets the tile go on, an AGGREGATE as well as a PREFIX?")


def _trace_diagnosis(run, *, cell, uninitialized_advice):
    """``(diagnosis, index, hint)`` for what the trace of a run shows, or None when it shows nothing wrong.

    ``cell(array, index)`` names an element in the hints; ``uninitialized_advice`` says what to fix
    for a read of an unwritten cell (a race's advice comes from the trace: :func:`_within_block_advice`).
    """
    if run.error is not None:
        diagnosis, hint = _hint_for_error(run.error, run)
        return diagnosis, None, hint
    races = run.races()
    if races:
        race = min(races, key=_race_rank)
        if race.between_blocks:
            return _between_blocks(run, race)
        return "race", None, (f"{cell(race.array, race.index)} in kernel '{race.kernel}': threads {race.threads[0]} "
                              f"and {race.threads[1]} of block {race.block} touch it in one barrier phase. "
                              f"{_within_block_advice(run, race)}")
    uninitialized = run.uninitialized_reads()
    if uninitialized:
        r = uninitialized[0]
        return "uninitialized-read", None, (f"{cell(r.array, r.index)} is read in block {r.block} before any thread "
                                            f"wrote it: {uninitialized_advice}")
    return None


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
        return (f"Both write it (line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}): two threads store "
                "to one place, and no barrier can fix that. Each thread must write only its own cells (its own "
                "rows, its own place in the output): check the index of the store.")
    where = (race.launch, race.block, race.array, race.phase)
    walk = collections.defaultdict(set)
    for r in run.records:
        if (r.launch, r.block, r.array, r.phase) == where and r.thread in race.threads[:2]:
            walk[r.thread].add(r.index)
    if min(len(cells) for cells in walk.values()) > _OWN_CELLS:
        return (f"Threads {race.threads[0]} and {race.threads[1]} each walk through {min(map(len, walk.values()))} or "
                "more cells in this phase, and their walks meet here: each thread must touch only its own cells (its "
                "own rows: first, first + step, ...), never a cell another thread works on.")
    wrapped = _read_after_own_store(run, race)
    if wrapped is not None:
        w, r = wrapped
        return (f"Thread {r.thread} stores it (line {w.line}) and reads it again (line {r.line}) in the next "
                "iteration of the loop, with no barrier between, while another thread touches it: a "
                "cuda.syncthreads() is missing after the store, so that every thread has stored before any "
                "thread reads in the next step.")
    if _spans_several_steps(run, race):
        return ("Its thread went round the loop more than once in this phase: a cuda.syncthreads() is missing "
                "after the store, so that every thread has stored before any thread reads in the next step.")
    return ("Both touch it in the same step of the loop, one reading what the other writes: a barrier between "
            "steps cannot help. Check the index read against the invariant (a step should read only cells no "
            "thread writes in that step), or read into a register, cuda.syncthreads(), then write.")


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
    """Whether a thread of ``race``'s block ran a racing source line more often than another thread, in the race's phase.

    Then loop iterations ran without a barrier between them: the barrier between steps is
    missing (the ladder without its barrier: ``a[t] += a[p]`` twice in one phase).
    """
    where = (race.launch, race.block, race.array, race.phase)
    lines = {r.line for r in run.records if (r.launch, r.block, r.array, r.phase) == where and r.index == race.index}
    runs = collections.Counter((r.line, r.write, r.thread) for r in run.records
                               if (r.launch, r.block, r.array, r.phase) == where and r.line in lines)
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
    accesses = [r for r in run.records if (r.launch, r.array, r.index) == (race.launch, race.array, race.index)
                and r.block in race.threads[:2]]
    line = race.line
    kind = race.kind
    if kind == "plain-poll":
        line = next((r.line for r in accesses if not r.write and not r.atomic), line)
    if kind == "both-write":
        plain = [r for r in accesses if r.write and not r.atomic]
        if plain and any(r.atomic for r in accesses):
            kind, line = "plain-store", plain[0].line
    diagnosis, hint = _BLOCK_RACES[kind]
    return diagnosis, None, hint.format(cell=f"{race.array}[{race.index}]", kernel=race.kernel, first=race.threads[0],
                                        second=race.threads[1], line=line)


# Races between blocks, by kind (prefixsum.trace.Race.kind): the diagnosis and the hint.
_BLOCK_RACES = {
    "both-write": ("race", "{cell} in kernel '{kernel}': blocks {first} and {second} both write it. No barrier "
                           "orders blocks: give each block its own cells."),
    "plain-store": ("race", "{cell} in kernel '{kernel}': a plain store (line {line}) writes it while another block "
                            "reads it with an atomic (an atomic read is not a write). A plain store of a 64-bit state may "
                            "be seen half written, and stays in the writer's cache: publish it with one atomic, "
                            "cuda.atomic.exch, so that every SM sees all of the new state or none of it."),
    "plain-poll": ("plain-load-poll", "{cell} in kernel '{kernel}': block {second} polls it with plain loads (line "
                                      "{line}) while block {first} writes it. Compiled, a plain load in a loop may be "
                                      "read once and the loop never ends: poll with an atomic, e.g. "
                                      "cuda.atomic.add(flags, j, 0)."),
    "unfenced": ("stale-read", "{cell} in kernel '{kernel}': block {second} waits for block {first}'s flag, then "
                               "reads it (line {line}), but nothing kept the store ahead of the flag: it may read "
                               "stale data. Call cuda.threadfence() between storing the data and raising the flag."),
    "read-write": ("race-between-blocks", "{cell} in kernel '{kernel}': block {first} and block {second} both touch "
                                          "it in one launch, one writing, and nothing orders them (read at line "
                                          "{line}). Blocks run in any order: publish the value behind a "
                                          "cuda.threadfence() and an atomic flag, and wait for the flag with an "
                                          "atomic, or carry it in a second launch."),
}


def _race_rank(race):
    """Races within a block first, then between blocks by how telling their kind is."""
    if not race.between_blocks:
        return 0
    return 1 + ("plain-poll", "unfenced", "read-write", "both-write").index(race.kind)
