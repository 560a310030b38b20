"""A decoupled look-back on a time axis, as plain data: for each tile, when it published its state
and whose states it read (the stepper's ``by="time"``, :class:`prefixsum.classroom.viz.stepper.TimelineStepper`).
"""

import collections
from typing import NamedTuple


class Tile(NamedTuple):
    """One block of a decoupled look-back, as :func:`timeline` reads it."""

    tile: int
    start: int
    """Position in the trace of the block's first access."""
    end: int
    published: tuple
    """Positions of its writes to its own state, in order (the aggregate, then the inclusive prefix)."""
    reads: tuple
    """``(position, tile)`` of each read of a predecessor's state."""
    waited_for: tuple
    """The predecessors whose state it read more than once: it polled, waiting for them."""


def timeline(trace, array="status", launch=None):
    """A look-back as a time axis: for each tile, when it published and whose state it read.

    Time is the position in the trace (the simulator runs a few blocks at once, in turns). A
    block's own tile is the highest state it wrote; the states below it that it read are its
    predecessors.

    Returns
    -------
    list of Tile
        By tile.
    """
    records = [
        (p, r)
        for p, r in enumerate(trace.records)
        if r.array == array and r.space == "global" and (launch is None or r.launch == launch)
    ]
    if not records:
        raise ValueError(
            f"the trace has no global array called {array!r}; arrays: {sorted({r.array for r in trace.records})}"
        )
    launch = records[0][1].launch if launch is None else launch
    span, mine = collections.defaultdict(list), collections.defaultdict(list)
    for p, r in enumerate(trace.records):
        if r.launch == launch:
            span[r.block].append(p)
    for p, r in records:
        if r.launch == launch:
            mine[r.block].append((p, r))
    tiles = []
    for block, accesses in mine.items():
        tile = max(r.index for _, r in accesses)  # atomics count as writes: a poll is one too
        reads = tuple((p, r.index) for p, r in accesses if r.index < tile)
        counts = collections.Counter(t for _, t in reads)
        tiles.append(
            Tile(
                tile,
                min(span[block]),
                max(span[block]),
                tuple(p for p, r in accesses if r.write and r.index == tile),
                reads,
                tuple(sorted(t for t, c in counts.items() if c > 1)),
            )
        )
    return sorted(tiles)


__all__ = ["Tile", "timeline"]
