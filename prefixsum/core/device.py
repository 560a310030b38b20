"""Choose between a real CUDA GPU and numba's CUDA simulator, before numba.cuda is imported.

numba reads ``NUMBA_ENABLE_CUDASIM`` once, when ``numba.cuda`` is first imported, so the choice
has to be made here, at the very top of the package's import.

The package sets ``NUMBA_ENABLE_CUDASIM`` itself when the user did not, and child processes
(Jupyter kernels, the tracer's simulator) inherit it. So that a child does not take its parent's
choice for the user's, the package marks its own setting in a second variable,
``PREFIXSUM_DEVICE``: ``"simulator: <reason>"`` or ``"gpu: <reason>"`` (see :func:`hand_down`).
A child finding both reports the parent's reason; a ``NUMBA_ENABLE_CUDASIM`` without a matching
mark is the user's.
"""

import ctypes
import functools
import os
import sys
import warnings

_ENV = "NUMBA_ENABLE_CUDASIM"
_MARK = "PREFIXSUM_DEVICE"
_KINDS = {"1": "simulator", "0": "gpu"}


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


_numba_config = []  # numba's config module, once imported (every public call asks simulating())


def simulating():
    """Whether this process runs kernels on the simulator (numba has made its choice)."""
    if not _numba_config:
        from numba import config

        _numba_config.append(config)
    return bool(_numba_config[0].ENABLE_CUDASIM)


def hand_down(simulator, reason):
    """Set ``NUMBA_ENABLE_CUDASIM`` as prefixsum's own choice, with the reason for it.

    Child processes started afterwards (and this process, if numba.cuda is not imported yet)
    use the simulator or the GPU, and on importing prefixsum report ``reason`` rather than a
    setting by the user.

    Parameters
    ----------
    simulator : bool
    reason : str
        Why, in a few words ("no usable CUDA GPU found").
    """
    os.environ.update(device_environment(simulator, reason))


def device_environment(simulator, reason):
    """The environment variables by which :func:`hand_down` passes its choice to child processes.

    For a child started with an environment of its own (the grader's sandboxed runs): it then
    uses the simulator or the GPU's compiler as told, and reports ``reason``.

    Returns
    -------
    dict
        ``{"NUMBA_ENABLE_CUDASIM": "1" or "0", "PREFIXSUM_DEVICE": "<kind>: <reason>"}``.
    """
    value = "1" if simulator else "0"
    return {_ENV: value, _MARK: f"{_KINDS[value]}: {reason}"}


def undecided_environment():
    """This process's environment without the variables that choose a device, for a child that
    makes the choice itself (a notebook's kernel, a fresh interpreter): the package's own choice,
    set in this process at import, would otherwise reach it as the user's."""
    return {key: value for key, value in os.environ.items() if key not in (_ENV, _MARK)}


def _handed_down_reason(value):
    """The reason a parent gave with :func:`hand_down` for ``NUMBA_ENABLE_CUDASIM=value``, or None."""
    kind, separator, reason = os.environ.get(_MARK, "").partition(": ")
    return reason if separator and reason and kind == _KINDS[value] else None


def choose():
    """Decide simulator or GPU, set the environment for numba, and return ``(simulator, reason)``."""
    if "numba.cuda" in sys.modules:
        from numba import config

        if not config.ENABLE_CUDASIM and not _gpu_usable():
            warnings.warn(
                "numba.cuda was imported before prefixsum, for a GPU, and no usable GPU was found: "
                "kernels will fail. Import prefixsum first (it then chooses the simulator), or set "
                f"{_ENV}=1 before importing numba.",
                RuntimeWarning,
                stacklevel=3,
            )
        return bool(config.ENABLE_CUDASIM), "numba.cuda was imported before prefixsum"
    value = os.environ.get(_ENV)
    if value in ("0", "1"):
        return value == "1", _handed_down_reason(value) or f"{_ENV}={value} set by the user"
    simulator = not _gpu_usable()
    reason = "no usable CUDA GPU found" if simulator else "a CUDA GPU was found"
    hand_down(simulator, reason)
    return simulator, reason


_RECIPES = {}  # id(device function) -> (the function, its recipe): see device_specific


def device_specific(factory):
    """Decorate a factory of device functions whose code depends on the device (GPU or simulator).

    The factory returns a device function or a tuple of them, made for the device this process
    runs on. Each remembers the call that made it (:func:`recipe`), so that a process on the other
    device, the simulating worker of a process on a GPU, makes its own by calling the factory
    again rather than running code written for the GPU.
    """

    @functools.wraps(factory)
    def make(*args, **kwargs):
        made = factory(*args, **kwargs)
        for index, function in enumerate(made if isinstance(made, tuple) else (made,)):
            _RECIPES[id(function)] = (
                function,
                (make.__module__, make.__qualname__, args, kwargs, index if isinstance(made, tuple) else None),
            )
        return made

    return make


def recipe(function):
    """``(module, qualname, args, kwargs, index)`` of the :func:`device_specific` call that made ``function``, or
    None."""
    kept = _RECIPES.get(id(function))
    return kept[1] if kept is not None and kept[0] is function else None


def remake(module, qualname, args, kwargs, index):
    """The device function a :func:`recipe` describes, made in this process, for its device."""
    made = import_attribute(module, qualname)(*args, **kwargs)
    return made if index is None else made[index]


def import_attribute(module, qualname):
    """The object ``qualname`` (dotted) of the module named ``module``, imported if need be."""
    import importlib

    found = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


_classroom_simulator_runs = None


def set_classroom_probe(probe):
    """Register ``probe()``: whether the next launch runs in the classroom simulator.

    The classroom simulator (a higher layer) registers itself here, so that the scans, which sit
    below it, can ask what the launch they are about to make will run on without importing it.
    """
    global _classroom_simulator_runs
    _classroom_simulator_runs = probe


def classroom_simulator():
    """Whether a kernel launched now runs in the classroom simulator (not numba's stock one, not a GPU)."""
    return simulating() and _classroom_simulator_runs is not None and _classroom_simulator_runs()


def warp_intrinsics():
    """Whether a kernel launched now may use warp intrinsics (shuffles, votes, ``syncwarp``).

    A GPU and the classroom simulator have them; numba's stock simulator does not.
    """
    return not simulating() or classroom_simulator()


_reason = None


# numba's performance warnings that the workbook's examples trigger on purpose: one block of a
# few threads, numpy arrays passed straight to a kernel. On a GPU numba prints them to stderr, so
# a notebook would print there what it does not print on the simulator.
_DELIBERATE = ("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "NUMBA_CUDA_WARN_ON_IMPLICIT_COPY")


def pick():
    """Make the device choice once (:func:`choose`) and remember why, for :func:`device_info`.

    Also turns off numba's warnings about small grids and implicit copies, unless the user set
    them (``NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=1``, ``NUMBA_CUDA_WARN_ON_IMPLICIT_COPY=1``).
    """
    global _reason
    for name in _DELIBERATE:
        os.environ.setdefault(name, "0")
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
