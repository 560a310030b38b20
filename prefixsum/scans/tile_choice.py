"""The look-back scan's tile for each element size and length: the fastest measured one.

A tile of 128 threads x 32 elements fills the GPU's memory pipes best when there are thousands
of tiles, but at 2^16 elements that is 16 tiles on 132 multiprocessors: fewer, larger tiles
leave the chip idle and the look-back's chain long. So ``"lookback"`` (and ``"auto"``, which
picks it) does not fix its tile: for a call of n elements of an element size it takes the
shape that was fastest at the measured length nearest to n (in log2) in ``scan_tiles.csv``,
the table ``benchmarks/cub_tuning.py`` writes from its kernel times (CUPTI) of five shapes at
2^12 .. 2^28. Explicit ``block_size`` / ``items_per_thread`` options override it.

The table ships with the package (:mod:`prefixsum.core.tables`); without it, every length gets
:data:`DEFAULT_SHAPE`.
"""

import functools

from ..core import tables

TABLE = "scan_tiles.csv"
DEFAULT_SHAPE = (128, 32)
"""``(block_size, items_per_thread)`` where the table has no row for the element size: the
fastest shape from 2^20 on for both element sizes (``benchmarks/cub_tuning.csv``)."""


@functools.lru_cache(maxsize=None)
def measured():
    """``{itemsize: ((n, block_size, items_per_thread), ...)}`` from the table, by n; ``{}`` without it."""
    shapes = {}
    for row in tables.rows(TABLE):
        if row["itemsize"]:
            shapes.setdefault(int(row["itemsize"]), []).append(
                (int(row["n"]), int(row["block_size"]), int(row["items_per_thread"]))
            )
    return {itemsize: tuple(sorted(rows)) for itemsize, rows in shapes.items()}


def fastest_shape(itemsize, n):
    """``(block_size, items_per_thread)`` measured fastest at the length nearest ``n`` (log2; a tie
    goes to the longer one) for elements of ``itemsize`` bytes, else :data:`DEFAULT_SHAPE`."""
    rows = measured().get(itemsize)
    if not rows:
        return DEFAULT_SHAPE
    length = tables.nearest([row[0] for row in rows], n)
    _, block_size, items = next(row for row in rows if row[0] == length)
    return block_size, items


def shapes(itemsize):
    """Every shape :func:`fastest_shape` may return for ``itemsize``: the kernels ``"auto"`` may launch."""
    return tuple(dict.fromkeys([(b, i) for _, b, i in measured().get(itemsize, ())] or [DEFAULT_SHAPE]))
