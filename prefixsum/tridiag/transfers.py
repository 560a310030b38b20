"""``tridiag.solve`` of numpy batches with the copies overlapped: groups of whole systems through pinned slots.

A numpy call copies a, b, c and d to the GPU, solves, and copies x back. Done one after the
other, the SMs wait for PCIe and PCIe for the SMs. The systems of a batch are independent, so the
batch is cut into chunks of whole systems (``[k0, k1)``; :func:`chunk_systems`: about
:data:`TARGET_CHUNKS` of them, from :data:`MIN_CHUNK_BYTES` to :data:`CHUNK_BYTES` of inputs
each) and, as for ``ps.scan`` of a numpy array (:mod:`prefixsum.scans.transfers`, with the
machinery of :mod:`prefixsum.core.overlap`):

* a copy engine moves chunk k's a, b, c, d rows to the device on one side stream, straight from
  the caller's arrays (:data:`PAGEABLE`; the driver stages pageable memory on the calling
  thread), or, for arrays that are not C-contiguous, from pinned slots into which the staging
  threads pack chunks k + 1, k + 2, ... meanwhile, one ``(4, rows, n)`` block each;
* the SMs solve chunk k on the default stream: the method's ``run`` on the chunk's
  ``(rows, n)`` views, its failure flags the chunk's slice of the batch's, so a failure names the
  system's index in the whole batch; no carry passes between chunks;
* the other copy engine moves chunk k - 1's x back on another side stream, straight into the
  result, page-locked memory kept between calls (:func:`prefixsum.core.workspace.pinned_result`).

Every method takes a batch of any size, so the chunks apply to all of them: a chunk is solved
as a batch of its own. A single system (batch 1) is never cut: there is nothing to overlap with
its solve but its own copies. Batches of fewer than :data:`MIN_BYTES` of inputs, and calls whose
result would not fit the thread's pinned budget, go the plain way (:mod:`.api`): on the H100
machine the chunks did not pay at any batch of up to 32 MiB measured (:data:`MIN_BYTES` says why);
what did pay is copying the caller's arrays straight to the device and x into a kept pinned
result (:func:`copy_planes`, :func:`to_host`), which both ways do.
"""
import concurrent.futures

import numpy as np
from numba import cuda

from ..core import overlap
from ..core.device import simulating
from ..core.overlap import copies, events
from ..core.workspace import pinned_result, reused, side_stream, staging

MIN_BYTES = 64 << 20
"""Batches with fewer bytes of inputs (a, b, c, d together) go the plain way (the caller's arrays
copied straight to the device, the solve, one copy out into a kept pinned result). On the H100
machine (``benchmarks/transfers_tridiag.csv``) chunks lost to the plain way at every batch up to
the 32 MiB measured but one: 2 chunks of 4096 x 256 float32 (16 MiB) took 1.64 ms against 1.78
(and lost by 8 % there in an earlier run); 4096 x 256 float64 (32 MiB) 2.88 against 2.81, 16384 x
64 float64 3.15 against 2.77, the smaller batches 8-30 % slower in 2 chunks. The driver's staging of the
pageable inputs on the calling thread sets the pace; chunks only hide the copy out, a fifth of
the bytes, for host work per chunk. Larger batches were not measured."""
CHUNK_BYTES = 16 << 20
"""Most bytes of inputs per chunk (a whole number of systems, at least one)."""
MIN_CHUNK_BYTES = 1 << 20
"""Fewest bytes of inputs per chunk, unless the batch is smaller."""
TARGET_CHUNKS = 2
"""Chunks a batch is cut into, within :data:`MIN_CHUNK_BYTES` .. :data:`CHUNK_BYTES` each: 2 beat
4 and 8 at every batch of ``transfers_tridiag.csv`` copied straight (each chunk costs host time)."""
SLOTS = 4
"""Pinned slots: chunk k's is reused by chunk k + SLOTS once chunk k is on the device."""
PINNED_RESULT_BYTES = 1 << 20
"""The plain way's x is page-locked memory from this many bytes on (:func:`to_host`), as ``ps.scan``'s result."""
PAGEABLE = True
"""Whether the caller's C-contiguous arrays are copied straight to the device (from pageable
memory: the driver stages them through its own pinned buffer, on the calling thread) rather than
packed into pinned memory first (by the staging threads, chunked; by the calling thread, plain):
straight was 25-40 % faster the plain way and 2-33 % chunked, at every batch of
``transfers_tridiag.csv`` (H100 machine; 4096 x 256 float32 plain: 1.78 against 2.58 ms), one
host pass over the inputs fewer."""
KEPT_BYTES = 64 << 20
"""Device buffers and chunk views of up to this many bytes of inputs are kept for the next call
of the same shape (making the views costs about 10 us of host time each); larger ones are made
for the call."""


def chunk_systems(batch, n, dtype):
    """Systems per chunk for (batch, n) systems of ``dtype``: ``batch / TARGET_CHUNKS`` within the
    byte bounds, at least one."""
    system_bytes = 4 * n * np.dtype(dtype).itemsize
    target = min(CHUNK_BYTES, max(MIN_CHUNK_BYTES, batch * system_bytes // TARGET_CHUNKS))
    return max(1, min(batch, target // system_bytes))


def overlapped(batch, n, dtype):
    """Whether a numpy call on (batch, n) systems of ``dtype`` goes through :func:`solve`: at
    least :data:`MIN_BYTES` of inputs, cut into two chunks or more."""
    return 4 * batch * n * np.dtype(dtype).itemsize >= MIN_BYTES and chunk_systems(batch, n, dtype) < batch


def buffers(batch, n, dtype, per, info):
    """``(inputs, x, chunks)``: the device buffer of the chunks' packed inputs (1-D, chunk k's
    ``(4, rows, n)`` block at ``k * 4 * per * n``), x as 1-D, and for each chunk
    ``(k0, k1, (a, b, c, d), x, info)``, its device views. Kept per thread and shape on a GPU
    (up to :data:`KEPT_BYTES`), fresh on the simulator."""
    def make():
        chunks = -(-batch // per)
        inputs, x = cuda.device_array(chunks * 4 * per * n, dtype), cuda.device_array(batch * n, dtype)
        views = []
        for k in range(chunks):
            k0, k1 = k * per, min(batch, (k + 1) * per)
            block = inputs[k * 4 * per * n:(k * 4 * per + 4 * (k1 - k0)) * n].reshape(4, k1 - k0, n)
            views.append((k0, k1, tuple(block[p] for p in range(4)), x[k0 * n:k1 * n].reshape(k1 - k0, n), info[k0:k1]))
        return inputs, x, views, info  # info: held, so that its id in the key stays its own
    dtype = np.dtype(dtype)
    if simulating() or 4 * batch * n * dtype.itemsize > KEPT_BYTES:
        return make()[:3]
    return reused(("tridiag numpy", batch, n, dtype.str, per, id(info)), make)[:3]


def solve(arrays, batch, n, dtype, run, info):
    """Solve the numpy (batch, n) systems ``arrays`` (a, b, c, d, native byte order) with the
    method ``run`` chunk by chunk, failures into the device array ``info``; x as a new 1-D numpy
    array of ``batch * n`` (page-locked), or None, with nothing launched, when the thread's pinned
    results are full (the caller then goes the plain way)."""
    dtype = np.dtype(dtype)
    result = pinned_result(batch * n, dtype)
    if result is None:
        return None
    per = chunk_systems(batch, n, dtype)
    inputs, x, chunks = buffers(batch, n, dtype, per, info)
    rows = [v.reshape(batch, n) for v in arrays]
    direct = PAGEABLE and all(v.flags.c_contiguous for v in arrays)
    slots = 0 if direct else min(len(chunks), SLOTS)
    slot_size = 4 * per * n  # elements
    nbytes = slots * slot_size * dtype.itemsize
    inward = staging("tridiag in", nbytes)[:nbytes].view(dtype) if slots else None  # a kept buffer may be longer
    to_device, to_host, compute = side_stream("copies in"), side_stream("copies out"), cuda.default_stream()
    (solved,), copied_in = events("solved", 1), events("in", SLOTS)
    ops = copies()
    pool = overlap.copy_pool("staging")

    def block(k):
        """Chunk k's packed inputs in its pinned slot, as one 1-D array."""
        k0, k1 = chunks[k][:2]
        start = (k % slots) * slot_size
        return inward[start:start + 4 * (k1 - k0) * n]

    def stage(k):
        """On a copy thread: chunk k's rows into its slot, once the slot's last chunk (k - slots)
        is on the device (its event was recorded before this job was submitted)."""
        k0, k1 = chunks[k][:2]
        if k >= slots:
            ops.synchronize(copied_in[k % slots])
        packed = block(k).reshape(4, k1 - k0, n)
        for p in range(4):
            overlap.host_copy(packed[p], rows[p][k0:k1])

    def send(k, k0, k1):
        """Queue chunk k's copy to the device and return the event recorded after it: from its
        slot, once staged (then the slot's next chunk is staged), or from the caller's rows
        themselves, one pageable copy per coefficient (the driver returns once it has them)."""
        offset = k * slot_size * dtype.itemsize
        if direct:
            for p in range(4):
                ops.copy_in(inputs, offset + p * (k1 - k0) * n * dtype.itemsize, rows[p][k0:k1].reshape(-1), to_device)
            ops.record(copied_in[k % SLOTS], to_device)
            return copied_in[k % SLOTS]
        staged[k].result()
        ops.copy_in(inputs, offset, block(k), to_device)
        ops.record(copied_in[k % slots], to_device)
        if k + slots < len(chunks):
            staged.append(pool.submit(stage, k + slots))
        return copied_in[k % slots]

    staged = [pool.submit(stage, k) for k in range(slots)]
    try:
        for k, (k0, k1, planes, x_k, info_k) in enumerate(chunks):
            ops.wait(send(k, k0, k1), compute)
            run(*planes, x_k, info_k)
            ops.record(solved, compute)
            ops.wait(solved, to_host)
            ops.copy_out(result[k0 * n:k1 * n], x, k0 * n * dtype.itemsize, to_host)
    finally:  # no copy thread may still write a slot when the call ends, even by an error
        concurrent.futures.wait(staged)
    ops.synchronize_stream(to_host)
    return result


def copy_planes(device, arrays):
    """Copy the C-contiguous numpy arrays a, b, c, d into the planes of the (4, batch, n) device
    array ``device``, one pageable copy each, queued on the default stream (the driver returns once
    it has staged them: the arrays may change afterwards)."""
    ops, stream = copies(), cuda.default_stream()
    for p, v in enumerate(arrays):
        ops.copy_in(device, p * v.nbytes, v.reshape(-1), stream)


def to_host(x):
    """The (batch, n) device array ``x`` copied into a new 1-D numpy array (waits for the copy):
    from :data:`PINNED_RESULT_BYTES` on, page-locked memory kept between calls while the thread's
    pinned budget lasts, which the copy engine fills at full PCIe speed, else a pageable array."""
    result = pinned_result(x.size, x.dtype) if x.size * x.dtype.itemsize >= PINNED_RESULT_BYTES else None
    if result is None:
        result = np.empty(x.size, x.dtype)
    ops, stream = copies(), cuda.default_stream()
    ops.copy_out(result, x, 0, stream)
    ops.synchronize_stream(stream)
    return result
