"""A scan of a numpy array whose copies overlap the scan: chunks through pinned memory on two streams.

``ps.scan(numpy_array)`` must copy the array to the GPU and the result back. Done one after
the other (copy in, scan, copy out), a GPU that scans 2^24 elements in far less time than the copies
take spends most of the call waiting for PCIe, and copies from pageable numpy memory are slower still: the
driver stages them through its own pinned buffer, one piece at a time, on one core, while the
caller waits. Here the array is cut into chunks (:func:`chunk_bytes`: about :data:`TARGET_CHUNKS`
of them, from :data:`MIN_CHUNK_BYTES` to :data:`CHUNK_BYTES` each) and the engines of the
machine work at once, as in CUDA's "overlap of data transfer and kernel execution":

* :data:`~prefixsum.core.overlap.STAGING_THREADS` host threads copy chunks k + 1, k + 2, ... into pinned
  staging slots at once (numpy releases the GIL while it copies; one core alone does not keep up with PCIe),
* a copy engine moves chunk k to the device on one side stream, as soon as its slot is full,
* the SMs scan chunk k on the call's stream (``stream=``; numba's default stream unless given), and
* the other copy engine moves chunk k - 1 back on another side stream, straight into the
  result, which is page-locked memory kept between calls (:func:`prefixsum.core.workspace.pinned_result`),
  or, past what the thread may keep pinned, into a pinned slot from which the host copies it.

Events order the four (:func:`prefixsum.core.workspace.side_stream`: the side streams never wait for the call's stream
otherwise); on a GPU the copies and events go straight to the driver (:func:`prefixsum.core.overlap.copies`,
:class:`prefixsum.core.numba_gpu.DriverCopies`: numba's copy of a slice costs tens of microseconds of checks, as long as
a 1 MiB copy). The scan is one whose plan launches a range of tiles (:attr:`prefixsum.scans.registry.Prepared.chunks`,
the look-back scan's, :mod:`.lookback`): each chunk is one launch over the chunk's tiles (``first`` = its first tile),
with the tile states of one epoch for the whole call, so a chunk's first tiles find the carry of all chunks before in
the look-back state of the previous chunk's last tile, which has published its prefix: the previous launch finished
before this one started (one stream), so no extra kernel carries anything. A reverse scan takes the chunks from the end
of the array, as its tiles do.

A pinned slot is reused :data:`SLOTS` chunks later: the copy thread that fills it first waits
for the event of its last copy to the device.

**What limits it** (measured in ``benchmarks/transfers.csv`` and ``transfers_tune.csv``): the copy engines move data
faster than the host fills pinned memory, and the SMs scan a chunk in far less time than it is copied; the host sets the
pace, with its copies into pinned memory (all threads together) and its work per chunk: a small call cut into many small
chunks took longer than the plain way, its work per chunk beyond its copies more than the few driver calls and the
hand-over between threads should cost (not profiled further). Hence no chunks below :data:`MIN_BYTES`: there one
pageable copy in (the driver's own staging) and one copy out straight into a kept pinned result beat torch's round trip.
Registering the caller's array with the driver (``cuMemHostRegister``) instead of copying it was not tried: it pins
every page of the caller's array on every call, and the array is not ours to keep registered.
"""

import concurrent.futures

import numpy as np

from ..core import overlap
from ..core.overlap import copies, events
from ..core.workspace import latest, pinned_result, side_stream, staging

CHUNK_BYTES = 16 << 20
"""Most bytes of the array per chunk (a chunk is a whole number of tiles, at least one)."""
MIN_CHUNK_BYTES = 1 << 20
"""Fewest bytes per chunk, unless the array is smaller: below, the host's work per chunk
(a handful of driver calls, a launch, a hand-over between threads) outweighs the copy engine's
time for it (``transfers_tune.csv``: 256 and 512 KiB chunks lost to 1 MiB at 2^19..2^22)."""
TARGET_CHUNKS = 4
"""Chunks an array is cut into, within :data:`MIN_CHUNK_BYTES` .. :data:`CHUNK_BYTES` each: enough
for the copy threads to work at once and the first and last chunks' copies, which overlap
nothing, to be short (4 beat 8 and 16 at 2^20..2^22 in ``transfers_tune.csv``)."""
SLOTS = 4
"""Pinned slots per direction: chunk k's slot is reused by chunk k + SLOTS (at least 2: the host
copies chunk k - 1 out of its slot after chunk k's copy into the next one is queued)."""
MIN_BYTES = 8 << 20
"""Arrays of fewer bytes go the plain way (one pageable copy in, one launch, one copy out into
kept pinned memory): below 8 MiB the plain way beat 1 MiB chunks and torch's round trip, at
8 MiB the chunks won (``benchmarks/transfers_tune.csv``)."""
PINNED_RESULT_BYTES = 1 << 20
"""A numpy call's result of this many bytes or more is page-locked memory (:func:`to_host`):
below, the copy is short and a page-locked block per size would not pay for itself."""


def round_trip(fields, outs, stream, launch, chunks=None, temp=None):
    """A numpy call: the numpy arrays ``fields`` (one per field of an element, this machine's byte
    order, one length n) copied to the device, ``launch(sources, targets)`` run on the copies (if
    n >= 1), and the results copied back, waited for on ``stream`` (a :class:`~prefixsum.core.streams.Stream`).

    Returns the results, one numpy array per field: ``outs[k]`` where given, else new ones. With
    ``chunks`` (:attr:`prefixsum.scans.registry.Prepared.chunks`, an algorithm that launches a range
    of tiles) and one array of :data:`MIN_BYTES` or more, the copies overlap the launches chunk by
    chunk (:func:`scan`, the tile states in ``temp`` if given); else one copy each way. The device
    copies are this thread's and stream's, kept for its next call of the length
    (:func:`prefixsum.core.workspace.latest`): no allocation, which takes longer than a small scan.
    """
    n = fields[0].shape[0]
    if chunks is not None and len(fields) == 1 and n and fields[0].nbytes >= MIN_BYTES:
        return [scan(fields[0], chunks, stream, outs[0], temp)]
    sources = [latest(f"numpy input {k}", n, field.dtype, stream) for k, field in enumerate(fields)]
    targets = [latest(f"numpy result {k}", n, field.dtype, stream) for k, field in enumerate(fields)]
    for source, field in zip(sources, fields):
        to_device(source, field, stream)
    if n:
        launch(sources, targets)
    return [to_host(target, stream, out) for target, out in zip(targets, outs)]


def to_device(device, x, stream):
    """Copy the 1-D numpy array ``x`` into the device array ``device`` of its length, queued on
    ``stream`` (a :class:`~prefixsum.core.streams.Stream`; from pageable memory the driver returns
    once it has staged the data: ``x`` may change afterwards)."""
    host = np.ascontiguousarray(x)
    if host.nbytes:
        copies().copy_in(device, 0, host, stream.numba)


def to_host(device, stream, out=None):
    """The 1-D device array ``device`` copied into ``out`` (a numpy array of its length and dtype)
    or a new numpy array, queued on ``stream`` and waited for.

    From :data:`PINNED_RESULT_BYTES` on, a new array is page-locked memory kept between calls
    (:func:`prefixsum.core.workspace.pinned_result`), which the copy engine fills at full PCIe
    speed; a pageable one is filled through the driver's staging buffer, several times slower.
    """
    n, dtype = device.shape[0], device.dtype
    result = out
    if result is None:
        result = pinned_result(n, dtype) if n * dtype.itemsize >= PINNED_RESULT_BYTES else None
    if result is None:
        result = np.empty(n, dtype)
    if n:
        ops = copies()
        ops.copy_out(result, device, 0, stream.numba)
        ops.synchronize_stream(stream.numba)
    return result


def chunk_bytes(nbytes):
    """Bytes per chunk for an array of ``nbytes``: ``nbytes / TARGET_CHUNKS`` within
    :data:`MIN_CHUNK_BYTES` .. :data:`CHUNK_BYTES` (the caller rounds it up to whole tiles)."""
    return min(CHUNK_BYTES, max(MIN_CHUNK_BYTES, nbytes // TARGET_CHUNKS))


def scan(x, chunks, stream, out=None, temp=None):
    """The scan of the 1-D numpy array ``x`` (native byte order, n >= 1) by a plan's ``chunks``
    (:class:`prefixsum.scans.registry.Chunks`), on ``stream``, into ``out`` (a numpy array of its
    length and dtype) or a new numpy array; the tile states in ``temp`` if given."""
    n, dtype = x.shape[0], x.dtype
    tile = chunks.tile
    tiles = -(-n // tile)
    per_chunk = max(1, -(-chunk_bytes(x.nbytes) // (tile * dtype.itemsize)))
    chunk = per_chunk * tile  # elements
    count = -(-tiles // per_chunk)
    slots = min(count, SLOTS)
    source, target = latest("numpy input 0", n, dtype, stream), latest("numpy result 0", n, dtype, stream)
    state = chunks.begin(stream, temp)
    slot_bytes = chunk * dtype.itemsize
    result = None if out is not None or x.nbytes < PINNED_RESULT_BYTES else pinned_result(n, dtype)
    direct = result is not None  # the copy engine writes the (page-locked) result itself; else through slots
    if result is None:
        result = np.empty(n, dtype) if out is None else out
    inward = staging("scan in", slots * slot_bytes)
    outward = None if direct else staging("scan out", slots * slot_bytes)
    to_device, to_host, compute = side_stream("copies in"), side_stream("copies out"), stream.numba
    (scanned,), copied_in, copied_out = events("scanned", 1), events("in", SLOTS), events("out", SLOTS)
    ops = copies()
    pool = overlap.copy_pool("staging")
    reverse = chunks.reverse

    def span(k):
        """Chunk k's elements ``lo .. hi - 1`` in memory (from the end for a reverse scan), and its slot."""
        first, last = k * chunk, min((k + 1) * chunk, n)
        lo, hi = (n - last, n - first) if reverse else (first, last)
        slot = (k % slots) * slot_bytes
        return lo, hi, slot, slot + (hi - lo) * dtype.itemsize

    def stage(k):
        """On a copy thread: chunk k into its pinned slot, once the slot's last chunk (k - slots)
        is on the device (its event was recorded before this job was submitted)."""
        lo, hi, a, b = span(k)
        if k >= slots:
            ops.synchronize(copied_in[k % slots])
        overlap.host_copy(inward[a:b].view(dtype), x[lo:hi])

    def copy_out(k):
        """Wait for chunk k's copy to the host and move it from its slot into the result."""
        lo, hi, a, b = span(k)
        ops.synchronize(copied_out[k % slots])
        overlap.copy_parallel(result[lo:hi], outward[a:b].view(dtype))

    staged = [pool.submit(stage, k) for k in range(slots)]
    try:
        for k in range(count):
            lo, hi, a, b = span(k)
            staged[k].result()
            ops.copy_in(source, lo * dtype.itemsize, inward[a:b].view(dtype), to_device)
            ops.record(copied_in[k % slots], to_device)
            if k + slots < count:
                staged.append(pool.submit(stage, k + slots))
            ops.wait(copied_in[k % slots], compute)
            chunks.launch(source, target, state, k * per_chunk, min(per_chunk, tiles - k * per_chunk), stream)
            ops.record(scanned, compute)
            ops.wait(scanned, to_host)
            # through a slot: its last chunk (k - slots) was copied out of it at step k - slots + 1 <= k - 1
            ops.copy_out(result[lo:hi] if direct else outward[a:b].view(dtype), target, lo * dtype.itemsize, to_host)
            ops.record(copied_out[k % slots], to_host)
            if k and not direct:
                copy_out(k - 1)
    finally:  # no copy thread may still write a slot when the call ends, even by an error
        concurrent.futures.wait(staged)
    if direct:
        ops.synchronize(copied_out[(count - 1) % slots])  # the last copy on the stream: every one is done
    else:
        copy_out(count - 1)
    return result
