"""Hooks: callbacks the simulator calls at launches, device-function calls, allocations, accesses.

Tools built on the simulator (the tracer, the checker, tests) register callbacks here instead of
patching numba; the simulator calls them:

* :func:`launch_hook`: ``callback(info)`` once per kernel launch this simulator runs (not under
  ``enabled(False)``, where numba's stock simulator runs it), at its start (before the launch
  configuration is checked, so a launch the simulator refuses counts too), with a
  :class:`LaunchInfo`. For example, to check that bad input launches nothing::

      launches = []
      with prefixsum.sim.launch_hook(launches.append):
          with pytest.raises(ValueError):
              prefixsum.scan(bad_input)
      assert launches == []

* :func:`call_hook`: ``callback(function)`` for every device-function call inside a simulated
  launch, with the Python function of the device function called (``function.__name__`` names
  it), in the calling thread.
* :func:`allocation_hook`: ``callback(array)`` for every fresh device array that
  ``cuda.device_array`` or ``cuda.device_array_like`` allocates on the host while the simulator
  is installed (whether or not it is enabled), before the caller gets it.
* :func:`access_hook`: ``callback(access)`` for every element read, write and atomic operation
  on a global, shared or local array in a launch started inside the ``with``. ``access`` is an
  :class:`Access` named tuple: kernel name, block and thread (tuples), array name (the kernel
  parameter's name for a global array, the assigned variable's name for a shared or local one),
  memory space, the element's index in that array (views and records are mapped back to the
  array), kind (``"read"``, ``"write"`` or ``"atomic"``), the value read or stored, the thread's
  barrier phase, the kernel source file and line, the array's shape and dtype, and whether a
  global read was *stale* (another block's store to the element was not yet published to it,
  :mod:`.memory`)::

      accesses = []
      with prefixsum.sim.access_hook(accesses.append):
          kernel[blocks, threads](x, out)
      shared_writes = [a for a in accesses if a.space == "shared" and a.kind == "write"]

  The phase is a Lamport clock of synchronisation: 0 at the start, and at every barrier (and at
  a ``syncwarp``, for the lanes meeting there) the threads that meet leave with one more than
  the highest phase among them. Where threads pass only barriers, it is the number of barriers
  passed. Two accesses of two threads of a block with equal phases are never ordered by a
  barrier or a ``syncwarp``, so a tracer flagging equal phases reports no false races; it can
  miss a race between two warps when one of them has passed a ``syncwarp`` since the last
  barrier. Launches started without an access hook use arrays without the reporting code, so
  the hook costs nothing when unused.

* :func:`fence_hook`: ``callback(fence)`` for every ``cuda.threadfence()`` (and
  ``threadfence_system()``) in a launch started inside the ``with``, with a :class:`Fence`:
  kernel name, block, thread, its phase, source file and line. Called in the fencing thread, in
  order with the access hook's callbacks, so that a tracer can tell which stores a fence
  publishes (:mod:`.memory`).

* :func:`wait_hook`: ``callback(wait)`` for every barrier (``cuda.syncthreads()`` and its
  variants) and warp-level call (shuffles, votes, ``syncwarp``, ``activemask``) a thread of a
  launch started inside the ``with`` makes, with a :class:`Wait`: kernel name, block, thread,
  the call's name, source file and line. Called in the calling thread before it waits, in order
  with the access hook's callbacks: a tracer sees a loop that makes no memory access but calls
  (a warp walking a window that holds nothing, a loop of barriers) as steps.

Each function registers its callback at once and returns a context manager that unregisters it
on exit (or call its ``remove()``). Hooks stack: every registered callback is called, in the
order they were registered. The hooks of a launch are those registered when it starts. An
exception raised by a callback inside a launch aborts the launch like one raised by the kernel.
"""

from typing import NamedTuple

import numpy as np


class Access(NamedTuple):
    """One element access in a simulated launch, as passed to an :func:`access_hook` callback."""

    kernel: str
    """Name of the kernel function."""
    block: tuple
    """``(x, y, z)`` of the block."""
    thread: tuple
    """``(x, y, z)`` of the thread within its block."""
    array: str
    """Name of the array: a kernel parameter, or the variable a shared/local array is bound to."""
    space: str
    """``"global"``, ``"shared"`` or ``"local"``."""
    index: tuple
    """Index of the element in the array (for a record field, the field name comes last)."""
    kind: str
    """``"read"``, ``"write"`` or ``"atomic"``."""
    value: object
    """The value read, the value stored, or for an atomic the value after the operation."""
    phase: int
    """The thread's synchronisation clock: the barriers it has passed, when it used no ``syncwarp``
    (see the module's docstring)."""
    file: str
    """Source file of the kernel (or device function) line that made the access."""
    line: int
    """Line number in ``file``."""
    shape: tuple
    """Shape of the array (``index`` is an index into this shape)."""
    dtype: np.dtype
    """Element type of the array."""
    stale: bool = False
    """For a global read: whether it returned the old contents of an element that another block
    had stored to but not published yet (:mod:`.memory`), as a GPU may."""


class Fence(NamedTuple):
    """One ``cuda.threadfence()`` in a simulated launch, as passed to a :func:`fence_hook` callback."""

    kernel: str
    """Name of the kernel function."""
    block: tuple
    """``(x, y, z)`` of the block."""
    thread: tuple
    """``(x, y, z)`` of the thread within its block."""
    phase: int
    """The thread's synchronisation clock, as in :class:`Access`."""
    file: str
    """Source file of the line that called the fence."""
    line: int
    """Line number in ``file``."""


class Wait(NamedTuple):
    """One barrier or warp-level call in a simulated launch, as passed to a :func:`wait_hook` callback."""

    kernel: str
    """Name of the kernel function."""
    block: tuple
    """``(x, y, z)`` of the block."""
    thread: tuple
    """``(x, y, z)`` of the thread within its block."""
    kind: str
    """The call: ``"syncthreads"``, ``"ballot_sync"``, ``"shfl_sync"``, ..."""
    file: str
    """Source file of the line that made the call."""
    line: int
    """Line number in ``file``."""


class LaunchInfo(NamedTuple):
    """One simulated kernel launch, as passed to a :func:`launch_hook` callback."""

    kernel: str
    """Name of the kernel function."""
    function: object
    """The kernel's Python function."""
    grid: tuple
    """``gridDim`` as ``(x, y, z)``."""
    block: tuple
    """``blockDim`` as ``(x, y, z)``."""
    dynamic_shared_bytes: int
    """Bytes of dynamic shared memory per block (the launch's fourth parameter)."""
    arguments: tuple = ()
    """The arguments as the host passed them (numpy arrays, device arrays, scalars)."""


class _Hooks:
    """The callbacks registered for one kind of event, in registration order."""

    def __init__(self):
        self.callbacks = ()  # a tuple: a launch keeps the ones registered when it started

    def __call__(self, event):
        for callback in self.callbacks:
            callback(event)


launches = _Hooks()
calls = _Hooks()
allocations = _Hooks()
accesses = _Hooks()
fences = _Hooks()
waits = _Hooks()


class _Registration:
    """A callback registered now; as a context manager, unregistered on exit."""

    def __init__(self, hooks, callback):
        if not callable(callback):
            raise TypeError(f"a hook must be callable, not {type(callback).__name__}")
        self._hooks = hooks
        self._callback = callback
        hooks.callbacks += (callback,)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()

    def remove(self):
        """Unregister the callback (the last registration of it, when it was registered twice)."""
        callbacks = self._hooks.callbacks
        last = len(callbacks) - 1 - callbacks[::-1].index(self._callback)
        self._hooks.callbacks = callbacks[:last] + callbacks[last + 1 :]


def launch_hook(callback):
    """Register ``callback(info)``, called on the host with a :class:`LaunchInfo` at the start of
    every simulated launch, before the launch configuration is checked.

    Returns a context manager that removes the hook on exit (or at its ``remove()``).
    """
    return _Registration(launches, callback)


def call_hook(callback):
    """Register ``callback(function)``, called in the simulated thread, with the device function's
    Python function, for every device-function call of a launch started while it is registered.

    Returns a context manager that removes the hook on exit (or at its ``remove()``).
    """
    return _Registration(calls, callback)


def allocation_hook(callback):
    """Register ``callback(array)``, called with every array that ``cuda.device_array`` or
    ``cuda.device_array_like`` returns while the simulator is installed, before the caller gets it.

    Returns a context manager that removes the hook on exit (or at its ``remove()``).
    """
    return _Registration(allocations, callback)


def access_hook(callback):
    """Register ``callback(access)``, called in the simulated thread with an :class:`Access` for
    every array element access of a launch started while it is registered.

    Returns a context manager that removes the hook on exit (or at its ``remove()``); use it in a
    ``with`` statement.
    """
    return _Registration(accesses, callback)


def fence_hook(callback):
    """Register ``callback(fence)``, called in the simulated thread with a :class:`Fence` for
    every ``cuda.threadfence()`` of a launch started while it is registered.

    Returns a context manager that removes the hook on exit (or at its ``remove()``).
    """
    return _Registration(fences, callback)


def wait_hook(callback):
    """Register ``callback(wait)``, called in the simulated thread with a :class:`Wait` for every
    barrier and warp-level call of a launch started while it is registered.

    Returns a context manager that removes the hook on exit (or at its ``remove()``).
    """
    return _Registration(waits, callback)
