"""The ``cuda`` module as simulated threads see it.

numba's simulator runs kernel code as Python: ``cuda.threadIdx`` and ``cuda.syncthreads()`` in a kernel look up the
global ``cuda`` of the kernel's module. During a launch that global is :class:`Module` (numba's own swap,
:func:`.numba_sim.swapped_for_launch`): thread and block indices set by the scheduler, barriers and warp-level calls
that wait in the scheduler (:mod:`.scheduler`, :mod:`.warp`), checked and poisoned memory (:mod:`.memory`,
:mod:`.allocation`), fences that publish a block's stores to the other blocks (:mod:`.memory`), ``popc``, ``clz``,
``ffs`` and ``brev`` over the operand's own width (:mod:`.integers`). ``cuda.cg.this_grid().sync()`` in a grid of more
than one block raises NotImplementedError (the simulator does not model a cooperative launch).
"""

import sys

import numpy as np

from ...core.hardware import WARP_SIZE
from . import integers, numba_sim
from .allocation import Local
from .errors import WarpDivergenceError
from .memory import Atomic
from .warp import integer_operand, match_key, predicate_operand, shuffle_operand


class Module(numba_sim.FakeCUDAModule):
    """The ``cuda`` module as simulated threads see it.

    Parameters
    ----------
    launch : scheduler.Launch
        The launch whose threads see this module: its barriers and warp calls wait there.
    array_class : type
        The launch's array wrapper, for shared and local arrays.
    """

    # Plain attributes shadow the base class's properties: the scheduler sets them per thread
    # and per block, so reading ``cuda.threadIdx`` costs no lookup of the current thread.
    threadIdx = None
    blockIdx = None

    def __init__(self, launch, array_class):
        super().__init__(launch.grid_dim, launch.block_dim, numba_sim.dynamic_shared_bytes(launch.kernel))
        self._launch = launch
        self._shared = None  # the shared memory of the block whose turn it is
        self._local = Local(array_class)
        self._atomic = Atomic()
        self._cg = _CooperativeGroups(launch)

    def __getattr__(self, name):
        raise AttributeError(f"cuda.{name} is not available in the CUDA simulator")

    def enter(self, block):
        """Show the threads ``block`` (a :class:`~.scheduler.Block`): its index, its shared memory."""
        self.blockIdx = block.dim3
        self._shared = block.shared

    def threadfence(self):
        self._launch.fence(sys._getframe(1))

    def threadfence_system(self):
        self._launch.fence(sys._getframe(1))

    def threadfence_block(self):
        """Orders memory within the block only: nothing to publish to other blocks."""

    @property
    def laneid(self):
        return self._launch.thread.linear % WARP_SIZE

    def syncthreads(self):
        self._launch.barrier("syncthreads", None, sys._getframe(1))

    def syncthreads_count(self, value):
        return self._launch.barrier("syncthreads_count", value, sys._getframe(1))

    def syncthreads_and(self, value):
        return self._launch.barrier("syncthreads_and", value, sys._getframe(1))

    def syncthreads_or(self, value):
        return self._launch.barrier("syncthreads_or", value, sys._getframe(1))

    # Bit counts and reversal over the operand's own width, as PTX computes them (numba's
    # simulator counts the bits of Python's bin(), so that popc of an int32 -1 is 1, not 32).
    popc = staticmethod(integers.popc)
    clz = staticmethod(integers.clz)
    ffs = staticmethod(integers.ffs)
    brev = staticmethod(integers.brev)

    # Warp-level calls, with numba's signatures (no ``width``: numba's shuffles always use the
    # whole warp) and the operand types its compiler accepts.

    def syncwarp(self, mask=0xFFFFFFFF):
        self._warp("syncwarp", mask, None)

    def shfl_sync(self, mask, value, src_lane):
        return self._shuffle("shfl_sync", mask, value, src_lane)

    def shfl_up_sync(self, mask, value, delta):
        return self._shuffle("shfl_up_sync", mask, value, delta)

    def shfl_down_sync(self, mask, value, delta):
        return self._shuffle("shfl_down_sync", mask, value, delta)

    def shfl_xor_sync(self, mask, value, lane_mask):
        return self._shuffle("shfl_xor_sync", mask, value, lane_mask)

    def ballot_sync(self, mask, predicate):
        return self._warp("ballot_sync", mask, predicate_operand("ballot_sync", predicate))

    def all_sync(self, mask, predicate):
        return self._warp("all_sync", mask, predicate_operand("all_sync", predicate))

    def any_sync(self, mask, predicate):
        return self._warp("any_sync", mask, predicate_operand("any_sync", predicate))

    def eq_sync(self, mask, predicate):
        return self._warp("eq_sync", mask, predicate_operand("eq_sync", predicate))

    def match_any_sync(self, mask, value):
        return self._warp("match_any_sync", mask, match_key(shuffle_operand("match_any_sync", value)))

    def match_all_sync(self, mask, value):
        return self._warp("match_all_sync", mask, match_key(shuffle_operand("match_all_sync", value)))

    def activemask(self):
        return self._launch.wait("activemask", None, None, sys._getframe(1))

    def lanemask_lt(self):
        return np.uint32((1 << self.laneid) - 1)

    def _shuffle(self, kind, mask, value, operand):
        operand = integer_operand(kind, "lane or delta", operand)
        return self._warp(kind, mask, (shuffle_operand(kind, value), operand), frames_up=3)

    def _warp(self, kind, mask, value, frames_up=2):
        mask = integer_operand(kind, "mask", mask) & 0xFFFFFFFF
        lane = self.laneid
        if not mask >> lane & 1:
            raise WarpDivergenceError(
                f"cuda.{kind}(): the calling lane {lane} is not in its mask 0x{mask:08x} (the "
                "result is undefined on a GPU)"
            )
        return self._launch.wait(kind, value, mask, sys._getframe(frames_up))


class _CooperativeGroups:
    def __init__(self, launch):
        self._launch = launch

    def this_grid(self):
        return _GridGroup(self._launch)


class _GridGroup:
    def __init__(self, launch):
        self._launch = launch

    def sync(self):
        launch = self._launch
        blocks = launch.grid_dim[0] * launch.grid_dim[1] * launch.grid_dim[2]
        if blocks > 1:
            raise NotImplementedError(
                f"cuda.cg.this_grid().sync() in a grid of {blocks} blocks cannot be simulated: "
                "the simulator does not model a cooperative launch"
            )
        launch.barrier("grid.sync", None, sys._getframe(1))
