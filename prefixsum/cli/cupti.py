"""Device time of whole calls from CUPTI, through ``torch.profiler``: the benchmarks' second method.

CUDA events around a call time the stream between two points: the kernels, and any gap the GPU
spends waiting for the host between them (:func:`prefixsum.cli.timing.kernel_us` hides those gaps
behind a busy kernel, but only for launches on one stream). CUPTI, the profiling interface under
``torch.profiler``, records the start and end of every kernel of the process, whoever launched
it (numba, cuda.core, CUB behind torch, cuSPARSE behind CuPy, XLA behind JAX): summing the
durations of a call's kernels gives its device time with no host gap in it, the same way for our
kernels and a library's several. That is what issue 29's measurements used.

A call's kernels are told from the next call's by a marker: after each call the device is
synchronised and :func:`call_boundary`, an empty kernel, is launched; in the trace, the kernels
between two markers are one call. Copies and memsets (``Memcpy ...``, ``Memset ...`` in the
trace) are left out unless asked for (a baseline that is a copy, as torch's ``copy_``).
"""

import importlib
import statistics

from numba import cuda

BOUNDARY = "call_boundary"
"""A substring of :func:`call_boundary`'s (mangled) kernel name in the trace."""
COPIES = ("Memcpy", "Memset")
"""Trace names of the device's copies and fills, which are not kernels."""


@cuda.jit
def call_boundary():
    """Does nothing: its launch marks the end of a call in the profiler's trace."""


def is_device_event(event):
    """Whether a profiler event ran on the GPU (its ``device_type`` is ``DeviceType.CUDA``).

    Compared by name, so that the events of a test need not import torch.
    """
    return str(event.device_type).rsplit(".", 1)[-1] == "CUDA"


def per_call_us(events, boundary=BOUNDARY, copies=False):
    """Microseconds of kernel time of each call in a profiler trace, in the order of the calls.

    Parameters
    ----------
    events : iterable
        ``torch.profiler``'s events (or anything with ``name``, ``device_type`` and a
        ``time_range`` with ``start`` and ``elapsed_us()``), in any order.
    boundary : str
        A substring of the name of the kernel launched after each call.
    copies : bool
        Count the copies and memsets (:data:`COPIES`) too: for a call that is a copy
        (``torch``'s ``copy_`` of a contiguous tensor is a device-to-device memcpy, no kernel).

    Returns
    -------
    list of float
        For each boundary kernel, the summed durations of the other kernels that started after
        the previous boundary (or the trace's start) and before it; copies and memsets
        (:data:`COPIES`) only if ``copies``; host events never. Kernels after the last boundary are
        not a whole call and are dropped.
    """
    found, total = [], 0.0
    for event in sorted(filter(is_device_event, events), key=lambda e: e.time_range.start):
        if boundary in event.name:
            found.append(total)
            total = 0.0
        elif copies or not event.name.startswith(COPIES):
            total += event.time_range.elapsed_us()
    return found


def kernels_per_call(events, calls, boundary=BOUNDARY, copies=False):
    """``{name: launches per call}`` of the device work in a trace of ``calls`` calls, in order of first start.

    What each library launches, for a benchmark's log; the markers (``boundary``) are left out,
    and the copies and memsets unless ``copies`` (as in :func:`per_call_us`).
    """
    counts = {}
    for event in sorted(filter(is_device_event, events), key=lambda e: e.time_range.start):
        if boundary not in event.name and (copies or not event.name.startswith(COPIES)):
            counts[event.name] = counts.get(event.name, 0) + 1
    return {name: count / calls for name, count in counts.items()}


def available():
    """Whether torch's profiler can trace this GPU: torch installed, built with CUDA, seeing a GPU."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def cupti_us(launch, *, warmup, repeats, copies=False, seen=None):
    """Median over ``repeats`` calls of ``launch()``'s kernel time, from torch.profiler's trace.

    Parameters
    ----------
    launch : callable
        Queues the GPU work of one call (on any stream; the device is synchronised after it).
    warmup : int
        Calls made before tracing (compilation, first-call allocations).
    repeats : int
        Traced calls.
    copies : bool
        Count the device's copies and memsets as well as its kernels (:func:`per_call_us`).
    seen : dict, optional
        Filled with the names of the kernels (and copies) of a call and their launches per call
        (:func:`kernels_per_call`).

    Raises
    ------
    RuntimeError
        The trace does not hold one kernel (or with ``copies``, copy) or more for every call: the
        work went unseen (a launch on a context CUPTI does not trace, or a copy without
        ``copies``), and no time would be right.
    """
    try:  # an optional baseline, like every GPU library the benchmarks compare with
        from torch.profiler import ProfilerActivity, profile
    except ImportError as error:
        raise RuntimeError("the CUPTI method needs torch (with CUDA); measure with method='events' instead") from error

    for _ in range(warmup):
        launch()
    call_boundary[1, 1]()  # compiled and loaded before the trace starts
    cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as traced:
        for _ in range(repeats):
            launch()
            cuda.synchronize()
            call_boundary[1, 1]()
            cuda.synchronize()
    calls = per_call_us(traced.events(), copies=copies)
    if seen is not None:
        seen.update(kernels_per_call(traced.events(), repeats, copies=copies))
    if len(calls) != repeats or min(calls, default=0.0) <= 0.0:
        raise RuntimeError(
            f"the profiler's trace held {len(calls)} calls for {repeats} made, "
            f"with kernel times {calls[:5]}...: it did not see every kernel"
        )
    return statistics.median(calls)


def cupti_us_each(launches, *, warmup, repeats, copies=()):
    """:func:`cupti_us` of every launch of the dict ``launches`` (name -> launch), all traced in one
    profiler session: ``{name: median microseconds}``.

    Each launch is called ``repeats`` times in a row, a boundary after each call, the launches one
    after another; a profiler session and the reading of its trace cost about a second, so that
    a benchmark of many variants at one size pays it once. ``copies`` names the launches whose
    device copies and memsets count (:func:`per_call_us`). Raises RuntimeError as
    :func:`cupti_us` does when the trace lacks a call.
    """
    try:  # an optional baseline, like every GPU library the benchmarks compare with
        from torch.profiler import ProfilerActivity, profile
    except ImportError as error:
        raise RuntimeError("the CUPTI method needs torch (with CUDA); measure with method='events' instead") from error

    for launch in launches.values():
        for _ in range(warmup):
            launch()
    call_boundary[1, 1]()
    cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as traced:
        for launch in launches.values():
            for _ in range(repeats):
                launch()
                cuda.synchronize()
                call_boundary[1, 1]()
                cuda.synchronize()
    events = traced.events()
    by_kind = {False: per_call_us(events), True: per_call_us(events, copies=True)}
    found = {}
    for k, name in enumerate(launches):
        calls = by_kind[name in copies][k * repeats : (k + 1) * repeats]
        if len(calls) != repeats or min(calls, default=0.0) <= 0.0:
            raise RuntimeError(
                f"the profiler's trace held {len(calls)} calls of {name!r} for {repeats} made, "
                f"with kernel times {calls[:5]}...: it did not see every kernel"
            )
        found[name] = statistics.median(calls)
    return found


def kernel_names(launch):
    """The names of the kernels one call of ``launch()`` runs, from torch.profiler's trace: which
    routine a library chose (JAX's ``tridiagonal_solve`` calls one of cuSPARSE's, by shape).

    Parameters
    ----------
    launch : callable
        Queues the GPU work of one call (on any stream); called once before tracing.

    Returns
    -------
    list of str
        Each kernel's name once, in the order they first ran; copies and memsets left out.
    """
    try:  # an optional baseline, like every GPU library the benchmarks compare with
        from torch.profiler import ProfilerActivity, profile
    except ImportError as error:
        raise RuntimeError("reading kernel names from CUPTI needs torch (with CUDA)") from error

    launch()
    cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as traced:
        launch()
        cuda.synchronize()
    ran = sorted(
        (e for e in traced.events() if is_device_event(e) and not e.name.startswith(COPIES)),
        key=lambda e: e.time_range.start,
    )
    return list(dict.fromkeys(e.name for e in ran))
