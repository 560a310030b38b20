"""What every tiled scan shares: where a logical element lives, what a lane stores, the carry.

A scan of n elements that do not fit one thread block is cut into tiles. Each tile is scanned
on its own by one block, which also writes the tile's total; the totals are scanned (by the same
algorithm, recursively); then every tile but the first combines the total of all tiles before it
into its elements. Algorithms differ only in how one tile is scanned.

Directions are handled by indexing, not by copies: a reverse (suffix) scan is a forward scan of
the mirrored array, so logical element ``i`` lives at ``n - 1 - i``. An exclusive scan is the
inclusive one shifted by a lane, with the identity in lane 0 of every tile; the carry then turns
that identity into the total of the tiles before.

A user operator's tuples run through the same tile kernels and carry, each compiled for one
array per field by :mod:`prefixsum.primitives.fields` (``register_tiled(...,
capabilities=Capability.USER_OPERATOR)``).
"""

import functools
import math

from numba import cuda, types

from ..core.streams import launch_stream as on
from ..core.workspace import scratch  # noqa: F401  (the tiled scans' scratch, by the name they import)
from ..primitives.block import position
from ..primitives.fields import device_function, is_fields, kernel
from .ops import check_dtype, device_op, identity, numba_type
from .registry import Algorithm, check_block_size, register


@functools.lru_cache(maxsize=None)
def lane_result(op, dtype, inclusive):
    """Device function ``lane_result(scanned, t)``: what lane ``t`` of a scanned tile stores.

    ``scanned`` holds the tile's inclusive scan; an exclusive scan takes the previous lane's
    value, and lane 0 the identity.
    """
    neutral = identity(op, dtype)

    def inclusive_lane(scanned, t):
        return scanned[t]

    def exclusive_lane(scanned, t):
        return scanned[t - 1] if t > 0 else neutral

    return device_function(inclusive_lane if inclusive else exclusive_lane, dtype, arrays=("scanned",))


@functools.lru_cache(maxsize=None)
def carry_kernel(op, dtype, reverse, tile):
    """Kernel ``carry(out, carries, n)``: block b combines ``carries[b]`` into tile ``b + 1``.

    ``carries`` is the inclusive scan of the tile totals, so ``carries[b]`` is everything in
    tiles 0..b. Launched with one block per tile after the first. The carry comes first, as it
    holds the elements before the tile (a user operator need not commute).
    """
    combine = device_op(op, dtype)
    where = position(reverse)

    def carry_into_tile(out, carries, n):
        carry = carries[cuda.blockIdx.x]
        start = (cuda.blockIdx.x + 1) * tile
        for k in range(cuda.threadIdx.x, tile, cuda.blockDim.x):
            if start + k < n:
                p = where(start + k, n)
                out[p] = combine(carry, out[p])

    return kernel(carry_into_tile, dtype, arrays=("out", "carries"))


def array_type(dtype):
    """The numba type of a C-contiguous 1-D device array of ``dtype``."""
    return types.Array(numba_type(dtype), 1, "C")


def _arrays(dtype):
    """The array types of one element array: one, or one per field of a tuple of dtypes."""
    return tuple(array_type(d) for d in dtype) if is_fields(dtype) else (array_type(dtype),)


def tile_kernel_argtypes(dtype):
    """Argument types of a tile kernel ``(x, out, totals, n)``, for compiling it to PTX."""
    return _arrays(dtype) * 3 + (types.int64,)


def carry_argtypes(dtype):
    """Argument types of :func:`carry_kernel`'s kernel ``(out, carries, n)``."""
    return _arrays(dtype) * 2 + (types.int64,)


def scan_tiles(x, out, tile_kernel, *, tile, threads, op, reverse, scan_totals, stream=None):
    """Scan the device array ``x`` into ``out`` tile by tile, then carry the totals across tiles.

    What every tiled scan of one array runs (a user operator's tuples take
    :func:`scan_field_tiles`, the same steps with one array per field).

    Parameters
    ----------
    x, out : device arrays
        Input and output, 1-D, same length n >= 1 and dtype.
    tile_kernel : kernel
        ``tile_kernel(x, out, totals, n)``: block b scans tile b (elements ``b*tile`` to
        ``(b+1)*tile - 1`` in logical order) into ``out`` and writes the tile total to
        ``totals[b]``.
    tile, threads : int
        Elements per tile and threads per block.
    op, reverse :
        The operator and direction, for the carry kernel.
    scan_totals : callable
        ``scan_totals(totals, carries)`` writes the inclusive forward scan of ``totals`` into
        ``carries`` (the caller passes its own algorithm, so the recursion stays in it).
    stream : Stream, optional
        Where the launches go (:func:`prefixsum.core.streams.as_stream`; None: numba's default stream).
    """
    dtype = check_dtype(x.dtype)
    n = x.shape[0]
    ntiles = math.ceil(n / tile)
    totals = scratch("totals", ntiles, dtype, stream)
    tile_kernel[ntiles, threads, on(stream)](x, out, totals, n)
    if ntiles > 1:
        carries = scratch("carries", ntiles, dtype, stream)
        scan_totals(totals, carries)
        carry_kernel(op, dtype, reverse, tile)[ntiles - 1, threads, on(stream)](out, carries, n)


def scan_field_tiles(xs, outs, tile_kernel, *, tile, threads, op, reverse, scan_totals, stream=None):
    """:func:`scan_tiles` for a user operator's tuples: ``xs``, ``outs``, the totals and the
    carries are tuples of one device array per field (of ``op.dtypes``, a
    :class:`~prefixsum.primitives.fields.Operator`'s), which the kernels take in a row."""
    n = xs[0].shape[0]
    ntiles = math.ceil(n / tile)
    totals = tuple(scratch(f"totals {k}", ntiles, d, stream) for k, d in enumerate(op.dtypes))
    tile_kernel[ntiles, threads, on(stream)](*xs, *outs, *totals, n)
    if ntiles > 1:
        carries = tuple(scratch(f"carries {k}", ntiles, d, stream) for k, d in enumerate(op.dtypes))
        scan_totals(totals, carries)
        carry_kernel(op, op.dtypes, reverse, tile)[ntiles - 1, threads, on(stream)](*outs, *carries, n)


def register_tiled(name, tile_kernel, *, items_per_thread=1, options=None, check_options=None, **about):
    """Register a scan made of one tile kernel and :func:`scan_tiles`'s carries.

    Parameters
    ----------
    name : str
        The algorithm's name in :data:`prefixsum.ALGORITHMS`.
    tile_kernel : callable
        ``tile_kernel(op, dtype, inclusive, reverse, **options)`` -> a kernel ``(x, out, totals, n)``
        that scans tile b of ``items_per_thread * block_size`` elements with one block of
        ``block_size`` threads and writes the tile's total to ``totals[b]``.
    items_per_thread : int, default 1
        Elements of a tile per thread.
    options : dict, optional
        Option names and defaults; ``{"block_size": 256}`` when omitted. ``block_size`` is required.
    check_options : callable, optional
        Raises ValueError for a bad option; by default ``block_size`` must be a power of two
        from 32 to 1024.
    **about
        ``summary``, ``source``, ``auto_rank``, ``capabilities``: as in
        :class:`prefixsum.scans.registry.Algorithm`. With ``Capability.USER_OPERATOR``, ``tile_kernel`` must compile
        for a user operator (``op`` an :class:`~prefixsum.primitives.fields.Operator`, ``dtype``
        its tuple of dtypes; see :mod:`prefixsum.primitives.fields`), and its arrays become one
        per field.

    Returns
    -------
    Algorithm
        The registered algorithm; its ``run`` scans the tile totals recursively with itself.
    """

    def run(x, out, op, inclusive, reverse, *, stream=None, **chosen):
        block_size = chosen["block_size"]
        fields = isinstance(x, tuple)
        dtype = op.dtypes if fields else x.dtype
        (scan_field_tiles if fields else scan_tiles)(
            x,
            out,
            tile_kernel(op, dtype, inclusive, reverse, **chosen),
            tile=items_per_thread * block_size,
            threads=block_size,
            op=op,
            reverse=reverse,
            scan_totals=lambda totals, carries: run(totals, carries, op, True, False, stream=stream, **chosen),
            stream=stream,
        )

    def kernels(op, dtype, inclusive, reverse, **chosen):
        tile = items_per_thread * chosen["block_size"]
        for lane_inclusive, lane_reverse in dict.fromkeys([(inclusive, reverse), (True, False)]):
            yield tile_kernel(op, dtype, lane_inclusive, lane_reverse, **chosen), tile_kernel_argtypes(dtype)
        for carry_reverse in dict.fromkeys([reverse, False]):
            yield carry_kernel(op, dtype, carry_reverse, tile), carry_argtypes(dtype)

    return register(
        Algorithm(
            name=name,
            run=run,
            kernels=kernels,
            options=options or {"block_size": 256},
            check_options=check_options or (lambda block_size: check_block_size("block_size", block_size)),
            **about,
        )
    )
