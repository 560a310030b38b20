"""How a launch runs: blocks one after another, the threads of a block as greenlets, in turn.

Blocks run one after another, in CUDA's linear order (x fastest). Each thread of a block is a
greenlet on the launching OS thread: threads run in turn, in linear order, each until it reaches a
barrier (``cuda.syncthreads`` and its ``_count``/``_and``/``_or`` variants) or returns; when every
thread of the block waits at the same barrier, all are released. Scheduling is therefore
deterministic: a run gives the same results, the same errors and the same error messages every
time. Two threads never interleave between two barriers, so a data race inside one barrier phase
is not randomly exposed; the access hook (:mod:`.hooks`) lets a tracer find such races instead. A
thread also stops at a warp-level call (``shfl_*_sync``, ``syncwarp``, votes; :mod:`.warp`)
until the lanes its mask names have all arrived there.

A barrier that not every thread of the block reaches -- some threads have returned while others
wait, or threads wait at different ``syncthreads`` call sites -- raises
:class:`BarrierDivergenceError`, listing which threads are where. Overflow in numpy scalar
arithmetic wraps silently, as GPU arithmetic does: numpy's RuntimeWarning is off inside
simulated threads.

One launch runs at a time, as in numba's simulator.
"""
import contextlib
import contextvars

import greenlet
from numba.cuda.simulator import kernel as _stock_kernel

from ...core.arithmetic import quiet_arithmetic
from .errors import BarrierDivergenceError, SimError, barrier_divergence, in_thread
from .memory import Array, traced_arrays
from .module import CudaSwap, Module
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


def cuda_order(dims):
    """All (x, y, z) points of ``dims`` in CUDA's linear order (x fastest)."""
    nx, ny, nz = dims
    return [(x, y, z) for z in range(nz) for y in range(ny) for x in range(nx)]


def in_launch():
    """Whether a simulated launch is running now (a call from kernel code, not from the host)."""
    return Launch.running is not None


class Launch:
    """One kernel launch while it runs: the blocks in turn, the threads of each block in turn.

    Parameters
    ----------
    kernel : numba's FakeCUDAKernel
        The kernel, configured for this launch.
    grid_dim, block_dim : tuple
        The launch's dimensions, ``(x, y, z)`` each, checked.
    access_hooks, call_hooks : tuple of callable
        The hooks registered when the launch started (:mod:`.hooks`).
    """

    running = None
    """The launch running now, if any."""

    def __init__(self, kernel, grid_dim, block_dim, access_hooks, call_hooks):
        self.kernel = kernel
        self.name = kernel.fn.__name__
        self.grid_dim = grid_dim
        self.block_dim = block_dim
        self.array_class = traced_arrays(self, access_hooks) if access_hooks else Array
        self.module = Module(self, self.array_class)
        self.block = None
        self.thread = None
        self._call_hooks = call_hooks
        self._cuda = CudaSwap(self.module)
        self._main = None
        self._rendezvous = None
        self._aborting = False

    def run(self, args):
        """Run every block on the kernel arguments ``args`` (as the threads see them)."""
        # A GPU never warns (overflow wraps, inf - inf is NaN); a debug=True kernel raises on a
        # division by zero, as numba's simulator does. The threads run in this context.
        with quiet_arithmetic(**({"divide": "raise"} if self.kernel._debug else {})):
            context = contextvars.copy_context()
        self._main = greenlet.getcurrent()
        self._cuda.point(self.kernel.fn)
        Launch.running = self
        try:
            with _stock_kernel._push_kernel_context(self.module):
                for block in cuda_order(self.grid_dim):
                    self._run_block(block, args, context)
        finally:
            Launch.running = None
            self._cuda.restore()

    def call(self, fn, args):
        """Call the device function ``fn`` from the running thread."""
        self._cuda.point(fn)
        for hook in self._call_hooks:
            hook(fn)
        return fn(*args)

    def wait(self, kind, value, mask, frame):
        """Called by a thread at a barrier or warp-level call: wait until it is released there."""
        if self._aborting:
            raise greenlet.GreenletExit
        t = self.thread
        t.site = (frame.f_code, frame.f_lasti, kind)
        t.line = frame.f_lineno
        t.value = value
        t.mask = mask
        return self._main.switch()

    def barrier(self, kind, value, frame):
        """Called by a thread at a block barrier: wait until the block is released there."""
        return self.wait(kind, value, None, frame)

    def _run_block(self, block, args, context):
        self.block = block
        self.module.new_block(block)
        threads = [
            Thread(self.kernel.fn, self._main, index, linear)
            for linear, index in enumerate(cuda_order(self.block_dim))
        ]
        for t in threads:
            t.greenlet.gr_context = context.copy()
            t.resume = args
        self._rendezvous = Rendezvous(self.name, block, threads)
        ready = threads
        while ready:
            self._step(ready, threads)
            try:
                ready = self._release(threads)
            except SimError:  # raised with its message built while the threads still wait
                self._abort(threads)
                raise

    def _step(self, ready, threads):
        """Run each of ``ready`` until it waits or returns."""
        for t in ready:
            self.thread = t
            self.module.threadIdx = t.dim3
            try:
                t.greenlet.switch(*t.resume)
            except Exception as exc:
                self._abort(threads)
                raise in_thread(exc, self.name, self.block, t.index)
            except BaseException:
                self._abort(threads)
                raise

    def _release(self, threads):
        """The threads that may run on now that every live thread waits; [] when all returned.

        Warp-level calls go first (:class:`~.warp.Rendezvous`), then a block barrier, which
        needs every thread of the block.
        """
        live = [t for t in threads if not t.greenlet.dead]
        if not live:
            return []
        at_warp = [t for t in live if t.site[2] in WARP_CALLS]
        if at_warp:
            return self._rendezvous.release(at_warp)
        if len(live) < len(threads) or len({t.site for t in live}) > 1:
            raise BarrierDivergenceError(barrier_divergence(self.name, self.block, threads))
        result = _REDUCE_BARRIER[live[0].site[2]]([t.value for t in live])
        synchronize(live)
        for t in live:
            t.resume = (result,)
        return live

    def _abort(self, threads):
        """Unwind every started thread, so that their ``finally`` blocks run now."""
        self._aborting = True
        for t in threads:
            if t.greenlet:
                with contextlib.suppress(Exception):
                    t.greenlet.throw()
