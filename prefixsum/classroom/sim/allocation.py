"""Shared and local arrays: poisoned, one per call site, named after the variable they are bound to.

* Shared memory is filled with poison (:mod:`prefixsum.core.poison`: NaN for floating-point
  types, True for booleans, the byte 0x5A repeated for everything else) at the start of every
  block, so that a block reads no value an earlier block left. Local arrays
  (``cuda.local.array``) are poisoned too.
* Every ``cuda.shared.array`` call site gets its own array, also when two are on one source line
  (numba's simulator makes those alias). Dynamic shared memory (``shape`` 0) is one buffer of the
  launch's dynamic size, which every such array views from its first byte.
* A block using more than 48 KiB of shared memory (:mod:`prefixsum.core.hardware`) raises
  :class:`LaunchError`, as a GPU refuses to compile or launch it.
"""

import linecache
import re
import sys

import numpy as np

from ...core.hardware import MAX_SHARED_BYTES_PER_BLOCK
from ...core.poison import poison
from . import numba_sim
from .errors import LaunchError

_STOCK_LOCAL = numba_sim.FakeCUDALocal()  # numba's allocator: converts numba types to dtypes

_site_names = {}  # (code, instruction offset) of an allocation -> (line number, array name)
_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][\w\s,]*?)\s*=[^=]")


def _site_name(frame, space):
    """The name of the array allocated at ``frame``'s current call: the variable it is bound to.

    With several allocations on one line (``a, b = cuda.shared.array(...), ...``) the n-th call
    site met on the line gets the n-th target; the first thread meets them in source order.
    """
    site = (frame.f_code, frame.f_lasti)
    known = _site_names.get(site)
    if known is None:
        lineno = frame.f_lineno
        nth = sum(1 for (code, _), (line, _) in _site_names.items() if code is frame.f_code and line == lineno)
        text = linecache.getline(frame.f_code.co_filename, lineno)
        match = _ASSIGNMENT.match(text)
        targets = [t.strip() for t in match.group(1).split(",")] if match else []
        if len(targets) == text.count(f"{space}.array(") and nth < len(targets):
            name = targets[nth]
        else:
            name = f"{space}@line{lineno}" + (f"#{nth + 1}" if nth else "")
        known = _site_names[site] = (lineno, name)
    return known[1]


class Shared:
    """``cuda.shared``: one array per call site and block, poisoned at the start of the block.

    Parameters
    ----------
    array_class : type
        The launch's array wrapper (:class:`~.memory.Array` or a traced one).
    dynamic_bytes : int
        The launch's dynamic shared memory per block.
    """

    def __init__(self, array_class, dynamic_bytes):
        self._array_class = array_class
        self._dynamic_bytes = dynamic_bytes
        self.new_block()

    def new_block(self):
        """Forget the arrays of the previous block: the next block allocates its own."""
        self._arrays = {}
        self._names = set()
        self._dynamic = None
        self._bytes = self._dynamic_bytes

    def array(self, shape, dtype, alignment=None):
        """The block's shared array allocated at the caller's call site (``alignment`` is moot)."""
        frame = sys._getframe(1)
        array = self._arrays.get((frame.f_code, frame.f_lasti))
        if array is None:
            array = self._allocate(shape, dtype, frame)
        return array

    def _allocate(self, shape, dtype, frame):
        if shape == 0:  # dynamic shared memory: every such array starts at the same byte
            dtype = _STOCK_LOCAL.array(0, dtype).dtype
            fresh = self._dynamic is None
            if fresh:
                self._dynamic = np.empty(self._dynamic_bytes, np.uint8)
            count = self._dynamic_bytes // dtype.itemsize
            ary = self._dynamic[: count * dtype.itemsize].view(dtype)
            if fresh:  # poisoned as the first dtype asked for; others see its bytes
                poison(ary)
        else:
            ary = _STOCK_LOCAL.array(shape, dtype)
            self._bytes += ary.nbytes
            if self._bytes > MAX_SHARED_BYTES_PER_BLOCK:
                raise LaunchError(
                    f"this block uses {self._bytes} bytes of shared memory, but a block has at "
                    f"most {MAX_SHARED_BYTES_PER_BLOCK}; a GPU refuses to compile or launch the "
                    "kernel"
                )
            poison(ary)
        name = _site_name(frame, "shared")
        if name in self._names:  # two call sites bind the same name: keep names unique
            name = f"{name}@{frame.f_lineno}"
        self._names.add(name)
        array = self._array_class(ary, name, "shared")
        self._arrays[(frame.f_code, frame.f_lasti)] = array
        return array


class Local:
    """``cuda.local.array``: a fresh poisoned array per call."""

    def __init__(self, array_class):
        self._array_class = array_class

    def array(self, shape, dtype, alignment=None):
        ary = poison(_STOCK_LOCAL.array(shape, dtype))
        return self._array_class(ary, _site_name(sys._getframe(1), "local"), "local")
