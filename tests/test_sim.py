"""The classroom simulator :mod:`prefixsum.sim`: every strictness rule and its errors, the
switches, and identical results with numba's stock simulator on correct kernels (the hooks and the
warp-level calls: tests/test_sim_hooks_and_warps.py)."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import re  # noqa: E402
import warnings  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda, float32, int32  # noqa: E402

from prefixsum import sim  # noqa: E402

HERE = os.path.abspath(__file__)
WHERE = re.compile(r"block \(\d+, \d+, \d+\) thread \(\d+, \d+, \d+\)")


# Every test runs on the classroom simulator, strict (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("strict_simulator")


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
