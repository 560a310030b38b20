"""What counts as a device array, for every public function that takes one."""
from numba import cuda


def is_device_array(x):
    """Whether ``x`` is a device array: numba's, or anything with ``__cuda_array_interface__``."""
    # The simulator's device arrays have no __cuda_array_interface__, but numba knows its own.
    return hasattr(x, "__cuda_array_interface__") or cuda.devicearray.is_cuda_ndarray(x)
