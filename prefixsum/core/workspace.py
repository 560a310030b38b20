"""One workspace for the device memory the package keeps between calls: scratch, tile states, results.

Allocating device memory (``cuMemAlloc``) and freeing it (``cuMemFree``, which waits for the
GPU) costs more host time than a small scan or solve, so the package keeps what it allocates:

* :func:`reused`: whatever a call builds for itself and hands to no one (a solver's failure
  flags and work rows, the look-back's tile states), made once per key and kept (the oldest of
  more than :data:`KEPT_ENTRIES` keys is dropped);
* :func:`scratch`: a device array for intermediate results (tile totals, carries), by role,
  shape and dtype; fresh on the simulator, so that the checker's poisoned allocations see every
  write;
* :func:`latest`: the last array of a role and dtype, replaced when the shape changes (the
  device copies of a numpy input and its result: the memory of one length at a time);
* :func:`result_memory` and :func:`keep_result_memory`: the memory of results the caller has
  dropped, handed out again for the next result of the same size (up to :data:`KEPT_RESULT_BYTES`);
* :func:`pinned_result`: numpy results in page-locked memory, kept when the caller drops them
  and handed out again (up to :data:`KEPT_PINNED_BYTES`), so that a numpy call's result is
  written by the copy engine directly, with no host copy after it;
* :func:`staging`: page-locked host buffers (a numpy call's copies go through them, so that the
  copy engines move them while the SMs scan) and :func:`side_stream`: streams of this thread for
  those copies, which never wait for the default stream's kernels unless told to by an event.

**Policy for threads and streams.** Everything is kept *per host thread and stream*: a thread
never sees another thread's buffers, and a thread's work on one stream never sees the buffers of
its work on another stream (the ``stream`` argument below: a :class:`~prefixsum.core.streams.Stream`,
or None for numba's default stream). So two threads scanning at once never share a scratch array
or a tile state, no lazy initialisation can be seen half done by another thread, and two calls of
one thread on two streams, which the GPU may run at the same time, never share temporary storage.
Within one thread and stream, the calls queue on the stream in order, so a buffer reused by the
next call is written only after the kernels of the previous call have read it. The same holds for
results: the memory of a result the caller dropped is handed out again only to a later call of
the same thread on the same stream (as PyTorch's caching allocator keeps a block to its stream),
which the stream orders after everything queued on it before; a caller who reads a result on
another stream must drop it only after that work is done (PyTorch's ``record_stream`` rule).
A thread keeps the memory of at most :data:`KEPT_STREAMS` streams; the oldest stream's is freed
beyond (``cuMemFree`` waits for the GPU). A numpy call's copies run on this thread's side streams
(:func:`side_stream`), ordered against its kernels by events and finished before the call returns,
so the buffers they touch (:func:`staging`, :func:`latest`) are free again when the next call
starts. The only structure two threads touch is a result's memory given back by a finalizer, which
may run on any thread (the garbage collector's): it goes back to the pool of the thread and stream
that allocated it, under that pool's lock. A caller's own temporary storage (``temp=`` of a plan,
:mod:`prefixsum.core.plans`) is outside the workspace: the caller must not let two calls that may
run at once share it. The kept memory belongs to the GPU it was allocated on: one GPU per process.

**On the simulator** one thing more is shared: while a kernel is simulated, the name ``cuda``
in the modules of its functions stands for the simulated module (numba's simulator works that
way), so another thread's host code in those modules must not run meanwhile. A public call (a
scan, a tridiagonal solve) therefore takes :func:`simulator_turn` for its whole length, and
every simulated launch takes it too: on the simulator the calls of several threads run one after
another, each whole. On a GPU it costs nothing.
"""

import contextlib
import functools
import threading
import weakref

import numpy as np
from numba import cuda

from . import numba_gpu
from .device import simulating

KEPT_ENTRIES = 64
"""Keys :func:`reused` keeps per thread and stream; the oldest goes first."""
KEPT_STREAMS = 16
"""Streams whose memory a thread keeps; beyond, the oldest stream's is freed."""
KEPT_RESULT_BYTES = 1 << 30
"""Bytes of dropped results a thread keeps for reuse on each stream; a dropped result beyond is freed."""

KEPT_PINNED_BYTES = 256 << 20
"""Bytes of page-locked memory a thread's numpy results may hold (handed out or kept); beyond, a
result is a plain numpy array."""

_local = threading.local()
_simulator = threading.RLock()


def simulator_turn():
    """A context manager: on the simulator, the process-wide turn of a public call or a launch
    (reentrant: a call's own launches take it again); on a GPU, nothing."""
    return _simulator if simulating() else contextlib.nullcontext()


def one_call_at_a_time(function):
    """Decorate a public call so that, on the simulator, it runs whole in :func:`simulator_turn`;
    on a GPU the call is returned as it is (no turn to take, and no wrapper to pass on every call).

    numba has made its choice by then: this module imports ``numba.cuda``, and the choice never
    changes within a process.
    """
    if not simulating():
        return function

    @functools.wraps(function)
    def call(*args, **kwargs):
        with _simulator:
            return function(*args, **kwargs)

    return call


def _per_stream(name, key, make):
    """This thread's ``name`` store of the stream ``key`` (made on first use: a thread-local needs
    no lock), the oldest stream's dropped beyond :data:`KEPT_STREAMS`."""
    stores = getattr(_local, name, None)
    if stores is None:
        stores = {}
        setattr(_local, name, stores)
    store = stores.get(key)
    if store is None:
        if len(stores) >= KEPT_STREAMS:
            stores.pop(next(iter(stores)))
        store = stores[key] = make()
    return store


def _store(stream=None):
    """This thread's entries for ``stream`` (a dictionary lookup when they exist: every call asks)."""
    key = 0 if stream is None else stream.key
    stores = getattr(_local, "entries", None)
    store = None if stores is None else stores.get(key)
    return store if store is not None else _per_stream("entries", key, dict)


def reused(key, make, stream=None):
    """``make()``, made once per thread, stream and ``key`` and handed out again afterwards.

    For what a call builds for itself and hands to no one. Never for what it returns.
    """
    store = _store(stream)
    kept = store.get(key)
    if kept is None:
        if len(store) >= KEPT_ENTRIES:
            store.pop(next(iter(store)))
        kept = store[key] = make()
    return kept


def scratch(role, shape, dtype, stream=None):
    """A device array for intermediate results, kept per thread, stream, ``role``, ``shape`` and ``dtype``.

    On the simulator every call gets a fresh array, so that the checker's poisoned allocations
    see every write.
    """
    if simulating():
        return cuda.device_array(shape, dtype)
    dtype = np.dtype(dtype)
    return reused(("scratch", role, shape, dtype.str), lambda: cuda.device_array(shape, dtype), stream)


def latest(role, shape, dtype, stream=None):
    """The device array of ``role`` and ``dtype`` of this thread's last call on ``stream``, if it
    had ``shape``; else a new one, which replaces it (the old one is freed first). Fresh on the simulator."""
    if simulating():
        return cuda.device_array(shape, dtype)
    dtype = np.dtype(dtype)
    store = _store(stream)
    key = ("latest", role, dtype.str)
    kept = store.get(key)
    if kept is None or kept.shape != (shape if isinstance(shape, tuple) else (shape,)):
        store.pop(key, None)
        kept = store[key] = cuda.device_array(shape, dtype)
    return kept


class _ResultPool:
    """The memory of one thread's dropped results, by size in bytes, behind a lock (a finalizer
    may give memory back from any thread)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.free = {}
        self.kept = 0

    def take(self, nbytes):
        with self.lock:
            free = self.free.get(nbytes)
            if free:
                self.kept -= nbytes
                return free.pop()
        return None

    def give(self, base, nbytes):
        with self.lock:
            if self.kept + nbytes <= KEPT_RESULT_BYTES:
                self.free.setdefault(nbytes, []).append(base)
                self.kept += nbytes


def result_memory(nbytes, stream_key=0):
    """``(allocation, give_back)``: device memory of ``nbytes`` for a result, reused if this thread
    kept some of that size for the stream of ``stream_key`` (:attr:`~prefixsum.core.streams.Stream.key`),
    and the function that keeps it again, for that stream, once the result is dropped."""
    pools = getattr(_local, "results", None)
    pool = None if pools is None else pools.get(stream_key)
    if pool is None:
        pool = _per_stream("results", stream_key, _ResultPool)
    base = pool.take(nbytes)
    if base is None:
        base = cuda.current_context().memalloc(nbytes)
    return base, lambda: pool.give(base, nbytes)


class _PinnedPool:
    """One thread's page-locked blocks for numpy results, by size, behind a lock (a dropped
    result gives its block back from whichever thread drops it)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.free = {}
        self.held = 0

    def take(self, nbytes):
        """A kept block of ``nbytes``, a new one while the thread holds less than
        :data:`KEPT_PINNED_BYTES`, else None."""
        with self.lock:
            free = self.free.get(nbytes)
            if free:
                return free.pop()
            if self.held + nbytes > KEPT_PINNED_BYTES:
                return None
            self.held += nbytes
        return cuda.pinned_array(nbytes, np.uint8)

    def give(self, block):
        with self.lock:
            self.free.setdefault(block.nbytes, []).append(block)


class _Lease:
    """What a pinned result's numpy array is a view of: while it lives, the block is the caller's."""

    def __init__(self, block, n, dtype):
        self.__array_interface__ = {
            "shape": (n,),
            "typestr": dtype.str,
            "data": (block.ctypes.data, False),
            "version": 3,
        }


def pinned_result(n, dtype):
    """A new numpy array of ``n`` elements of ``dtype`` (n >= 1) in page-locked memory, or None.

    Its memory goes back to this thread's pool when the array and every view of it are dropped,
    and the next result of the same size gets it again: ``cudaHostAlloc`` takes longer than
    copying a few MiB. None when the thread's results already hold :data:`KEPT_PINNED_BYTES` (the
    caller then makes a plain numpy array): page-locked memory is taken from the OS's pageable pool.
    """
    pool = getattr(_local, "pinned", None)
    if pool is None:
        pool = _local.pinned = _PinnedPool()
    dtype = np.dtype(dtype)
    block = pool.take(n * dtype.itemsize)
    if block is None:
        return None
    lease = _Lease(block, n, dtype)
    weakref.finalize(lease, pool.give, block)
    return np.asarray(lease)


def staging(role, nbytes):
    """A page-locked (pinned) host buffer of at least ``nbytes`` bytes (uint8), this thread's, by ``role``.

    Kept between calls and replaced by a larger one when a call needs more (the old one is freed
    first): ``cudaHostAlloc`` takes milliseconds, and the DMA engines read and write only pinned
    memory (a copy from pageable memory is staged by the driver through its own pinned buffer,
    one piece at a time, while the caller waits). On the simulator: a plain numpy array.
    """
    store = _store()
    key = ("staging", role)
    kept = store.get(key)
    if kept is None or kept.nbytes < nbytes:
        store.pop(key, None)
        kept = store[key] = cuda.pinned_array(nbytes, np.uint8)
    return kept


def side_stream(role):
    """This thread's stream for ``role``, made on first use and kept: on a GPU a non-blocking one
    (``CU_STREAM_NON_BLOCKING``: its work never waits for the legacy default stream's, where
    the package's kernels run, nor the other way round; events order them); on the simulator
    numba's simulated stream."""
    return reused(("side stream", role), _new_side_stream)


def _new_side_stream():
    return cuda.stream() if simulating() else numba_gpu.nonblocking_stream()
