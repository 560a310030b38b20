"""stream=, out= and temp= on a GPU: the package's work is ordered on the caller's stream.

Skipped on the simulator (every launch runs at once there). Run on a GPU machine with
``NUMBA_ENABLE_CUDASIM=0 python -m pytest -o addopts="" tests/test_streams_gpu.py``.

Each test queues, on a stream that does not wait for the legacy default stream (non-blocking),
a kernel that waits a few milliseconds and then writes the input, then the package's call, then
work that overwrites the input. The result is right only if the call ran after the first and
before the last, on that stream: a call queued anywhere else would read the input unwritten or
overwritten.
"""

import numpy as np
import pytest
from numba import cuda

import prefixsum as ps
from prefixsum import apps, tridiag
from prefixsum.apps import segmented
from prefixsum.core.device import simulating
from prefixsum.tridiag import transfers

pytestmark = pytest.mark.skipif(simulating(), reason="needs a CUDA GPU (NUMBA_ENABLE_CUDASIM=0)")

WAIT_ROUNDS = 4000
"""Rounds of ``nanosleep(1000)`` before the input is written: milliseconds, longer than any call's host time."""


@cuda.jit
def wait_then_copy(source, target, rounds):
    """After thread 0 of each block has slept ``rounds`` microseconds, ``target[i] = source[i]``."""
    if cuda.threadIdx.x == 0:
        for _ in range(rounds):
            cuda.nanosleep(1000)
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < target.shape[0]:
        target[i] = source[i]


@cuda.jit
def overwrite(target):
    i = cuda.grid(1)
    if i < target.shape[0]:
        target[i] = 0


def nonblocking():
    from prefixsum.core.numba_gpu import nonblocking_stream

    return nonblocking_stream()


def late_input(values, stream):
    """A device array that ``stream`` fills with ``values`` only after a wait (numba's stream object)."""
    source = cuda.to_device(values)
    target = cuda.device_array_like(source)
    overwrite[(len(values) + 255) // 256, 256](target)
    cuda.synchronize()
    wait_then_copy[(len(values) + 255) // 256, 256, stream](source, target, WAIT_ROUNDS)
    return target


def scrub(array, stream):
    """Queue, on ``stream``, the overwrite of ``array`` after the call under test."""
    overwrite[(array.shape[0] + 255) // 256, 256, stream](array)


@pytest.mark.parametrize("n", [1000, 1 << 20])
def test_a_scan_on_a_numba_stream_runs_after_the_work_before_it(n, rng):
    stream = nonblocking()
    values = rng.integers(-9, 9, n).astype(np.int32)
    x = late_input(values, stream)
    out = ps.scan(x, stream=stream)
    exclusive = ps.exclusive_scan(x, stream=stream)
    scrub(x, stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), np.cumsum(values, dtype=np.int32))
    np.testing.assert_array_equal(exclusive.copy_to_host()[1:], np.cumsum(values, dtype=np.int32)[:-1])


def test_two_streams_of_one_thread_never_share_temporary_storage(rng):
    """Two scans of one length on two streams may run at once: each needs its own tile states."""
    n = 1 << 22
    first, second = nonblocking(), nonblocking()
    values = [rng.integers(-9, 9, n).astype(np.int32) for _ in range(2)]
    inputs = [late_input(v, s) for v, s in zip(values, (first, second))]
    results = [ps.scan(x, stream=s) for x, s in zip(inputs, (first, second))]
    first.synchronize()
    second.synchronize()
    for result, v in zip(results, values):
        np.testing.assert_array_equal(result.copy_to_host(), np.cumsum(v, dtype=np.int32))


def test_the_applications_on_a_numba_stream(rng):
    stream = nonblocking()
    n = 100_000
    values = rng.normal(size=n).astype(np.float32)
    mask = rng.random(n) < 0.3
    keys = rng.integers(0, 1 << 30, n).astype(np.uint32)
    x, k = late_input(values, stream), late_input(keys, stream)
    flags = cuda.to_device(mask)  # bool device flags
    kept, count = apps.compact(x, flags, sync=False, stream=stream)
    sorted_keys = apps.radix_sort(k, stream=stream)
    segments = apps.segmented_scan(x, flags, stream=stream)
    scrub(x, stream)
    scrub(k, stream)
    stream.synchronize()
    np.testing.assert_array_equal(kept.copy_to_host()[: count.copy_to_host()[0]], values[mask])
    np.testing.assert_array_equal(sorted_keys.copy_to_host(), np.sort(keys))
    np.testing.assert_allclose(
        segments.copy_to_host(),
        segmented.reference(values.astype(np.float64), mask),
        rtol=1e-4,
        atol=1e-3 * np.abs(values).sum(),
    )


def test_out_and_temp_on_a_stream(rng):
    stream = nonblocking()
    n = 1 << 20
    values = rng.integers(-9, 9, n).astype(np.int64)
    x = late_input(values, stream)
    plan = ps.plan_scan(np.int64, n)
    out = cuda.device_array(n, np.int64)
    temp = cuda.device_array(plan.temp_bytes, np.uint8)
    assert plan(x, out, stream=stream, temp=temp) is out
    scrub(x, stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), np.cumsum(values))


def test_a_scan_on_a_pytorch_stream(rng):
    torch = pytest.importorskip("torch")
    stream = torch.cuda.Stream()
    n = 1 << 20
    values = rng.integers(-9, 9, n).astype(np.int32)
    x = torch.zeros(n, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    source = torch.from_numpy(values).cuda()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)  # tens of milliseconds of GPU cycles, then the write
        x.copy_(source)
    out = ps.scan(x, stream=stream)  # outside the context: the array interface names the default stream
    with torch.cuda.stream(stream):
        x.zero_()
    stream.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), np.cumsum(values, dtype=np.int32))


def test_a_sort_on_a_cupy_stream(rng):
    cupy = pytest.importorskip("cupy")
    stream = cupy.cuda.Stream(non_blocking=True)
    n = 1 << 20
    keys = rng.integers(0, 1 << 30, n).astype(np.uint32)
    x = cupy.zeros(n, dtype=cupy.uint32)
    cupy.cuda.Device().synchronize()
    with stream:
        wait_then_copy[(n + 255) // 256, 256, cuda.external_stream(stream.ptr)](cupy.asarray(keys), x, WAIT_ROUNDS)
    sorted_keys = apps.radix_sort(x, stream=stream)
    scan = ps.scan(x, stream=stream)
    with stream:
        x.fill(0)
    stream.synchronize()
    np.testing.assert_array_equal(sorted_keys.copy_to_host(), np.sort(keys))
    np.testing.assert_array_equal(scan.copy_to_host(), np.cumsum(keys, dtype=np.uint32))


def dominant_systems(rng, batch, n):
    """(batch, n) float64 systems, strictly diagonally dominant, and their solutions by LAPACK's
    banded solver, one at a time on the host."""
    import scipy.linalg

    a, c, d = rng.uniform(-1, 1, (3, batch, n))
    b = np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))
    x = np.stack(
        [
            scipy.linalg.solve_banded((1, 1), np.stack([np.r_[0, c[k, :-1]], b[k], np.r_[a[k, 1:], 0]]), d[k])
            for k in range(batch)
        ]
    )
    return [a, b, c, d], x


def late_systems(system, stream):
    """The four bands as device arrays that ``stream`` writes only after a wait (:func:`late_input`)."""
    return [late_input(v.reshape(-1), stream).reshape(v.shape) for v in system]


@pytest.mark.parametrize("batch, n", [(64, 40), (3, 5000)])
def test_tridiagonal_solves_on_a_numba_stream_run_after_the_work_before_them(batch, n, rng):
    """Every method, the plan with the caller's out and temp, Stone's solve: a solve queued
    anywhere else would read bands of zeros (a zero pivot, or NaN)."""
    stream = nonblocking()
    system, expected = dominant_systems(rng, batch, n)
    for method in ("auto", *tridiag.METHODS):
        device = late_systems(system, stream)
        x = tridiag.solve(*device, method=method, stream=stream)
        for band in device:
            scrub(band.reshape(-1), stream)
        stream.synchronize()
        np.testing.assert_allclose(x.copy_to_host(), expected, rtol=1e-9, atol=1e-12, err_msg=method)
    plan = tridiag.plan_solve(np.float64, (batch, n), method="thomas")
    out, temp = cuda.device_array((batch, n)), cuda.device_array(plan.temp_bytes, np.uint8)
    assert plan(*late_systems(system, stream), out, stream=stream, temp=temp) is out
    stream.synchronize()
    np.testing.assert_allclose(out.copy_to_host(), expected, rtol=1e-9, atol=1e-12)
    x = apps.stone_solve(*late_systems(system, stream), stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(x.copy_to_host(), expected, rtol=1e-8, atol=1e-11)


def test_two_streams_of_one_thread_never_share_a_solvers_scratch(rng):
    """Two solves of one shape on two streams may run at once: each needs its own route flags,
    failure flags and work rows (the workspace keeps them per stream)."""
    first, second = nonblocking(), nonblocking()
    systems = [dominant_systems(rng, 8, 3000) for _ in range(2)]
    for method in ("auto", "pcr", "pivoting"):
        inputs = [late_systems(system, s) for (system, _), s in zip(systems, (first, second))]
        results = [tridiag.solve(*device, method=method, stream=s) for device, s in zip(inputs, (first, second))]
        for result, (_, expected) in zip(results, systems):
            np.testing.assert_allclose(result.copy_to_host(), expected, rtol=1e-9, atol=1e-12, err_msg=method)


def test_numpy_solves_and_householder_on_a_numba_stream(rng, monkeypatch):
    stream = nonblocking()
    system, expected = dominant_systems(rng, 40, 300)
    out = np.empty((40, 300))
    assert tridiag.solve(*system, out=out, stream=stream) is out
    np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-12)
    monkeypatch.setattr(transfers, "MIN_BYTES", 0)  # the chunked way: copies on side streams, solves on this one
    monkeypatch.setattr(transfers, "MIN_CHUNK_BYTES", 0)
    np.testing.assert_allclose(tridiag.solve(*system, stream=stream), expected, rtol=1e-9, atol=1e-12)
    m = rng.normal(size=(4, 30, 30))
    A = m @ m.transpose(0, 2, 1) + 30 * np.eye(30)
    rhs = rng.normal(size=(4, 30))
    late = late_input(rhs.reshape(-1), stream).reshape(4, 30)
    x = tridiag.solve_symmetric(cuda.to_device(A), late, stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(x.copy_to_host(), np.linalg.solve(A, rhs[..., None])[..., 0], rtol=1e-8)


def test_a_solve_on_a_pytorch_stream(rng):
    torch = pytest.importorskip("torch")
    stream = torch.cuda.Stream()
    system, expected = dominant_systems(rng, 256, 100)
    bands = [torch.zeros(v.shape, dtype=torch.float64, device="cuda") for v in system]
    torch.cuda.synchronize()
    sources = [torch.from_numpy(v).cuda() for v in system]
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)  # tens of milliseconds of GPU cycles, then the writes
        for band, source in zip(bands, sources):
            band.copy_(source)
    x = tridiag.solve(*bands, stream=stream)
    with torch.cuda.stream(stream):
        for band in bands:
            band.zero_()
    stream.synchronize()
    np.testing.assert_allclose(x.copy_to_host(), expected, rtol=1e-9, atol=1e-12)


def test_a_solve_on_a_cupy_stream(rng):
    cupy = pytest.importorskip("cupy")
    stream = cupy.cuda.Stream(non_blocking=True)
    system, expected = dominant_systems(rng, 256, 100)
    bands = [cupy.zeros(v.size, dtype=cupy.float64) for v in system]
    cupy.cuda.Device().synchronize()
    with stream:
        for band, v in zip(bands, system):
            wait_then_copy[(v.size + 255) // 256, 256, cuda.external_stream(stream.ptr)](
                cupy.asarray(v.reshape(-1)), band, WAIT_ROUNDS
            )
    x = tridiag.solve(*(band.reshape(v.shape) for band, v in zip(bands, system)), stream=stream)
    with stream:
        for band in bands:
            band.fill(0)
    stream.synchronize()
    np.testing.assert_allclose(x.copy_to_host(), expected, rtol=1e-9, atol=1e-12)
