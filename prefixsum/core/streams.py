"""The stream a public call runs on: ``stream=`` in every form a user may hold, as one object.

Every public call (``ps.scan``, ``ps.exclusive_scan``, the plans, the applications) takes
``stream=``: None for numba's default stream (where the package's work ran before the keyword
existed), or a stream of the caller's:

* a numba stream (``cuda.stream()``, ``cuda.default_stream()``, ``cuda.external_stream(ptr)``),
* any object with ``__cuda_stream__`` (CUDA's stream protocol: it returns ``(version, handle)``;
  cuda.core's streams and numba-cuda's have it),
* a PyTorch stream (``torch.cuda.Stream``: its handle is ``.cuda_stream``) or a CuPy stream
  (``cupy.cuda.Stream``: ``.ptr``).

:func:`as_stream` turns each into a :class:`Stream` (made once per handle and kept in the plan cache,
:data:`prefixsum.core.plans.PLANS`): numba's stream object (for a launch through
numba's dispatcher and for numba's copies), the driver handle (for a
:class:`~prefixsum.core.launch.Launcher`'s ``cuLaunchKernel``) and the key under which the
workspace keeps this stream's memory apart from every other stream's
(:mod:`prefixsum.core.workspace`). The work of a call is queued on the stream in order with
whatever the caller queued there before, and nothing waits for it unless the call must return
host data (a numpy result, a count read back), which waits for this stream only.

On the simulator every kernel runs at once on the host, so a stream orders nothing: any of these
forms is accepted (numba's simulated streams too) and the call runs as on the default stream.
"""

from . import numba_gpu
from .device import simulating
from .plans import kept


class Stream:
    """A stream as the package's launches and copies take it.

    Attributes
    ----------
    numba : numba stream
        For ``kernel[grid, block, stream]`` and numba's copies.
    pointer : ctypes.c_void_p
        The driver's ``CUstream`` handle, for :class:`~prefixsum.core.launch.Launcher`.
    key : int
        The handle as an integer, 0 for numba's default stream: what the workspace keeps this
        stream's memory under.
    """

    __slots__ = ("numba", "pointer", "key")

    def __init__(self, numba, pointer, key):
        self.numba, self.pointer, self.key = numba, pointer, key

    def synchronize(self):
        """Wait on the host for everything queued on this stream."""
        self.numba.synchronize()

    def __repr__(self):
        return f"Stream(key={self.key})"


_default = []


def default_stream():
    """The :class:`Stream` of numba's default stream (key 0), made once."""
    if not _default:
        from numba import cuda

        numba_stream = cuda.default_stream()
        pointer = None if simulating() else numba_gpu.stream_pointer(numba_stream)
        _default.append(Stream(numba_stream, pointer, 0))
    return _default[0]


def handle_of(stream):
    """The integer driver handle of a stream in any accepted form (see the module's docstring).

    Raises
    ------
    TypeError
        For anything else, naming what it got and what is accepted.
    """
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        answer = protocol()
        if not (isinstance(answer, tuple) and len(answer) == 2):
            raise TypeError(f"stream.__cuda_stream__() must return (version, handle); got {answer!r}")
        return int(answer[1])
    for attribute in ("cuda_stream", "ptr"):  # PyTorch's, CuPy's
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int) and not isinstance(handle, bool):
            return handle
    raise TypeError(
        f"stream must be None, a numba stream, a PyTorch or CuPy stream, or an object with "
        f"__cuda_stream__; got {type(stream).__name__}"
    )


def as_stream(stream):
    """The :class:`Stream` for ``stream=`` of a public call (None: numba's default stream; a
    :class:`Stream` is returned as it is).

    On the simulator every accepted form gives the default stream (see the module's docstring);
    numba's simulated streams, which have no handle, are accepted as they are.
    """
    if stream is None:
        return default_stream()
    if type(stream) is Stream:  # already one: a call made by another of the package's calls
        return stream
    if simulating():
        if not _is_simulated_stream(stream):
            handle_of(stream)  # refuses what is not a stream
        return default_stream()
    handle = handle_of(stream)
    return kept(("stream", handle), _stream_of, handle)


def _is_simulated_stream(stream):
    from numba import cuda

    return isinstance(stream, type(cuda.default_stream()))


def _stream_of(handle):
    """The :class:`Stream` of ``handle`` (kept in the plan cache, as making numba's stream object
    over a handle costs microseconds): numba's default stream for the legacy default stream's
    handles, else numba's external stream over the handle (which owns nothing: the caller's
    stream is the caller's to destroy)."""
    from numba import cuda

    if handle in (0, 1):  # CU_STREAM_DEFAULT, CU_STREAM_LEGACY: numba's default stream
        return default_stream()
    numba_stream = cuda.external_stream(handle)
    return Stream(numba_stream, numba_gpu.stream_pointer(numba_stream), handle)


def launch_stream(stream):
    """The third item of a launch through numba's dispatcher (``kernel[grid, block, stream]``) for
    ``stream`` (a :class:`Stream` or None): numba's stream object, or 0 for its default stream."""
    return 0 if stream is None else stream.numba
