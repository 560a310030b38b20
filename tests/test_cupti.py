"""The CUPTI method of the benchmarks (prefixsum.cli.cupti): summing a trace's kernels per call,
on synthetic profiler events (no GPU needed); and its marker kernel compiled to PTX."""

import types

import pytest

from prefixsum.cli import cupti, timing

MARK = "_ZN6cudapy8prefixsum3cli5cupti13call_boundaryB2v1E"


class _Range:
    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start


def _event(name, start, end, device="DeviceType.CUDA"):
    return types.SimpleNamespace(name=name, time_range=_Range(start, end), device_type=device)


def test_kernels_between_markers_are_summed_per_call_in_time_order():
    events = [
        _event("cub::DeviceScanKernel", 10, 14),
        _event("cub::DeviceScanInitKernel", 2, 3),
        _event(MARK, 20, 21),
        _event("gtsv2_nopivot_kernel", 30, 37.5),
        _event("gtsv2_kernel_2", 40, 41),
        _event("Memcpy DtoD (Device -> Device)", 41, 90),
        _event("Memset (Device)", 91, 92),
        _event("cudaLaunchKernel", 25, 95, device="DeviceType.CPU"),
        _event(MARK, 100, 101),
        _event("left after the last marker", 110, 500),
    ]
    events.reverse()  # the trace's order is not promised: the start times decide
    assert cupti.per_call_us(events) == [5.0, 8.5]
    assert cupti.per_call_us(events, copies=True) == [5.0, 8.5 + 49 + 1]


def test_a_call_that_launched_nothing_is_zero_and_no_marker_is_no_call():
    assert cupti.per_call_us([_event(MARK, 0, 1), _event(MARK, 5, 6)]) == [0.0, 0.0]
    assert cupti.per_call_us([_event("k", 0, 3)]) == []


def test_only_cuda_events_count():
    assert cupti.is_device_event(_event("k", 0, 1))
    assert not cupti.is_device_event(_event("k", 0, 1, device="DeviceType.CPU"))


def test_kernel_us_reports_the_method_in_its_timing(monkeypatch):
    monkeypatch.setattr(timing, "simulating", lambda: False)
    monkeypatch.setattr(timing.cupti, "cupti_us", lambda launch, warmup, repeats, copies: 12.5)
    measured = timing.kernel_us(lambda: None, method="cupti")
    assert (measured.us, measured.method, measured.timing) == (12.5, "cupti", "cupti, kernels summed per call")


def test_methods_are_checked():
    assert timing.check_methods(["cupti", "events", "cupti"]) == ["cupti", "events"]
    with pytest.raises(ValueError, match="'clock'.*cupti, events"):
        timing.check_methods(["clock"])


def test_the_marker_kernel_compiles_for_a_gpu(ptx_compiler):
    from prefixsum import ptx

    assert ptx.compiles_in_child(cupti.call_boundary, "void()") == (True, "ok")


def test_the_kernels_of_a_call_are_named_with_their_launches_per_call():
    events = [
        _event("scan", 0, 1),
        _event("Memcpy DtoH", 1, 2),
        _event(MARK, 3, 4),
        _event("scan", 5, 6),
        _event("reduce", 6, 7),
        _event("Memcpy DtoH", 7, 8),
        _event(MARK, 9, 10),
        _event("cudaLaunchKernel", 0, 10, device="DeviceType.CPU"),
    ]
    assert cupti.kernels_per_call(events, 2) == {"scan": 1.0, "reduce": 0.5}
    assert cupti.kernels_per_call(events, 2, copies=True) == {"scan": 1.0, "Memcpy DtoH": 1.0, "reduce": 0.5}
