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


def simulating():
    """Whether this process runs kernels on a CUDA simulator (numba's, or the classroom one on top)."""
    from numba import config

    return bool(config.ENABLE_CUDASIM)


_classroom_simulator_runs = None


def set_classroom_probe(probe):
    """Register ``probe()``: whether the next launch runs in the classroom simulator.

    The classroom simulator (a higher layer) registers itself here, so that the scans, which sit
    below it, can ask what the launch they are about to make will run on without importing it.
    """
    global _classroom_simulator_runs
    _classroom_simulator_runs = probe


def warp_intrinsics():
    """Whether a kernel launched now may use warp intrinsics (shuffles, votes, ``syncwarp``).

    A GPU and the classroom simulator have them; numba's stock simulator does not.
    """
    if not simulating():
        return True
    return _classroom_simulator_runs is not None and _classroom_simulator_runs()


_reason = None


def pick():
    """Make the device choice once (:func:`choose`) and remember why, for :func:`device_info`."""
    global _reason
    simulator, _reason = choose()
    return simulator, _reason


def device_info():
    """A short description of the device the package runs on.

    Returns
    -------
    dict
        ``simulator`` (bool), ``name`` (str), ``reason`` (why this device was chosen), and on
        a GPU ``compute_capability`` (tuple) and ``memory_gb`` (float).
    """
    info = {"simulator": simulating(), "reason": _reason}
    if info["simulator"]:
        info["name"] = "CUDA simulator (numba)"
        return info
    from numba import cuda

    device = cuda.get_current_device()
    name = device.name
    info["name"] = name.decode() if isinstance(name, bytes) else name
    info["compute_capability"] = tuple(device.compute_capability)
    info["memory_gb"] = round(cuda.current_context().get_memory_info().total / 2**30, 1)
    return info


def size_for_device(simulator, gpu):
    """Pick a problem size for the current device: ``simulator`` on the simulator, else ``gpu``.

    Notebooks call this instead of hard-coding sizes, so they run in seconds on a laptop and
    at full size on a GPU.
    """
    return simulator if simulating() else gpu
