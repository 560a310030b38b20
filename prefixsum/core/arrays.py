"""What counts as a device array, for every public function that takes one; result arrays."""

import numpy as np
from numba import cuda

from . import numba_gpu
from .device import simulating
from .plans import kept
from .workspace import result_memory


def is_device_array(x):
    """Whether ``x`` is a device array: numba's, or anything with ``__cuda_array_interface__``."""
    # numba's own first: the simulator's have no __cuda_array_interface__, and on a GPU the
    # interface of numba's is a property that builds a dict (microseconds a call).
    return numba_gpu.is_numba_array(x) or hasattr(x, "__cuda_array_interface__")


def as_numba(x):
    """The device array ``x`` (numba's, or anything with ``__cuda_array_interface__``) as numba's
    device array, without a copy: numba's own comes back as it is."""
    return x if numba_gpu.is_numba_array(x) else cuda.as_cuda_array(x)


def result_array(shape, dtype, stream=None):
    """A new C-contiguous device array of ``shape`` (an int for 1-D) and ``dtype``, for a result
    handed to the caller: ``result_maker(shape, dtype)(key)``, ``key`` the stream's
    (:attr:`~prefixsum.core.streams.Stream.key`; None: numba's default stream).

    numba allocates every device array with ``cuMemAlloc`` and frees it with ``cuMemFree``
    (which waits for the GPU), which on a GPU machine costs more than a scan of a million elements
    (``benchmarks/scan_calls.py`` times whole calls). Here the memory of a result the caller has dropped is kept and
    handed out again for the next result of the same size on the same stream, as PyTorch's
    caching allocator does: :func:`prefixsum.core.workspace.result_memory`, whose policy (per
    thread and stream) makes the reuse safe. The maker of each layout is a plan of
    :data:`prefixsum.core.plans.PLANS` (a plan keeps its own). On the simulator: a plain
    ``cuda.device_array``, poisoned by the checker as any.
    """
    make = kept(("result layout", shape, dtype), lambda: result_maker(shape, dtype))
    return make(0 if stream is None else stream.key)


def result_maker(shape, dtype):
    """``make(stream_key=0)``: :func:`result_array` of ``shape`` and ``dtype`` at each call, for the
    stream of ``stream_key``, with the layout (shape, strides, bytes) worked out once."""
    dtype = np.dtype(dtype)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(map(int, shape))
    strides = tuple(int(np.prod(shape[k + 1 :], dtype=np.int64)) * dtype.itemsize for k in range(len(shape)))
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if not nbytes or simulating():

        def make(stream_key=0):
            return cuda.device_array(shape, dtype)

        return make
    return numba_gpu.recycled_arrays(shape, strides, dtype, nbytes, result_memory)


def copy_to_host(device, host):
    """Copy ``device`` into the host array ``host``, both contiguous and of one size, as
    ``device.copy_to_host(host)`` does but without its checks.

    For buffers the package made itself, on every call of a solver: numba's checks of the two
    arrays cost more host time than the copy of a few flags. The copy
    waits for the work queued before it, as any copy on the default stream does.
    """
    if simulating():
        device.copy_to_host(host)
        return
    numba_gpu.device_to_host(host, device, host.nbytes)
