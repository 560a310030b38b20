"""The folding scan of the partial-sum notebook (chapter 02), one element per thread, tiles carried across blocks.

The notebook pads the length m to a power of two N and folds downwards: for ``phase`` = N/2, N/4,
..., 1, every cell ``i`` with ``i + phase < m`` adds cell ``i + phase``, all cells at once.

Why it yields suffix sums. Write the array in rows of ``phase`` cells, cell 0 top left. Loop
invariant: after the phase with stride p, cell i holds the combination of x[i], x[i + p],
x[i + 2p], ... -- its own column, from its row down to the bottom. It holds before the first
phase (p = N: each column is one cell). A phase with stride p halves the row width: cell i's
new column is its old column at stride 2p (x[i], x[i + 2p], ...) together with the old column
of cell i + p (x[i + p], x[i + 3p], ...), which is exactly what the fold adds. At p = 1 the
rows are single cells, the column of cell i is x[i..m-1], and that is the suffix sum.

The fold's own direction is therefore the reverse (suffix) scan. Here a tile is always scanned
forwards in logical order (:mod:`prefixsum.scans.tiles`), so the kernel runs the mirrored fold: lane
t adds lane ``t - phase`` and ends with the prefix of its tile. For ``reverse=True`` logical
lane t lives at array index ``n - 1 - t``, and the kernel is then the notebook's fold verbatim on
the array: cell i adds cell ``i + phase``.

The columns interleave (x[i] and x[i + 2p] are combined before x[i + p] joins them), so the
fold needs a commutative operator as well as an associative one; all of :data:`prefixsum.OPS`
are. Floating-point sums are combined in another order than a sequential loop's and may round
differently.

Each phase reads cells that other threads overwrite in the same phase (cell i + p is read by
thread i and written by thread i + p), so a phase reads into registers, waits at a barrier, then
writes, and waits again before the next phase reads.

Work N log2(N) - (N - 1) combines, depth log2(N) phases of two barriers, per tile of N elements.
"""

import functools

from numba import cuda

from .ops import device_op, identity, numba_type
from .tiles import lane_result, position, register_tiled


@functools.lru_cache(maxsize=None)
def folding_tile_kernel(op, dtype, inclusive, reverse, block_size):
    """Kernel ``(x, out, totals, n)``: block b folds tile b of ``block_size`` elements."""
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    where = position(reverse)
    result = lane_result(op, dtype, inclusive)
    element = numba_type(dtype)

    def folding_tile(x, out, totals, n):
        cells = cuda.shared.array(block_size, element)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * block_size + t
        cells[t] = x[where(i, n)] if i < n else neutral
        cuda.syncthreads()
        phase = block_size >> 1
        while phase > 0:
            folded = cells[t]
            if t >= phase:
                folded = combine(cells[t - phase], folded)
            cuda.syncthreads()  # every read of this phase before any write
            cells[t] = folded
            cuda.syncthreads()  # every write of this phase before the next phase reads
            phase >>= 1
        if i < n:
            out[where(i, n)] = result(cells, t)
        if t == block_size - 1:
            totals[cuda.blockIdx.x] = cells[t]

    return cuda.jit(folding_tile)


ALGORITHM = register_tiled(
    "folding",
    folding_tile_kernel,
    options={"block_size": 256},
    summary="the partial-sum notebook's folding: phases N/2 down to 1, cell i adds cell i + phase (suffix); work N log "
    "N, depth log N",
    source="a Python notebook of partial-sum experiments (partial_sum_folded)",
    simulator_us_per_element=(130, 4900),
)
