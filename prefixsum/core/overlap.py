"""What a numpy call needs to overlap its copies with its kernels: copy threads, driver copies, events.

Shared by :mod:`prefixsum.scans.transfers` (``ps.scan`` of a numpy array, cut into chunks of
tiles) and :mod:`prefixsum.tridiag.transfers` (``tridiag.solve`` of numpy batches, cut into
groups of whole systems). Both queue, per chunk, a copy in on one side stream
(:func:`prefixsum.core.workspace.side_stream`), the kernels on the default stream and a copy out
on another side stream, ordered by events, while host threads fill the next chunks' pinned
slots (:func:`prefixsum.core.workspace.staging`); see :mod:`prefixsum.scans.transfers` for the
timeline and what limits it.
"""
import concurrent.futures
import functools
import os
import threading

import numpy as np
from numba import cuda

from . import numba_gpu
from .device import simulating
from .workspace import reused

STAGING_THREADS = min(4, os.cpu_count() or 1)
"""Host threads that fill the pinned slots, a chunk each (4 matched or beat 8 in ``transfers_tune.csv``)."""
COPY_THREADS = min(8, os.cpu_count() or 1)
"""Host threads for a copy out of a pinned slot into a result past the pinned budget (:func:`copy_parallel`)."""
PART_BYTES = 2 << 20
"""A host copy is split into parts of at least this many bytes, one per thread."""

_pool = {}  # "staging" and "copies": the two thread pools, made on first use
_making_pool = threading.Lock()


def copy_pool(role):
    """The thread pool of ``role``: "staging" (:data:`STAGING_THREADS`, the chunks into their
    slots) or "copies" (:data:`COPY_THREADS`, :func:`copy_parallel`'s parts), made on first use.
    Two pools, so that a copy out never queues behind chunks waiting for their slots."""
    pool = _pool.get(role)
    if pool is None:
        with _making_pool:  # two host threads' first calls make one pool
            if role not in _pool:
                threads = STAGING_THREADS if role == "staging" else COPY_THREADS
                _pool[role] = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix=f"prefixsum-{role}")
            pool = _pool[role]
    return pool


def copy_parallel(target, source):
    """``target[...] = source`` for 1-D arrays of one length, in parts on :data:`COPY_THREADS` threads.

    numpy releases the GIL while it copies, so the parts run at once; the calling thread copies
    the first part itself.
    """
    parts = min(COPY_THREADS, max(1, target.nbytes // PART_BYTES))
    if parts == 1:
        np.copyto(target, source)
        return
    pool = copy_pool("copies")
    bounds = np.linspace(0, target.shape[0], parts + 1).astype(np.int64)
    pending = [pool.submit(np.copyto, target[a:b], source[a:b]) for a, b in zip(bounds[1:-1], bounds[2:])]
    np.copyto(target[:bounds[1]], source[:bounds[1]])
    for job in pending:
        job.result()


def host_copy(target, source):
    """``target[...] = source``: one chunk into its pinned slot, on a copy thread (a function of its
    own so that ``benchmarks/transfers.py --timeline`` can mark it)."""
    np.copyto(target, source)


class _NumbaCopies:
    """:class:`prefixsum.core.numba_gpu.DriverCopies`' calls through numba's public API: the
    simulator's (whose streams and events are numba's stand-ins)."""

    @staticmethod
    def copy_in(device, offset, host, stream):
        start = offset // host.itemsize
        _flat(device)[start:start + host.shape[0]].copy_to_device(host, stream=stream)

    @staticmethod
    def copy_out(host, device, offset, stream):
        start = offset // host.itemsize
        _flat(device)[start:start + host.shape[0]].copy_to_host(host, stream=stream)

    @staticmethod
    def record(event, stream):
        event.record(stream)

    @staticmethod
    def wait(event, stream):
        event.wait(stream)

    @staticmethod
    def synchronize(event):
        event.synchronize()

    @staticmethod
    def synchronize_stream(stream):
        stream.synchronize()


def _flat(device):
    """A C-contiguous device array as 1-D (the driver's copies see only its address)."""
    return device if device.ndim == 1 else device.reshape(device.size)


_driver_copies = []  # made once, on a GPU


def copies():
    """The copy and event calls of a numpy call: the driver's on a GPU, numba's on the simulator.

    ``copy_in(device, offset, host, stream)`` and ``copy_out(host, device, offset, stream)`` take
    a C-contiguous device array, a byte offset into it and a contiguous 1-D host array.
    """
    if simulating():
        return _NumbaCopies
    if not _driver_copies:
        _driver_copies.append(numba_gpu.DriverCopies())
    return _driver_copies[0]


def events(role, count):
    """``count`` events of this thread for ``role``, made once and kept (the simulator's take no
    ``timing`` argument)."""
    make = cuda.event if simulating() else functools.partial(cuda.event, timing=False)
    return reused(("transfer events", role, count), lambda: [make() for _ in range(count)])
