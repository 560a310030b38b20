"""Host or device: what every application does with its checked inputs and its results.

The inputs are checked by :func:`prefixsum.core.inputs.as_input` (one wording for every call);
here a numpy input is copied to the device on the call's stream, and a result goes back as the
caller gave its input.
"""

import numpy as np
from numba import cuda

from ..core.streams import launch_stream

THREADS = 256
"""Most threads per block of the applications' element-wise kernels."""


def device_copy(x, on_device, stream):
    """``x`` (checked by :func:`~prefixsum.core.inputs.as_input`) on the device: itself if
    ``on_device``, else a new device copy queued on ``stream`` (a :class:`~prefixsum.core.streams.Stream`)."""
    if on_device:
        return x
    return cuda.to_device(np.ascontiguousarray(x), stream=launch_stream(stream))


def grid(n):
    """``(blocks, threads)`` of an element-wise launch over ``n`` elements.

    :data:`THREADS` per block, fewer (whole warps) when ``n`` is smaller: the simulator runs
    every thread of a block, idle or not.
    """
    threads = min(THREADS, max(32, -(-n // 32) * 32))
    return max(1, -(-n // threads)), threads


def back(x, on_device, stream):
    """``x`` as the caller gave its input: the device array, or a numpy copy (which waits for ``stream``)."""
    if on_device:
        return x
    host = x.copy_to_host(stream=launch_stream(stream))
    stream.synchronize()
    return host
