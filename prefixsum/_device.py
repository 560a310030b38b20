"""Choose between a real CUDA GPU and numba's CUDA simulator, before numba.cuda is imported.

numba reads ``NUMBA_ENABLE_CUDASIM`` once, when ``numba.cuda`` is first imported, so the choice
has to be made here, at the very top of the package's import.
"""
import ctypes
import os
import sys
import warnings

_ENV = "NUMBA_ENABLE_CUDASIM"


def _gpu_usable():
    """Return True when the CUDA driver loads, initialises and reports at least one device."""
    names = {"win32": ("nvcuda.dll",), "darwin": ()}.get(sys.platform, ("libcuda.so.1", "libcuda.so"))
    for name in names:
        try:
            driver = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if driver.cuInit(0) == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0:
            return count.value > 0
    return False


def choose():
    """Decide simulator or GPU, set the environment for numba, and return ``(simulator, reason)``."""
    if "numba.cuda" in sys.modules:
        from numba import config

        if not config.ENABLE_CUDASIM and not _gpu_usable():
            warnings.warn(
                "numba.cuda was imported before prefixsum, for a GPU, and no usable GPU was found: "
                "kernels will fail. Import prefixsum first (it then chooses the simulator), or set "
                f"{_ENV}=1 before importing numba.", RuntimeWarning, stacklevel=3)
        return bool(config.ENABLE_CUDASIM), "numba.cuda was imported before prefixsum"
    user = os.environ.get(_ENV)
    if user in ("0", "1"):
        return user == "1", f"{_ENV}={user} set by the user"
    simulator = not _gpu_usable()
    os.environ[_ENV] = "1" if simulator else "0"
    return simulator, "no usable CUDA GPU found" if simulator else "a CUDA GPU was found"
