"""Plans: a call's arguments checked, its algorithm chosen and its kernels built once, then run many times.

A public call of the package (``ps.scan``, ``apps.compact``, ...) does two things: it works out
what to launch for arguments of these dtypes, lengths and settings (checks, the algorithm's
choice, the tile, the kernels with their argument types, the temporary storage), and it launches
it on the arrays. CUB splits the two the same way (its dispatch layer, then the agents), and
``cuda.compute`` hands the first to the caller as a build-once object. Here the first is a
:class:`Plan`, made by a public constructor (``ps.plan_scan``, ``apps.plan_compact``, ...) for a
caller who calls in a loop, and kept in :data:`PLANS`, the one bounded cache of the package, for
the one-line calls: a one-line call is a lookup in :data:`PLANS` by what the plan was made for
(dtype, length, operator, flags, algorithm) and a call of the plan.

A plan is called as ``plan(x, ..., out=None, stream=None, temp=None)``:

* ``out``: where the result goes (where its shape is known before the call): an array of the
  result's kind (a device array for device input, a numpy array for numpy input), shape and
  dtype, contiguous, sharing no memory with the input (:func:`check_out`). None: a new result.
* ``stream``: the caller's stream in any form :func:`prefixsum.core.streams.as_stream` takes.
* ``temp``: temporary storage the caller owns (CUB's ``d_temp_storage``): a contiguous device
  array of at least ``plan.temp_bytes`` bytes, for plans that take it (``temp_bytes`` is None
  for those whose algorithm keeps its storage in the package's workspace). The plan writes it
  freely during the call (and zeroes what must start at zero); the caller must not use it for
  two calls that may run at the same time. None: the workspace's storage of this thread and
  stream (:mod:`prefixsum.core.workspace`).

**Thread safety.** A plan holds no per-call state: one plan may be called from several threads
and on several streams at once; each call takes its temporary storage from its own thread's and
stream's workspace (or the caller's ``temp``). :data:`PLANS` is a dictionary read without a lock
(a lookup is atomic under the GIL) and written under one; two threads that make the same plan at
once both make it, and one is kept.
"""

import contextlib
import threading

import numpy as np

from . import numba_gpu

PLANS_KEPT = 512
"""Plans :data:`PLANS` keeps; beyond, the oldest goes (a later call makes it again)."""


class PlanCache:
    """The one bounded cache of plans, by key: :meth:`get` and :meth:`keep`.

    A key holds everything a plan was made for, with the types of the flags (so that ``1`` never
    finds the plan made for ``True``); an unhashable key (a list as an option) raises TypeError
    in :meth:`get`, and the caller then makes the plan without keeping it.
    """

    def __init__(self, bound=PLANS_KEPT):
        self.bound = bound
        self._plans = {}
        self._lock = threading.Lock()
        self.get = self._plans.get  # the one-line calls' lookup: a dictionary's own get, no Python frame

    def keep(self, key, plan):
        """Keep ``plan`` under ``key`` (the oldest plan goes beyond :attr:`bound`) and return it."""
        with self._lock:
            while len(self._plans) >= self.bound:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan
        return plan

    def clear(self):
        with self._lock:
            self._plans.clear()

    @contextlib.contextmanager
    def unchanged(self):
        """While inside, plans are made and kept as usual; on leaving, the cache holds what it held before.

        The grader's sandbox runs a student's code under this: the grader replays that run
        without running it, so its cache never holds the plans made there, and a later call
        must find the same plans in both (a plan's making calls a user operator on the host).
        """
        with self._lock:
            before = dict(self._plans)
        try:
            yield
        finally:
            with self._lock:
                self._plans.clear()  # the same dictionary: PlanCache.get is bound to it
                self._plans.update(before)

    def __len__(self):
        return len(self._plans)

    def __contains__(self, key):
        return key in self._plans


PLANS = PlanCache()
"""The plans of the one-line calls (and of :func:`prefixsum.core.arrays.result_array`'s layouts)."""


def kept(key, make, *args, **options):
    """The plan of :data:`PLANS` under ``key``, made by ``make(*args, **options)`` and kept if new;
    made and not kept for an unhashable key."""
    try:
        plan = PLANS.get(key)
    except TypeError:
        return make(*args, **options)
    return plan if plan is not None else PLANS.keep(key, make(*args, **options))


def one_line_call(key, make, args, options, *call):
    """A one-line call of the package (``ps.scan``, ``apps.compact``, ...): the plan :func:`kept`
    under ``key`` (made by ``make(*args, **options)`` if new), run as ``plan.run(*call)`` on arrays
    the caller has checked."""
    return kept(key, make, *args, **options).run(*call)


class Plan:
    """What every plan has; each family (scans, applications) adds its ``__call__``.

    Attributes
    ----------
    algorithm : str
        The name of the algorithm the plan runs (the registry's choice for ``"auto"``).
    temp_bytes : int or None
        Bytes of temporary storage a call takes from ``temp=``; None: the algorithm keeps its
        storage in the workspace and a plan refuses ``temp=``.
    """

    algorithm = ""
    temp_bytes = None
    _kernels = None

    @property
    def kernels(self):
        """Every ``(dispatcher, argtypes)`` a call may launch: what ``python -m prefixsum ptx`` and
        the PTX tests compile (built on first use)."""
        if self._kernels is None:
            self._kernels = tuple(self._list_kernels())
        return self._kernels

    def _list_kernels(self):
        return ()

    def check_temp(self, temp):
        """``temp`` as numba's uint8 device array of at least :attr:`temp_bytes` bytes, or ValueError / TypeError."""
        if self.temp_bytes is None:
            raise ValueError(
                f"this plan's algorithm {self.algorithm!r} keeps its temporary storage in the "
                f"package's workspace and takes no temp=; plans whose temp_bytes is an integer take one"
            )
        array = device_bytes(temp, "temp")
        if array.size < self.temp_bytes:
            raise ValueError(f"temp holds {array.size} bytes; this plan needs temp_bytes = {self.temp_bytes}")
        return array

    def __repr__(self):
        return f"<{type(self).__name__} {self.algorithm!r}>"


def device_bytes(array, name):
    """The contiguous device array ``array`` as numba's 1-D uint8 array over the same memory."""
    from numba import cuda

    if not (numba_gpu.is_numba_array(array) or hasattr(array, "__cuda_array_interface__")):
        raise TypeError(
            f"{name} must be a device array (numba's, or one with __cuda_array_interface__); got {type(array).__name__}"
        )
    array = array if numba_gpu.is_numba_array(array) else cuda.as_cuda_array(array)
    if not array.is_c_contiguous():
        raise ValueError(f"{name} must be contiguous; got strides {tuple(array.strides)}")
    flat = array.reshape(array.size) if len(array.shape) != 1 else array
    return flat.view(np.uint8) if flat.dtype != np.uint8 else flat


def check_out(out, shape, dtype, on_device, source=None, name="out"):
    """``out`` checked as the result of a call: its kind (a device array when ``on_device``, else a
    numpy array), ``shape``, ``dtype``, contiguity, and no memory shared with ``source`` (the
    input, an array of the same kind, or None). Returns numba's device array or the numpy array.

    Raises
    ------
    TypeError
        ``out`` of the wrong kind or dtype.
    ValueError
        ``out`` of the wrong shape, not contiguous, read-only, or overlapping the input.
    """
    from numba import cuda

    if on_device:
        if not (numba_gpu.is_numba_array(out) or hasattr(out, "__cuda_array_interface__")):
            raise TypeError(f"{name} must be a device array for a device input; got {type(out).__name__}")
        out = out if numba_gpu.is_numba_array(out) else cuda.as_cuda_array(out)
    elif not isinstance(out, np.ndarray):
        raise TypeError(f"{name} must be a numpy array for a numpy input; got {type(out).__name__}")
    expected = tuple(shape) if isinstance(shape, tuple) else (shape,)
    if tuple(out.shape) != expected:
        raise ValueError(f"{name} must have shape {expected}; got {tuple(out.shape)}")
    if np.dtype(out.dtype) != np.dtype(dtype):
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}; got {np.dtype(out.dtype).name}")
    if on_device:
        if not out.is_c_contiguous():
            raise ValueError(f"{name} must be contiguous; got strides {tuple(out.strides)}")
        if source is not None and out.size and _overlap(out, source):
            raise ValueError(f"{name} shares memory with the input; give a separate array")
    else:
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise ValueError(f"{name} must be a contiguous, writeable numpy array")
        if source is not None and np.may_share_memory(out, source):
            raise ValueError(f"{name} shares memory with the input; give a separate array")
    return out


def _overlap(a, b):
    """Whether numba's device arrays ``a`` and ``b`` share bytes (on the simulator: identity)."""
    if numba_gpu.numba_array_type() is None:
        return a is b
    (a0, a1), (b0, b1) = numba_gpu.address_range(a), numba_gpu.address_range(b)
    return a0 < b1 and b0 < a1


def carved_bytes(parts):
    """Bytes :func:`carve` takes from a caller's memory for ``parts``: ``[(count, dtype), ...]``,
    each part 16-byte aligned."""
    return sum(-(-count * np.dtype(dtype).itemsize // 16) * 16 for count, dtype in parts)


def carve(memory, parts):
    """The arrays of ``parts`` (``[(count, dtype), ...]``) laid out one after another, each 16-byte
    aligned, in ``memory`` (numba's uint8 device array of at least :func:`carved_bytes`)."""
    arrays, offset = [], 0
    for count, dtype in parts:
        nbytes = count * np.dtype(dtype).itemsize
        arrays.append(memory[offset : offset + nbytes].view(np.dtype(dtype)))
        offset += -(-nbytes // 16) * 16
    return arrays
