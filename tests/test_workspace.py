"""One workspace (prefixsum.core.workspace): what a thread keeps is its own, so two host threads
that scan arrays of one length at once each get their own right result."""

import gc
import threading

import numpy as np
import pytest
from numba import cuda

import prefixsum as ps
from prefixsum.core import workspace
from prefixsum.core.device import simulating
from prefixsum.primitives import tile_state
from prefixsum.scans.testing import random_input


def in_threads(count, work):
    """Run ``work(k)`` in ``count`` threads started together; return their results or exceptions.

    CUDA is set up in this thread first, as a program does before its threads: numba-cuda marks
    its driver initialized before ``cuInit`` returns (``Driver.ensure_initialized``), so when the
    first CUDA call of a process comes from two threads at once, one of them can fail with
    CUDA_ERROR_NOT_INITIALIZED (seen on an H100), whatever prefixsum does.
    """
    cuda.get_current_device()
    start = threading.Barrier(count)
    results = [None] * count

    def run(k):
        start.wait()
        try:
            results[k] = work(k)
        except Exception as error:  # reported by the test, with the thread's number
            results[k] = error

    threads = [threading.Thread(target=run, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.parametrize(
    "algorithm, dtype", [("lookback", "int32"), ("lookback", "float64"), ("hierarchical", "int64")]
)
def test_two_threads_scanning_arrays_of_one_length_at_once_both_get_their_own_result(algorithm, dtype, rng):
    n = 2 * 32 * 5 + 7  # several tiles of 32 threads x 1 element, a partial last one
    inputs = [random_input(n, "add", dtype, rng) for _ in range(2)]
    options = {"block_size": 32, "items_per_thread": 1}

    def work(k):
        x = cuda.to_device(inputs[k])
        return [ps.scan(x, algorithm=algorithm, **options).copy_to_host() for _ in range(3)]

    for k, results in enumerate(in_threads(2, work)):
        assert not isinstance(results, Exception), f"thread {k}: {results!r}"
        expected = np.cumsum(inputs[k], dtype=np.float64 if dtype == "float64" else dtype)
        for result in results:
            if dtype == "float64":
                np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-9 * np.abs(inputs[k]).sum())
            else:
                np.testing.assert_array_equal(result, expected)


def test_each_thread_keeps_its_own_tile_states_and_scratch():
    def work(k):
        return tile_state.kept_states(4), workspace.reused(("test", 1), object)

    (states_a, kept_a), (states_b, kept_b) = in_threads(2, work)
    assert states_a is not states_b and kept_a is not kept_b
    assert workspace.reused(("test", 1), object) is workspace.reused(("test", 1), object)  # kept within a thread


def test_the_oldest_entry_goes_first_beyond_the_limit(monkeypatch):
    def work(k):
        monkeypatch.setattr(workspace, "KEPT_ENTRIES", 3)
        first = workspace.reused("a", object)
        for key in "bcd":
            workspace.reused(key, object)
        return first is workspace.reused("a", object), workspace.reused("d", object) is workspace.reused("d", object)

    ((first_kept, last_kept),) = in_threads(1, work)
    assert not first_kept and last_kept


@pytest.mark.skipif(simulating(), reason="results are recycled device memory on a GPU only")
def test_a_view_of_a_dropped_result_keeps_its_memory_and_a_dropped_one_is_handed_out_again(rng):
    x = random_input(5000, "add", np.dtype("int32"), rng)
    expected = np.cumsum(x, dtype=np.int32)
    source = cuda.to_device(x)
    first = ps.scan(source)
    assert isinstance(first, cuda.devicearray.DeviceNDArray) and first.shape == (5000,) and first.dtype == np.int32
    address = first.device_ctypes_pointer.value
    view = first[100:]
    del first
    gc.collect()
    second = ps.scan(source)  # the view still holds the first result's memory
    assert second.device_ctypes_pointer.value != address
    np.testing.assert_array_equal(view.copy_to_host(), expected[100:])
    np.testing.assert_array_equal(second.copy_to_host(), expected)
    assert cuda.as_cuda_array(second).device_ctypes_pointer.value == second.device_ctypes_pointer.value
    del view
    gc.collect()
    third = ps.scan(source)  # dropped with its last view: handed out again
    assert third.device_ctypes_pointer.value == address
    np.testing.assert_array_equal(third.copy_to_host(), expected)
