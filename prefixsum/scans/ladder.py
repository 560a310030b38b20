"""The ladder scan of the partial-sum notebook (chapter 01), one element per thread, tiles carried across blocks.

At phase ``p`` (p = 1, 2, 4, ...) the tile is cut into aligned runs of ``p`` elements; every
thread whose index has bit ``p`` set is in an odd run and adds the last element of the run just
before it, at index ``(t & ~(p - 1)) - 1``. Loop invariant: after phase p every aligned run of
2p elements holds the inclusive scan of itself. Threads with bit p clear only get read, so one
phase never reads what it writes: a barrier between phases is all the synchronisation needed.

Work n/2 * log2(n) combines, depth log2(n) phases, n reads and n writes of global memory per
tile pass (plus the carry pass when there are several tiles).
"""

import functools

from numba import cuda

from ..core.registry import Capability
from ..primitives.fields import kernel
from .ops import device_op, identity, numba_type
from .tiles import lane_result, position, register_tiled


@functools.lru_cache(maxsize=None)
def ladder_tile_kernel(op, dtype, inclusive, reverse, block_size):
    """Kernel ``(x, out, totals, n)``: block b ladder-scans tile b of ``block_size`` elements."""
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    where = position(reverse)
    result = lane_result(op, dtype, inclusive)
    element = numba_type(dtype)

    def ladder_tile(x, out, totals, n):
        rungs = cuda.shared.array(block_size, element)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * block_size + t
        rungs[t] = x[where(i, n)] if i < n else neutral
        cuda.syncthreads()
        phase = 1
        while phase < block_size:
            if t & phase:
                rungs[t] = combine(rungs[(t & ~(phase - 1)) - 1], rungs[t])
            cuda.syncthreads()
            phase <<= 1
        if i < n:
            out[where(i, n)] = result(rungs, t)
        if t == block_size - 1:
            totals[cuda.blockIdx.x] = rungs[t]

    return kernel(ladder_tile, dtype, arrays=("x", "out", "totals"))


ALGORITHM = register_tiled(
    "ladder",
    ladder_tile_kernel,
    options={"block_size": 256},
    summary="the partial-sum notebook's ladder: phase p adds the last element of the preceding aligned run; work n/2 "
    "log n, depth log n",
    source="a Python notebook of partial-sum experiments (partial_sum_ladder)",
    simulator_us_per_element=(80, 4000),
    auto_rank=1,
    capabilities=Capability.USER_OPERATOR,
)
