"""Polls: the reads of a wait, counted apart from a run's steps, with a limit of their own.

A thread that reads a cell of global memory (a load or an atomic) and finds what it found there
the time before is waiting: its read is a *poll*. :class:`prefixsum.trace.record` counts polls
per thread and cell with a :class:`Polls`, not as steps, so that a tile that waits long for
another block costs the run no steps, and a wait longer than the limit stops the run with
:class:`prefixsum.sim.PollLimitError`, naming the thread, the cell, its line and what it found.
"""
import numpy as np

_UNSEEN = object()


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

    def count(self, cell, access, kernel):
        """Whether ``access`` (a :class:`prefixsum.sim.Access` to ``cell`` in a launch of ``kernel``) is a poll.

        Raises :class:`prefixsum.sim.PollLimitError` at the poll one past the limit.
        """
        if access.space != "global":
            return False
        before = self.seen.get(cell, _UNSEEN)
        self.seen[cell] = access.value
        if access.kind == "write" or not _same(before, access.value):
            return False
        self.waits[cell] = polls = self.waits.get(cell, 0) + 1
        if self.limit is not None and polls > self.limit:
            from .sim import PollLimitError  # the simulator is loaded by the run that calls this

            _, block, thread, array, index = cell
            raise PollLimitError(
                f"block {block} thread {thread} of kernel '{kernel}' polled {array}[{index}] (line {access.line}) "
                f"{polls} times, finding {_shown(access.value)} each time: past the limit of {self.limit} polls of one wait")
        return True


def _same(before, value):
    """Whether a cell still holds what a thread found there before (False for a value that refuses comparison)."""
    if before is _UNSEEN:
        return False
    try:
        return bool(before == value)
    except (TypeError, ValueError):
        return False


def _shown(value):
    """A polled value as a verdict prints it: a 64-bit tile state in hex, with its flag (the high half)."""
    if isinstance(value, (int, np.integer)) and int(value) > 0xFFFFFFFF:
        return f"{int(value):#018x} (flag {int(value) >> 32})"
    return repr(value.item() if isinstance(value, np.generic) else value)


__all__ = ["Polls"]
