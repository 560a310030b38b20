"""The classroom simulator :mod:`prefixsum.sim`: its access, launch, call and allocation hooks,
the warp-level calls (shuffles, votes, matches, divergence) and views made by array methods."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import importlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda, float32, float64  # noqa: E402

from prefixsum import sim  # noqa: E402

HERE = os.path.abspath(__file__)
WHERE = re.compile(r"block \(\d+, \d+, \d+\) thread \(\d+, \d+, \d+\)")


# Every test runs on the classroom simulator, strict (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("strict_simulator")


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
        "hooked",
        (0, 0, 0),
        (0, 0, 0),
        "x",
        "global",
        (0,),
        "read",
        np.float32(1),
        0,
        HERE,
        first.line,
        (2,),
        np.dtype(np.float32),
    )
    seen = [(r.thread[0], r.array, r.space, r.index, r.kind, r.phase) for r in records]
    assert seen == [
        (0, "x", "global", (0,), "read", 0),
        (0, "s", "shared", (0,), "write", 0),
        (1, "x", "global", (1,), "read", 0),
        (1, "s", "shared", (1,), "write", 0),
        (0, "s", "shared", (1,), "read", 1),
        (0, "out", "global", (0, 0), "write", 1),
        (0, "x", "global", (0,), "atomic", 1),
        (1, "s", "shared", (0,), "read", 1),
        (1, "out", "global", (1, 0), "write", 1),
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


@cuda.jit
def does_nothing(out):
    pass


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
        ("doubling", (3, 1, 1), (4, 1, 1), 0),
        ("doubling", (1, 2, 1), (8, 1, 1), 64),
    ]
    assert launches[0].function is doubling.py_func


def test_launch_hook_sees_a_launch_the_simulator_refuses():
    launches = []
    with sim.launch_hook(launches.append), pytest.raises(sim.LaunchError):
        does_nothing[1, 2048](np.zeros(1))
    assert [(i.kernel, i.block) for i in launches] == [("does_nothing", (2048, 1, 1))]


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
        (
            exited_lane,
            32,
            "its mask names lanes 20..31, which have returned from the kernel",
            "threads (20, 0, 0)..(31, 0, 0) (12 threads) returned from the kernel",
        ),
        (
            full_mask,
            20,
            "its mask names lanes 20..31, which this block of 20 threads does not have",
            "threads (0, 0, 0)..(19, 0, 0) (20 threads) wait at shfl_up_sync() with mask 0xffffffff",
        ),
        (
            elsewhere,
            32,
            "lanes 16..31, named in its mask, wait elsewhere",
            "threads (16, 0, 0)..(31, 0, 0) (16 threads) wait at syncthreads()",
        ),
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
    """benchmarks/warp_semantics.py: the simulator agrees with the PTX model (warp_model.py), and
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
    offset = (
        view[index : index + 1].__array_interface__["data"][0]
        if view.ndim == 1
        else view[tuple(slice(i, i + 1) for i in index)].__array_interface__["data"][0]
    )
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
