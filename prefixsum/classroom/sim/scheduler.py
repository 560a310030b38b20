"""How a launch runs: a few blocks resident at once, their threads as greenlets, taking turns.

**The device model.** A launch has at most ``resident_blocks()`` blocks resident at once (4 unless set:
:mod:`.settings`), like the few blocks that fit on a GPU's SMs at a time. Blocks are dispatched in CUDA's linear order
(x fastest), as a GPU dispatches them: first as many as fit, then one more each time a resident block retires (all its
threads returned). The resident blocks take turns in an order that is *not* blockIdx order: each round, a random
permutation of them, each for 1 to :data:`PHASES_PER_TURN` barrier phases, all drawn from a generator seeded with
``block_order_seed()`` (0 unless set), so that a run gives the same results, the same errors and the same messages every
time, and another seed gives another interleaving. Every error of a launch of several blocks ends with the seed. With
``resident_blocks(1)`` the blocks run one after another, as in numba's stock simulator.

**A block's turn.** Each thread of a block is a greenlet on the launching OS thread. In each
phase of its block's turn every thread that can run does, in linear order, until it waits at a
barrier (``cuda.syncthreads`` and its ``_count``/``_and``/``_or`` variants), waits at a warp-level call
(``shfl_*_sync``, ``syncwarp``, votes; :mod:`.warp`) until the lanes its mask names have all
arrived there, or *yields*: at an atomic operation on global memory, a ``cuda.threadfence()``,
or a global read after a run of reads long enough to be a loop (a poll, :mod:`.memory`); a
yielding thread runs on in the block's next turn (a yield ends the turn). When every live thread
of the block waits at the same barrier, all are released. Two threads of a block never interleave
between two switch points, so a data race inside one barrier phase is not randomly exposed;
the access hook (:mod:`.hooks`) lets a tracer find such races instead. What one block sees of
another's stores, and when, is :mod:`.memory`'s.

**Errors.** A barrier that not every thread of the block reaches -- some threads have returned
while others wait, or threads wait at different ``syncthreads`` call sites -- raises
:class:`BarrierDivergenceError`, listing which threads are where. A round in which no thread of
any resident block moves on -- each waits at a barrier or warp call that cannot be released, or
polls and finds the state it found at its previous poll, no global memory having changed since
-- raises :class:`DeadlockError` naming the blocks, the threads, what they poll and the source
lines, and the blocks not yet dispatched. Overflow in numpy scalar arithmetic wraps silently, as
GPU arithmetic does: numpy's RuntimeWarning is off inside simulated threads.

One launch runs at a time, as in numba's simulator.
"""

import contextlib
import contextvars
import gc
import random
import threading

import greenlet

from ...core.arithmetic import quiet_arithmetic
from . import numba_sim
from .allocation import Shared
from .errors import (
    PACKAGE_DIR,
    BarrierDivergenceError,
    DeadlockError,
    SimError,
    barrier_divergence,
    block_order,
    deadlock,
    in_thread,
)
from .hooks import Fence, Wait
from .memory import Array, global_arrays, traced_arrays
from .module import Module
from .numba_typing import numba_typed
from .settings import settings
from .thread import Thread, synchronize
from .warp import WARP_CALLS, Rendezvous

# What each kind of block barrier returns to the threads, from their operands.
_REDUCE_BARRIER = {
    "syncthreads": lambda values: None,
    "syncthreads_count": lambda values: sum(1 for v in values if v),
    "syncthreads_and": lambda values: int(all(values)),
    "syncthreads_or": lambda values: int(any(values)),
    "grid.sync": lambda values: None,
}


_GC_THRESHOLD = 20_000  # allocations between two young-generation collections during a launch

PHASES_PER_TURN = 4
"""A resident block's turn lasts 1 to this many barrier phases (drawn from the seeded generator),
unless a thread of the block yields: blocks interleave at barriers, and running a block for a few
phases on end keeps the simulator fast."""

# The kinds of ``Thread.site`` of a thread that yielded (Launch.switch_point): it runs on.
_SWITCH_POINTS = ("poll", "yield")


def cuda_order(dims):
    """All (x, y, z) points of ``dims`` in CUDA's linear order (x fastest)."""
    nx, ny, nz = dims
    return [(x, y, z) for z in range(nz) for y in range(ny) for x in range(nx)]


_running = threading.local()  # .launch: the launch running on this OS thread (its greenlets run there)


def running_launch():
    """The simulated launch running on the calling host thread, or None."""
    return getattr(_running, "launch", None)


def in_launch():
    """Whether a simulated launch is running now on this host thread (a call from kernel code,
    not from the host)."""
    return running_launch() is not None


class Block:
    """A resident block: its threads, those to run in its next turn, its shared memory, and its
    global stores not yet published to the other blocks (:mod:`.memory`)."""

    __slots__ = ("index", "dim3", "threads", "ready", "shared", "rendezvous", "unpublished")

    def __init__(self, index, threads, shared, rendezvous):
        self.index = index
        self.dim3 = numba_sim.Dim3(*index)
        self.threads = threads
        self.ready = threads
        self.shared = shared
        self.rendezvous = rendezvous
        self.unpublished = []  # (cells, cell, thread, phase) of each held-back store


class Launch:
    """One kernel launch while it runs: its resident blocks in turn, their threads in turn.

    Parameters
    ----------
    kernel : numba's FakeCUDAKernel
        The kernel, configured for this launch.
    grid_dim, block_dim : tuple
        The launch's dimensions, ``(x, y, z)`` each, checked.
    access_hooks, call_hooks, fence_hooks, wait_hooks : tuple of callable
        The hooks registered when the launch started (:mod:`.hooks`).
    """

    def __init__(self, kernel, grid_dim, block_dim, access_hooks, call_hooks, fence_hooks=(), wait_hooks=()):
        self.kernel = kernel
        function = numba_sim.kernel_function(kernel)
        self.function = numba_typed(function)  # what its threads run: numba's integer typing
        self.name = function.__name__
        self.grid_dim = grid_dim
        self.block_dim = block_dim
        self.array_class = traced_arrays(self, access_hooks) if access_hooks else Array
        self.global_class = global_arrays(self, self.array_class)
        self.module = Module(self, self.array_class)
        self.current = None  # the Block whose turn it is
        self.block = None  # its index
        self.thread = None
        blocks = grid_dim[0] * grid_dim[1] * grid_dim[2]
        self.hiding = blocks > 1  # whether a block's stores are held back from the others
        self.unpublished = {}  # id(root array) -> {cell: (block, old contents)}
        self.version = 0  # counts changes of global memory, so that a poll sees whether any
        self.reads = 0  # global reads of the running thread since it last waited or yielded
        self.resident = settings.resident
        self.seed = random.randrange(2**31) if settings.seed is None else settings.seed
        self.note = block_order(self.resident, self.seed) if blocks > 1 else ""
        self._call_hooks = call_hooks
        self._fence_hooks = fence_hooks
        self._wait_hooks = wait_hooks
        self._point = None  # points a function's ``cuda`` at self.module, while run() runs
        self._typed = {}  # device function -> the function to run: pointed and rewritten once a launch
        self._main = None
        self._blocks = []  # the resident ones
        self._moved = False  # whether a round released, retired or resumed a thread not cycling
        self._yields = 0  # threads of the block whose turn it is that yielded in it
        self._aborting = False

    def run(self, args):
        """Run every block on the kernel arguments ``args`` (as the threads see them)."""
        # A GPU never warns (overflow wraps, inf - inf is NaN); a debug=True kernel raises on a
        # division by zero, as numba's simulator does. The threads run in this context.
        with quiet_arithmetic(**({"divide": "raise"} if numba_sim.is_debug(self.kernel) else {})):
            context = contextvars.copy_context()
        self._main = greenlet.getcurrent()
        with numba_sim.swapped_for_launch(self.module) as self._point:
            self._point(self.function)
            self._run_swapped(args, context)

    def _run_swapped(self, args, context):
        _running.launch = self
        # The threads of a launch make many short-lived objects; the garbage collections they
        # trigger need not walk the rest of the process's heap (numba's, numpy's) every time.
        collecting, thresholds = gc.isenabled(), gc.get_threshold()
        if collecting:
            gc.freeze()
            gc.set_threshold(max(thresholds[0], _GC_THRESHOLD), *thresholds[1:])
        try:
            with numba_sim.running_kernel(self.module):
                self._run_blocks(args, context)
        finally:
            if collecting:
                gc.set_threshold(*thresholds)
                gc.unfreeze()
            _running.launch = None

    def _run_blocks(self, args, context):
        order = cuda_order(self.grid_dim)
        dispatched = 0
        turns = random.Random(self.seed)
        resident = self._blocks
        while True:
            while len(resident) < self.resident and dispatched < len(order):
                resident.append(self._dispatch(order[dispatched], args, context))
                dispatched += 1
            if not resident:
                return
            self._moved = False
            version = self.version
            if len(resident) > 1:
                for block in turns.sample(resident, len(resident)):
                    for _ in range(turns.randint(1, PHASES_PER_TURN)):
                        self._turn(block)
                        if not block.ready or self._yields:
                            break
            else:
                self._turn(resident[0])
            retired = [b for b in resident if not b.ready]
            for block in retired:
                self._publish(block, block.unpublished)
                resident.remove(block)
            if not retired and not self._moved and self.version == version:
                message = deadlock(self.name, resident, order[dispatched:], _describe_poll)
                self._abort()
                raise DeadlockError(message + self.note)

    def _dispatch(self, index, args, context):
        threads = [
            Thread(self.function, self._main, index_in_block, linear)
            for linear, index_in_block in enumerate(cuda_order(self.block_dim))
        ]
        for t in threads:
            t.greenlet.gr_context = context.copy()
            t.resume = args
        shared = Shared(self.array_class, numba_sim.dynamic_shared_bytes(self.kernel))
        return Block(index, threads, shared, Rendezvous(self.name, index, threads))

    def _turn(self, block):
        """Run each thread of ``block`` that can run until it waits, yields or returns."""
        self.current = block
        self.block = block.index
        self.module.enter(block)
        self._yields = 0
        for t in block.ready:
            self.thread = t
            self.module.threadIdx = t.dim3
            self.reads = 0
            try:
                t.greenlet.switch(*t.resume)
            except Exception as exc:
                self._abort()
                # in_thread sets its own cause and hides the context: the student sees one error, not two
                raise in_thread(exc, self.name, block.index, t.index, self.note)  # noqa: B904
            except BaseException:
                self._abort()
                raise
        try:
            block.ready = self._release(block)
        except SimError as exc:  # raised with its message built while the threads still wait
            self._abort()
            raise type(exc)(f"{exc}{self.note}") from None

    def call(self, fn, args):
        """Call the device function ``fn`` from the running thread, with numba's integer typing."""
        # A kernel calls its device functions millions of times a chapter: each is pointed at the
        # launch's module and looked up among the rewritten functions once, not at every call.
        typed = self._typed.get(fn)
        if typed is None:
            self._point(fn)
            typed = self._typed[fn] = numba_typed(fn)
        for hook in self._call_hooks:
            hook(fn)
        return typed(*args)

    def wait(self, kind, value, mask, frame):
        """Called by a thread at a barrier or warp-level call: wait until it is released there."""
        if self._aborting:
            raise greenlet.GreenletExit
        t = self.thread
        if self._wait_hooks:
            wait = Wait(self.name, self.current.index, t.index, kind, frame.f_code.co_filename, frame.f_lineno)
            for hook in self._wait_hooks:
                hook(wait)
        t.site = (frame.f_code, frame.f_lasti, kind)
        t.line = frame.f_lineno
        t.value = value
        t.mask = mask
        return self._main.switch()

    def barrier(self, kind, value, frame):
        """Called by a thread at a block barrier: wait until the block is released there."""
        return self.wait(kind, value, None, frame)

    def switch_point(self, frame, poll=None):
        """Called by a thread at a global atomic, a fence or a global read after a long run of
        reads: let the other resident blocks run before it goes on.

        ``poll`` is None where the thread changed global memory; for a read or an atomic that
        changed nothing it is ``(array, key, cell)``, and the thread's state (where it is, what it
        polls, its local variables, the version of global memory) is compared with its state
        at its previous poll: equal, the thread is *cycling*, and would poll forever unless
        another thread changes global memory.
        """
        if self._aborting:
            raise greenlet.GreenletExit
        t = self.thread
        t.site = (frame.f_code, frame.f_lasti, "poll" if poll else "yield")
        t.line = frame.f_lineno
        t.mask = None
        if poll is None:
            t.spin = None
            t.cycling = False
        else:
            state = (t.site, id(poll[0]._cells), poll[2], self.version, _locals(frame, self.function))
            t.cycling = _same(state, t.spin)
            t.spin = state
        t.value = poll
        self._yields += 1
        self._main.switch()

    def fence(self, frame):
        """``cuda.threadfence()`` by the running thread: publish the stores of its block that it
        made, or that its block made in an earlier barrier phase, then yield."""
        t = self.thread
        block = self.current
        if self._fence_hooks:
            fence = Fence(self.name, block.index, t.index, t.phase, frame.f_code.co_filename, frame.f_lineno)
            for hook in self._fence_hooks:
                hook(fence)
        keep = [s for s in block.unpublished if s[2] != t.linear and s[3] >= t.phase]
        self._publish(block, [s for s in block.unpublished if s[2] == t.linear or s[3] < t.phase])
        block.unpublished = keep
        self.switch_point(frame)

    def _publish(self, block, stores):
        """Make ``stores`` (held back by ``block``) visible to every block."""
        for cells, cell, _, _ in stores:
            entry = cells.get(cell)
            if entry is not None and entry[0] is block:
                del cells[cell]
                self.version += 1

    def _release(self, block):
        """The threads of ``block`` to run in its next turn; [] when all returned.

        Yielded threads run on; warp-level calls go next (:class:`~.warp.Rendezvous`), then a
        block barrier, which needs every thread of the block.
        """
        threads = block.threads
        live = [t for t in threads if not t.greenlet.dead]
        if not live:
            return []
        if self._yields:
            yielded = [t for t in live if t.site[2] in _SWITCH_POINTS]
            at_warp = [t for t in live if t.site[2] in WARP_CALLS]
            released = block.rendezvous.release_met(at_warp) if at_warp else []
            if released or not all(t.cycling for t in yielded):
                self._moved = True
            for t in yielded:
                t.resume = ()
            return sorted(yielded + released, key=lambda t: t.linear)
        at_warp = [t for t in live if t.site[2] in WARP_CALLS]
        self._moved = True
        if at_warp:
            return block.rendezvous.release(at_warp)
        if len(live) < len(threads) or len({t.site for t in live}) > 1:
            raise BarrierDivergenceError(barrier_divergence(self.name, block.index, threads))
        result = _REDUCE_BARRIER[live[0].site[2]]([t.value for t in live])
        synchronize(live)
        for t in live:
            t.resume = (result,)
        return live

    def _abort(self):
        """Unwind every started thread of the resident blocks, so that their ``finally`` blocks
        run now."""
        self._aborting = True
        for block in self._blocks:
            for t in block.threads:
                if t.greenlet:
                    with contextlib.suppress(Exception):
                        t.greenlet.throw()


def _locals(frame, kernel):
    """The local variables of the kernel's frames from ``frame`` out to the kernel's own."""
    found = []
    while frame is not None:
        if not frame.f_code.co_filename.startswith(PACKAGE_DIR):
            found.append(tuple(frame.f_locals.items()))
        if frame.f_code is kernel.__code__:
            break
        frame = frame.f_back
    return tuple(found)


def _same(state, previous):
    """Whether two poll states are equal (False where a value refuses comparison)."""
    try:
        return bool(previous is not None and state == previous)
    except (TypeError, ValueError):
        return False


def _describe_poll(thread):
    """What a polling ``thread`` reads, for a deadlock message: ``flags[1] (value 0)``."""
    array, key, _ = thread.value
    shown = array._show(key)
    try:
        value = array._ary[key]
    except (IndexError, TypeError):
        return shown
    return f"{shown} (value {value})"
