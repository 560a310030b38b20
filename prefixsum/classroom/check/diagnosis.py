"""What the trace of a run shows: errors, races within and between blocks (their advice is
:mod:`prefixsum.classroom.check.race_diagnosis`'s), uninitialized reads."""

import collections
import os
import re

import numpy as np

from .. import hand_offs, polls, sim, stepping
from .race_diagnosis import race_diagnosis
from .results import not_attempted_hint


def _hint_for_error(error, run=None):
    """``(diagnosis, hint)`` for an error that stopped a run; ``run`` (its trace) names what a hung block waited for."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    if _not_attempted(error):
        return "not-attempted", not_attempted_hint(_todo(error))
    if isinstance(error, sim.PollLimitError):
        return "poll-limit", (run is not None and hand_offs.hang(run)) or _poll_limit_hint(text, run)
    if isinstance(error, TimeoutError):
        limit = "the limit of simulated steps" if "simulated steps" in text else "the time limit"
        spinning = None if run is None else (hand_offs.idle(run, _IDLE_CALLS) or _idle(run) or _polled(run))
        if spinning is not None:
            return "timeout", f"Stopped at {limit}: {spinning}"
        return "timeout", f"Stopped at {limit}: does every loop advance (phase <<= 1, stride *= 2)?"
    if isinstance(error, sim.DeadlockError):
        cause = None if run is None else (hand_offs.hang(run) or _polled(run))
        if cause is not None:
            return "deadlock", f"Every resident block waits: {cause}"
        polls = [
            re.sub(r" \(\d+ threads?\) poll ", " polls ", line.strip())
            for line in str(error).splitlines()
            if " poll " in line
        ]
        where = f" ({polls[0]})" if polls else ""
        return "deadlock", (
            f"Every resident block waits{where}: a block waits for a block that is not running. "
            "Blocks start in blockIdx order, a few at a time: wait only for tiles taken earlier "
            "(take tile ids from an atomic counter) and never for a block that starts later."
        )
    if isinstance(error, sim.WarpDivergenceError):
        return "barrier-divergence", _warp_divergence_hint(str(error))
    if isinstance(error, sim.BarrierDivergenceError):
        return "barrier-divergence", (
            "Not every thread reached the same cuda.syncthreads(): "
            "a barrier inside an if, or threads returning early. Move the barrier out of the "
            "branch."
        )
    if isinstance(error, IndexError):
        at = re.findall(r"\n\s+at [^\n]*:(\d+) in \w+", str(error))
        text += f" (line {at[-1]})" if at else ""
        blocked = None if run is None else hand_offs.negative_index_verdict(run, text)
        if blocked is not None:
            return "out-of-bounds", f"{text} {blocked}"
        if _in_package(error):
            return "out-of-bounds", (
                f"{text} This access is the package's, with an index computed from what your "
                "function returned: check your function's value at the smallest lane and tile "
                "(a rank counts the lanes before the caller, not the caller itself)."
            )
        if "negative index" in text:
            return "out-of-bounds", (
                f"{text} An index computed below 0: check the partner's formula (t - 2^d, "
                "t - phase, ...) at the smallest thread and level that use it."
            )
        return "out-of-bounds", f"{text} Guard every access with i < n, and check each index at the largest thread."
    if isinstance(error, OverflowError):
        return "exception", (
            f"OverflowError: {text}. A GPU never raises for an integer that does not fit: numba "
            "computes integers in 64 bits and keeps the low bits where a value is stored or cast to "
            "a narrower type. Which value does not fit its type here, and is that what you meant?"
        )
    return "exception", f"{type(error).__name__}: {text}"


def _not_attempted(error):
    """Whether ``error`` is (or came from) the ``NotImplementedError`` of a blank exercise."""
    while error is not None:
        if isinstance(error, NotImplementedError) or str(error).startswith("NotImplementedError: Exercise"):
            return True
        error = error.__cause__
    return False


def _todo(error):
    """What the blank exercise's ``NotImplementedError`` asks for, its first line."""
    text = str(error).splitlines()[0] if str(error) else ""
    return text.removeprefix("NotImplementedError: ").strip() or "write the missing code"


def _in_package(error):
    """Whether the innermost kernel frame of a simulated thread's ``error`` is the package's own code."""
    frames = re.findall(r"\n\s+at (.+?):\d+ in \w+", str(error))
    return bool(frames) and frames[-1].startswith(_PACKAGE_DIR) and not frames[-1].startswith(_CLASSROOM_DIR)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_CLASSROOM_DIR = os.path.join(_PACKAGE_DIR, "classroom") + os.sep


def _warp_divergence_hint(text):
    """The hint of lanes of one mask at different warp-level calls, naming the calls and their lines."""
    waits = re.findall(r"wait at (\w+)\(\) with mask \w+\n\s+at [^:\n]*:(\d+)", text)
    where = "; ".join(f"{call} at line {line}" for call, line in waits) or "different calls"
    return (
        f"The lanes of one warp wait at different warp-level calls ({where}): a shuffle inside an if, which "
        "only some lanes reach. Every lane named in the mask must make each call: shuffle in every lane, "
        "then choose what to keep."
    )


# A thread that made this many barriers and warp-level calls since its last memory access, when a
# run stopped at its step limit, was going round a loop that reads nothing.
_IDLE_CALLS = 64
# A thread that found one global cell unchanged this often, in the last accesses of a run that hung, was polling it.
_POLLS = 8
_LAST_ACCESSES = 4000


def _idle(run):
    """The thread of a stopped run that went round a loop of barriers or warp-level calls without a memory access, or
    None."""
    spinning = [(key, calls) for key, calls in run.idle.items() if calls[0] > _IDLE_CALLS]
    if not spinning:
        return None
    (_, block, thread), (calls, kind, line) = max(spinning, key=lambda item: item[1][0])
    return (
        f"thread {thread} of block {block} made {calls} barriers and warp-level calls ({kind} at line {line}) "
        "since its last memory access: a loop that reads and writes nothing goes on as long as its bound does "
        "not move. Does every loop advance (phase <<= 1, stride *= 2, end -= 32), and can its condition become "
        "false?"
    )


def _polled(run):
    """What a thread of a hung run polled: a global cell, of an array the launch writes, that it read again
    and again finding the same value, in the run's last accesses; None if none was polled.

    Reads of arrays nothing in the launch writes (the input, a constant table) are never polls.
    A block's tile is taken as the highest cell of that array it touched (a look-back publishes
    its own tile's state and reads its predecessors').
    """
    written = {(r.launch, r.array) for r in run.records if r.write}
    last = [r for r in run.records[-_LAST_ACCESSES:] if r.space == "global" and (r.launch, r.array) in written]
    touched = collections.defaultdict(set)
    for r in run.records:
        if r.space == "global":
            touched[(r.launch, r.block, r.array)].add(r.index)
    found, repeats = {}, collections.Counter()
    for r in last:
        key = (r.launch, r.block, r.thread, r.array, r.index)
        if (not r.write or r.atomic) and key in found and stepping.same(found[key], _plain(r.value)):
            repeats[key + (r.line,)] += 1
        found[key] = None if r.write and not r.atomic else _plain(r.value)
    for (launch, block, _, array, index, line), count in repeats.most_common():
        if count < _POLLS:
            return None
        own = max(touched[(launch, block, array)])
        if index == own:
            continue  # its own state, not a wait
        tile = f" (tile {own})" if own > index else ""
        value = next(
            _plain(r.value)
            for r in reversed(last)
            if (r.launch, r.block, r.array, r.index) == (launch, block, array, index)
        )
        return (
            f"block {block}{tile} polls {array}[{index}] (line {line}), {count} times in its last accesses, "
            "finding "
            f"{polls.shown(value)} each time, and the state it waits for never comes. Is it published on every "
            "path "
            "(an AGGREGATE first, the PREFIX at the end, by every tile), and by a block that is running? Blocks "
            "start in blockIdx order: wait only for tiles taken earlier, from an atomic counter."
        )
    return None


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


_POLL_LIMIT = re.compile(
    r"block (\d+) thread \d+ of kernel '[^']*' polled (\w+)\[(\d+)\] \(line (\d+)\) (\d+) times, "
    r"finding (.*) each time: past the limit of (\d+) polls"
)


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
    waiter = (
        f"tile {own} (block {block})"
        if own > index
        else f"tile {index + 1} (block {block}, which has published no state of its own yet)"
    )
    looked = hand_offs.look(run) if run is not None and array == hand_offs.STATES else None
    if looked is not None:
        word = next((a.word for a in reversed(looked.accesses) if a.block == block and a.index == index), None)
        if word is not None:
            state = hand_offs.describe(word, looked.published)
    return (
        f"{waiter} polled {array}[{index}] (line {line}) {count} times and found {state} each time: a wait longer "
        f"than the {limit} polls the check allows, for a state that comes late or never. Is every state published "
        "on every path (an AGGREGATE first, the PREFIX at the end, by every tile), and does the wait end at any "
        "state of this call that lets the tile go on, an AGGREGATE as well as a PREFIX?"
    )


def wrong_result_hint(run):
    """What the trace of a run whose result is wrong shows about why: a hand-off or look-back gone
    wrong, named with the values seen (:func:`prefixsum.classroom.hand_offs.wrong_sum`); else None."""
    return None if run is None else hand_offs.wrong_sum(run)


def _trace_diagnosis(run, *, cell, uninitialized_advice):
    """``(diagnosis, index, hint)`` for what the trace of a run shows, or None when it shows nothing wrong.

    ``cell(array, index)`` names an element in the hints; ``uninitialized_advice`` says what to fix
    for a read of an unwritten cell (a race's advice comes from the trace:
    :func:`prefixsum.classroom.check.race_diagnosis.race_diagnosis`).
    """
    if run.error is not None:
        diagnosis, hint = _hint_for_error(run.error, run)
        return diagnosis, None, hint
    races = run.races()
    if races:
        return race_diagnosis(run, races, cell)
    uninitialized = run.uninitialized_reads()
    if uninitialized:
        r = uninitialized[0]
        return (
            "uninitialized-read",
            None,
            (f"{cell(r.array, r.index)} is read in block {r.block} before any thread wrote it: {uninitialized_advice}"),
        )
    return None


_BANDS = {0: "lower band a", 1: "diagonal b", 2: "upper band c", 3: "right-hand side d"}


def band_hint(run):
    """For a tridiagonal solver whose x is wrong: the rows a thread solves alone in a sweep, when the
    sweep never reads one of their coefficients (a shared array of rows with an axis of 4: a, b,
    c, d); else None.

    The sweep is the phase of the last launch in which the fewest threads read the rows (the others
    wait: one thread per system of rows, as a Thomas sweep after PCR steps).
    """
    if run is None or not run.records:
        return None
    launch = run.records[-1].launch
    readers = collections.defaultdict(set)
    for r in run.records:
        if r.launch == launch and r.space == "shared" and not r.write:
            readers[(r.phase, r.array)].add((r.block, r.thread))
    if not readers:
        return None
    (phase, array), threads = min(readers.items(), key=lambda item: (len(item[1]), -item[0][0]))
    shape = run.shapes.get((launch, "shared", array), ())
    if 4 not in shape or len(threads) == max(len(t) for t in readers.values()):
        return None
    axis = shape.index(4)
    read = {
        np.unravel_index(r.index, shape)[axis]
        for r in run.records
        if (r.launch, r.space, r.array, r.phase) == (launch, "shared", array, phase) and not r.write
    }
    missing = [k for k in _BANDS if k not in read]
    if not missing:
        return None
    block, thread = min(threads)
    lines = sorted(
        {
            r.line
            for r in run.records
            if (r.launch, r.array, r.phase, r.block, r.thread) == (launch, array, phase, block, thread)
        }
    )
    return (
        f"The rows that one thread solves alone (thread {thread} of block {block}, lines {lines[0]} to "
        f"{lines[-1]}) "
        f"never read their {', '.join(_BANDS[k] for k in missing)} ({array}[..., {missing[0]}, ...] along its axis "
        "of coefficients): the sweep down must eliminate each row's lower band a_j x_(j - step) with the row "
        "above, pivot = b_j - a_j c'_(j - step) and d'_j = (d_j - a_j d'_(j - step)) / pivot, and the sweep up "
        "then sets x_j = d'_j - c'_j x_(j + step)."
    )


def written_nan(run, array, index):
    """For a NaN in the output ``array[index]`` (flat): where it came from, if the run wrote it there
    computed; None if it was never written (the poison of an unwritten cell is NaN as well)."""
    if run is None:
        return None
    written = [r for r in run.records if r.array == array and r.index == index and r.write and r.space == "global"]
    if not written or not _not_finite(written[-1].value):
        return None
    first = next(r for r in run.records if r.write and _not_finite(r.value))
    return (
        f"was written, as NaN (line {written[-1].line}): computed, not left unwritten. The run's first NaN or "
        f"inf was stored to {first.array}[{first.index}] (line {first.line}, thread {first.thread} of block "
        f"{first.block}): a division by zero, or 0 times inf, upstream."
    )


def _not_finite(value):
    try:
        return not np.isfinite(value)
    except TypeError:
        return False
