"""What counts as a device array, for every public function that takes one; result arrays."""
import numpy as np
from numba import cuda

from .device import simulating


def is_device_array(x):
    """Whether ``x`` is a device array: numba's, or anything with ``__cuda_array_interface__``."""
    # numba's own first: the simulator's have no __cuda_array_interface__, and on a GPU the
    # interface of numba's is a property that builds a dict (microseconds a call).
    return cuda.devicearray.is_cuda_ndarray(x) or hasattr(x, "__cuda_array_interface__")


_FREE = {}  # bytes -> device allocations whose arrays were dropped, ready for the next result
_KEPT_BYTES = 1 << 30  # at most this much memory waits in _FREE; beyond, a dropped array's memory is freed
_kept = 0
_LAYOUTS = {}  # (shape, dtype) as asked -> (shape, strides, dtype, nbytes): see _layout


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
    layout = _LAYOUTS.get((shape, dtype))
    if layout is None:
        layout = _layout(shape, dtype)
    shape, strides, dtype, nbytes = layout
    if not nbytes or simulating():
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
    return cuda.devicearray.DeviceNDArray(shape, strides, dtype, gpu_data=pointer)


def _layout(shape, dtype):
    """``(shape, strides, dtype, nbytes)`` of a C-contiguous array, worked out once per request."""
    key = (shape, dtype)
    dtype = np.dtype(dtype)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(map(int, shape))
    strides = tuple(int(np.prod(shape[k + 1:], dtype=np.int64)) * dtype.itemsize for k in range(len(shape)))
    if len(_LAYOUTS) >= 1024:
        _LAYOUTS.clear()
    _LAYOUTS[key] = layout = shape, strides, dtype, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return layout


def _keep(base, nbytes):
    """A result array was dropped: keep its memory for the next result of its size, if there is room."""
    global _kept
    if _kept + nbytes <= _KEPT_BYTES:
        _FREE.setdefault(nbytes, []).append(base)
        _kept += nbytes


def copy_to_host(device, host):
    """Copy ``device`` into the host array ``host``, both contiguous and of one size, as
    ``device.copy_to_host(host)`` does but without its checks.

    For buffers the package made itself, on every call of a solver: numba's checks of the two
    arrays cost about 15 microseconds of host time, more than the copy of a few flags. The copy
    waits for the work queued before it, as any copy on the default stream does.
    """
    if simulating():
        device.copy_to_host(host)
        return
    from numba.cuda.cudadrv import driver

    driver.device_to_host(host, device, host.nbytes)
