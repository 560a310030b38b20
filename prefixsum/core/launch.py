"""Launching a kernel with less Python per call than numba's dispatcher.

``kernel[grid, block](*args)`` types every argument, looks up the compiled overload for those
types, builds a launch configuration and marshals every argument through generic code: about
30 microseconds of host time per launch on the H100 machine, more than the GPU takes to scan a
million elements. A :class:`Launcher` is made for one kernel and one fixed list of argument
types (C-contiguous arrays and integers); it compiles that overload once, keeps numba-cuda's
cuda.core handle of the compiled kernel, the stream numba launches on (the default one) and one
launch configuration per grid, block and dynamic shared memory, and a call only reads each
array's address, shape and strides and hands the flattened arguments to ``cuda.core.launch``,
as numba itself does in the end.

What it reads of numba-cuda beyond the documented API is in :mod:`.numba_gpu`. On the
simulator, or if this numba-cuda lacks the pieces it uses (then with a warning, once per
process), a launcher launches through the dispatcher, as any kernel does. The compiled kernel
is kept for the GPU of the first call: a process that switches GPUs (``cuda.select_device``)
must not reuse a launcher across them.
"""
import threading

from numba import types

from . import numba_gpu
from .device import simulating


class Launcher:
    """``launcher(grid, block, *args, shared=0)`` runs ``dispatcher[grid, block, 0, shared](*args)``
    for arguments of ``argtypes``.

    Parameters
    ----------
    dispatcher : numba kernel
        A ``cuda.jit`` kernel.
    argtypes : tuple of numba types
        Its argument types: C-contiguous arrays (any number of dimensions) and integers only. The
        caller promises that every call passes arguments of exactly these types (no conversion or
        check is made).
    """

    def __init__(self, dispatcher, argtypes):
        for argtype in argtypes:
            if not (isinstance(argtype, types.Integer) or (isinstance(argtype, types.Array) and argtype.layout == "C")):
                raise TypeError(f"a Launcher takes C-contiguous arrays and integers; got {argtype}")
        self.dispatcher = dispatcher
        self.argtypes = tuple(argtypes)
        self._kernel = None
        self._direct = not simulating()
        self._configs = {}
        self._preparing = threading.Lock()

    def _prepare(self):
        """Compile the overload and keep what a launch needs (:mod:`.numba_gpu`); if this
        numba-cuda lacks a piece of it, warn once and launch through the dispatcher."""
        with self._preparing:
            if self._kernel is not None or not self._direct:
                return  # another thread prepared it meanwhile
            try:
                kernel, self._launch, self._config_type, self._stream = numba_gpu.launch_parts(
                    self.dispatcher, self.argtypes)
            except (ImportError, AttributeError) as error:
                numba_gpu.warn_fallback(error)
                self._direct = False
                return
            self._params = numba_gpu.marshaller(self.argtypes)
            self._kernel = kernel  # last: a thread that sees it set finds everything else set

    def __call__(self, grid, block, *args, shared=0):
        if self._direct and self._kernel is None:
            self._prepare()
        if not self._direct:
            self.dispatcher[grid, block, 0, shared](*args)
            return
        config = self._configs.get((grid, block, shared))
        if config is None:
            if len(self._configs) > 256:
                self._configs.clear()
            config = self._configs[grid, block, shared] = self._config_type(grid=grid, block=block, shmem_size=shared)
        self._launch(self._stream, config, self._kernel, *self._params(args))
