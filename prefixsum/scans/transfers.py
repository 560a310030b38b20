"""A scan of a numpy array whose copies overlap the scan: chunks through pinned memory on two streams.

``ps.scan(numpy_array)`` must copy the array to the GPU and the result back. Done one after
the other (copy in, scan, copy out), a GPU that scans 2^24 elements in 60 microseconds spends
milliseconds waiting for PCIe, and copies from pageable numpy memory are slower still: the
driver stages them through its own pinned buffer, one piece at a time, while the caller waits.
Here the array is cut into chunks of :data:`CHUNK_BYTES` and the three engines of the machine
work at once, as in CUDA's "overlap of data transfer and kernel execution":

* the host's cores copy chunk k + 1 into a pinned staging slot (:func:`copy_parallel`, numpy
  copies on :data:`COPY_THREADS` threads: one core alone does not keep up with PCIe),
* a copy engine moves chunk k to the device on one side stream, while
* the SMs scan chunk k on the default stream, and
* the other copy engine moves chunk k - 1 back on another side stream, straight into the
  result, which is page-locked memory kept between calls (:func:`prefixsum.core.workspace.pinned_result`),
  or, past what the thread may keep pinned, into a pinned slot from which the host copies it.

Events order the four (:func:`prefixsum.core.workspace.side_stream`: the side streams never wait
for the default stream otherwise). The scan is the look-back scan (:mod:`.lookback`): each chunk
is one launch over the chunk's tiles (``first`` = its first tile), with the tile states of one
epoch for the whole call, so a chunk's first tiles find the carry of all chunks before in the
look-back state of the previous chunk's last tile, which has published its prefix: the previous
launch finished before this one started (one stream), so no extra kernel carries anything. A
reverse scan takes the chunks from the end of the array, as its tiles do.

A pinned slot is reused :data:`SLOTS` chunks later, after the event of its last copy has fired.

**What limits it** (H100 machine, ``benchmarks/transfers_tune.csv`` and ``transfers_timeline.csv``):
the copy engines move a 16 MiB chunk in about 0.3-0.5 ms each way (35-55 GB/s) and the SMs scan
it in 20 us, but the host's copy of a chunk into a pinned slot runs at about 12-30 GB/s on that
machine, so the host sets the pace and the engines work in bursts between its copies: 0.1-0.2x
torch's round trip at 2^24, where torch's ``.cpu()`` also pays for fresh pageable pages, and no
gain below :data:`MIN_BYTES`, where one pageable copy each way (the driver's own staging) is as
fast. Copying straight from the numpy array (pageable copies per chunk, the copies out on a
second thread) measured slower in an earlier run: cuda-python's copy calls hold the GIL, so the
second thread could not copy meanwhile.
"""
import concurrent.futures
import functools
import os
import threading

import numpy as np
from numba import cuda

from ..core.device import simulating
from ..core.workspace import latest, pinned_result, reused, side_stream, staging
from .tile_state import states

CHUNK_BYTES = 16 << 20
"""Bytes of the array per chunk (a whole number of tiles; at least one tile). From
``benchmarks/transfers_tune.csv`` (H100): 16 MiB beat 1, 2 and 4 MiB at 2^22 and 2^24 float32;
with small chunks the host's work per chunk (events, slices, each copy's set-up) dominates."""
SLOTS = 3
"""Pinned slots per direction: chunk k's slot is reused by chunk k + SLOTS (at least 2: the host
copies chunk k - 1 out of its slot after chunk k's copy into the next one is queued)."""
MIN_BYTES = 8 << 20
"""Arrays of fewer bytes go the plain way (one pageable copy in, one launch, one copy out): at
4 MiB both ways took 0.75-0.85 ms on the H100 (``transfers_tune.csv``); at 16 MiB the chunks
took 1.6-2.1 ms against 2.2 ms."""
COPY_THREADS = min(8, os.cpu_count() or 1)
"""Threads for the host's copies into and out of pinned memory (8 beat 2 at 2^24 in
``transfers_tune.csv``; at 2^22, one chunk, the two were within the run's noise)."""
PINNED_RESULT_BYTES = 1 << 20
"""A numpy call's result of this many bytes or more is page-locked memory (:func:`to_host`):
below, the copy is short and a page-locked block per size would not pay for itself."""
PART_BYTES = 2 << 20
"""A host copy is split into parts of at least this many bytes, one per thread."""

_pool = []  # the copy threads, made on first use
_making_pool = threading.Lock()


def overlapped(algorithm, x):
    """Whether ``ps.scan`` of the numpy array ``x`` with ``algorithm`` goes through :func:`scan`."""
    return algorithm.name == "lookback" and x.nbytes >= MIN_BYTES


def to_host(device):
    """The 1-D device array ``device`` copied into a new numpy array (waits for the copy).

    From :data:`PINNED_RESULT_BYTES` on, the array is page-locked memory kept between calls
    (:func:`prefixsum.core.workspace.pinned_result`), which the copy engine fills at full PCIe
    speed; a pageable one is filled through the driver's staging buffer, several times slower.
    """
    n, dtype = device.shape[0], device.dtype
    result = pinned_result(n, dtype) if n * dtype.itemsize >= PINNED_RESULT_BYTES else None
    if result is None:
        return device.copy_to_host()
    device.copy_to_host(result)
    return result


def copy_parallel(target, source):
    """``target[...] = source`` for 1-D arrays of one length, in parts on :data:`COPY_THREADS` threads.

    numpy releases the GIL while it copies, so the parts run at once; the calling thread copies
    the first part itself.
    """
    parts = min(COPY_THREADS, max(1, target.nbytes // PART_BYTES))
    if parts == 1:
        np.copyto(target, source)
        return
    with _making_pool:  # two host threads' first calls make one pool
        if not _pool:
            _pool.append(concurrent.futures.ThreadPoolExecutor(COPY_THREADS - 1, thread_name_prefix="prefixsum-copy"))
    bounds = np.linspace(0, target.shape[0], parts + 1).astype(np.int64)
    pending = [_pool[0].submit(np.copyto, target[a:b], source[a:b]) for a, b in zip(bounds[1:-1], bounds[2:])]
    np.copyto(target[:bounds[1]], source[:bounds[1]])
    for job in pending:
        job.result()


def scan(x, op, inclusive, reverse, block_size, items_per_thread):
    """The look-back scan of the 1-D numpy array ``x`` (native byte order, n >= 1), as a new numpy array.

    Parameters as :func:`prefixsum.scans.lookback.run`'s, with ``x`` on the host.
    """
    from . import lookback  # here, not above: the algorithms register in the chapters' order (scans/__init__.py)

    n, dtype = x.shape[0], x.dtype
    items = lookback.tile_items(dtype, block_size, items_per_thread)
    tile = block_size * items
    tiles = -(-n // tile)
    per_chunk = max(1, CHUNK_BYTES // (tile * dtype.itemsize))
    chunk = per_chunk * tile  # elements
    chunks = -(-tiles // per_chunk)
    source, target = latest("numpy input", n, dtype), latest("numpy result", n, dtype)
    status, values, counter, epoch = states(dtype, tiles)
    launch = lookback.launcher(op, dtype, inclusive, reverse, block_size, items)
    slot_bytes = chunk * dtype.itemsize
    result = pinned_result(n, dtype) if x.nbytes >= PINNED_RESULT_BYTES else None
    direct = result is not None  # the copy engine writes the result itself; else through slots
    if not direct:
        result = np.empty(n, dtype)
    inward = staging("scan in", SLOTS * slot_bytes)
    outward = None if direct else staging("scan out", SLOTS * slot_bytes)
    to_device, to_host, compute = side_stream("copies in"), side_stream("copies out"), cuda.default_stream()
    (scanned,), copied_in, copied_out = _events("scanned", 1), _events("in", SLOTS), _events("out", SLOTS)

    def span(k):
        """Chunk k's elements ``lo .. hi - 1`` in memory (from the end for a reverse scan), and its slot."""
        first, last = k * chunk, min((k + 1) * chunk, n)
        lo, hi = (n - last, n - first) if reverse else (first, last)
        slot = (k % SLOTS) * slot_bytes
        return lo, hi, slot, slot + (hi - lo) * dtype.itemsize

    def copy_out(k):
        """Wait for chunk k's copy to the host and move it from its slot into the result."""
        lo, hi, a, b = span(k)
        copied_out[k % SLOTS].synchronize()
        copy_parallel(result[lo:hi], outward[a:b].view(dtype))

    for k in range(chunks):
        lo, hi, a, b = span(k)
        if k >= SLOTS:
            copied_in[k % SLOTS].synchronize()  # the slot's last chunk is on the device
        staged = inward[a:b].view(dtype)
        copy_parallel(staged, x[lo:hi])
        source[lo:hi].copy_to_device(staged, stream=to_device)
        copied_in[k % SLOTS].record(to_device)
        copied_in[k % SLOTS].wait(compute)
        launch(min(per_chunk, tiles - k * per_chunk), block_size, source, target, status, values, counter, n,
               epoch, k * per_chunk)
        scanned.record(compute)
        scanned.wait(to_host)
        # through a slot: its last chunk (k - SLOTS) was copied out of it at step k - SLOTS + 1 <= k - 1
        target[lo:hi].copy_to_host(result[lo:hi] if direct else outward[a:b].view(dtype), stream=to_host)
        copied_out[k % SLOTS].record(to_host)
        if k and not direct:
            copy_out(k - 1)
    if direct:
        copied_out[(chunks - 1) % SLOTS].synchronize()  # the last copy on the stream: every one is done
    else:
        copy_out(chunks - 1)
    return result


def _events(role, count):
    """``count`` events of this thread for ``role``, made once and kept (the simulator's take no
    ``timing`` argument)."""
    make = cuda.event if simulating() else functools.partial(cuda.event, timing=False)
    return reused(("transfer events", role, count), lambda: [make() for _ in range(count)])
