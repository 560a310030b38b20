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
from .workspace import reused, staging

STAGING_THREADS = min(4, os.cpu_count() or 1)
"""Host threads that fill the pinned slots, a chunk each (4 matched or beat 8 in ``transfers_tune.csv``)."""
COPY_THREADS = min(8, os.cpu_count() or 1)
"""Host threads for a copy out of a pinned slot into a result past the pinned budget
(:func:`copy_parallel`), and for the parts of :func:`send_packed`."""
PART_BYTES = 2 << 20
"""A host copy is split into parts of at least this many bytes, one per thread."""
PACK_PIECE_BYTES = 32 << 20
"""The largest piece of :func:`send_packed`, and the largest slot of its page-locked ring."""
MIN_SLOT_BYTES = 1 << 20
"""The smallest slot of :func:`send_packed`'s page-locked ring (a slot is a power of two of bytes)."""
MIN_PACK_BYTES = 256 << 10
"""The fewest bytes a copy thread packs at a time for :func:`send_packed` (unless a block is smaller)."""
PACK_SLOTS = 2
"""Slots of a thread's page-locked ring for :func:`send_packed` (at most ``PACK_SLOTS *
PACK_PIECE_BYTES`` bytes, allocated on first use and kept): a piece is packed into its slot once
the slot's last copy to the device is over."""

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
    np.copyto(target[: bounds[1]], source[: bounds[1]])
    for job in pending:
        job.result()


def send_packed(device, offset, planes, stream):
    """Queue on ``stream`` the copy of the host arrays ``planes`` into the C-contiguous device array
    ``device`` from ``offset`` bytes on, one after the other, packed into page-locked memory first.

    A copy from pageable memory runs at the speed of the driver's staging on the calling thread,
    one from page-locked memory at the copy engine's, and numpy fills page-locked memory on
    several threads at once (``benchmarks/host_copies.csv`` holds the times of each way, on
    both machines measured). So the planes are cut into pieces of up to :data:`PACK_PIECE_BYTES` (whole
    rows, or pieces of one row where a row is longer; :func:`_pieces`), each packed by all the
    copy threads into a slot of this thread's page-locked ring (:func:`_pack`), then sent.
    Doing two of these things at once did not pay on either machine, the host's memory being
    the bound: 2 pieces of 8 MiB, the second packed while the first is sent, took longer than one
    piece of 16 MiB, and so did half of the 16 MiB sent pageable by the calling thread while the
    threads pack the other half (``benchmarks/host_copies.csv``). So the pieces are large, and serve to bound the
    page-locked memory.

    ``planes``: 2-D arrays of one shape and of ``device``'s dtype, any strides; plane p lands at
    ``offset + p * planes[p].nbytes``. Returns once the last piece is queued: the caller's arrays
    may change from then on. A slot is packed again only after its last copy (this call's or an
    earlier one's) is over, so calls on one thread may follow each other without synchronizing.
    """
    dtype = np.dtype(device.dtype)
    ops = copies()
    ring, slot_size, sent, state = _ring(dtype, len(planes) * planes[0].size * dtype.itemsize, ops)
    for blocks, start, size in _pieces(planes, min(slot_size, max(1, PACK_PIECE_BYTES // dtype.itemsize))):
        slot = state["cursor"] % PACK_SLOTS
        state["cursor"] = slot + 1
        ops.synchronize(sent[slot])
        packed = ring[slot * slot_size : slot * slot_size + size]
        _pack(packed, blocks)
        ops.copy_in(device, offset + start * dtype.itemsize, packed, stream)
        ops.record(sent[slot], stream)


def _ring(dtype, nbytes, ops):
    """This thread's page-locked ring for a send of ``nbytes``: ``(slots, slot_size, events, state)``,
    the slots as one array of ``dtype``, ``slot_size`` elements apart, an event per slot and the
    ring's state (its slot size in bytes, the next slot).

    A slot holds a power of two of bytes, from :data:`MIN_SLOT_BYTES` up to :data:`PACK_PIECE_BYTES`,
    enough for the whole send where it can: a small send does not pin 64 MiB. The ring only grows,
    and before it does, every copy out of its old memory is waited for (the old memory is freed).
    """
    want = min(PACK_PIECE_BYTES, max(MIN_SLOT_BYTES, 1 << max(0, nbytes - 1).bit_length()))
    sent = events("pack ring", PACK_SLOTS)
    state = reused(("pack ring",), lambda: {"slot_bytes": 0, "cursor": 0})
    if state["slot_bytes"] < want:
        for event in sent:
            ops.synchronize(event)
        state["slot_bytes"] = want
    slot_bytes = state["slot_bytes"]
    ring = staging("pack ring", PACK_SLOTS * slot_bytes)[: PACK_SLOTS * slot_bytes].view(dtype)
    return ring, slot_bytes // dtype.itemsize, sent, state


def _pieces(planes, size):
    """``(blocks, start, elements)`` for each piece of at most ``size`` elements: consecutive
    blocks of :func:`_parts`, which lie one after the other on the device from element ``start``."""
    blocks, start, total = [], 0, 0
    for block, at in _parts(planes, size):
        if blocks and total + block.size > size:
            yield blocks, start, total
            blocks, total = [], 0
        if not blocks:
            start = at
        blocks.append(block)
        total += block.size
    yield blocks, start, total


def _pack(packed, blocks):
    """The 2-D ``blocks`` one after the other into the 1-D ``packed``, in parts of about
    ``1 / COPY_THREADS`` of the whole (at least :data:`MIN_PACK_BYTES`) on the copy threads; the
    calling thread copies the first part and waits for the others."""
    unit = max(MIN_PACK_BYTES, packed.nbytes // COPY_THREADS)
    jobs, at = [], 0
    for block in blocks:
        target = packed[at : at + block.size].reshape(block.shape)
        at += block.size
        count = max(1, -(-block.nbytes // unit))
        if block.shape[0] == 1:
            target, block = target[0], block[0]
        edges = np.linspace(0, target.shape[0], min(count, target.shape[0]) + 1).astype(np.int64)
        jobs += [(target[a:b], block[a:b]) for a, b in zip(edges[:-1], edges[1:])]
    pool = copy_pool("copies")
    pending = [pool.submit(np.copyto, *job) for job in jobs[1:]]
    np.copyto(*jobs[0])
    for job in pending:
        job.result()


def _parts(planes, size):
    """``(block, start)`` for every part of the 2-D ``planes`` of at most ``size`` elements, in
    order: whole rows while a row fits, else equal pieces of one row; ``start`` counts elements
    from the first plane's first, the planes laid one after the other."""
    rows, cols = planes[0].shape
    per = size // cols
    pieces = 1 if per else -(-cols // size)
    width = -(-cols // pieces)
    for p, plane in enumerate(planes):
        base = p * rows * cols
        if per:
            for r in range(0, rows, per):
                yield plane[r : r + per], base + r * cols
        else:
            for r in range(rows):
                for c in range(0, cols, width):
                    yield plane[r : r + 1, c : c + width], base + r * cols + c


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
        _flat(device)[start : start + host.shape[0]].copy_to_device(host, stream=stream)

    @staticmethod
    def copy_out(host, device, offset, stream):
        start = offset // host.itemsize
        _flat(device)[start : start + host.shape[0]].copy_to_host(host, stream=stream)

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
