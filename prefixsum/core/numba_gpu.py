"""The one door to numba-cuda's internals on the GPU side: every name it does not promise to keep.

The package's fast path on a GPU launches kernels without numba's per-call dispatch
(:mod:`.launch`) and wraps recycled device memory as numba's arrays (:mod:`.arrays`); compiling
for a GPU on a machine without one needs a stand-in for the current device. Each of these leans
on numba-cuda beyond its documented API, and every such use is in this module, so that an
upgrade of numba-cuda is checked here and in the two tests that look: ``tests/test_numba_internals.py``
looks every name up in a ``NUMBA_ENABLE_CUDASIM=0`` process, and ``tests/test_numba_gpu.py``
compares :func:`marshaller` with numba's own ``_Kernel._prepare_args`` for every argument kind
a :class:`~prefixsum.core.launch.Launcher` takes. Public replacements are used where they exist:
a compiled kernel's ``library`` (not ``_codelibrary``), ``cuda.core.Stream.from_handle`` (not
``driver._to_core_stream``), and cuda-python's driver binding for the one thing numba offers no call for (a
non-blocking stream, :func:`nonblocking_stream`). The simulator side has its own door,
:mod:`prefixsum.classroom.sim.numba_sim`; nowhere else is an internal module of numba imported
or an attribute of numba assigned (``tests/test_architecture.py``).
"""
import contextlib
import ctypes
import threading
import types as pytypes
import warnings
import weakref

from numba import types
from numba.np.numpy_support import as_dtype

_patching = threading.Lock()


def pretend_device(cc):
    """From now on numba compiles as if the current device had compute capability ``cc``; returns
    the function that undoes it.

    Device functions ask the current device for its capability when they are compiled; on a
    machine without a GPU there is none, so numba's ``dispatcher.get_current_device`` is replaced
    by a stand-in (numba-cuda offers no argument for it). For a process that only compiles (the
    PTX checks); elsewhere :func:`compiling_for` limits it to a block.

    Parameters
    ----------
    cc : tuple of int
        ``(major, minor)``, e.g. ``(9, 0)``.
    """
    from numba.cuda import dispatcher

    original = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=tuple(cc))

    def undo():
        dispatcher.get_current_device = original

    return undo


@contextlib.contextmanager
def compiling_for(cc):
    """Within the block, numba compiles as if the current device had compute capability ``cc``
    (:func:`pretend_device`, undone on exit; one thread at a time)."""
    with _patching:
        undo = pretend_device(cc)
        try:
            yield
        finally:
            undo()


def launch_parts(jitted, argtypes):
    """``(kernel, launch, LaunchConfig, stream)``: what launching the ``cuda.jit`` kernel
    ``jitted`` for ``argtypes`` through cuda.core needs, compiled once.

    Raises ImportError or AttributeError if this numba-cuda or cuda.core lacks one of them.
    """
    from cuda.core import LaunchConfig, Stream, launch

    compiled = jitted.compile(tuple(argtypes))
    kernel = compiled.library.get_cufunc().kernel
    return kernel, launch, LaunchConfig, Stream.from_handle(0)


def marshaller(argtypes):
    """``params(args) -> list``: the flat kernel parameters of ``args``, laid out as numba's
    ``_Kernel._prepare_args`` lays them out, for C-contiguous arrays and integers.

    numba passes an array as ``(meminfo, parent, nitems, itemsize, data, *shape, *strides)`` and
    an integer as the ctypes value of its type. The caller promises arguments of ``argtypes``:
    nothing is checked or converted, as a launch is on the hot path.
    """
    marshal = tuple(  # an array's item size (numba's Boolean has no bitwidth), an integer's ctypes type
        as_dtype(argtype.dtype).itemsize if isinstance(argtype, types.Array) else getattr(ctypes, f"c_{argtype}")
        for argtype in argtypes)

    def params(args):
        flat = []
        for how, value in zip(marshal, args):
            if isinstance(how, int):
                shape = value.shape
                if len(shape) == 1:
                    flat += (0, 0, shape[0], how, value.device_ctypes_pointer.value, shape[0], how)
                else:
                    flat += (0, 0, value.size, how, value.device_ctypes_pointer.value, *shape, *value.strides)
            else:
                flat.append(how(value))
        return flat

    return params


_classes = []  # (MemoryPointer, DeviceNDArray), imported once: a result is made on every call


def device_array(base, nbytes, shape, strides, dtype, finalizer):
    """numba's device array over ``nbytes`` of the allocation ``base`` (a ``memalloc`` result),
    calling ``finalizer()`` when the array is dropped instead of freeing the memory."""
    if not _classes:
        from numba.cuda.cudadrv import devicearray, driver

        _classes.extend((driver.MemoryPointer, devicearray.DeviceNDArray))
    pointer_class, array_class = _classes
    pointer = pointer_class(base.context, base.device_pointer, nbytes, finalizer=finalizer)
    return array_class(shape, strides, dtype, gpu_data=pointer)


def device_to_host(host, device, nbytes):
    """Copy ``nbytes`` from numba's device array ``device`` into the host array ``host``, without
    ``copy_to_host``'s checks (which cost more host time than copying a few flags)."""
    from numba.cuda.cudadrv import driver

    driver.device_to_host(host, device, nbytes)


def nonblocking_stream():
    """A new numba stream that never waits for the legacy default stream (``CU_STREAM_NON_BLOCKING``),
    made with cuda-python's driver binding (numba's ``cuda.stream()`` makes blocking ones only)
    and destroyed when the numba stream object is dropped."""
    from cuda.bindings import driver as binding
    from numba import cuda

    cuda.current_context()  # the stream belongs to numba's context: made current first
    error, handle = binding.cuStreamCreate(binding.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
    if error != binding.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuStreamCreate(CU_STREAM_NON_BLOCKING) failed: {error}")
    stream = cuda.external_stream(int(handle))
    weakref.finalize(stream, binding.cuStreamDestroy, handle)  # numba never destroys an external stream
    return stream


def real_target_classes():
    """The classes of a kernel, a configured launch and a device array of numba's real CUDA target,
    ``(CUDADispatcher, _LaunchConfiguration, DeviceNDArrayBase)``, for a pickler that must
    recognise them (:mod:`prefixsum.classroom.child`)."""
    from numba.cuda import dispatcher
    from numba.cuda.cudadrv import devicearray

    return dispatcher.CUDADispatcher, dispatcher._LaunchConfiguration, devicearray.DeviceNDArrayBase


def driver_version():
    """The CUDA version the driver supports, as ``"13.0"``."""
    from numba.cuda.cudadrv import driver

    return ".".join(map(str, driver.get_version()))


_warned = []


def warn_fallback(error):
    """Warn, once per process, that launches go through numba's dispatcher because ``error``
    (an ImportError or AttributeError from :func:`launch_parts`) says this numba-cuda lacks a
    name the fast path uses. Returns whether it warned."""
    if _warned:
        return False
    _warned.append(error)
    warnings.warn(
        f"prefixsum: this numba-cuda lacks what the fast kernel launch uses ({type(error).__name__}: {error}); "
        "kernels launch through numba's dispatcher instead (about 30 us more host time per launch). "
        "tests/test_numba_internals.py names what changed.", RuntimeWarning, stacklevel=3)
    return True
