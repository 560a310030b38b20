"""What the trace of a run shows: errors, races within and between blocks, uninitialized reads."""
import collections
import re

from .. import sim


def _hint_for_error(error):
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    if isinstance(error, TimeoutError):
        return "timeout", "Stopped at the time limit: does every loop advance (phase <<= 1, stride *= 2)?"
    if isinstance(error, sim.DeadlockError):
        polls = [re.sub(r" \(\d+ threads?\) poll ", " polls ", line.strip())
                 for line in str(error).splitlines() if " poll " in line]
        where = f" ({polls[0]})" if polls else ""
        return "deadlock", (f"Every resident block waits{where}: a block waits for a block that is not running. "
                            "Blocks start in blockIdx order, a few at a time: wait only for tiles taken earlier "
                            "(take tile ids from an atomic counter) and never for a block that starts later.")
    if isinstance(error, sim.BarrierDivergenceError):
        return "barrier-divergence", ("Not every thread reached the same cuda.syncthreads(): "
                                      "a barrier inside an if, or threads returning early. Move the barrier out of the branch.")
    if isinstance(error, IndexError):
        return "out-of-bounds", f"{text} Guard every access with i < n; x[i - 1] at i = 0 reads index -1."
    return "exception", f"{type(error).__name__}: {text}"


def _trace_diagnosis(run, *, cell, race_advice, uninitialized_advice):
    """``(diagnosis, index, hint)`` for what the trace of a run shows, or None when it shows nothing wrong.

    ``cell(array, index)`` names an element in the hints; the advice strings say what to fix.
    """
    if run.error is not None:
        diagnosis, hint = _hint_for_error(run.error)
        return diagnosis, None, hint
    races = run.races()
    if races:
        race = min(races, key=_race_rank)
        if race.between_blocks:
            return _BLOCK_RACES[race.kind][0], None, _BLOCK_RACES[race.kind][1].format(
                cell=f"{race.array}[{race.index}]", kernel=race.kernel, first=race.threads[0],
                second=race.threads[1], line=race.line)
        if not _spans_several_steps(run, race):
            race_advice = ("Both touch it in the same step of the loop, one reading what the other writes: a barrier "
                           "between steps cannot help. Check the index read against the invariant (a step should "
                           "read only cells no thread writes in that step), or read into a register, "
                           "cuda.syncthreads(), then write.")
        return "race", None, (f"{cell(race.array, race.index)} in kernel '{race.kernel}': threads {race.threads[0]} "
                              f"and {race.threads[1]} of block {race.block} touch it in one barrier phase. {race_advice}")
    uninitialized = run.uninitialized_reads()
    if uninitialized:
        r = uninitialized[0]
        return "uninitialized-read", None, (f"{cell(r.array, r.index)} is read in block {r.block} before any thread "
                                            f"wrote it: {uninitialized_advice}")
    return None


def _spans_several_steps(run, race):
    """Whether a thread of ``race``'s block ran a racing source line more than once in the race's phase.

    Then loop iterations ran without a barrier between them: the barrier between steps is
    missing. If every thread ran those lines once, the race lies inside one step, and adding a
    barrier between steps changes nothing: the index read is wrong (the ladder's partner
    without its ``- 1`` reads a cell its own phase writes), or the step must read, wait, write.
    """
    where = (race.launch, race.block, race.array, race.phase)
    lines = {r.line for r in run.records if (r.launch, r.block, r.array, r.phase) == where and r.index == race.index}
    runs = collections.Counter((r.thread, r.line, r.write) for r in run.records
                               if (r.launch, r.block, r.array, r.phase) == where and r.line in lines)
    # One execution of ``a[t] += a[p]`` reads twice and writes once.
    return any(count > (1 if write else 2) for (_, _, write), count in runs.items())


# Races between blocks, by kind (prefixsum.trace.Race.kind): the diagnosis and the hint.
_BLOCK_RACES = {
    "both-write": ("race", "{cell} in kernel '{kernel}': blocks {first} and {second} both write it. No barrier "
                           "orders blocks: give each block its own cells."),
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
