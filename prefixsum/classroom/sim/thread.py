"""A simulated CUDA thread: a greenlet, where it waits or polls, and its synchronisation clock."""

import greenlet

from . import numba_sim


class Thread:
    """A simulated CUDA thread: its greenlet, and where it waits when at a barrier or warp call.

    Parameters
    ----------
    run : callable
        The kernel's Python function.
    parent : greenlet.greenlet
        The scheduler's greenlet, which the thread switches back to when it waits or returns.
    index : tuple
        ``threadIdx`` as ``(x, y, z)``.
    linear : int
        The thread's place in its block in CUDA's linear order (x fastest).
    """

    __slots__ = (
        "greenlet",
        "index",
        "linear",
        "dim3",
        "phase",
        "site",
        "line",
        "value",
        "mask",
        "resume",
        "spin",
        "cycling",
    )

    def __init__(self, run, parent, index, linear):
        self.greenlet = greenlet.greenlet(run, parent)
        self.index = index
        self.linear = linear
        self.dim3 = numba_sim.Dim3(*index)
        self.phase = 0
        self.site = None  # (code, instruction offset, kind) of the barrier or warp call it waits at
        self.line = None
        self.value = None  # its operand: syncthreads_count/_and/_or's predicate, a warp call's
        self.mask = None  # a warp call's member mask (None at a block barrier and activemask)
        self.resume = None  # the arguments of its next switch: the kernel's, then a call's result
        self.spin = None  # its state when it last polled (see Launch.switch_point)
        self.cycling = False  # it polled twice in one state with no global change in between


def synchronize(threads):
    """Advance the phases of ``threads`` meeting at a barrier or ``syncwarp``, as a Lamport clock.

    All leave with one more than the highest phase among them, so an access made after the
    meeting has a higher phase than any access made before it by any of them: two threads that
    touch one address with equal phases are not ordered by any barrier or ``syncwarp``.
    """
    phase = max(t.phase for t in threads) + 1
    for t in threads:
        t.phase = phase
