"""How the benchmarks time, the harness of ``python -m prefixsum bench`` and of every script in
``benchmarks/``.

Two times are measured, each the median of ``repeats`` samples after a warm-up:

- **kernel time** (:func:`kernel_us`), by one of two methods (:data:`METHODS`, a CSV's ``method``
  column): ``cupti``, the durations of the call's kernels summed from torch.profiler's CUPTI trace
  (:mod:`.cupti`: every kernel of the process, whoever launched it, with no host gap in it; the
  default), or ``events``, CUDA events around the launches of one call, queued on the GPU behind
  a busy kernel, so that the host's time to issue them (tens of microseconds of Python per numba
  launch) is not counted; a library's kernels (torch, CuPy) are timed the same way, on their own
  stream (:func:`library_stream`);
- **whole-call time** (:func:`host_us`, :func:`host_us_in_turn`): whole calls on the host clock,
  synchronised, the compared calls taken in turn.

A baseline library that cannot run is skipped with a line saying why (:func:`gpu_library`); a
script runs on the simulator only with ``--quick``, to test it (:func:`script_arguments`).
"""

import argparse
import functools
import importlib
import math
import os
import random
import statistics
import sys
import time
from typing import NamedTuple

from numba import cuda

from ..core.device import simulating
from . import cupti

REPEATS = 25
METHODS = ("cupti", "events")
"""Ways to measure device time: CUPTI's kernel durations (:mod:`.cupti`), CUDA events (:func:`kernel_us`)."""
WARMUP = 3
# The simulator's times mean nothing (a quick run there tests the script): one call, no warm-up.
QUICK_REPEATS = 1 if simulating() else 2
HOST_WARMUP = 0 if simulating() else 1  # untimed calls before host_us samples
LIBRARIES = ("torch", "cupy")

# The busy kernel must outlast the host's issuing of the launches it hides: twice the host time
# one call took with the GPU idle, plus a millisecond for the interpreter's hiccups. A call that
# needs more than MAX_BUSY_US of it is not queued (it synchronises, or launches for so long that
# the gaps between its launches do not matter).
BUSY_MARGIN_US = 1000.0
MAX_BUSY_US = 50_000.0
MAX_MISSES = 3


def default_out():
    """Where the scripts write: ``$OUT`` (the GPU machine's result folder) or ``benchmarks/out``."""
    return os.environ.get("OUT") or os.path.join("benchmarks", "out")


def script_arguments(argv, quick_help, more=None):
    """Parse the options of a benchmark script (``--out``, ``--quick``, ``--method``; ``more(parser)``
    adds the script's own); stop unless a GPU or ``--quick``.

    The description is the first line of the calling script's docstring.
    """
    description = (sys.modules["__main__"].__doc__ or "").strip().splitlines()[:1]
    parser = argparse.ArgumentParser(description=description[0] if description else None)
    parser.add_argument("--out", default=default_out())
    parser.add_argument("--quick", action="store_true", help=quick_help)
    add_method_option(parser)
    if more:
        more(parser)
    args = parser.parse_args(argv)
    require_gpu(args.quick)
    args.method = check_methods(args.method or ["cupti"])
    return args


def add_method_option(parser):
    """``--method``, repeatable: how device times are measured (:data:`METHODS`; cupti if none)."""
    parser.add_argument(
        "--method",
        action="append",
        choices=METHODS,
        help="how device time is measured: cupti (torch.profiler's kernel durations summed per call, "
        "the default) or events (CUDA events around queued launches); repeat for both",
    )


def require_gpu(quick):
    """Stop unless a GPU runs the kernels, or ``quick`` (tiny sizes on the simulator, to test the script)."""
    if simulating() and not quick:
        raise SystemExit("this benchmark needs a CUDA GPU; on the simulator, run it with --quick to test the script")


def gpu_library(name):
    """The module ``torch``, ``cupy`` or ``jax`` if it is installed and sees the GPU, else None.

    A baseline that cannot run is skipped with a line saying why, never an error: the other rows
    of the run still count.
    """
    if simulating():
        print(f"{name}: skipped (the CUDA simulator: no GPU for it)")
        return None
    try:
        module = importlib.import_module(name)
    except ImportError as error:
        print(f"{name}: skipped (not installed: {error})")
        return None
    usable = {
        "torch": lambda: module.cuda.is_available(),
        "cupy": lambda: module.cuda.runtime.getDeviceCount() > 0,
        "jax": lambda: module.default_backend() == "gpu",
    }[name]
    try:
        if usable():
            return module
        reason = "it sees no GPU"
    except Exception as error:  # a library without a working CUDA build raises its own errors
        reason = f"{type(error).__name__}: {error}"
    print(f"{name}: skipped ({reason})")
    return None


@cuda.jit
def _spin(sleeps):
    """The busy kernel, for one thread: ``sleeps`` naps of about a microsecond."""
    for _ in range(sleeps):
        cuda.nanosleep(1000)


@functools.cache
def _us_per_sleep():
    """Microseconds one nap of :func:`_spin` takes on this GPU: nanosleep only promises 0 to 2x the request."""
    _spin[1, 1](1)
    start, stop = cuda.event(), cuda.event()
    start.record()
    _spin[1, 1](2000)
    stop.record()
    stop.synchronize()
    return max(start.elapsed_time(stop) * 1e3 / 2000, 0.05)


def _busy(us, stream):
    """Queue a one-thread kernel on ``stream`` that keeps it busy for about ``us`` microseconds."""
    _spin[1, 1, stream](math.ceil(us / _us_per_sleep()))


class KernelTime(NamedTuple):
    """:func:`kernel_us`'s answer: the median, whether every sample was queued, and the method."""

    us: float
    queued: bool
    method: str = "events"

    @property
    def timing(self):
        """How it was measured, for the CSV's ``timing`` column."""
        if math.isnan(self.us):
            return "not timed (simulator)"
        if self.method == "cupti":
            return "cupti, kernels summed per call"
        return "events, queued" if self.queued else "events, not queued"


def check_methods(methods):
    """The measuring methods asked for, checked: each of :data:`METHODS`, and ``"cupti"`` only
    where torch's profiler can trace the GPU (or on the simulator, which times nothing)."""
    for method in methods:
        if method not in METHODS:
            raise ValueError(f"unknown measuring method {method!r}; the methods are {', '.join(METHODS)}")
    if "cupti" in methods and not simulating() and not cupti.available():
        raise SystemExit("--method cupti needs torch with CUDA (its profiler reads CUPTI); use --method events")
    return list(dict.fromkeys(methods))


def kernel_us(launch, *, stream=None, warmup=WARMUP, repeats=REPEATS, method="events", copies=False, ran=False):
    """Median microseconds of the GPU work that ``launch()`` queues, without the host's launch time.

    ``method="cupti"`` sums the durations of the call's kernels in torch.profiler's trace instead
    (:func:`prefixsum.cli.cupti.cupti_us`; ``stream`` is not needed; ``copies``: count the
    device's memcpys and memsets too); the default, ``"events"``, is described here.

    Each sample queues a busy kernel on ``stream``, records the start event, calls ``launch()``
    and records the stop event; the busy kernel outlasts the host's issuing of the launches, so
    the GPU finds them all queued when the start event fires and the events time the kernels
    alone. A sample is kept only if the start event was still pending when ``launch()`` returned
    (else the GPU caught up with the host, and waited: the busy time is doubled and the sample
    redone). A ``launch`` that synchronises cannot be queued: after ``MAX_MISSES`` misses, or when
    the busy time would exceed ``MAX_BUSY_US``, it is timed without the busy kernel and the
    result says ``queued=False``.

    Parameters
    ----------
    launch : callable
        Queues the GPU work on ``stream`` and returns without waiting for it.
    stream : numba stream, optional
        The stream ``launch`` uses: numba's default stream (the default), or
        :func:`library_stream` for torch or cupy.
    ran : bool, optional
        ``launch`` has just run (for its check): on the simulator it does not run again.

    Returns
    -------
    KernelTime
        NaN on the simulator, which records no time (``launch`` runs once, to test the code, unless ``ran``).
    """
    if simulating():
        if not ran:
            launch()
        return KernelTime(float("nan"), False, method)
    if method == "cupti":
        return KernelTime(cupti.cupti_us(launch, warmup=warmup, repeats=repeats, copies=copies), True, method)
    stream = cuda.default_stream() if stream is None else stream
    for _ in range(warmup):
        launch()
    cuda.synchronize()
    clock = time.perf_counter()
    launch()
    busy_us = 2 * (time.perf_counter() - clock) * 1e6 + BUSY_MARGIN_US
    cuda.synchronize()
    queued = busy_us <= MAX_BUSY_US
    start, stop = cuda.event(), cuda.event()
    samples, misses = [], 0
    # Freeing device memory synchronises the device; launches that allocate must not free inside.
    with cuda.defer_cleanup():
        while len(samples) < repeats:
            if queued:
                _busy(busy_us, stream)
            start.record(stream)
            launch()
            stop.record(stream)
            missed = queued and start.query()
            stop.synchronize()
            if not missed:
                samples.append(start.elapsed_time(stop) * 1e3)
                continue
            misses += 1
            busy_us *= 2
            if misses >= MAX_MISSES or busy_us > MAX_BUSY_US:
                queued = False
                samples.clear()
    return KernelTime(statistics.median(samples), queued)


def kernel_us_each(launches, *, repeats=REPEATS, method="cupti", stream=None, copies=(), ran=False):
    """``{name: KernelTime}`` of each launch of the dict ``launches`` (name -> launch): by CUPTI in
    one profiler session (:func:`prefixsum.cli.cupti.cupti_us_each`), or by :func:`kernel_us`
    one launch after another (``stream``: a launch's stream for the events, by name, else numba's
    default; ``copies``: the launches whose device copies count; ``ran``: as :func:`kernel_us`'s).
    NaN on the simulator."""
    if simulating() or method != "cupti":
        return {
            name: kernel_us(
                launch, stream=(stream or {}).get(name), repeats=repeats, method=method, copies=name in copies, ran=ran
            )
            for name, launch in launches.items()
        }
    found = cupti.cupti_us_each(launches, warmup=WARMUP, repeats=repeats, copies=copies)
    return {name: KernelTime(us, True, method) for name, us in found.items()}


def library_stream(module):
    """The numba stream on which ``module`` (torch or cupy) queues its kernels now, checked.

    One busy kernel and one kind of event for numba, torch and cupy alike: the numba stream wraps
    the library's own current stream handle (0, the legacy default stream that numba uses too,
    unless the library was told otherwise), so the busy kernel and the events are ordered with
    the library's kernels by construction. The check proves it on the GPU: after a long busy
    kernel on the returned stream, the library's own synchronisation of its stream must wait.
    """
    if module.__name__ == "torch":
        current = module.cuda.current_stream()
        handle = current.cuda_stream
    else:
        current = module.cuda.get_current_stream()
        handle = current.ptr
    stream = cuda.legacy_default_stream() if handle == 0 else cuda.external_stream(handle)
    _busy(20_000, stream)
    clock = time.perf_counter()
    current.synchronize()
    waited_ms = (time.perf_counter() - clock) * 1e3
    if waited_ms < 10:
        raise RuntimeError(
            f"{module.__name__}'s stream {handle} did not wait for a 20 ms kernel queued on it "
            f"(it waited {waited_ms:.1f} ms): its kernels would not be queued for timing"
        )
    return stream


def queued_library(name):
    """``(module, stream)``: :func:`gpu_library` and its :func:`library_stream`, or ``(None, None)``
    (with a line saying why) when it cannot run or its kernels cannot be queued."""
    module = gpu_library(name)
    if module is None:
        return None, None
    try:
        return module, library_stream(module)
    except RuntimeError as error:
        print(f"{name}: skipped ({error})")
        return None, None


def host_us(call, *, warmup=HOST_WARMUP, repeats=REPEATS):
    """Median microseconds of a whole ``call()`` on the host clock (it must synchronise itself)."""
    return host_us_in_turn({None: call}, warmup=warmup, repeats=repeats)[None]


def host_us_in_turn(calls, *, warmup=HOST_WARMUP, repeats=REPEATS, seed=0):
    """Median microseconds of each whole call of the dict ``calls`` (name -> function that
    synchronises itself) on the host clock, the calls taken in turn, one of each per round, so
    that a drift of the machine's speed during the run touches every call alike.

    Each round takes the calls in an order of its own, shuffled by ``random.Random(seed)``, so
    that every call follows each of the others about as often: a call runs slower after some
    others (``tridiag.solve`` after torch's round trip), and an order rotated round by
    round still put the same call before it in every round but the ones it began.
    """
    times = {name: [] for name in calls}
    order = list(calls.items())
    for _ in range(warmup):
        for call in calls.values():
            call()
    shuffle = random.Random(seed).shuffle
    for _ in range(repeats):
        shuffle(order)
        for name, call in order:
            start = time.perf_counter()
            call()
            times[name].append((time.perf_counter() - start) * 1e6)
    return {name: statistics.median(values) for name, values in times.items()}
