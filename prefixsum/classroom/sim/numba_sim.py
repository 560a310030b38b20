"""The one door to numba's simulator internals: every name of it that numba does not promise to keep.

This simulator reuses numba's (``NUMBA_ENABLE_CUDASIM=1``): its launch-configuration rules, its
argument wrappers, its ``cuda`` module classes, and its convention that a kernel sees the
simulated ``cuda`` through its module's globals. None of these is public API, so every use is
here, and ``tests/test_numba_internals.py`` looks each one up: an upgrade of numba that renames
one fails there, by name, not somewhere in a launch. This and
:mod:`prefixsum.core.numba_gpu` (the GPU side) are the only modules that assign to numba's
attributes (``tests/test_architecture.py``, ``tests/test_numba_internals.py``);
:mod:`.numba_patches` says when, through :func:`replace_kernel_call` and :func:`replace_allocator`.
"""

import contextlib
import os
import sys

from numba import cuda
from numba.cuda.simulator import kernel as _kernel, kernelapi as _kernelapi
from numba.cuda.simulator.cudadrv.devicearray import FakeShape

FakeCUDAModule = _kernelapi.FakeCUDAModule
"""The simulated ``cuda`` module a launch's threads see; :class:`.module.Module` extends it."""
FakeCUDAAtomic = _kernelapi.FakeCUDAAtomic
"""numba's ``cuda.atomic`` in the simulator, whose operations :mod:`.memory` wraps."""
FakeCUDALocal = _kernelapi.FakeCUDALocal
"""numba's ``cuda.local``: it turns numba types into dtypes for :mod:`.allocation`."""
Dim3 = _kernelapi.Dim3
"""The ``(x, y, z)`` of ``threadIdx``, ``blockIdx`` and their dimensions."""
FakeShape = FakeShape
"""The ``shape`` of numba's simulated arrays (a tuple that refuses negative indices)."""
FakeCUDAKernel = _kernel.FakeCUDAKernel
"""What ``cuda.jit`` makes in the simulator: a kernel, or a device function."""
FakeCUDAArray = _kernel.FakeCUDAArray
"""numba's simulated device array."""
ArgHint = _kernel.ArgHint
"""``cuda.In``/``cuda.Out``/``cuda.InOut``: arguments that say which way they are copied."""
normalize_kernel_dimensions = _kernel.normalize_kernel_dimensions
"""numba's check and normalisation of a launch's grid and block (ints or tuples -> Dim3s)."""

# numba-cuda's simulator and numba's built-in one (macOS) keep wrap_arg in different modules,
# each next to the ArgHint its kernel module uses.
wrap_arg = sys.modules[ArgHint.__module__].wrap_arg
"""A host array as a launch argument: copied to the device and back, as numba's simulator does."""

SIMULATOR_DIR = os.path.dirname(os.path.dirname(_kernel.__file__)) + os.sep
"""numba's simulator's folder: frames from there are library frames in a kernel's traceback."""


def host_array(value):
    """The numpy array behind a simulated device array (or a record), else None."""
    return value._ary if isinstance(value, FakeCUDAArray) else None


def is_debug(kernel):
    """Whether ``kernel`` was compiled with ``debug=True`` (it then raises on a division by zero)."""
    return kernel._debug


def is_device_function(kernel):
    """Whether ``kernel`` is a device function (``cuda.jit(device=True)``), not a kernel."""
    return kernel._device


def kernel_function(kernel):
    """The Python function a simulated kernel or device function runs (numba's ``fn``)."""
    return kernel.fn


def dynamic_shared_bytes(kernel):
    """The dynamic shared memory a configured simulated launch asks for, in bytes (numba's ``dynshared_size``)."""
    return kernel.dynshared_size


def kernel_context():
    """numba's current simulated ``cuda`` module: None unless a simulated kernel is running."""
    return _kernel._kernel_context


def running_kernel(module):
    """Context manager: numba's simulator sees ``module`` as its running kernel's ``cuda``."""
    return _kernel._push_kernel_context(module)


def swapped_cuda(function, module):
    """Context manager: ``cuda`` in ``function``'s module is the simulated ``module`` while inside.

    numba's own swap (kernel code reads the global ``cuda`` of its module), counted per module
    and undone by the last one out, so nested and concurrent swaps of one module are safe.
    """
    return _kernelapi.swapped_cuda_module(function, module)


def replace_kernel_call(call):
    """Make ``call(kernel, *args)`` what calling a simulated kernel or device function does.

    Returns
    -------
    callable
        numba's own ``FakeCUDAKernel.__call__``, which ``call`` may hand a call on to.
    """
    stock = FakeCUDAKernel.__call__
    FakeCUDAKernel.__call__ = call
    return stock


def replace_allocator(name, wrap):
    """Replace ``cuda.<name>`` (``device_array``, ...) by ``wrap(numba's own)``; returns numba's own."""
    stock = getattr(cuda, name)
    setattr(cuda, name, wrap(stock))
    return stock


@contextlib.contextmanager
def swapped_for_launch(module):
    """Context manager yielding ``point(function)``: from then on until the ``with`` ends, ``cuda``
    in ``function``'s module is ``module``.

    A launch points each function it runs once (numba's simulator swaps on every device-function
    call, which costs more than the call), and every module is restored at the end.
    """
    with contextlib.ExitStack() as stack:
        seen = set()

        def point(function):
            key = id(function.__globals__)
            if key not in seen:
                seen.add(key)
                stack.enter_context(swapped_cuda(function, module))

        yield point


def python_function(kernel):
    """The Python function a simulated kernel or device function runs (numba's ``fn``), else None."""
    function = getattr(kernel, "fn", None) if isinstance(kernel, FakeCUDAKernel) else None
    return function if callable(function) and hasattr(function, "__globals__") else None


def replace_python_function(kernel, function):
    """Make the simulated ``kernel`` run ``function`` from now on (its ``fn``)."""
    kernel.fn = function
