"""The one door to numba-cuda's internals on the GPU side: every name it does not promise to keep.

The package's fast path on a GPU launches kernels without numba's per-call dispatch
(:mod:`prefixsum.core.launch`) and wraps recycled device memory as numba's arrays
(:mod:`prefixsum.core.arrays`); compiling for a GPU on a machine without one needs a stand-in for
the current device. Each of these leans on numba-cuda beyond its documented API, and every such
use is in this package (the launch's parameters in :mod:`.launch_params`, the rest here), so that
an upgrade of numba-cuda is checked here and in the two tests that look: ``tests/test_numba_internals.py``
looks every name up in a ``NUMBA_ENABLE_CUDASIM=0`` process, and ``tests/test_numba_gpu.py``
compares :func:`marshaller` with numba's own ``_Kernel._prepare_args`` for every argument kind
a :class:`~prefixsum.core.launch.Launcher` takes, and the :class:`ParamBlock` a launch passes
with both. Public replacements are used where they exist: a compiled kernel's ``library`` (not
``_codelibrary``), and the driver for what numba offers no call for: the launch itself (the
driver library's ``cuLaunchKernel`` through ctypes, with a kept parameter block) and, through
cuda-python's binding, a non-blocking stream (:func:`nonblocking_stream`). The simulator side has its own door,
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

from .launch_params import ParamBlock, driver_launch, flat_params, launch_parts, marshaller  # noqa: F401  (the door's names)

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


_classes = []  # (_Recycled, DeviceNDArray), made once: a result is made on every call
_bases = {}  # id(allocation) -> (weak reference to it, what a pointer over it holds): read once per recycled allocation


def _recycled_pointer_class():
    from numba.cuda.cudadrv import driver

    class _Recycled(driver.MemoryPointer):
        """numba's memory pointer over recycled memory: ``give_back()`` when the last array over
        it (the result, or a view of it) is dropped, instead of ``cuMemFree``.

        Made without ``MemoryPointer.__init__`` (its ``weakref.finalize`` costs a microsecond a
        result); ``device_ctypes_pointer`` is an attribute, as numba's ``OwnedPointer`` makes it,
        so that a launch reads it without a property call.
        """

        device_ctypes_pointer = None

        def view(self, start, stop=None):
            # numba's view holds its owner by a weak proxy: the view keeps this pointer alive
            view = super().view(start, stop)
            view.recycled_base = self
            return view

        def __del__(self):
            self.give_back()

    return _Recycled


def recycled_arrays(shape, strides, dtype, nbytes, memory):
    """``make(stream_key=0)``: a new numba device array of this layout (``nbytes`` bytes) over
    recycled memory at every call. ``memory(nbytes, stream_key)`` gives ``(allocation, give_back)``:
    a ``memalloc`` result, and the function that keeps it again (called, instead of freeing it,
    when the array and every view of it are dropped).

    An array is built from a kept copy of the attributes of the first one, as numba's own
    ``bind`` copies an array (``DeviceNDArray.__init__`` checks the shape and builds its layout
    again on every call: several microseconds), and its pointer from the fields read once per
    allocation.
    """
    if not _classes:
        from numba.cuda.cudadrv import devicearray

        _classes.extend((_recycled_pointer_class(), devicearray.DeviceNDArray))
    pointer_class, array_class = _classes
    template = {}

    def make(stream_key=0):
        base, give_back = memory(nbytes, stream_key)
        known = _bases.get(id(base))
        if known is None or known[0]() is not base:  # a new allocation, or a freed one's id reused
            known = _pointer_fields(base, nbytes)
        pointer = object.__new__(pointer_class)
        pointer.__dict__.update(known[1])
        pointer.give_back = give_back
        if not template:
            template.update(vars(array_class(shape, strides, dtype, gpu_data=pointer)))
            template["gpu_data"] = None  # the template must not keep this first result's memory
        array = object.__new__(array_class)
        array.__dict__.update(template)
        array.gpu_data = pointer
        return array

    return make


def _pointer_fields(base, nbytes):
    """``(weak reference to base, the attributes of a pointer over it)``, kept per allocation."""
    if len(_bases) >= 1024:
        _bases.clear()
    address = base.device_pointer
    known = _bases[id(base)] = (
        weakref.ref(base),
        {
            "context": base.context,
            "device_pointer": address,
            "handle": address,
            "device_ctypes_pointer": ctypes.c_size_t(int(address)),
            "size": nbytes,
            "_cuda_memsize_": nbytes,
            "is_managed": False,
            "refct": 1,
            "_owner": None,
        },
    )
    return known


NUMBA_ARRAY_MARK = "__cuda_ndarray__"
"""The attribute by which numba's ``devicearray.is_cuda_ndarray`` (which its documented API does
not name) knows its own device arrays, on a GPU and on the simulator."""


def is_numba_array(x):
    """Whether ``x`` is numba's own device array (on a GPU or the simulator): numba's
    ``devicearray.is_cuda_ndarray``, by :data:`NUMBA_ARRAY_MARK`."""
    return getattr(x, NUMBA_ARRAY_MARK, False)


def numba_array_type():
    """The class of numba's device arrays on a GPU (``DeviceNDArray``), or None on the simulator
    (whose arrays are of another class): a public call compares an argument's type with it first,
    as asking an array for ``__cuda_array_interface__`` builds a dictionary."""
    from numba import cuda

    return getattr(cuda.devicearray, "DeviceNDArray", None)


def first_elements(array, k):
    """The first ``k`` elements of the contiguous 1-D numba device array ``array``, sharing its memory.

    On a GPU without numba's slicing, which builds and checks a view (microseconds): a new
    ``DeviceNDArray`` over the same memory pointer; on the simulator, the slice.
    """
    array_class = numba_array_type()
    if array_class is None or type(array) is not array_class:
        return array[:k]
    return array_class((k,), (array.dtype.itemsize,), array.dtype, gpu_data=array.gpu_data)


def python_function(op):
    """The Python function behind a numba CUDA device function, or None if ``op`` is not one.

    On a GPU ``cuda.jit(device=True)`` gives a dispatcher whose ``targetoptions`` say ``device``
    and whose ``py_func`` is the function; on the simulator a ``FakeCUDAKernel`` with ``_device``
    and ``fn``. Both are read here, as the layers below the classroom (whose own door is
    :mod:`prefixsum.classroom.sim.numba_sim`) need the answer too.
    """
    if getattr(op, "targetoptions", {}).get("device"):
        return op.py_func
    if getattr(op, "_device", False):
        return op.fn
    return None


def is_device_function(op):
    """Whether ``op`` is a numba CUDA device function (``cuda.jit(device=True)``), on a GPU or on the
    simulator, or an object made to pass for one (:func:`pass_for_device_function`)."""
    return bool(getattr(op, "targetoptions", {}).get("device") or getattr(op, "_device", False))


def pass_for_device_function(stand_in, device):
    """Make ``stand_in`` answer :func:`is_device_function` as a numba function compiled with
    ``device=device`` would (the grader's replay puts such objects where a student's function was)."""
    stand_in._device = device
    stand_in.targetoptions = {"device": device}


def jit_options(kernel):
    """The ``cuda.jit`` options (``device``, ``fastmath``, ``debug``) a GPU dispatcher was made with, those set."""
    return {
        name: kernel.targetoptions[name]
        for name in ("device", "fastmath", "debug")
        if kernel.targetoptions.get(name) is not None
    }


def stream_pointer(stream):
    """The driver handle of numba's ``stream`` as a ``ctypes.c_void_p`` (what :func:`driver_launch` takes):
    its ``__cuda_stream__`` (CUDA's stream protocol), as numba-cuda's streams give it."""
    return ctypes.c_void_p(int(stream.__cuda_stream__()[1]) or None)


def zero_bytes(array, nbytes, stream_handle):
    """Queue ``cuMemsetD8Async`` of the first ``nbytes`` bytes of numba's device array ``array`` to 0
    on the stream of ``stream_handle`` (a ``c_void_p``, :func:`stream_pointer`'s): numba has no
    memset in its documented API."""
    from cuda.bindings import driver as binding

    (error,) = binding.cuMemsetD8Async(array.device_ctypes_pointer.value, 0, nbytes, stream_handle.value or 0)
    if error != binding.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuMemsetD8Async of {nbytes} bytes failed: {error}")


def address_range(array):
    """``(first, end)``: the device addresses of numba's contiguous device array ``array``'s bytes,
    to tell whether two arrays overlap."""
    start = array.device_ctypes_pointer.value or 0
    return start, start + array.size * array.dtype.itemsize


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


_relaxed_words = []


def relaxed_words():
    """Intrinsics ``(load, store, load_pair, store_pair)`` for 64-bit words of a global uint64 array
    at gpu scope, relaxed: PTX's ``ld.relaxed.gpu`` and ``st.relaxed.gpu``, and their 16-byte
    vector forms on two words from an even index.

    ``load(words, i) -> uint64``, ``store(words, i, word)``, ``load_pair(words, i) -> (uint64,
    uint64)`` and ``store_pair(words, i, first, second)``, ``i`` any integer (``words[i]`` and,
    for a pair, ``words[i + 1]``; no bounds check, no negative index). A relaxed access at gpu
    scope is what C++ calls an atomic load or store with ``memory_order_relaxed``: it reads or
    writes the word whole, in the L2 cache every SM shares (never a stale line of the SM's own
    L1), with none of an atomic read-modify-write's cost; the look-back's tile states need no
    more (:mod:`prefixsum.primitives.tile_state`). A pair is one 16-byte access, as CUB's
    ``ScanTileState`` reads and writes the status and value of an 8-byte type together (an
    aligned 16-byte access is one transaction on the hardware, which CUB relies on). Each access
    is an ``asm volatile`` with a memory clobber, so that the compiler neither drops a poll
    repeated in a loop nor moves other memory accesses across it.

    numba-cuda has no relaxed access of its own (its ``cuda.ldcg``/``stcg`` are plain cached
    accesses without ``volatile``): made with its ``intrinsic`` and llvmlite's inline assembly,
    once, on first use; for the real target only (the simulator has its own, in the tile states).
    """
    if not _relaxed_words:
        from llvmlite import ir
        from numba.cuda.extending import intrinsic

        word = ir.IntType(64)

        def address(context, builder, signature, args):
            array_type, index_type = signature.args[:2]
            data = context.make_array(array_type)(context, builder, value=args[0]).data
            return builder.gep(data, [context.cast(builder, args[1], index_type, types.int64)])

        def check(words, index):
            if not (isinstance(words, types.Array) and words.dtype == types.uint64 and words.ndim == 1):
                raise TypeError(f"a relaxed access takes a 1-D uint64 array; got {words}")
            if not isinstance(index, types.Integer):
                raise TypeError(f"a relaxed access takes an integer index; got {index}")

        @intrinsic
        def load(typingctx, words, index):
            check(words, index)

            def codegen(context, builder, signature, args):
                asm = ir.InlineAsm(
                    ir.FunctionType(word, [word.as_pointer()]),
                    "ld.relaxed.gpu.global.u64 $0, [$1];",
                    "=l,l,~{memory}",
                    side_effect=True,
                )
                return builder.call(asm, [address(context, builder, signature, args)])

            return types.uint64(words, index), codegen

        @intrinsic
        def store(typingctx, words, index, value):
            check(words, index)

            def codegen(context, builder, signature, args):
                asm = ir.InlineAsm(
                    ir.FunctionType(ir.VoidType(), [word.as_pointer(), word]),
                    "st.relaxed.gpu.global.u64 [$0], $1;",
                    "l,l,~{memory}",
                    side_effect=True,
                )
                value = context.cast(builder, args[2], signature.args[2], types.uint64)
                builder.call(asm, [address(context, builder, signature, args), value])
                return context.get_dummy_value()

            return types.void(words, index, value), codegen

        @intrinsic
        def load_pair(typingctx, words, index):
            check(words, index)
            pair = types.UniTuple(types.uint64, 2)

            def codegen(context, builder, signature, args):
                asm = ir.InlineAsm(
                    ir.FunctionType(ir.LiteralStructType([word, word]), [word.as_pointer()]),
                    "ld.relaxed.gpu.global.v2.u64 {$0, $1}, [$2];",
                    "=l,=l,l,~{memory}",
                    side_effect=True,
                )
                loaded = builder.call(asm, [address(context, builder, signature, args)])
                return context.make_tuple(
                    builder, pair, [builder.extract_value(loaded, 0), builder.extract_value(loaded, 1)]
                )

            return pair(words, index), codegen

        @intrinsic
        def store_pair(typingctx, words, index, first, second):
            check(words, index)

            def codegen(context, builder, signature, args):
                asm = ir.InlineAsm(
                    ir.FunctionType(ir.VoidType(), [word.as_pointer(), word, word]),
                    "st.relaxed.gpu.global.v2.u64 [$0], {$1, $2};",
                    "l,l,l,~{memory}",
                    side_effect=True,
                )
                values = [context.cast(builder, args[k], signature.args[k], types.uint64) for k in (2, 3)]
                builder.call(asm, [address(context, builder, signature, args), *values])
                return context.get_dummy_value()

            return types.void(words, index, first, second), codegen

        _relaxed_words.extend((load, store, load_pair, store_pair))
    return tuple(_relaxed_words)


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
        "tests/test_numba_internals.py names what changed.",
        RuntimeWarning,
        stacklevel=3,
    )
    return True


class DriverCopies:
    """A numpy call's asynchronous copies and the events that order them, through cuda-python's
    driver binding on raw addresses: ``copy_in``, ``copy_out``, ``record``, ``wait``,
    ``synchronize`` (an event), ``synchronize_stream``.

    numba's ``copy_to_device`` and ``copy_to_host`` on a slice of a device array build the slice
    (a new device array and pointer) and check both arrays first: tens of microseconds a call, as
    long as the copy of a 1 MiB chunk itself. The streams and events are numba's (their handles
    are read); the host arrays must be contiguous and page-locked for the copy to be asynchronous.
    Every call raises RuntimeError with the driver's error if it fails.
    """

    def __init__(self):
        from cuda.bindings import driver as binding

        self._binding, self._success = binding, binding.CUresult.CUDA_SUCCESS

    def _check(self, result, what):
        if result[0] != self._success:
            raise RuntimeError(f"{what} failed: {result[0]}")

    def copy_in(self, device, offset, host, stream):
        """Copy the host array ``host`` to ``offset`` bytes into the device array ``device``, queued on ``stream``."""
        self._check(
            self._binding.cuMemcpyHtoDAsync(
                device.device_ctypes_pointer.value + offset, host.ctypes.data, host.nbytes, stream.handle
            ),
            "cuMemcpyHtoDAsync",
        )

    def copy_out(self, host, device, offset, stream):
        """Copy ``host.nbytes`` from ``offset`` bytes into the device array ``device`` into ``host``, queued on
        ``stream``."""
        self._check(
            self._binding.cuMemcpyDtoHAsync(
                host.ctypes.data, device.device_ctypes_pointer.value + offset, host.nbytes, stream.handle
            ),
            "cuMemcpyDtoHAsync",
        )

    def record(self, event, stream):
        """Record numba's ``event`` on numba's ``stream``."""
        self._check(self._binding.cuEventRecord(event.handle, stream.handle), "cuEventRecord")

    def wait(self, event, stream):
        """Make ``stream`` wait for ``event``'s last record."""
        self._check(self._binding.cuStreamWaitEvent(stream.handle, event.handle, 0), "cuStreamWaitEvent")

    def synchronize(self, event):
        """Wait on the host for ``event``'s last record (the GIL is released meanwhile)."""
        self._check(self._binding.cuEventSynchronize(event.handle), "cuEventSynchronize")

    def synchronize_stream(self, stream):
        """Wait on the host for everything queued on numba's ``stream``."""
        self._check(self._binding.cuStreamSynchronize(stream.handle), "cuStreamSynchronize")
