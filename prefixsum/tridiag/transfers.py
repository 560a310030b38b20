"""``tridiag.solve`` of numpy batches: inputs sent through page-locked memory, large batches in chunks.

A numpy call copies a, b, c and d to the GPU, solves, and copies x back. Done one after the
other, the SMs wait for PCIe and PCIe for the SMs. The systems of a batch are independent, so the
batch is cut into chunks of whole systems (``[k0, k1)``; :func:`chunk_systems`: about
:data:`TARGET_CHUNKS` of them, from :data:`MIN_CHUNK_BYTES` to :data:`CHUNK_BYTES` of inputs
each) and, as for ``ps.scan`` of a numpy array (:mod:`prefixsum.scans.transfers`, with the
machinery of :mod:`prefixsum.core.overlap`):

* a copy engine moves chunk k's a, b, c, d rows to the device on one side stream, as the plain
  way sends a whole batch (:func:`send`): packed into page-locked memory by the copy threads,
  then sent (:func:`prefixsum.core.overlap.send_packed`), or, for batches under
  :data:`PACKED_FROM_BYTES` of C-contiguous arrays, straight from the caller's (pageable) arrays;
* the SMs solve chunk k on the call's stream: the method's ``run`` on the chunk's
  ``(rows, n)`` views, its failure flags the chunk's slice of the batch's, so a failure names the
  system's index in the whole batch; no carry passes between chunks;
* the other copy engine moves chunk k - 1's x back on another side stream, straight into the
  result, page-locked memory kept between calls (:func:`prefixsum.core.workspace.pinned_result`).

Every method takes a batch of any size, so the chunks apply to all of them: a chunk is solved
as a batch of its own. A single system (batch 1) is never cut: there is nothing to overlap with
its solve but its own copies. Batches of fewer than :data:`MIN_BYTES` of inputs, and calls whose
result would not fit the thread's pinned budget, go the plain way (:mod:`.api`): the inputs sent
by :func:`send`, the solve, x copied into a kept pinned result (:func:`to_host`).
"""

import numpy as np
from numba import cuda

from ..core import overlap
from ..core.device import simulating
from ..core.overlap import copies, events
from ..core.workspace import pinned_result, reused, side_stream

MIN_BYTES = 64 << 20
"""Batches with fewer bytes of inputs (a, b, c, d together) go the plain way (the inputs sent by
:func:`send`, the solve, one copy out into a kept pinned result). In
``benchmarks/transfers_tridiag.csv`` (the variants of a shape timed in turn, as fractions of
torch's round trip, H100 and H200) 2 chunks lost to the plain way at every batch below 64 MiB and
only came near it at 64 and 128 MiB. The host's packing sets the pace; chunks hide only the copy
out, a fifth of the bytes, for host work per chunk."""
CHUNK_BYTES = 64 << 20
"""Most bytes of inputs per chunk (a whole number of systems, at least one): batches of up to
128 MiB go in :data:`TARGET_CHUNKS` chunks."""
MIN_CHUNK_BYTES = 1 << 20
"""Fewest bytes of inputs per chunk, unless the batch is smaller."""
TARGET_CHUNKS = 2
"""Chunks a batch is cut into, within :data:`MIN_CHUNK_BYTES` .. :data:`CHUNK_BYTES` each: 2 beat
4 at every batch of ``transfers_tridiag.csv`` (each chunk costs host time)."""
PINNED_RESULT_BYTES = 1 << 20
"""The plain way's x is page-locked memory from this many bytes on (:func:`to_host`), as ``ps.scan``'s result."""
PACKED_FROM_BYTES = 32 << 20
"""Batches with at least this many bytes of inputs are packed into page-locked memory on the copy
threads, then sent (:func:`send`); smaller ones of C-contiguous arrays are copied straight from
the caller's arrays (pageable: the driver stages them through its own pinned buffer on the
calling thread). ``transfers_tridiag.csv`` (fractions of torch's round trip, H100 and H200) holds
where packing wins: from 32 MiB of planes on; at 16 MiB it ties or loses, below it loses: on a few
MiB the threads' start and the copy engine's wait for the whole piece cost more than the driver's
staging (``host_copies.csv``)."""
KEPT_BYTES = 64 << 20
"""Device buffers and chunk views of up to this many bytes of inputs are kept for the next call
of the same shape (making the views costs host time, ``benchmarks/tridiag_call_profile.py``); larger ones are made
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


def buffers(batch, n, dtype, per, info, stream=None):
    """``(inputs, x, chunks)``: the device buffer of the chunks' packed inputs (1-D, chunk k's
    ``(4, rows, n)`` block at ``k * 4 * per * n``), x as 1-D, and for each chunk
    ``(k0, k1, (a, b, c, d), x, info)``, its device views. Kept per thread, stream and shape on a GPU
    (up to :data:`KEPT_BYTES`), fresh on the simulator."""

    def make():
        chunks = -(-batch // per)
        inputs, x = cuda.device_array(chunks * 4 * per * n, dtype), cuda.device_array(batch * n, dtype)
        views = []
        for k in range(chunks):
            k0, k1 = k * per, min(batch, (k + 1) * per)
            block = inputs[k * 4 * per * n : (k * 4 * per + 4 * (k1 - k0)) * n].reshape(4, k1 - k0, n)
            views.append(
                (k0, k1, tuple(block[p] for p in range(4)), x[k0 * n : k1 * n].reshape(k1 - k0, n), info[k0:k1])
            )
        return inputs, x, views, info  # info: held, so that its id in the key stays its own

    dtype = np.dtype(dtype)
    if simulating() or 4 * batch * n * dtype.itemsize > KEPT_BYTES:
        return make()[:3]
    return reused(("tridiag numpy", batch, n, dtype.str, per, id(info)), make, stream)[:3]


def solve(arrays, batch, n, dtype, run, info, stream=None, result=None):
    """Solve the numpy (batch, n) systems ``arrays`` (a, b, c, d, native byte order) with the
    method ``run`` chunk by chunk on ``stream`` (a :class:`~prefixsum.core.streams.Stream`; None:
    numba's default), failures into the device array ``info``; x into ``result`` (a contiguous
    1-D numpy array of ``batch * n``, the caller's ``out``) or a new page-locked one, returned; or
    None, with nothing launched, when the thread's pinned results are full (the caller then goes
    the plain way)."""
    dtype = np.dtype(dtype)
    if result is None:
        result = pinned_result(batch * n, dtype)
    if result is None:
        return None
    per = chunk_systems(batch, n, dtype)
    inputs, x, chunks = buffers(batch, n, dtype, per, info, stream)
    rows = [v.reshape(batch, n) for v in arrays]
    packed = packs(batch, n, dtype)
    compute = cuda.default_stream() if stream is None else stream.numba
    to_device, to_host = side_stream("copies in"), side_stream("copies out")
    (solved,), (copied_in,) = events("solved", 1), events("in", 1)
    ops = copies()
    for k, (k0, k1, planes, x_k, info_k) in enumerate(chunks):
        send(inputs, k * 4 * per * n * dtype.itemsize, [v[k0:k1] for v in rows], to_device, packed)
        ops.record(copied_in, to_device)
        ops.wait(copied_in, compute)
        run(*planes, x_k, info_k, stream=stream)
        ops.record(solved, compute)
        ops.wait(solved, to_host)
        ops.copy_out(result[k0 * n : k1 * n], x, k0 * n * dtype.itemsize, to_host)
    ops.synchronize_stream(to_host)
    return result


def packs(batch, n, dtype):
    """Whether :func:`send` packs (batch, n) systems of ``dtype``: :data:`PACKED_FROM_BYTES` of inputs or more."""
    return 4 * batch * n * np.dtype(dtype).itemsize >= PACKED_FROM_BYTES


def send(device, offset, planes, stream, packed):
    """Queue on ``stream`` the copy of the numpy (rows, n) ``planes`` (a, b, c, d) into the
    C-contiguous device array ``device`` from ``offset`` bytes on, one plane after the other.

    ``packed`` (or a plane that is not C-contiguous): through page-locked memory, packed by the
    copy threads (:func:`prefixsum.core.overlap.send_packed`); else one pageable copy per plane.
    Returns once the planes' bytes are the driver's: the caller's arrays may change.
    """
    if packed or not all(v.flags.c_contiguous for v in planes):
        overlap.send_packed(device, offset, planes, stream)
        return
    ops = copies()
    for p, v in enumerate(planes):
        ops.copy_in(device, offset + p * v.nbytes, v.reshape(-1), stream)


def to_host(x, flags=None, stream=None, result=None):
    """The (batch, n) device array ``x`` copied on ``stream`` (a :class:`~prefixsum.core.streams.Stream`;
    None: numba's default) into ``result`` (a contiguous 1-D numpy array, the caller's ``out``) or
    a new 1-D numpy array, returned once the copy is done: from :data:`PINNED_RESULT_BYTES` on,
    page-locked memory kept between calls while the thread's pinned budget lasts, which the copy
    engine fills at full PCIe speed, else a pageable array.

    ``flags``: ``(device, host)`` failure flags copied after x, in the same wait (one round trip
    to the GPU, not two, for the call that must read both).
    """
    if result is None and x.size * x.dtype.itemsize >= PINNED_RESULT_BYTES:
        result = pinned_result(x.size, x.dtype)
    if result is None:
        result = np.empty(x.size, x.dtype)
    ops, stream = copies(), cuda.default_stream() if stream is None else stream.numba
    ops.copy_out(result, x, 0, stream)
    if flags is not None:
        ops.copy_out(flags[1], flags[0], 0, stream)
    ops.synchronize_stream(stream)
    return result
