"""Launching a kernel with less Python per call than numba's dispatcher.

``kernel[grid, block](*args)`` types every argument, looks up the compiled overload for those
types, builds a launch configuration and marshals every argument through generic code: more host time
per launch than the GPU takes to scan a million elements (``benchmarks/scan_calls.py`` times
whole calls), of which numba-cuda's own last step, ``cuda.core.launch``, is a good part. A
:class:`Launcher` is made for one kernel and one fixed list of argument types (C-contiguous
arrays and integers); it compiles that overload once and keeps the kernel's handle, numba's
default stream (where a launch goes unless it names another stream) and, per host thread, a parameter block
(:class:`~.numba_gpu.ParamBlock`): a call writes each array's address, shape and strides into
the block with one ``struct.pack_into`` (in a function written for the argument types) and calls
the driver's ``cuLaunchKernel`` with it through ctypes (:func:`~.numba_gpu.driver_launch`).

**Lifetimes.** ``cuLaunchKernel`` copies the parameters before it returns, so the block is free
for the next launch of the same thread at once; the arrays themselves are the caller's, as with
numba's dispatcher, which keeps none of them either (numba frees device memory with
``cuMemFree``, which waits for the GPU, and the package's recycled memory goes back only to
the same thread's stream: :mod:`.workspace`). Two threads never share a block.

What it reads of numba-cuda beyond the documented API is in :mod:`.numba_gpu`. On the
simulator, or if this numba-cuda lacks the pieces it uses (then with a warning, once per
process), a launcher launches through the dispatcher, as any kernel does. The compiled kernel
is kept for the GPU of the first call: a process that switches GPUs (``cuda.select_device``)
must not reuse a launcher across them.
"""

import threading

from numba import cuda, types

from . import numba_gpu
from .device import simulating


class Launcher:
    """``launcher(grid, block, *args, shared=0, stream=None)`` runs
    ``dispatcher[grid, block, stream, shared](*args)`` for arguments of ``argtypes``.

    ``stream`` is a :class:`~prefixsum.core.streams.Stream` (:func:`~prefixsum.core.streams.as_stream`),
    or None for numba's default stream.

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
        self._local = threading.local()

    def _prepare(self):
        """Compile the overload and keep what a launch needs (:mod:`.numba_gpu`); if this
        numba-cuda lacks a piece of it, warn once and launch through the dispatcher."""
        with self._preparing:
            if self._kernel is not None or not self._direct:
                return  # another thread prepared it meanwhile
            try:
                kernel, self._stream, self._launch, self._success = numba_gpu.launch_parts(
                    self.dispatcher, self.argtypes
                )
            except (ImportError, AttributeError) as error:
                numba_gpu.warn_fallback(error)
                self._direct = False
                return
            self._kernel = kernel  # last: a thread that sees it set finds everything else set

    def _block(self):
        """This thread's parameter block, made on its first launch (numba's context is made
        current on the thread first: ``cuLaunchKernel`` launches in the current one)."""
        cuda.current_context()
        block = self._local.block = numba_gpu.ParamBlock(self.argtypes)
        return block

    def __call__(self, grid, block, *args, shared=0, stream=None):
        params = getattr(self._local, "block", None)  # set only once the direct launch is prepared
        if params is None:
            if self._direct and self._kernel is None:
                self._prepare()
            if not self._direct:
                self.dispatcher[grid, block, 0 if stream is None else stream.numba, shared](*args)
                return
            params = self._block()
        dims = self._configs.get((grid, block, shared)) or self._dims(grid, block, shared)
        params.fill(args)
        error = self._launch(
            self._kernel, *dims, self._stream if stream is None else stream.pointer, params.address, None
        )
        if error != self._success:
            raise RuntimeError(
                f"cuLaunchKernel of {self.dispatcher.py_func.__name__} with grid {grid}, block {block}, "
                f"{shared} bytes of shared memory failed: CUresult {error}"
            )

    def _dims(self, grid, block, shared):
        """``(gx, gy, gz, bx, by, bz, shared)`` of a launch, kept per configuration."""
        grid3 = (tuple(grid) + (1, 1))[:3] if isinstance(grid, tuple) else (grid, 1, 1)
        block3 = (tuple(block) + (1, 1))[:3] if isinstance(block, tuple) else (block, 1, 1)
        dims = (*map(int, grid3), *map(int, block3), int(shared))
        if not all(0 <= value < 1 << 31 for value in dims):  # the driver's call takes them as C ints
            raise ValueError(
                f"a launch of {self.dispatcher.py_func.__name__} takes grid and block dimensions and "
                f"shared bytes from 0 to 2**31 - 1; got grid {grid}, block {block}, shared {shared}"
            )
        if len(self._configs) > 256:
            self._configs.clear()
        self._configs[grid, block, shared] = dims
        return dims
