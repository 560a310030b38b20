"""Stream compaction, the readable version: keep the elements whose flag is set, in order (Sengupta et al. 2007).

The exclusive scan (add) of the 0/1 flags gives every kept element the number of kept elements
before it, which is its place in the output; one scatter writes it there. Work O(n), the depth
of one scan, and no element moves twice.

Three launches from Python (flags, scan, scatter) and a read of the output's length between
them: chapter 11's first version. :func:`prefixsum.apps.compact` does the same in one pass
(:mod:`.selection`).
"""

import numpy as np
from numba import cuda

from ..core.streams import as_stream, launch_stream
from ..scans.api import exclusive_scan
from ._arrays import back, device_copy, grid
from .selection import _checked_pair


@cuda.jit
def to_flags(mask, flags):
    """``flags[i] = 1`` where ``mask[i]`` is set, else 0 (int32, to be scanned)."""
    i = cuda.grid(1)
    if i < flags.shape[0]:
        flags[i] = 1 if mask[i] else 0


@cuda.jit
def scatter_kept(x, flags, places, out):
    """Element i, if kept, goes to ``out[places[i]]``: the kept elements before it."""
    i = cuda.grid(1)
    if i < x.shape[0] and flags[i]:
        out[places[i]] = x[i]


def compact_by_scan(x, mask, *, stream=None):
    """The elements of ``x`` where ``mask`` is set, in their order: ``x[mask]`` by a scan, in three launches.

    Parameters
    ----------
    x : numpy.ndarray or device array, 1-D
        Any numeric dtype. Never modified.
    mask : numpy.ndarray or device array, 1-D, same length and kind
        bool or any integer type (nonzero keeps).
    stream : optional
        The stream the launches are queued on (any form :func:`prefixsum.scan` takes); the read
        of the output's length waits for it. None: numba's default stream.

    Returns
    -------
    numpy.ndarray or numba device array
        The kept elements, numpy for numpy ``x``.

    Examples
    --------
    >>> import numpy as np
    >>> compact_by_scan(np.arange(6), np.array([1, 0, 0, 1, 1, 0], bool))
    array([0, 3, 4])
    """
    (x, on_device), (mask, _) = _checked_pair(x, mask)
    where = as_stream(stream)
    on = launch_stream(where)
    x, mask = device_copy(x, on_device, where), device_copy(mask, on_device, where)
    n = x.shape[0]
    if n == 0:
        return back(cuda.device_array(0, x.dtype), on_device, where)
    flags = cuda.device_array(n, np.int32)
    blocks, threads = grid(n)
    to_flags[blocks, threads, on](mask, flags)
    places = exclusive_scan(flags, stream=where)
    ends = np.empty(2, np.int32)
    places[n - 1 :].copy_to_host(ends[:1], stream=on)
    flags[n - 1 :].copy_to_host(ends[1:], stream=on)
    where.synchronize()
    out = cuda.device_array(int(ends.sum()), x.dtype)
    scatter_kept[blocks, threads, on](x, flags, places, out)
    return back(out, on_device, where)
