"""The classroom simulator :mod:`prefixsum.sim`: every strictness rule, its errors, the switches,
the access hook, the warp-level calls, and identical results with numba's stock simulator on
correct kernels."""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import importlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda, float32, float64, int32  # noqa: E402

from prefixsum import sim  # noqa: E402

HERE = os.path.abspath(__file__)
WHERE = re.compile(r"block \(\d+, \d+, \d+\) thread \(\d+, \d+, \d+\)")


@pytest.fixture(scope="module", autouse=True)
def installed():
    assert sim.install()
    with sim.enabled(True), sim.allow_negative_indices(False):
        yield


def both(kernel, config, *arrays):
    """Run ``kernel[config]`` on copies of ``arrays`` in stock and in our simulator."""
    results = []
    for flag in (False, True):
        copies = [a.copy() for a in arrays]
        with sim.enabled(flag):
            kernel[config](*copies)
        results.append(copies)
    return results


# Correct kernels: the same results in both simulators.

@cuda.jit
def block_scan(x, out):
    """Hillis-Steele inclusive scan of each block's tile, double-buffered in shared memory."""
    buf = cuda.shared.array((2, 64), float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    buf[0, t] = x[i]
    cuda.syncthreads()
    src = 0
    d = 1
    while d < cuda.blockDim.x:
        v = buf[src, t]
        if t >= d:
            v += buf[src, t - d]
        buf[1 - src, t] = v
        src = 1 - src
        cuda.syncthreads()
        d *= 2
    out[i] = buf[src, t]


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


@cuda.jit
def block_sum_and_votes(x, sums, votes):
    """Tree reduction (one barrier per level) plus the three voting barriers."""
    part = cuda.shared.array(32, int32)
    t = cuda.threadIdx.x
    v = x[cuda.blockIdx.x * 32 + t]
    part[t] = v
    cuda.syncthreads()
    step = 16
    while step > 0:
        if t < step:
            part[t] += part[t + step]
        cuda.syncthreads()
        step //= 2
    positive = cuda.syncthreads_count(v > 0)
    all_positive = cuda.syncthreads_and(v > 0)
    any_big = cuda.syncthreads_or(v > 90)
    if t == 0:
        sums[cuda.blockIdx.x] = part[0]
        votes[cuda.blockIdx.x, 0] = positive
        votes[cuda.blockIdx.x, 1] = all_positive
        votes[cuda.blockIdx.x, 2] = any_big


@cuda.jit
def transpose(a, out):
    """Tiled transpose with 2-D blocks through a padded shared tile."""
    tile = cuda.shared.array((8, 9), float32)
    x, y = cuda.grid(2)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tile[ty, tx] = a[y, x]
    cuda.syncthreads()
    ox = cuda.blockIdx.y * 8 + tx
    oy = cuda.blockIdx.x * 8 + ty
    out[oy, ox] = tile[tx, ty]


def test_install_is_idempotent_and_enabled():
    assert sim.install() is True
    assert sim.install() is True
    assert sim.is_enabled()
    with sim.enabled(False):
        assert not sim.is_enabled()
        with sim.enabled(True):
            assert sim.is_enabled()
        assert not sim.is_enabled()
    assert sim.is_enabled()


def test_block_scan_matches_stock_and_numpy():
    x = (np.arange(128) % 5).astype(np.float32)
    (stock_x, stock), (_, ours) = both(block_scan, (2, 64), x, np.zeros_like(x))
    np.testing.assert_array_equal(ours, stock)
    np.testing.assert_array_equal(ours, np.cumsum(x.reshape(2, 64), axis=1).ravel())


def test_map_kernel_matches_stock():
    x = np.linspace(0, 1, 300, dtype=np.float32)
    y = np.ones(300, np.float32)
    config = (3, 128)
    results = []
    for flag in (False, True):
        out = np.zeros_like(x)
        with sim.enabled(flag):
            axpy[config](np.float32(2), x, y, out)
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[1], 2 * x + y)


def test_several_barriers_and_votes_match_stock():
    x = np.arange(-3, 93, dtype=np.int32)
    (_, stock_sums, stock_votes), (_, sums, votes) = both(
        block_sum_and_votes, (3, 32), x, np.zeros(3, np.int32), np.zeros((3, 3), np.int32)
    )
    np.testing.assert_array_equal(sums, stock_sums)
    np.testing.assert_array_equal(votes, stock_votes)
    np.testing.assert_array_equal(sums, x.reshape(3, 32).sum(axis=1))
    np.testing.assert_array_equal(votes, [[28, 0, 0], [32, 1, 0], [32, 1, 1]])


def test_two_dimensional_blocks_match_stock():
    a = np.arange(16 * 24, dtype=np.float32).reshape(16, 24)
    (_, stock), (_, ours) = both(transpose, ((3, 2), (8, 8)), a, np.zeros((24, 16), np.float32))
    np.testing.assert_array_equal(ours, stock)
    np.testing.assert_array_equal(ours, a.T)


@cuda.jit
def histogram(x, bins, biggest):
    i = cuda.grid(1)
    cuda.atomic.add(bins, x[i] % 4, 1)
    cuda.atomic.max(biggest, 0, x[i])


def test_atomics_match_stock():
    x = (np.arange(64) * 7 % 23).astype(np.int32)
    (_, stock_bins, stock_max), (_, bins, biggest) = both(
        histogram, (2, 32), x, np.zeros(4, np.int32), np.zeros(1, np.int32)
    )
    np.testing.assert_array_equal(bins, stock_bins)
    np.testing.assert_array_equal(bins, np.bincount(x % 4, minlength=4))
    assert biggest[0] == stock_max[0] == x.max()


@cuda.jit
def records(a):
    i = cuda.grid(1)
    a[i].y = a[i].x * 2


def test_structured_arrays_match_stock():
    a = np.zeros(4, dtype=[("x", np.int32), ("y", np.float64)])
    a["x"] = np.arange(4)
    (stock,), (ours,) = both(records, (1, 4), a)
    np.testing.assert_array_equal(ours, stock)
    np.testing.assert_array_equal(ours["y"], 2 * np.arange(4))
    seen = []
    with sim.access_hook(seen.append):
        records[1, 4](a.copy())
    assert [(r.index, r.kind) for r in seen[:2]] == [((0, "x"), "read"), ((0, "y"), "write")]


# Poisoned, unaliased shared memory.

@cuda.jit
def read_unwritten_shared(out_f, out_i):
    f = cuda.shared.array(4, float32)
    n = cuda.shared.array(4, int32)
    t = cuda.threadIdx.x
    if cuda.blockIdx.x == 0:
        f[t] = 7.0
        n[t] = 7
    cuda.syncthreads()
    out_f[cuda.blockIdx.x, t] = f[t]
    out_i[cuda.blockIdx.x, t] = n[t]


def test_shared_memory_is_poisoned_in_every_block():
    out_f = np.zeros((2, 4), np.float32)
    out_i = np.zeros((2, 4), np.int32)
    read_unwritten_shared[2, 4](out_f, out_i)
    np.testing.assert_array_equal(out_f[0], 7)
    np.testing.assert_array_equal(out_i[0], 7)
    assert np.isnan(out_f[1]).all()  # block 1 does not see block 0's values
    np.testing.assert_array_equal(out_i[1], 0x5A5A5A5A)
    assert sim.poison_value(np.int32) == 0x5A5A5A5A
    assert np.isnan(sim.poison_value(np.float64))
    assert sim.poison_value(np.uint8) == 0x5A


@cuda.jit
def two_on_one_line(out):
    a, b = cuda.shared.array(4, int32), cuda.shared.array(4, int32)
    t = cuda.threadIdx.x
    a[t] = 1
    b[t] = 2
    cuda.syncthreads()
    out[t] = a[t]


def test_two_shared_arrays_on_one_line_do_not_alias():
    (stock,), (ours,) = both(two_on_one_line, (1, 4), np.zeros(4, np.int32))
    np.testing.assert_array_equal(ours, 1)
    np.testing.assert_array_equal(stock, 2)  # numba's simulator aliases them


@cuda.jit
def dynamic_shared(out):
    d = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    if t < 2:
        d[t] = t
    cuda.syncthreads()
    out[t] = d[t]


def test_dynamic_shared_memory_is_poisoned():
    out = np.zeros(4, np.float32)
    dynamic_shared[1, 4, 0, 16](out)
    np.testing.assert_array_equal(out[:2], [0, 1])
    assert np.isnan(out[2:]).all()


@cuda.jit
def read_unwritten_local(out):
    scratch = cuda.local.array(2, int32)
    scratch[0] = 1
    out[cuda.threadIdx.x] = scratch[1]


def test_local_memory_is_poisoned():
    out = np.zeros(2, np.int32)
    read_unwritten_local[1, 2](out)
    np.testing.assert_array_equal(out, 0x5A5A5A5A)


@cuda.jit
def too_much_shared(out):
    big = cuda.shared.array(13000, float32)
    big[cuda.threadIdx.x] = 1
    out[0] = big[0]


def test_more_than_48_kib_of_shared_memory_is_refused():
    with pytest.raises(sim.LaunchError, match="52000 bytes of shared memory") as info:
        too_much_shared[1, 1](np.zeros(1, np.float32))
    assert "big = cuda.shared.array(13000, float32)" in str(info.value)


# Negative indices.

@cuda.jit
def shift_right(x, out):
    i = cuda.grid(1)
    out[i] = x[i - 1]


def test_negative_global_index_is_an_error_with_context():
    with pytest.raises(sim.NegativeIndexError) as info:
        shift_right[2, 4](np.arange(8, dtype=np.float32), np.zeros(8, np.float32))
    message = str(info.value)
    assert isinstance(info.value, IndexError)
    assert "kernel 'shift_right', block (0, 0, 0) thread (0, 0, 0)" in message
    assert "x[-1] into global array 'x' (float32, shape (8,))" in message
    assert "to x[7]" in message
    assert f"{HERE}:" in message and "out[i] = x[i - 1]" in message
    assert WHERE.sub("WHERE", message).count("WHERE") == 1


def test_negative_index_switch():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    with sim.allow_negative_indices():
        shift_right[2, 4](x, out)
    np.testing.assert_array_equal(out, np.roll(x, 1))
    with pytest.raises(sim.NegativeIndexError):
        shift_right[2, 4](x, out)
    sim.allow_negative_indices(True)
    try:
        shift_right[2, 4](x, out)
    finally:
        sim.allow_negative_indices(False)
    with pytest.raises(sim.NegativeIndexError):
        shift_right[2, 4](x, out)


@cuda.jit
def shared_neighbour(out):
    s = cuda.shared.array((2, 4), int32)
    t = cuda.threadIdx.x
    s[1, t] = t
    cuda.syncthreads()
    s[0, t - 1] = s[1, t]
    out[t] = s[0, t]


@cuda.jit
def local_negative(out):
    acc = cuda.local.array(3, int32)
    k = cuda.threadIdx.x - 2
    acc[k] = 1
    out[0] = acc[0]


def test_negative_shared_and_local_indices_are_errors():
    with pytest.raises(sim.NegativeIndexError) as info:
        shared_neighbour[1, 4](np.zeros(4, np.int32))
    message = str(info.value)
    assert "s[0, -1] into shared array 's' (int32, shape (2, 4))" in message
    assert "block (0, 0, 0) thread (0, 0, 0)" in message
    assert "s[0, t - 1] = s[1, t]" in message
    with pytest.raises(sim.NegativeIndexError) as info:
        local_negative[1, 4](np.zeros(1, np.int32))
    assert "acc[-2] into local array 'acc'" in str(info.value)


def test_stock_behaviour_when_disabled():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    with sim.enabled(False):
        shift_right[2, 4](x, out)  # numba's simulator wraps silently
    np.testing.assert_array_equal(out, np.roll(x, 1))


# Out-of-bounds indices and exceptions in device functions.

@cuda.jit(device=True)
def load(a, i):
    return a[i]


@cuda.jit
def unguarded(x, out):
    i = cuda.grid(1)
    out[i] = load(x, i)


def test_out_of_bounds_names_array_and_every_kernel_frame():
    with pytest.raises(IndexError) as info:
        unguarded[2, 4](np.arange(6, dtype=np.float32), np.zeros(8, np.float32))
    message = str(info.value)
    assert "index 6 is out of bounds for axis 0 with size 6: x[6] in global array 'x'" in message
    assert "kernel 'unguarded', block (1, 0, 0) thread (2, 0, 0)" in message
    assert message.index("out[i] = load(x, i)") < message.index("return a[i]")


@cuda.jit
def dictionary_lookup(out):
    out[0] = {}["missing"]


def test_exception_that_cannot_carry_context_becomes_kernel_error():
    with pytest.raises(sim.KernelError, match="KeyError: 'missing'") as info:
        dictionary_lookup[1, 1](np.zeros(1))
    assert isinstance(info.value.__cause__, KeyError)
    assert "block (0, 0, 0) thread (0, 0, 0)" in str(info.value)


# Barrier divergence.

@cuda.jit
def early_return(x, out):
    t = cuda.threadIdx.x
    if t >= 6:
        return
    s = cuda.shared.array(8, float32)
    s[t] = x[t]
    cuda.syncthreads()
    out[t] = s[5 - t]


@cuda.jit
def two_barriers(out):
    t = cuda.threadIdx.x
    if t % 2 == 0:
        cuda.syncthreads()
    else:
        cuda.syncthreads()
    out[t] = t


def test_barrier_after_early_return_is_an_error():
    with pytest.raises(sim.BarrierDivergenceError) as info:
        early_return[1, 8](np.ones(8, np.float32), np.zeros(8, np.float32))
    message = str(info.value)
    assert "kernel 'early_return', block (0, 0, 0)" in message
    assert "threads (0, 0, 0)..(5, 0, 0) (6 threads) wait at syncthreads()" in message
    assert "threads (6, 0, 0)..(7, 0, 0) (2 threads) returned from the kernel" in message
    assert f"{HERE}:" in message


def test_threads_at_different_barriers_is_an_error():
    with pytest.raises(sim.BarrierDivergenceError) as info:
        two_barriers[1, 4](np.zeros(4, np.int32))
    message = str(info.value)
    assert "threads (0, 0, 0), (2, 0, 0) (2 threads) wait at syncthreads()" in message
    assert "threads (1, 0, 0), (3, 0, 0) (2 threads) wait at syncthreads()" in message


# Launch limits, overflow, cleanup.

@cuda.jit
def noop(out):
    pass


def test_more_than_1024_threads_per_block_is_refused():
    with pytest.raises(sim.LaunchError, match=r"kernel 'noop'.*1056 threads per block"):
        noop[1, (33, 32)](np.zeros(1))
    with pytest.raises(sim.LaunchError, match="z <= 64"):
        noop[1, (1, 1, 65)](np.zeros(1))
    noop[1, (32, 32)](np.zeros(1))


def test_a_grid_over_its_limit_is_refused():
    with pytest.raises(sim.LaunchError, match=r"gridDim is limited to x <= 2\*\*31 - 1, y <= 65535"):
        noop[(1, 65536), 1](np.zeros(1))


@cuda.jit
def overflow(x, out):
    out[0] = x[0] + x[1]
    out[1] = x[0] * x[1]
    out[2] = 2**40 + 5


def test_integer_overflow_wraps_silently():
    x = np.array([2**31 - 1, 2], np.int32)
    out = np.zeros(3, np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        overflow[1, 1](x, out)
    np.testing.assert_array_equal(out, [-(2**31) + 1, -2, 5])


@cuda.jit
def grid_sync(out):
    cuda.cg.this_grid().sync()
    out[0] = 1


def test_grid_sync_across_blocks_is_refused():
    with pytest.raises(NotImplementedError, match="grid of 2 blocks"):
        grid_sync[2, 1](np.zeros(1))
    out = np.zeros(1)
    grid_sync[1, 2](out)
    assert out[0] == 1


def test_failed_launch_restores_cuda_globals():
    with pytest.raises(sim.BarrierDivergenceError):
        early_return[1, 8](np.ones(8, np.float32), np.zeros(8, np.float32))
    assert globals()["cuda"] is numba.cuda
    assert unguarded.fn.__globals__["cuda"] is numba.cuda


# The access hook.

@cuda.jit
def hooked(x, out):
    s = cuda.shared.array(2, float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    row = out[t]
    row[0] = s[1 - t]
    cuda.atomic.add(x, 0, 1)


def test_access_hook_records_every_access():
    records = []
    x = np.array([1, 2], np.float32)
    out = np.zeros((2, 1), np.float32)
    with sim.access_hook(records.append):
        hooked[1, 2](x, out)
    hooked[1, 2](x.copy(), out.copy())  # no hook: nothing recorded
    assert len(records) == 10
    first = records[0]
    assert first == sim.Access(
        "hooked", (0, 0, 0), (0, 0, 0), "x", "global", (0,), "read", np.float32(1), 0,
        HERE, first.line, (2,), np.dtype(np.float32),
    )
    seen = [(r.thread[0], r.array, r.space, r.index, r.kind, r.phase) for r in records]
    assert seen == [
        (0, "x", "global", (0,), "read", 0), (0, "s", "shared", (0,), "write", 0),
        (1, "x", "global", (1,), "read", 0), (1, "s", "shared", (1,), "write", 0),
        (0, "s", "shared", (1,), "read", 1), (0, "out", "global", (0, 0), "write", 1),
        (0, "x", "global", (0,), "atomic", 1),
        (1, "s", "shared", (0,), "read", 1), (1, "out", "global", (1, 0), "write", 1),
        (1, "x", "global", (0,), "atomic", 1),
    ]
    assert records[6].value == 2 and records[9].value == 3
    assert records[5].shape == (2, 1)


def test_access_hooks_stack_and_leave_on_exit():
    outer, inner = [], []
    x, out = np.array([1, 2], np.float32), np.zeros((2, 1), np.float32)
    with sim.access_hook(outer.append):
        with sim.access_hook(inner.append):
            hooked[1, 2](x.copy(), out.copy())
        hooked[1, 2](x.copy(), out.copy())
    hooked[1, 2](x.copy(), out.copy())
    assert len(inner) == 10 and len(outer) == 20 and outer[:10] == inner


# The launch, device-function call and allocation hooks.

@cuda.jit(device=True)
def twice(v):
    return 2 * v


@cuda.jit
def doubling(x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] = twice(twice(x[i]))


def test_launch_hook_sees_each_launch_once_with_its_configuration():
    launches = []
    with sim.launch_hook(launches.append):
        doubling[3, 4](np.zeros(10))
        doubling[(1, 2), (8, 1, 1), 0, 64](np.zeros(10))
    doubling[1, 8](np.zeros(10))  # after the with: not seen
    assert [(i.kernel, i.grid, i.block, i.dynamic_shared_bytes) for i in launches] == [
        ("doubling", (3, 1, 1), (4, 1, 1), 0), ("doubling", (1, 2, 1), (8, 1, 1), 64)]
    assert launches[0].function is doubling.py_func


def test_launch_hook_sees_a_launch_the_simulator_refuses():
    launches = []
    with sim.launch_hook(launches.append), pytest.raises(sim.LaunchError):
        noop[1, 2048](np.zeros(1))
    assert [(i.kernel, i.block) for i in launches] == [("noop", (2048, 1, 1))]


def test_hooks_stack_and_each_leaves_on_exit_or_remove():
    first, second = [], []
    hook = sim.launch_hook(first.append)  # takes effect without a with
    with sim.launch_hook(second.append):
        doubling[1, 4](np.zeros(4))
    doubling[1, 4](np.zeros(4))
    hook.remove()
    doubling[1, 4](np.zeros(4))
    assert len(first) == 2 and len(second) == 1 and first[0] == second[0]
    with pytest.raises(TypeError, match="must be callable"):
        sim.launch_hook(None)


def test_call_hook_counts_device_function_calls():
    called = []
    x = np.arange(10, dtype=np.float64)
    with sim.call_hook(called.append):
        doubling[3, 4](x)
    np.testing.assert_array_equal(x, 4 * np.arange(10))
    assert called == [twice.py_func] * 20  # two calls in each of the 10 threads in bounds


def test_allocation_hook_sees_fresh_device_arrays_only():
    seen = []

    def fill(array):
        seen.append(array.shape)
        array.copy_to_device(np.full(array.shape, 7, array.dtype))

    with sim.allocation_hook(fill):
        fresh = cuda.device_array(3, np.int32)
        like = cuda.device_array_like(np.zeros((2, 2), np.float32))
        copied = cuda.to_device(np.zeros(5))  # not fresh: holds the host's values
    cuda.device_array(4)
    assert seen == [(3,), (2, 2)]
    assert (fresh.copy_to_host() == 7).all() and (like.copy_to_host() == 7).all()
    assert (copied.copy_to_host() == 0).all()


def test_an_exception_in_a_hook_aborts_the_launch_with_context():
    def refuse(function):
        raise RuntimeError(f"no calls of {function.__name__}")

    with sim.call_hook(refuse), pytest.raises(RuntimeError, match="no calls of twice") as info:
        doubling[1, 4](np.zeros(4))
    assert WHERE.search(str(info.value))


# Warp-level calls (the full cross-check against a GPU is benchmarks/warp_semantics.py).

FULL = 0xFFFFFFFF


@cuda.jit
def shuffles(x, out):
    t = cuda.threadIdx.x
    v = x[t]
    out[t, 0] = cuda.shfl_sync(FULL, v, 31 - (t & 31))
    out[t, 1] = cuda.shfl_up_sync(FULL, v, 3)
    out[t, 2] = cuda.shfl_down_sync(FULL, v, 3)
    out[t, 3] = cuda.shfl_xor_sync(FULL, v, 5)
    out[t, 4] = cuda.shfl_up_sync(FULL, v, 33)  # the delta's low 5 bits: 1
    out[t, 5] = cuda.shfl_sync(FULL, v, -1)  # lane 31


def test_shuffles_follow_ptx_within_each_warp():
    for dtype in (np.int32, np.int64, np.float32, np.float64):
        x = (np.arange(64) * 3 - 70).astype(dtype)
        if dtype == np.int64:
            x = x * (1 << 40) + 5  # both 32-bit halves busy
        out = np.zeros((64, 6), dtype)
        shuffles[1, 64](x, out)
        t = np.arange(64)
        lane, first = t & 31, t - (t & 31)
        np.testing.assert_array_equal(out[:, 0], x[first + 31 - lane])
        np.testing.assert_array_equal(out[:, 1], np.where(lane >= 3, x[t - 3], x))
        np.testing.assert_array_equal(out[:, 2], np.where(lane <= 28, x[np.minimum(t + 3, 63)], x))
        np.testing.assert_array_equal(out[:, 3], x[first + (lane ^ 5)])
        np.testing.assert_array_equal(out[:, 4], np.where(lane >= 1, x[t - 1], x))
        np.testing.assert_array_equal(out[:, 5], x[first + 31])


@cuda.jit
def partial_shuffles(x, out):
    t = cuda.threadIdx.x
    out[t] = -1.0
    if t % 2 == 1:
        out[t] = cuda.shfl_down_sync(0xAAAAAAAA, x[t], 1)


def test_shuffle_from_a_lane_outside_the_mask_is_poison():
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    partial_shuffles[1, 32](x, out)
    assert np.isnan(out[1:31:2]).all()  # lane + 1 is even: outside the mask, undefined
    assert out[31] == 31  # past the warp: the own value, as PTX defines
    assert (out[::2] == -1).all()


@cuda.jit
def voting(x, out):
    t = cuda.threadIdx.x
    lane = t & 31
    out[t, 0] = cuda.ballot_sync(FULL, x[t] > 0)
    out[t, 1] = cuda.all_sync(FULL, x[t] > -100)
    out[t, 2] = cuda.any_sync(FULL, x[t] > 1000)
    out[t, 3] = cuda.eq_sync(FULL, lane < 40)
    out[t, 4] = cuda.match_any_sync(FULL, x[t] % 3)
    mask, same = cuda.match_all_sync(FULL, x[t] * 0)
    out[t, 5] = mask + same
    out[t, 6] = cuda.lanemask_lt()
    out[t, 7] = -1
    if lane < 16:
        out[t, 7] = cuda.ballot_sync(0xFFFF, lane % 4 == 0)


def test_votes_and_matches():
    x = np.where(np.arange(64) % 2 == 1, 5, -5).astype(np.int32)
    x[31] = 7
    out = np.zeros((64, 8), np.int64)
    voting[1, 64](x, out)
    lane = np.arange(64) & 31
    assert out[0, 0] == out[31, 0] == np.int32(np.uint32(0xAAAAAAAA)) < 0  # numba's ballot is an int32
    assert out[32, 0] == np.int32(np.uint32(0xAAAAAAAA)) + 0  # warp 1: x[63] = 5 again
    assert (out[:, 1] == 1).all() and (out[:, 2] == 0).all() and (out[:, 3] == 1).all()
    residues = x % 3
    expected = [sum(1 << j for j in range(32) if residues[t - lane[t] + j] == residues[t]) for t in range(64)]
    np.testing.assert_array_equal(out[:, 4], np.array(expected, np.uint32).view(np.int32))
    assert (out[:, 5] == -1 + 1).all()  # every lane's value equal: mask 0xffffffff (-1) and True
    np.testing.assert_array_equal(out[:, 6], (1 << lane) - 1)
    np.testing.assert_array_equal(out[:, 7], np.where(lane < 16, 0x1111, -1))


@cuda.jit
def active(out):
    t = cuda.threadIdx.x
    out[t, 0] = cuda.activemask()
    out[t, 1] = 0
    if t % 32 < 10:
        out[t, 1] = cuda.activemask()
    out[t, 2] = 0
    if t % 2 == 1:
        out[t, 2] = cuda.activemask()


def test_activemask_reports_the_lanes_that_converge():
    out = np.zeros((40, 3), np.int64)
    active[1, 40](out)
    lane = np.arange(40) & 31
    np.testing.assert_array_equal(out[:, 0], np.where(np.arange(40) < 32, 0xFFFFFFFF, 0xFF))
    np.testing.assert_array_equal(out[:, 1], np.where(lane < 10, np.where(np.arange(40) < 32, 0x3FF, 0xFF), 0))
    # lanes 0..9 catch up after their branch, so every odd lane meets at the second call
    np.testing.assert_array_equal(out[:, 2], np.where(lane % 2 == 1, np.where(np.arange(40) < 32, 0xAAAAAAAA, 0xAA), 0))


@cuda.jit
def exchange(x, out, sync):
    s = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    if sync:
        cuda.syncwarp()
    out[t] = s[t ^ 1]


def test_syncwarp_orders_memory_for_the_tracer():
    for sync in (False, True):
        records = []
        with sim.access_hook(records.append):
            exchange[1, 32](np.arange(32, dtype=np.float32), np.zeros(32, np.float32), sync)
        shared = [r for r in records if r.space == "shared"]
        phases = {(r.kind, r.phase) for r in shared}
        # A tracer flags two threads touching one address in one phase.
        assert phases == ({("write", 0), ("read", 1)} if sync else {("write", 0), ("read", 0)})


@cuda.jit
def sync_then_barrier(out):
    t = cuda.threadIdx.x
    if t < 32:
        cuda.syncwarp()
        cuda.syncwarp()
    cuda.syncthreads()
    out[t] = t


def test_barrier_phases_stay_a_lamport_clock_across_warps():
    records = []
    with sim.access_hook(records.append):
        sync_then_barrier[1, 64](np.zeros(64))
    assert {r.phase for r in records} == {3}  # one past the highest phase of any thread


@cuda.jit
def exited_lane(out):
    t = cuda.threadIdx.x
    if t >= 20:
        return
    out[t] = cuda.shfl_up_sync(FULL, t, 1)


@cuda.jit
def full_mask(out):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_up_sync(FULL, t, 1)


@cuda.jit
def elsewhere(out):
    t = cuda.threadIdx.x
    if t < 16:
        out[t] = cuda.shfl_xor_sync(FULL, t, 1)
    cuda.syncthreads()


@cuda.jit
def two_masks(out):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_xor_sync(FULL if t < 16 else 0xFFFF0000, t, 1)


@cuda.jit
def not_in_mask(out):
    out[cuda.threadIdx.x] = cuda.ballot_sync(0x1, True)


def test_warp_divergence_is_an_error_naming_the_lanes():
    cases = [
        (exited_lane, 32, "its mask names lanes 20..31, which have returned from the kernel",
         "threads (20, 0, 0)..(31, 0, 0) (12 threads) returned from the kernel"),
        (full_mask, 20, "its mask names lanes 20..31, which this block of 20 threads does not have",
         "threads (0, 0, 0)..(19, 0, 0) (20 threads) wait at shfl_up_sync() with mask 0xffffffff"),
        (elsewhere, 32, "lanes 16..31, named in its mask, wait elsewhere",
         "threads (16, 0, 0)..(31, 0, 0) (16 threads) wait at syncthreads()"),
        (two_masks, 32, "lane 16 makes the same call with mask 0xffff0000", "shfl_xor_sync() with mask 0xffff0000"),
        (not_in_mask, 2, "the calling lane 1 is not in its mask 0x00000001", "in kernel 'not_in_mask'"),
    ]
    for kernel, threads, problem, where in cases:
        with pytest.raises(sim.WarpDivergenceError) as info:
            kernel[1, threads](np.zeros(threads))
        message = str(info.value)
        assert problem in message and where in message, message
        assert isinstance(info.value, sim.BarrierDivergenceError)
        assert f"{HERE}:" in message


@cuda.jit
def unsigned_shuffle(x, out):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_sync(FULL, x[t], 0)


@cuda.jit
def width_argument(x, out):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_up_sync(FULL, x[t], 1, 16)


def test_operands_numba_rejects_are_rejected():
    with pytest.raises(TypeError, match=r"int32, int64, float32 or float64 values, not uint32"):
        unsigned_shuffle[1, 32](np.zeros(32, np.uint32), np.zeros(32, np.uint32))
    with pytest.raises(TypeError, match="takes 4 positional arguments but 5"):  # numba has no width
        width_argument[1, 32](np.zeros(32, np.int32), np.zeros(32, np.int32))
    out = np.zeros(32, np.int64)
    unsigned_shuffle[1, 32](np.arange(32, dtype=np.int64), out)
    assert (out == 0).all()


def test_warp_semantics_benchmark_matches_its_ptx_model(tmp_path, capsys):
    """benchmarks/warp_semantics.py: the simulator agrees with the PTX model written there, and
    --compare spots a changed defined result (the GPU run is compared the same way)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks"))
    try:
        semantics = importlib.import_module("warp_semantics")
    finally:
        sys.path.pop(0)
    ours = tmp_path / "sim.json"
    assert semantics.main(["--out", str(ours)]) == 0
    data = json.loads(ours.read_text())
    assert any(0 in case["defined"] for case in data["cases"])  # undefined lanes are marked
    assert semantics.main(["--compare", str(ours), str(ours)]) == 0
    case = next(c for c in data["cases"] if c["name"] == "shfl_up_sync int32 delta=33 mask=full")
    case["values"][5] += 1
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(data))
    assert semantics.main(["--compare", str(ours), str(changed)]) == 1
    assert "DIFF shfl_up_sync int32 delta=33 mask=full: 1 differ" in capsys.readouterr().out


@cuda.jit
def _reshaped_shared(out):
    flat = cuda.shared.array(8, float64)
    t = cuda.threadIdx.x
    flat[t] = t
    cuda.syncthreads()
    grid = flat.reshape((2, 4))
    out[t] = grid[t // 4, t % 4] + grid[1 - t // 4, 0]


def test_views_made_by_array_methods_stay_checked_and_traced():
    from prefixsum import trace

    run = trace.record(lambda: _reshaped_shared[1, 8](cuda.to_device(np.zeros(8))))
    assert run.error is None
    reads = [r for r in run.records if r.space == "shared" and not r.write]
    assert len(reads) == 16 and {r.index for r in reads} <= set(range(8))


def _root_cell(view, root, index):
    """Where ``view[index]`` lies in ``root``, by numpy's own address arithmetic."""
    offset = view[index:index + 1].__array_interface__["data"][0] if view.ndim == 1 else \
        view[tuple(slice(i, i + 1) for i in index)].__array_interface__["data"][0]
    order = "F" if root.flags.f_contiguous and not root.flags.c_contiguous else "C"
    cell = np.unravel_index((offset - root.__array_interface__["data"][0]) // root.itemsize, root.shape, order=order)
    return tuple(int(i) for i in cell)


@pytest.mark.parametrize("order", ["C", "F"])
def test_every_element_of_a_view_is_reported_at_its_place_in_the_root(order):
    from prefixsum.classroom.sim.memory import Array

    root = np.asarray(np.arange(6 * 5 * 4, dtype=np.float32).reshape(6, 5, 4), order=order)
    whole = Array(root, "x", "global")
    views = {
        "slice": whole[1:5, ::2, 1:],
        "reversed": whole[::-1, 2],
        "transposed": whole.T,
        "reshaped": whole[2].reshape(20) if order == "C" else whole[:, :, 3].swapaxes(0, 1),
        "row of a slice": whole[3:, 1:][1],
    }
    for name, view in views.items():
        assert view._root is root, name
        for index in np.ndindex(view._ary.shape):
            key = index[0] if len(index) == 1 else index
            assert view._cell(key) == _root_cell(view._ary, root, key), (name, index)
            if len(index) > 1:  # negative indices count from the end, as numpy's do
                negative = tuple(i - d for i, d in zip(index, view._ary.shape))
                assert view._cell(negative) == view._cell(index), (name, index)
