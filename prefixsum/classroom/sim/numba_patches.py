"""What the package changes in numba's simulator: how launches run, and fresh device arrays.

``install()`` replaces ``FakeCUDAKernel.__call__`` of numba's simulator (through the door to
numba's internals, :mod:`.numba_sim`), so that a launch runs in
this simulator (:mod:`.launch`) while enabled and a device function called from a simulated
thread runs directly; and wraps ``cuda.device_array`` and ``cuda.device_array_like``, so that
the allocation hooks (:mod:`.hooks`) see every fresh device array. Tools built on the simulator
register hooks instead of patching numba themselves.
"""

import functools

import numba

from ...core import device
from ...core.workspace import simulator_turn
from . import hooks, launch, numba_sim
from .scheduler import running_launch
from .settings import settings

_stock = {}  # numba's originals that install() replaced, by name; empty until then
_ALLOCATORS = ("device_array", "device_array_like")


def install():
    """Make this simulator run kernel launches of numba's simulator.

    Returns
    -------
    bool
        True when installed (now or before); False when numba's simulator is not selected, in
        which case nothing is changed.
    """
    if not numba.config.ENABLE_CUDASIM:
        return False
    if not _stock:
        _stock["__call__"] = numba_sim.replace_kernel_call(_call)
        for name in _ALLOCATORS:
            _stock[name] = numba_sim.replace_allocator(name, _reporting_allocation)
        device.set_classroom_probe(is_enabled)
    return True


def is_enabled():
    """Whether the next kernel launch runs in this simulator (installed and enabled).

    Returns
    -------
    bool
    """
    return bool(_stock) and settings.enabled


def _call(kernel, *args):
    """FakeCUDAKernel.__call__ once installed: a launch or, inside one, a device function call.

    A launch takes the simulator's turn (:func:`prefixsum.core.workspace.simulator_turn`) before
    it looks at numba's kernel context, which is one for the process: a launch from another host
    thread is waited for, not mistaken for a kernel calling this one.
    """
    running = running_launch()
    if running is not None:
        return running.call(numba_sim.kernel_function(kernel), args)
    if settings.enabled and not numba_sim.is_device_function(kernel):
        with simulator_turn():
            if numba_sim.kernel_context() is None:
                return launch.run(kernel, args)
    return _stock["__call__"](kernel, *args)


def _reporting_allocation(allocate):
    """``allocate``, passing every array it returns to the allocation hooks first."""

    @functools.wraps(allocate)
    def allocate_and_report(*args, **kwargs):
        array = allocate(*args, **kwargs)
        hooks.allocations(array)
        return array

    return allocate_and_report
