"""Plans (prefixsum.core.plans), streams (prefixsum.core.streams), out= and temp= of the scans and
the applications, the one input check (prefixsum.core.inputs) and the registry's choice.

On the simulator every stream is accepted and ignored (kernels run at once); tests/test_streams_gpu.py
proves the ordering on a GPU.
"""

import re
import textwrap
import threading

import numpy as np
import pytest
from numba import cuda

import prefixsum as ps
from prefixsum import apps
from prefixsum.apps import segmented
from prefixsum.core import plans, streams, workspace
from prefixsum.core.device import simulating
from prefixsum.core.registry import Capability, Entry, Registry
from prefixsum.primitives import tile_state
from prefixsum.scans.registry import ALGORITHMS


class ProtocolStream:
    """An object with ``__cuda_stream__`` only (cuda.core's way): on a GPU over a real stream."""

    def __init__(self):
        self.numba = None if simulating() else cuda.stream()

    def __cuda_stream__(self):
        return (0, 12345 if self.numba is None else int(self.numba.handle))


class TorchLikeStream:
    """What PyTorch's stream shows the package: ``.cuda_stream``, the handle as an int."""

    def __init__(self):
        self.numba = None if simulating() else cuda.stream()
        self.cuda_stream = 4242 if self.numba is None else int(self.numba.handle)


class CupyLikeStream:
    """What CuPy's stream shows the package: ``.ptr``, the handle as an int."""

    def __init__(self):
        self.numba = None if simulating() else cuda.stream()
        self.ptr = 4343 if self.numba is None else int(self.numba.handle)


STREAMS = {
    "default": lambda: None,
    "numba stream": cuda.stream,
    "numba default stream": cuda.default_stream,
    "__cuda_stream__": ProtocolStream,
    "torch-like": TorchLikeStream,
    "cupy-like": CupyLikeStream,
}


def _finish(stream):
    """Wait for ``stream`` (any accepted form) on the host."""
    streams.as_stream(stream).synchronize()


# Every public call on one stream form is about 13 s on the simulator: the default stream stays in the
# developer loop, the other forms (the same calls, a stream converted otherwise) are slow.
@pytest.mark.parametrize(
    "form", [pytest.param(form, marks=() if form == "default" else pytest.mark.slow) for form in STREAMS]
)
def test_every_public_call_takes_a_stream_in_every_form(form, rng):
    stream = STREAMS[form]()
    n = 300
    x = rng.normal(size=n).astype(np.float32)
    keep = rng.random(n) < 0.4
    flags = (rng.random(n) < 0.1).astype(np.int32)
    keys = rng.integers(-1000, 1000, n).astype(np.int32)
    dx, dkeep, dflags = cuda.to_device(x), cuda.to_device(keep), cuda.to_device(flags)
    scanned = ps.scan(dx, stream=stream)
    _finish(stream)
    np.testing.assert_allclose(scanned.copy_to_host(), np.cumsum(x, dtype=np.float64), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(
        ps.exclusive_scan(x, stream=stream)[1:], np.cumsum(x[:-1], dtype=np.float64), rtol=1e-5, atol=1e-3
    )
    np.testing.assert_array_equal(ps.plan_scan(np.int32, n)(keys, stream=stream), np.cumsum(keys, dtype=np.int32))
    np.testing.assert_array_equal(apps.compact(x, keep, stream=stream), x[keep])
    np.testing.assert_array_equal(apps.compact_indices(dkeep, stream=stream).copy_to_host(), np.flatnonzero(keep))
    np.testing.assert_array_equal(apps.compact_by_scan(x, keep, stream=stream), x[keep])
    np.testing.assert_array_equal(apps.radix_sort(keys, stream=stream), np.sort(keys))
    # keys of 10 bits: a pass for each bit where keys differ, 10 instead of the 32 of mixed signs, each
    # pass the same launches (the signs' handling: test_apps.py's one-bit sorts)
    np.testing.assert_array_equal(apps.radix_sort_one_bit(keys % 1024, stream=stream), np.sort(keys % 1024))
    split, _ = apps.split_by_bit(cuda.to_device(keys.view(np.uint32)), 3, stream=stream)
    _finish(stream)
    bits = keys.view(np.uint32)
    np.testing.assert_array_equal(
        split.copy_to_host(), np.concatenate([bits[(bits >> 3) & 1 == 0], bits[(bits >> 3) & 1 == 1]])
    )
    got = apps.segmented_scan(dx, dflags, stream=stream)
    _finish(stream)
    np.testing.assert_allclose(
        got.copy_to_host(), segmented.reference(x.astype(np.float64), flags), rtol=1e-5, atol=1e-3
    )
    a, b = np.full(n, 0.5), rng.normal(size=n)
    expected = np.zeros(n)
    for i in range(n):
        expected[i] = a[i] * (expected[i - 1] if i else 1.0) + b[i]
    np.testing.assert_allclose(apps.linear_recurrence(a, b, x0=1.0, stream=stream), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        apps.lfilter([0.5], [1.0, -0.5], b, stream=stream), apps.linear_recurrence(np.full(n, 0.5), 0.5 * b), rtol=1e-12
    )
    spline = apps.cubic_spline(np.arange(5.0), np.arange(5.0) ** 2)
    np.testing.assert_allclose(spline(np.array([1.0, 2.5]), stream=stream), spline(np.array([1.0, 2.5])))


def test_anything_else_is_refused_as_a_stream_naming_the_forms():
    for bad in (0, "stream", object()):
        with pytest.raises(
            TypeError,
            match=r"stream must be None, a numba stream, a PyTorch or CuPy stream, or an "
            r"object with __cuda_stream__; got",
        ):
            ps.scan(np.arange(4.0), stream=bad)

    class Broken:
        def __cuda_stream__(self):
            return 7

    with pytest.raises(TypeError, match=r"__cuda_stream__\(\) must return \(version, handle\); got 7"):
        apps.radix_sort(np.arange(4), stream=Broken())


def test_a_stream_object_is_made_once_per_handle():
    if simulating():
        assert streams.as_stream(ProtocolStream()) is streams.default_stream()  # ignored: kernels run at once
        return
    stream = cuda.stream()
    assert streams.as_stream(stream) is streams.as_stream(stream)
    assert streams.as_stream(stream).key == int(stream.handle)
    assert streams.as_stream(cuda.default_stream()) is streams.default_stream()


def test_the_workspace_keeps_each_stream_apart():
    first, second = streams.Stream(None, None, 101), streams.Stream(None, None, 102)
    assert workspace.reused("plans test", object, first) is workspace.reused("plans test", object, first)
    assert workspace.reused("plans test", object, first) is not workspace.reused("plans test", object, second)
    assert tile_state.kept_states(4, 0, first) is not tile_state.kept_states(4, 0, second)
    assert tile_state.kept_states(4, 0, first) is tile_state.kept_states(4, 0, first)
    assert workspace.reused("plans test", object) is workspace.reused("plans test", object, streams.default_stream())


def test_the_plan_cache_is_bounded_and_drops_the_oldest():
    cache = plans.PlanCache(bound=3)
    for k in range(5):
        cache.keep(("key", k), f"plan {k}")
    assert len(cache) == 3 and cache.get(("key", 0)) is None and cache.get(("key", 4)) == "plan 4"
    assert 0 < plans.PLANS.bound <= 4096
    with pytest.raises(TypeError):
        cache.get(("unhashable", []))
    assert plans.kept(("unhashable", []), lambda: "made, not kept") == "made, not kept"


@pytest.mark.slow  # every public call three times on numpy and device inputs: about 25 s on the simulator
def test_a_one_line_call_reuses_its_plan_and_each_call_scans_its_own_input(rng):
    plans.PLANS.clear()
    inputs = [rng.integers(-50, 50, 500).astype(np.int64) for _ in range(3)]
    for x in inputs:
        np.testing.assert_array_equal(ps.scan(x, "max"), np.maximum.accumulate(x))
        np.testing.assert_array_equal(ps.scan(cuda.to_device(x), "max").copy_to_host(), np.maximum.accumulate(x))
    assert len(plans.PLANS) == 1  # one plan: numpy and device calls of one dtype and length share it
    for x in inputs[:2]:  # two calls of one plan, each sorting its own input (8 onesweep passes each)
        np.testing.assert_array_equal(apps.radix_sort(x), np.sort(x))
    assert len(plans.PLANS) == 2


def test_a_plan_says_what_it_runs_and_checks_what_it_is_given(rng):
    plan = ps.plan_scan(np.float64, 100, "add", inclusive=False)
    assert plan.algorithm == "lookback" and plan.temp_bytes > 0 and plan.kernels
    assert ps.plan_scan(np.float32, 100, algorithm="ladder").temp_bytes is None
    x = rng.normal(size=100)
    np.testing.assert_allclose(plan(x), np.concatenate([[0], np.cumsum(x)[:-1]]), atol=1e-12)
    with pytest.raises(ValueError, match=r"this plan scans 100 elements of float64; got 99 of float64"):
        plan(x[:99])
    with pytest.raises(ValueError, match=r"this plan scans 100 elements of float64; got 100 of float32"):
        plan(x.astype(np.float32))
    with pytest.raises(ValueError, match=r"n must be an integer >= 0; got -1"):
        ps.plan_scan(np.float64, -1)
    with pytest.raises(TypeError, match=r"unsupported dtype 'float16'"):
        ps.plan_scan(np.float16, 4)


def test_one_plan_serves_several_threads_at_once(rng):
    plan = ps.plan_scan(np.int32, 777)
    inputs = [rng.integers(-9, 9, 777).astype(np.int32) for _ in range(4)]
    results = [None] * 4

    def work(k):
        results[k] = [plan(cuda.to_device(inputs[k])).copy_to_host() for _ in range(3)]

    cuda.get_current_device()
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for k in range(4):
        for result in results[k]:
            np.testing.assert_array_equal(result, np.cumsum(inputs[k], dtype=np.int32))


def test_out_is_written_and_returned(rng):
    x = rng.normal(size=321)
    out = cuda.device_array(321, np.float64)
    assert ps.scan(cuda.to_device(x), out=out) is out
    np.testing.assert_allclose(out.copy_to_host(), np.cumsum(x), atol=1e-10)
    host_out = np.empty(321)
    assert ps.scan(x, "max", out=host_out) is host_out
    np.testing.assert_array_equal(host_out, np.maximum.accumulate(x))
    keys = rng.integers(0, 99, 321).astype(np.uint32)
    values = rng.normal(size=321).astype(np.float32)
    sorted_keys, sorted_values = np.empty_like(keys), np.empty_like(values)
    got = apps.radix_sort(keys, values, out=(sorted_keys, sorted_values))
    assert got[0] is sorted_keys and got[1] is sorted_values
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(sorted_keys, keys[order])
    np.testing.assert_array_equal(sorted_values, values[order])
    device_keys = cuda.device_array(321, np.uint32)
    assert apps.radix_sort(cuda.to_device(keys), out=device_keys) is device_keys
    np.testing.assert_array_equal(device_keys.copy_to_host(), np.sort(keys))
    flags = (rng.random(321) < 0.1).astype(np.int8)
    seg_out = np.empty(321)
    assert apps.segmented_scan(x, flags, out=seg_out) is seg_out
    np.testing.assert_allclose(seg_out, segmented.reference(x, flags), atol=1e-10)
    rec_out = cuda.device_array(321, np.float64)
    a = np.full(321, 0.25)
    assert apps.linear_recurrence(cuda.to_device(a), cuda.to_device(x), out=rec_out) is rec_out
    np.testing.assert_allclose(rec_out.copy_to_host(), apps.linear_recurrence(a, x), atol=1e-12)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda x, d: ps.scan(d, out=cuda.device_array(9, np.float64)),
            ValueError,
            r"out must have shape \(10,\); got "
            r"\(9,\)",
        ),
        (
            lambda x, d: ps.scan(d, out=cuda.device_array(10, np.float32)),
            TypeError,
            "out must have dtype float64; got float32",
        ),
        (
            lambda x, d: ps.scan(d, out=np.empty(10)),
            TypeError,
            "out must be a device array for a device input; got ndarray",
        ),
        (lambda x, d: ps.scan(x, out=cuda.device_array(10)), TypeError, "out must be a numpy array for a numpy input"),
        (lambda x, d: ps.scan(x, out=x), ValueError, "out shares memory with the input"),
        (lambda x, d: ps.scan(d, out=d), ValueError, "out shares memory with the input"),
        (lambda x, d: ps.scan(x, out=np.empty(20)[::2]), ValueError, "out must be a contiguous, writeable numpy array"),
        (lambda x, d: apps.radix_sort(x, x, out=np.empty(10)), TypeError, r"out must be a pair \(keys, values\)"),
        (lambda x, d: apps.radix_sort(x, out=np.empty(10, np.float32)), TypeError, "out must have dtype float64"),
        (lambda x, d: apps.segmented_scan(x, x > 0, out=np.empty(3)), ValueError, r"out must have shape \(10,\)"),
    ],
)
def test_a_wrong_out_is_refused_before_a_launch_and_the_input_kept(call, error, message):
    x = np.linspace(-1, 1, 10)
    before = x.copy()
    device = cuda.to_device(x)
    run = ps.trace.record(call, x, device)
    assert isinstance(run.error, error), repr(run.error)
    assert re.search(message, str(run.error)), str(run.error)
    assert run.launches == []
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(device.copy_to_host(), before)


def test_temporary_storage_of_the_callers_own(rng):
    n = 1000
    x = rng.integers(-99, 99, n).astype(np.int32)
    plan = ps.plan_scan(np.int32, n, block_size=32, items_per_thread=1)  # 32 tiles: look-backs over many states
    temp = cuda.to_device(np.full(plan.temp_bytes, 0xA5, np.uint8))  # poisoned: the plan zeroes what must start at 0
    for _ in range(3):
        np.testing.assert_array_equal(plan(cuda.to_device(x), temp=temp).copy_to_host(), np.cumsum(x, dtype=np.int32))
    user = ps.plan_scan((np.dtype(np.float64), np.dtype(np.float64)), n, apps.recurrences.affine, identity=(1.0, 0.0))
    a, b = np.full(n, 0.5), rng.normal(size=n)
    kept = cuda.to_device(np.full(user.temp_bytes, 0x5A, np.uint8))
    np.testing.assert_allclose(user((a, b), temp=kept)[1], apps.linear_recurrence(a, b), atol=1e-12)
    keep = rng.random(n) < 0.5
    select = apps.plan_compact(np.int32, n, mask_dtype=np.bool_)
    storage = cuda.device_array(select.temp_bytes, np.uint8)
    for _ in range(2):
        np.testing.assert_array_equal(select(x, keep, temp=storage), x[keep])
    sort = apps.plan_radix_sort(np.int32, n, value_dtype=np.float64)
    storage = cuda.device_array(sort.temp_bytes, np.uint8)
    for _ in range(2):
        got_keys, got_values = sort(x, b, temp=storage)
        np.testing.assert_array_equal(got_values, b[np.argsort(x, kind="stable")])
    with pytest.raises(ValueError, match=rf"temp holds 8 bytes; this plan needs temp_bytes = {plan.temp_bytes}"):
        plan(x, temp=cuda.device_array(8, np.uint8))
    with pytest.raises(ValueError, match="algorithm 'ladder' keeps its temporary storage in the package's workspace"):
        ps.plan_scan(np.int32, n, algorithm="ladder")(x, temp=temp)
    with pytest.raises(TypeError, match="temp must be a device array"):
        plan(x, temp=np.zeros(plan.temp_bytes, np.uint8))


@pytest.mark.parametrize("mask_dtype", [np.bool_, np.int8, np.uint16, np.int32, np.int64])
def test_a_mask_or_flags_of_bool_or_any_integer_type_on_the_device(mask_dtype, rng):
    n = 257
    x = rng.normal(size=n)
    raw = rng.integers(0, 3, n)
    mask = (raw != 0) if mask_dtype is np.bool_ else raw.astype(mask_dtype)
    if mask_dtype is np.int32:
        mask = (raw == 0).astype(np.int32)  # int32 device flags are read as they are: 0 or 1
    before = mask.copy()
    dx, dmask = cuda.to_device(x), cuda.to_device(mask)
    np.testing.assert_array_equal(apps.compact(dx, dmask).copy_to_host(), x[mask != 0])
    np.testing.assert_array_equal(apps.compact_indices(dmask).copy_to_host(), np.flatnonzero(mask))
    np.testing.assert_array_equal(apps.compact_by_scan(dx, dmask).copy_to_host(), x[mask != 0])
    for inclusive, reverse in ((True, False), (False, True)):
        got = apps.segmented_scan(dx, dmask, inclusive=inclusive, reverse=reverse).copy_to_host()
        np.testing.assert_allclose(got, segmented.reference(x, mask, inclusive=inclusive, reverse=reverse), atol=1e-10)
    np.testing.assert_array_equal(dmask.copy_to_host(), before)  # the caller's flags, never modified


def test_one_wording_for_every_call():
    two_d = np.ones((3, 4), np.float32)
    message = r"x must be 1-D; got an array of shape \(3, 4\) \(ndim=2\)"
    for call in (
        lambda: ps.scan(two_d),
        lambda: apps.compact(two_d, np.ones(3, bool)),
        lambda: apps.segmented_scan(two_d, np.ones(3, bool)),
    ):
        with pytest.raises(ValueError, match=message):
            call()
    with pytest.raises(ValueError, match=r"keys must be 1-D; got an array of shape \(3, 4\) \(ndim=2\)"):
        apps.radix_sort(two_d)
    for call in (
        lambda: apps.compact(np.ones(3), np.ones(3, np.float32)),
        lambda: apps.segmented_scan(np.ones(3), np.ones(3, np.float32)),
    ):
        with pytest.raises(TypeError, match=r"(mask|flags) must be bool or integers; got dtype float32"):
            call()
    strided = cuda.to_device(np.arange(10.0))[::2]
    for call in (lambda: ps.scan(strided), lambda: apps.compact(strided, cuda.to_device(np.ones(5, bool)))):
        with pytest.raises(ValueError, match=r"a device array x must be contiguous; got strides \(16,\)"):
            call()


def test_the_registry_chooses_from_measured_times_and_flags():
    measured = {"slow": 9.0, "fast": 2.0}
    registry = Registry("method", measured=lambda names, n, dtype: {k: measured[k] for k in names if k in measured})
    for name, rank, flags in (
        ("slow", 5, Capability.USER_OPERATOR),
        ("fast", 1, Capability.NONE),
        ("unmeasured", 9, Capability.USER_OPERATOR),
    ):
        registry.register(Entry(name, flags, auto_rank=rank))
    assert registry.choose("auto", 100).name == "fast"
    assert registry.choose("auto", 100, needs=Capability.USER_OPERATOR).name == "slow"
    with pytest.raises(
        ValueError,
        match=r"method 'fast' cannot carry a user operator; those that can: auto, slow, "
        r"unmeasured",
    ):
        registry.choose("fast", needs=Capability.USER_OPERATOR)
    with pytest.raises(ValueError, match="already taken"):
        registry.register(Entry("fast"))
    assert ALGORITHMS.choose("auto", 1 << 20, np.dtype(np.float32)).name == "lookback"  # lookback.csv's whole calls
    assert ALGORITHMS["lookback"].can(Capability.CHUNKED | Capability.CALLER_TEMP)


def test_every_plans_kernels_compile_to_ptx(ptx_child):
    """What a plan launches (its ``kernels``) compiles for a GPU: the look-back scans with the shared
    tile-id draw, a user operator's, the segmented scan's with the flags' conversion, the one-pass
    compaction and the onesweep sort."""
    code = """
        import numpy as np
        from numba import cuda
        import prefixsum as ps
        from prefixsum import apps
        from prefixsum.apps import onesweep
        from prefixsum.apps.recurrences import affine
        from prefixsum.core.numba_gpu import pretend_device
        pretend_device((9, 0))
        onesweep._multiprocessors = lambda: 132  # a sort's plan asks the device for it; there is none here
        plans = [ps.plan_scan(np.float32, 1 << 20), ps.plan_scan(np.float64, 5000, "max", reverse=True),
                 ps.plan_scan(np.int32, 5000, algorithm="hierarchical"),
                 ps.plan_scan((np.float64, np.float64), 5000, affine, identity=(1.0, 0.0)),
                 apps.plan_segmented_scan(np.float32, 5000, flags_dtype=np.bool_),
                 apps.plan_compact(np.float32, 5000, mask_dtype=np.int8),
                 apps.plan_compact_indices(5000, mask_dtype=np.bool_),
                 apps.plan_radix_sort(np.float32, 5000, value_dtype=np.int64)]
        for plan in plans:
            for kernel, argtypes in plan.kernels:
                cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
                print("ok", type(plan).__name__, kernel.py_func.__name__)
    """
    child = ptx_child(textwrap.dedent(code))
    assert child.returncode == 0, child.stderr[-3000:]
    compiled = child.stdout.split()
    for name in ("scan", "select", "digit_pass", "histogram", "clear", "nonzero_as_int32", "reduce_tiles"):
        assert name in compiled, (name, child.stdout)
