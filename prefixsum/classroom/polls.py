"""Polls and progress: what of a run's memory accesses is waiting, and what is work.

A thread that reads a cell of global memory (a load or an atomic) and finds what it found there
the time before, in an array that some thread of the launch writes, is waiting for that thread:
its read is a *poll*. Reads of an array nothing in the launch has written (the input, a constant
table) are never polls: no thread can change what they find, however often they are re-read.
:class:`prefixsum.trace.record` counts polls per thread and cell with a :class:`Polls`, not as
steps, so that a tile that waits long for another block costs the run no steps, and a wait
longer than the limit stops the run with :class:`prefixsum.sim.PollLimitError`, naming the
thread, the cell, its line and what it found.

Every other access is a step, and a thread's first access to a global cell is *progress*: a run
cannot go on touching cells it has not touched before, so each one pays for
:data:`PROGRESS_CREDIT` further steps. A slow but right kernel (one thread per output summing
``x[0..i]``: O(n^2) reads, every one of a cell new to its thread) keeps its step budget; a loop
that goes round the same cells without end spends it.
"""

import numpy as np

PROGRESS_CREDIT = 4
"""Steps a thread's first access to a global cell adds to the run's budget: enough for the few
accesses around each new element in a loop (``out[i] += x[j]``: two of ``out[i]`` per ``x[j]``)."""

POLL, PROGRESS, STEP = "poll", "progress", "step"
_OWN_STORE = object()  # what a thread "found" in a cell it stored to: its next read is not a poll


class Polls:
    """The polls of one traced run.

    Parameters
    ----------
    limit : int or None
        The most polls of one thread on one cell; None for no limit.
    """

    def __init__(self, limit=None):
        self.limit = limit
        self.seen = {}  # (launch, block, thread, array, index) -> what that thread last found there
        self.waits = {}  # the same key -> its polls so far
        self.written = set()  # (launch, array) of the arrays some thread of the launch wrote

    def classify(self, cell, access, kernel):
        """What ``access`` (a :class:`prefixsum.sim.Access` to ``cell``, a key of :attr:`seen`, in a
        launch of ``kernel``) is: :data:`POLL`, :data:`PROGRESS` (the thread's first access to a
        global cell) or :data:`STEP`.

        Raises :class:`prefixsum.sim.PollLimitError` at the poll one past the limit.
        """
        if access.space != "global":
            return STEP
        kind = access.kind
        if kind != "read":
            self.written.add((cell[0], cell[3]))
        before = self.seen.get(cell, None)
        first = before is None
        self.seen[cell] = _OWN_STORE if kind == "write" else access.value
        if first:
            return PROGRESS
        if (
            kind == "write"
            or before is _OWN_STORE
            or (cell[0], cell[3]) not in self.written
            or not _same(before, access.value)
        ):
            return STEP
        self.waits[cell] = polls = self.waits.get(cell, 0) + 1
        if self.limit is not None and polls > self.limit:
            from .sim import PollLimitError  # the simulator is loaded by the run that calls this

            _, block, thread, array, index = cell
            raise PollLimitError(
                f"block {block} thread {thread} of kernel '{kernel}' polled {array}[{index}] (line {access.line}) "
                f"{polls} times, finding {shown(access.value)} each time: past the limit of {self.limit} polls of one "
                "wait"
            )
        return POLL


def _same(before, value):
    """Whether a cell still holds what a thread found there before (False for a value that refuses comparison)."""
    try:
        return bool(before == value)
    except (TypeError, ValueError):
        return False


def shown(value):
    """A polled value as a verdict prints it: a 64-bit tile state in hex, with its flag (the high half)."""
    if isinstance(value, (int, np.integer)) and int(value) > 0xFFFFFFFF:
        return f"{int(value):#018x} (flag {int(value) >> 32})"
    return repr(value.item() if isinstance(value, np.generic) else value)


__all__ = ["POLL", "PROGRESS", "PROGRESS_CREDIT", "Polls", "STEP", "shown"]
