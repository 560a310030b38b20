"""A student's attempts at chapters 01, 03, 07, 10 and 11, each with the verdict its check must give.

The named mistakes of :mod:`prefixsum.classroom.mistakes` are the lessons' own; these are what a
new user wrote when working through the chapters on a laptop, kept where the checker's verdict
was wrong or misleading: right answers written as numba allows (a ballot kept as the int32 numba
returns, a lane mask built by hand in int32, a flag shifted without a cast) that the simulator
failed, and mistakes whose verdict named another bug (chapter 10's hand-offs, a missing barrier
after a load, a PCR step with zero rows outside the system, a Thomas sweep without the lower band,
a rank that counts its own lane). Each is made from the exercise cell's source by replacing
text, as a :class:`~prefixsum.classroom.mistakes.Mistake`. ``tests/test_attempts.py`` runs every
one as the grader runs it; ``notebooks/verdicts.md`` lists their verdicts, as :func:`main`
prints them::

    python -m prefixsum.classroom.attempts notebooks/[01][0-9]_*.ipynb
"""

import time

from .mistakes import Mistake


def _attempt(exercise, name, verdict, *edits, avoid=()):
    return Mistake(exercise, name, tuple(edits), verdict, tuple(avoid))


# A student's code as typed, one attempt a row: the formatter would spread each row over a dozen lines.
# fmt: off
_LOOK_PUBLISH = "publish(status, values, tile, published + (PREFIX if tile == 0 else AGGREGATE), aggregate)"
_WAIT = "            while flag < published:\n                flag, value = peek(status, values, p)\n"
_PACKED = "(np.uint64(flag) << np.uint64(32)) | np.uint64(to_bits(value))"
_DOWN_BAND = ("pivot = rows[1, j] - rows[0, j] * cp", "pivot = rows[1, j]")

RIGHT = (
    _attempt("11.warp-rank", "the ballot kept as numba returns it, an int32", "PASS",
             ("ballot = np.uint32(cuda.ballot_sync(0xFFFFFFFF, kept))", "ballot = cuda.ballot_sync(0xFFFFFFFF, kept)")),
    _attempt("11.warp-rank", "the lanes below the caller as np.int32(1 << lane) - 1", "PASS",
             ("cuda.popc(ballot & cuda.lanemask_lt())", "cuda.popc(ballot & (np.int32(1 << cuda.laneid) - 1))")),
    _attempt("11.digit-rank", "the peers kept as numba returns them, an int32", "PASS",
             ("peers = np.uint32(cuda.match_any_sync(0xFFFFFFFF, digit))", "peers = cuda.match_any_sync(0xFFFFFFFF, "
                                                                           "digit)")),
    _attempt("10.publish", "the flag shifted without a cast: (flag << 32) | to_bits(value)", "PASS",
             (_PACKED, "(flag << 32) | to_bits(value)")),
    _attempt("10.publish", "the flag as an int32 shifted by 32 (numba shifts it in 64 bits)", "PASS",
             (_PACKED, "(np.int32(flag) << 32) | to_bits(value)")),
)
"""Right answers: each must pass its check."""

WRONG = (
    _attempt("01.ladder-max", "no barrier after the load", "missing after the load",
             ("int32(INT32_MIN)\n    cuda.syncthreads()\n", "int32(INT32_MIN)\n"), avoid=("cannot help",)),
    _attempt("07.pcr-step", "a zero row outside the system", "identity row (0, 1, 0, 0)",
             ("0.0, 1.0, 0.0, 0.0", "0.0, 0.0, 0.0, 0.0"), avoid=("was never written",)),
    _attempt("07.thomas-sweep", "the sweep down ignores the lower band", "lower band",
             _DOWN_BAND, ("dp = (rows[3, j] - rows[0, j] * dp) / pivot", "dp = rows[3, j] / pivot"),
             avoid=("k1 = a_i / b_(i-s)", "Powers of two")),
    _attempt("10.chained-handoff", "the hand-off by blockIdx.x", "not blockIdx order",
             ("flags, b - 1, 0", "flags, cuda.blockIdx.x - 1, 0"), ("before = prefixes[b - 1]", "before = prefixes[cuda.blockIdx.x - 1]"),
             avoid=("take tile ids from an atomic counter",)),
    _attempt("10.lookback-loop", "every tile's aggregate flagged PREFIX", "published its first state as a PREFIX",
             (_LOOK_PUBLISH, "publish(status, values, tile, published + PREFIX, aggregate)"), avoid=("carry",)),
    _attempt("10.lookback-loop", "the window off by one", "The window is off by one",
             ("p = end - 32 + lane", "p = end - 31 + lane"), avoid=("carry",)),
    _attempt("10.lookback-loop", "no epoch: the bare flags", "without the epoch",
             ("published = np.uint32(2 * epoch)", "published = np.uint32(0)"), avoid=("carry",)),
    _attempt("10.lookback-loop", "tile 0 never publishes", "tile 0 never published",
             ("    if lane == 0:\n        publish(", "    if lane == 0 and tile > 0:\n        publish("),
             avoid=("take tile ids from an atomic counter",)),
    _attempt("10.lookback-loop", "the walk ends only at a PREFIX, and none below tile 0", "moved below tile 0",
             ("    while end > 0:\n", "    while True:\n"),
             ("flag, value = published + PREFIX, np.float32(0)", "flag, value = published + AGGREGATE, np.float32(0)"),
             avoid=("does every loop advance",)),
    _attempt("10.lookback-loop", "no wait for a state not yet published", "went on with it", (_WAIT, ""), avoid=("carry",)),
    _attempt("10.publish", "the halves of the word swapped", "in the low half",
             (_PACKED, "(np.uint64(to_bits(value)) << np.uint64(32)) | np.uint64(flag)"), avoid=("carry",)),
    _attempt("10.publish", "cuda.atomic.add to publish", "not put in its place",
             ("cuda.atomic.exch(status, tile, ", "cuda.atomic.add(status, tile, "), avoid=("carry",)),
    _attempt("10.publish", "the flag shifted in 32 bits: np.uint32(flag << 32)", "the flag was lost",
             ("(np.uint64(flag) << np.uint64(32))", "np.uint64(np.uint32(flag << 32))"),
             avoid=("take tile ids from an atomic counter",)),
    _attempt("11.warp-rank", "the caller counted in its own rank", "a rank counts the lanes before the caller",
             ("cuda.popc(ballot & cuda.lanemask_lt())", "cuda.popc(ballot & ((cuda.lanemask_lt() << 1) | 1))"),
             avoid=("Guard every access with i < n",)),
)
"""Mistakes: each must fail its check with the words of its ``verdict`` and none of ``avoid``."""
# fmt: on

SECONDS = 60
"""The longest a check cell may run on one of :data:`WRONG` (on one core of an idle machine)."""


def main(paths):
    """Print the rows of ``notebooks/verdicts.md``: every attempt of the exercises of the notebooks at
    ``paths``, graded as the grader's check runs it, with the check cell's CPU seconds."""
    import resource

    from . import mutation

    exercises = {e.id: e for e in mutation.exercises(paths)}
    for attempt in RIGHT + WRONG:
        exercise = exercises.get(attempt.exercise)
        if exercise is None:
            continue
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        _, output = mutation.isolated_verdict(exercise, attempt.source(exercise.source), timeout=20, wall=600)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        name = attempt.name.replace("|", "\\|")
        print(
            f"| {attempt.exercise} | {name} | {_shown(output)} | {cpu:.0f} s "
            f"({time.monotonic() - started:.0f} s wall) |",
            flush=True,
        )


_SHOWN = 600  # characters of a verdict in the table: enough for the words that name the bug


def _shown(output):
    """A check's output as a cell of the table: its first FAIL line without ``FAIL name:``, else every line."""
    lines = output.strip().splitlines() or ["(no output)"]
    failed = next((line for line in lines if line.startswith("FAIL")), None)
    text = failed.split(": ", 1)[1] if failed else "; ".join(lines)
    text = text.replace("|", "\\|")
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


__all__ = ["RIGHT", "SECONDS", "WRONG", "main"]

if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
