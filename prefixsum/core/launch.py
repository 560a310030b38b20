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

On the simulator, or if this numba-cuda lacks the pieces it uses, a launcher launches through
the dispatcher, as any kernel does. The compiled kernel is kept for the GPU of the first call:
a process that switches GPUs (``cuda.select_device``) must not reuse a launcher across them.
"""
import ctypes

from numba import types
from numba.np.numpy_support import as_dtype

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

    def _prepare(self):
        """Compile the overload and keep what a launch needs; fall back to the dispatcher if numba lacks it."""
        try:
            from cuda.core import LaunchConfig, launch
            from numba.cuda.cudadrv.driver import _to_core_stream
            compiled = self.dispatcher.compile(self.argtypes)
            self._kernel = compiled._codelibrary.get_cufunc().kernel
        except (ImportError, AttributeError):
            self._direct = False
            return
        self._launch, self._config_type, self._stream = launch, LaunchConfig, _to_core_stream(0)
        # numba passes an array as (meminfo, parent, nitems, itemsize, data, *shape, *strides):
        # an array's marshal is its item size, an integer's its ctypes type.
        self._marshal = tuple(
            as_dtype(argtype.dtype).itemsize if isinstance(argtype, types.Array) else getattr(ctypes, f"c_{argtype}")
            for argtype in self.argtypes)

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
        params = []
        for marshal, value in zip(self._marshal, args):
            if isinstance(marshal, int):
                shape = value.shape
                if len(shape) == 1:
                    params += (0, 0, shape[0], marshal, value.device_ctypes_pointer.value, shape[0], marshal)
                else:
                    params += (0, 0, value.size, marshal, value.device_ctypes_pointer.value, *shape, *value.strides)
            else:
                params.append(marshal(value))
        self._launch(self._stream, config, self._kernel, *params)
