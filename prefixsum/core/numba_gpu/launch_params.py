"""The launch without numba's per-call dispatch, behind the GPU side's door (:mod:`prefixsum.core.numba_gpu`):
a compiled kernel's driver handle, the driver's ``cuLaunchKernel`` through ctypes, and the kernel
parameters laid out as numba's ``_Kernel._prepare_args`` lays them out, in a kept parameter block.
``tests/test_numba_gpu.py`` compares :func:`marshaller` and :class:`ParamBlock` with numba's own
``_prepare_args`` for every argument kind a :class:`~prefixsum.core.launch.Launcher` takes.
"""

import ctypes
import struct
import sys

from numba import types
from numba.np.numpy_support import as_dtype


def launch_parts(jitted, argtypes):
    """``(function, stream, launch, success)``: the compiled ``cuda.jit`` kernel ``jitted`` for
    ``argtypes`` as the driver's ``CUfunction`` handle (a ``ctypes.c_void_p``; numba-cuda's cuda.core
    kernel, compiled once), numba's default stream as a ``CUstream`` handle (a ``c_void_p``: the legacy default stream,
    or the per-thread one under ``NUMBA_CUDA_PER_THREAD_DEFAULT_STREAM=1``), the driver's
    ``cuLaunchKernel`` (:func:`driver_launch`) and the ``CUresult`` it returns on success.

    Raises ImportError or AttributeError if this numba-cuda lacks one of them, or the driver
    library cannot be loaded.
    """
    from numba import cuda

    compiled = jitted.compile(tuple(argtypes))
    function = ctypes.c_void_p(int(compiled.library.get_cufunc().kernel.handle))
    stream = ctypes.c_void_p(int(cuda.default_stream().handle or 0))
    return function, stream, driver_launch(), 0


_driver_launch = []


def driver_launch():
    """The driver library's own ``cuLaunchKernel``, called through ctypes.

    cuda-python's binding builds a ``CUresult`` enum member in Python on every call, a large part of a whole scan call's
    host time (``benchmarks/scan_calls.py`` times whole calls); the C function through ctypes costs a small part of
    that, and less without ``argtypes`` (ctypes then converts nothing through Python): the caller passes the three
    handles (function, stream, parameter block) as ``ctypes.c_void_p`` and the seven dimensions and the shared bytes as
    Python ints, which ctypes passes as C ints (each below 2^31, as CUDA's limits are). The library is the one
    cuda-python and numba have loaded already. Raises ImportError where it cannot be loaded.
    """
    if not _driver_launch:
        name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
        try:
            launch = ctypes.CDLL(name).cuLaunchKernel
        except (OSError, AttributeError) as error:
            raise ImportError(f"cannot load cuLaunchKernel from {name}: {error}") from error
        launch.restype = ctypes.c_int
        _driver_launch.append(launch)
    return _driver_launch[0]


def flat_params(argtypes):
    """``params(args) -> list of int``: the flat kernel parameters of ``args`` as plain integers,
    laid out as numba's ``_Kernel._prepare_args`` lays them out, for C-contiguous arrays and
    integers: an array as ``(meminfo, parent, nitems, itemsize, data, *shape, *strides)`` (the
    first two 0, as numba passes them), an integer as itself.

    The caller promises arguments of ``argtypes``: nothing is checked or converted, as a launch
    is on the hot path.
    """
    itemsizes = tuple(  # an array's item size (numba's Boolean has no bitwidth); 0 for an integer
        as_dtype(argtype.dtype).itemsize if isinstance(argtype, types.Array) else 0 for argtype in argtypes
    )

    def params(args):
        flat = []
        for itemsize, value in zip(itemsizes, args):
            if not itemsize:
                flat.append(value)
                continue
            shape = value.shape
            if len(shape) == 1:
                flat += (0, 0, shape[0], itemsize, value.device_ctypes_pointer.value, shape[0], itemsize)
            else:
                flat += (0, 0, value.size, itemsize, value.device_ctypes_pointer.value, *shape, *value.strides)
        return flat

    return params


def marshaller(argtypes):
    """``params(args) -> list``: :func:`flat_params` with each integer argument as the ctypes value
    of its type, as numba's ``_Kernel._prepare_args`` gives it (what the tests compare)."""
    flat = flat_params(argtypes)
    wrap = []
    for argtype in argtypes:
        if isinstance(argtype, types.Array):
            wrap += [int] * (5 + 2 * argtype.ndim)
        else:
            wrap.append(getattr(ctypes, f"c_{argtype}"))

    def params(args):
        return [how(value) for how, value in zip(wrap, flat(args))]

    return params


_PACKED = {
    "int8": "b",
    "uint8": "B",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "uint64": "Q",
}
"""struct's code of an integer argument of each numba type."""


class ParamBlock:
    """The ``void **kernelParams`` of ``cuLaunchKernel`` for arguments of ``argtypes``, kept and
    refilled by every launch: one 8-byte slot per flat parameter of :func:`marshaller`, written
    in one ``struct.pack_into``, and the array of the slots' addresses.

    ``fill`` is a function written for ``argtypes`` (:func:`_filler`): it reads each argument's
    parameters and packs them in one expression, with no loop, list or per-argument branch, as a
    small scan's whole host time is a few such microseconds. ``cuLaunchKernel`` copies the
    parameters before it returns, so a block is free again after a launch; a block is used by
    one host thread at a time (the Launcher keeps one per thread).
    """

    def __init__(self, argtypes):
        codes = []
        for argtype in argtypes:
            if isinstance(argtype, types.Array):  # meminfo, parent, nitems, itemsize, data, shape, strides
                codes += ["q", "q", "q", "q", "Q"] + ["q"] * (2 * argtype.ndim)
            else:
                code = _PACKED[str(argtype)]
                codes.append(code + "x" * (8 - struct.calcsize(code)))
        self.buffer = (ctypes.c_uint64 * len(codes))()  # 8-byte aligned slots
        start = ctypes.addressof(self.buffer)
        self._pointers = (ctypes.c_void_p * len(codes))(*[start + 8 * k for k in range(len(codes))])
        self.address = ctypes.c_void_p(ctypes.addressof(self._pointers))  # as driver_launch takes it
        self.fill = _filler(argtypes, struct.Struct("=" + "".join(codes)).pack_into, self.buffer)


def _filler(argtypes, pack_into, buffer):
    """``fill(args)``: write the flat parameters of ``args`` (:func:`flat_params`' layout) into
    ``buffer`` with ``pack_into``, as one function written for ``argtypes``.

    The source reads, for two 1-D float32 arrays and an int64::

        def fill(args):
            a0, a1, a2 = args
            pack_into(buffer, 0, 0, 0, a0.shape[0], 4, a0.device_ctypes_pointer.value, a0.shape[0], 4,
                      0, 0, a1.shape[0], 4, a1.device_ctypes_pointer.value, a1.shape[0], 4, a2)
    """
    names = [f"a{k}" for k in range(len(argtypes))]
    fields = []
    for name, argtype in zip(names, argtypes):
        if not isinstance(argtype, types.Array):
            fields.append(name)
            continue
        itemsize = as_dtype(argtype.dtype).itemsize  # numba's Boolean has no bitwidth
        if argtype.ndim == 1:
            fields.append(
                f"0, 0, {name}.shape[0], {itemsize}, {name}.device_ctypes_pointer.value, {name}.shape[0], {itemsize}"
            )
        else:
            fields.append(
                f"0, 0, {name}.size, {itemsize}, {name}.device_ctypes_pointer.value, *{name}.shape, *{name}.strides"
            )
    unpack = f"    {', '.join(names)}, = args\n" if names else ""
    source = f"def fill(args):\n{unpack}    pack_into(buffer, 0, {', '.join(fields)})\n"
    namespace = {"pack_into": pack_into, "buffer": buffer}
    code = compile(source, f"<ParamBlock.fill of {len(argtypes)} arguments>", "exec")
    exec(code, namespace)  # noqa: S102  (the source is made above from numba types, no user text)
    return namespace["fill"]
