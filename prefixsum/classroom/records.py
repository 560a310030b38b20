"""What a trace is made of: its launches, its element accesses and its fences."""

from typing import NamedTuple


class Launch(NamedTuple):
    """One kernel launch in a trace."""

    number: int
    kernel: str
    grid: tuple
    block: tuple
    combines: int
    """Calls of the package's operator device functions (``prefixsum.scans.ops.device_op``)."""


class Record(NamedTuple):
    """One element access, as stored in a :class:`Trace`."""

    launch: int
    block: int
    """Linear block index (x fastest)."""
    thread: int
    """Linear thread index within the block (x fastest); its warp is ``thread // WARP_SIZE``."""
    array: str
    space: str
    index: int
    """Flat element index (row-major for multi-dimensional arrays)."""
    write: bool
    phase: int
    line: int
    instance: int
    """How many times this thread had executed this source line's access to this array before."""
    itemsize: int
    atomic: bool = False
    """An atomic operation (``write`` is True for it too)."""
    stale: bool = False
    """A global read that got the old contents of an element another block had not published."""
    value: object = None
    """The value read or stored (for an atomic, the value after it): the stepper replays them."""
    file: str = ""
    """The source file of ``line``."""


class FenceRecord(NamedTuple):
    """One ``cuda.threadfence()``, as stored in :attr:`Trace.fences`."""

    launch: int
    block: int
    thread: int
    phase: int
    line: int
    position: int
    """How many records precede it: it comes between ``records[position - 1]`` and
    ``records[position]``."""


__all__ = ["FenceRecord", "Launch", "Record"]
