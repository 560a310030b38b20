"""The naive scan of Hillis and Steele (GPU Gems 3, ch. 39.2.1), tiles carried across blocks.

At step ``stride`` = 1, 2, 4, ... every lane t >= stride combines lane ``t - stride`` into
itself. Loop invariant: after the step with stride s, lane t holds the combination of the 2s
elements ending at t (fewer near the start of the tile), so after log2(N) steps it holds the
inclusive prefix of its tile.

Lane t reads lane ``t - stride`` while the thread of that lane overwrites it in the same step.
The registered kernel therefore double-buffers in shared memory (ping-pong): a step reads one
buffer and writes the other, so one barrier per step suffices. The single-buffer version that
GPU Gems warns against is a lesson, :func:`prefixsum.classroom.lessons.hillis_steele_in_place_tile_kernel`.

Work N log2(N) - (N - 1) combines, depth log2(N) steps, per tile of N elements: not work-
efficient (a sequential scan needs N - 1 combines), but half the depth of the work-efficient
tree scan of :mod:`prefixsum.scans.blelloch`.
"""

import functools

from numba import cuda

from ..core.moved import moved
from ..core.registry import Capability
from ..primitives.fields import kernel
from .ops import device_op, identity, numba_type
from .tiles import lane_result, position, register_tiled


@functools.lru_cache(maxsize=None)
def hillis_steele_tile_kernel(op, dtype, inclusive, reverse, block_size):
    """Kernel ``(x, out, totals, n)``: block b scans tile b of ``block_size`` elements, ping-pong."""
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    where = position(reverse)
    result = lane_result(op, dtype, inclusive)
    element = numba_type(dtype)

    def hillis_steele_tile(x, out, totals, n):
        buffers = cuda.shared.array((2, block_size), element)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * block_size + t
        buffers[0, t] = x[where(i, n)] if i < n else neutral
        cuda.syncthreads()
        source = 0
        stride = 1
        while stride < block_size:
            if t >= stride:
                buffers[1 - source, t] = combine(buffers[source, t - stride], buffers[source, t])
            else:
                buffers[1 - source, t] = buffers[source, t]
            cuda.syncthreads()
            source = 1 - source
            stride <<= 1
        if i < n:
            out[where(i, n)] = result(buffers[source], t)
        if t == block_size - 1:
            totals[cuda.blockIdx.x] = buffers[source, t]

    return kernel(hillis_steele_tile, dtype, arrays=("x", "out", "totals"))


ALGORITHM = register_tiled(
    "hillis_steele",
    hillis_steele_tile_kernel,
    options={"block_size": 256},
    summary="Hillis-Steele: lane t adds lane t - stride for stride 1, 2, 4, ..., ping-pong; work N log N, depth log N",
    source="GPU Gems 3, ch. 39.2.1 (Harris, Sengupta, Owens)",
    simulator_us_per_element=(140, 4200),
    capabilities=Capability.USER_OPERATOR,
)

__getattr__ = moved(
    __name__, {"hillis_steele_in_place_tile_kernel": "prefixsum.classroom.lessons:hillis_steele_in_place_tile_kernel"}
)
