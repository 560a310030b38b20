"""What counts as a device array, for every public function that takes one; result arrays."""
import numpy as np
from numba import cuda


def is_device_array(x):
    """Whether ``x`` is a device array: numba's, or anything with ``__cuda_array_interface__``."""
    # The simulator's device arrays have no __cuda_array_interface__, but numba knows its own.
    return hasattr(x, "__cuda_array_interface__") or cuda.devicearray.is_cuda_ndarray(x)


_FREE = {}  # bytes -> device allocations whose arrays were dropped, ready for the next result
_KEPT_BYTES = 1 << 30  # at most this much memory waits in _FREE; beyond, a dropped array's memory is freed
_kept = 0


def result_array(shape, dtype):
    """A new C-contiguous device array of ``shape`` (an int for 1-D) and ``dtype``, for a result
    handed to the caller.

    numba allocates every device array with ``cuMemAlloc`` and frees it with ``cuMemFree``
    (which waits for the GPU), 45 to 100 microseconds a call on the H100 machine: more than a
    scan of a million elements. Here the memory of a result the caller has dropped is kept (up to
    1 GiB) and handed out again for the next result of the same size, as PyTorch's caching
    allocator does. Reuse is safe for work on numba's default stream, where the package launches
    everything: a kernel that writes the new result is queued after every kernel that used the
    old one. The kept memory belongs to the GPU it was allocated on: one GPU per process. On the
    simulator: a plain ``cuda.device_array``, poisoned by the checker as any.
    """
    from .device import simulating

    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if simulating() or not nbytes:
        return cuda.device_array(shape, dtype)
    from numba.cuda.cudadrv import driver

    global _kept
    free = _FREE.get(nbytes)
    if free:
        base = free.pop()
        _kept -= nbytes
    else:
        base = cuda.current_context().memalloc(nbytes)
    pointer = driver.MemoryPointer(base.context, base.device_pointer, nbytes, finalizer=lambda: _keep(base, nbytes))
    strides = tuple(int(np.prod(shape[k + 1:], dtype=np.int64)) * dtype.itemsize for k in range(len(shape)))
    return cuda.devicearray.DeviceNDArray(shape, strides, dtype, gpu_data=pointer)


def _keep(base, nbytes):
    """A result array was dropped: keep its memory for the next result of its size, if there is room."""
    global _kept
    if _kept + nbytes <= _KEPT_BYTES:
        _FREE.setdefault(nbytes, []).append(base)
        _kept += nbytes
