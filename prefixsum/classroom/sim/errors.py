"""The errors the simulator adds to numba's, and the messages that say where a kernel went wrong.

An exception raised in a simulated thread keeps its type and gets the context added below its
message: the kernel, the block and thread, and every kernel-source frame (file, line and the
line's text), for example::

    NegativeIndexError: negative index x[-1] into global array 'x' (float32, shape (8,)); ...
      in kernel 'shift', block (0, 0, 0) thread (0, 0, 0)
      at /home/me/kernels.py:12 in shift
          out[i] = x[i - 1]

Indices always print as ``block (3, 0, 0) thread (17, 0, 0)``; to sanitize them (nbval), match
``block \\(\\d+, \\d+, \\d+\\) thread \\(\\d+, \\d+, \\d+\\)``. An index outside an array raises
IndexError naming the array; an exception type that cannot be rebuilt with a message becomes
:class:`KernelError`.

Frames of the simulator itself, of numba, numpy and greenlet are not the student's: messages
skip them. The six kinds of messages built here: a refused launch, a negative index, an
exception in a thread, a barrier that not every thread of a block reaches, a warp-level
call that not every lane of its mask makes, and a deadlock (:class:`DeadlockError`: the
resident blocks, and where each of their threads waits or polls). Every error of a launch of
several blocks ends with the seed of the blocks' order (:func:`block_order`).
"""

import contextlib
import linecache
import os

import greenlet
import numba
import numpy as np

from ...core.hardware import WARP_SIZE
from . import numba_sim

PACKAGE_DIR = os.path.dirname(__file__) + os.sep
"""Every file of the simulator starts with this: frames from it are the simulator's."""

_LIBRARY_FILES = (
    PACKAGE_DIR,
    contextlib.__file__,
    os.path.dirname(numba.__file__) + os.sep,
    numba_sim.SIMULATOR_DIR,
    os.path.dirname(np.__file__) + os.sep,
    os.path.dirname(greenlet.__file__) + os.sep,
)


class SimError(Exception):
    """Base class of the errors this simulator adds to numba's."""


class NegativeIndexError(SimError, IndexError):
    """A negative index into a device array (see :func:`allow_negative_indices`)."""


class BarrierDivergenceError(SimError, RuntimeError):
    """Not every thread of a block reached the same barrier."""


class LaunchError(SimError, ValueError):
    """A launch configuration or resource use that a GPU refuses."""


class WarpDivergenceError(BarrierDivergenceError):
    """The lanes named in the mask of a warp-level call did not all make that call."""


class DeadlockError(SimError, RuntimeError):
    """Every thread of every resident block waits, and nothing any of them does can change that:
    a block polls memory that no running thread will write, or waits at a barrier for one that
    polls. On a GPU the kernel hangs."""


class PollLimitError(SimError, RuntimeError):
    """A thread read one cell of global memory and found it unchanged more often than the run's
    poll limit allows: it waits for a state that comes far later than the protocol needs, or
    never, while other blocks still change memory (so no :class:`DeadlockError` is raised)."""


class KernelError(SimError, RuntimeError):
    """An exception from a simulated thread whose own type cannot carry the added context."""


def dim(dims):
    """``(x, y, z)`` as messages print a block, a thread or a launch dimension."""
    return "(" + ", ".join(str(int(d)) for d in dims) + ")"


def runs(numbers):
    """Sorted ``numbers`` as runs, e.g. ``0..3, 7``."""
    found = []
    for k in numbers:
        if found and found[-1][1] == k - 1:
            found[-1][1] = k
        else:
            found.append([k, k])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in found)


def launch_refused(kernel, grid_dim, block_dim, problems):
    """The message of a launch that a GPU refuses for each of ``problems``."""
    return (
        f"kernel '{kernel}' cannot be launched with gridDim {dim(grid_dim)}, "
        f"blockDim {dim(block_dim)}: {'; '.join(problems)}. A GPU refuses this launch."
    )


def negative_index(shown, described, name, cell):
    """The message of a negative index ``shown`` into the array ``described``.

    ``cell`` is the element the index wraps to, as Python wraps it, or None when even the
    wrapped index is outside the array.
    """
    message = f"negative index {shown} into {described}; "
    if cell is None:
        return message + "it is outside the array even when wrapped as Python does"
    return message + (
        f"numba wraps it as Python does, to {name}[{', '.join(map(str, cell))}], on a "
        "GPU as well: that is almost never intended (call "
        "prefixsum.sim.allow_negative_indices() if it is)"
    )


def kernel_frame(frame):
    """The first frame from ``frame`` outwards that is not the simulator's: the kernel's code."""
    while frame.f_code.co_filename.startswith(PACKAGE_DIR):
        frame = frame.f_back
    return frame


def block_order(resident, seed):
    """The line added to every error of a launch of several blocks: how to run it again alike."""
    return (
        f"\n  (blocks ran {resident} at a time, in the order of seed {seed}: "
        f"prefixsum.sim.block_order_seed({seed}) repeats it)"
    )


def deadlock(kernel, blocks, waiting, describe_poll):
    """The message of a launch in which no resident thread can move on.

    Parameters
    ----------
    kernel : str
    blocks : list of scheduler.Block
        The resident blocks.
    waiting : list of tuple
        The blocks not dispatched yet (they wait for a resident block to retire).
    describe_poll : callable
        ``describe_poll(thread)``: what a polling thread reads, e.g. ``flags[3] (value 0)``.
    """
    lines = [
        f"deadlock in kernel '{kernel}': every thread of the {len(blocks)} resident "
        f"block{'s' * (len(blocks) > 1)} waits, at a barrier or polling global memory that no "
        "running thread will change (a GPU hangs here)"
    ]
    for block in blocks:
        lines.append(f"  block {dim(block.index)}:")
        polling = {}
        for t in block.threads:
            if not t.greenlet.dead and t.site[2] == "poll":
                polling.setdefault((t.site, describe_poll(t)), []).append(t)
        for (site, what), members in polling.items():
            code = site[0]
            at = _source(code.co_filename, members[0].line, code.co_name, "      ")
            lines.append(
                f"    {_thread_ranges(members)} ({len(members)} thread{'s' * (len(members) > 1)}) poll {what}{at}"
            )
        waiters = [t for t in block.threads if t.greenlet.dead or t.site[2] != "poll"]
        if waiters:
            lines.extend("  " + line for text in _whereabouts(waiters) for line in text.splitlines())
    if waiting:
        first = dim(waiting[0])
        more = f" and {len(waiting) - 1} more" if len(waiting) > 1 else ""
        lines.append(
            f"  not yet dispatched: block {first}{more}. A block is dispatched only when a "
            "resident one retires, so a block must never wait for one dispatched after it"
        )
    return "\n".join(lines)


def in_thread(exc, kernel, block, thread, note=""):
    """``exc`` with the kernel, block, thread and the student's source lines added to its message.

    Parameters
    ----------
    exc : Exception
        Raised in the simulated thread with index ``thread`` of block ``block``.
    kernel : str
        The kernel's name.
    block, thread : tuple

    Returns
    -------
    Exception
        Of ``exc``'s type when it can be built from a message, else a :class:`KernelError`.
    """
    frames = [
        (frame.f_code.co_filename, lineno, frame.f_code.co_name)
        for frame, lineno in _walk_tb(exc.__traceback__)
        if not frame.f_code.co_filename.startswith(_LIBRARY_FILES)
    ]
    context = (
        f"  in kernel '{kernel}', block {dim(block)} thread {dim(thread)}" + "".join(_source(*f) for f in frames) + note
    )
    message = f"{exc}\n{context}" if str(exc) else context
    new = None
    if not isinstance(exc, KeyError):  # KeyError prints its message as a repr
        with contextlib.suppress(Exception):
            new = type(exc)(message)
    if new is None:
        new = KernelError(f"{type(exc).__name__}: {message}")
        new.__cause__ = exc
    new.__suppress_context__ = True
    return new.with_traceback(exc.__traceback__)


def barrier_divergence(kernel, block, threads):
    """The message of a block whose ``threads`` do not all wait at one barrier."""
    lines = [
        f"barrier divergence in kernel '{kernel}', block {dim(block)}: every thread "
        "of a block must reach the same cuda.syncthreads() (a GPU hangs or computes garbage "
        "otherwise)"
    ]
    return "\n".join(lines + _whereabouts(threads))


def warp_divergence(kernel, block, thread, problem, warp):
    """The message of a warp-level call by ``thread`` that the lanes of its mask cannot meet.

    ``problem`` says why, ``warp`` is the caller's warp (its threads in lane order).
    """
    warp_index, lane = divmod(thread.linear, WARP_SIZE)
    lines = [
        f"warp divergence in kernel '{kernel}', block {dim(block)}, warp {warp_index}: "
        f"lane {lane} calls {thread.site[2]}() with mask 0x{thread.mask:08x}, and "
        f"{problem}. Every lane named in the mask of a warp-level call must make the same call "
        "with the same mask (a GPU hangs or returns undefined values otherwise)"
    ]
    return "\n".join(lines + _whereabouts(warp))


def _whereabouts(threads):
    """One line (plus source) per place where some of ``threads`` wait or have returned."""
    groups = {}
    for t in threads:
        groups.setdefault(None if t.greenlet.dead else (t.site, t.mask), []).append(t)
    lines = []
    for where, members in groups.items():
        who = f"  {_thread_ranges(members)} ({len(members)} thread{'s' * (len(members) > 1)})"
        if where is None:
            lines.append(f"{who} returned from the kernel")
            continue
        (code, _, kind), mask = where
        at = _source(code.co_filename, members[0].line, code.co_name, "    ")
        call = f"{kind}()" if mask is None else f"{kind}() with mask 0x{mask:08x}"
        lines.append(f"{who} wait at {call}{at}")
    return lines


def _walk_tb(tb):
    while tb is not None:
        yield tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next


def _source(filename, lineno, function, indent="  "):
    text = linecache.getline(filename, lineno).strip()
    at = f"\n{indent}at {filename}:{lineno} in {function}"
    return at + f"\n{indent}    {text}" if text else at


def _thread_ranges(threads, most=6):
    """``threads`` (in linear order) as runs, e.g. ``threads (0, 0, 0)..(7, 0, 0), (9, 0, 0)``."""
    found = []
    for t in threads:
        if found and found[-1][2] == t.linear - 1:
            found[-1][1:] = [t.index, t.linear]
        else:
            found.append([t.index, t.index, t.linear])
    parts = [dim(a) if a == b else f"{dim(a)}..{dim(b)}" for a, b, _ in found[:most]]
    if len(found) > most:
        parts.append(f"and {len(found) - most} more runs")
    word = "thread" if len(threads) == 1 else "threads"
    return f"{word} {', '.join(parts)}"
