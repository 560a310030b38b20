"""ps.scan on numpy arrays (copies overlapped with the scan) against torch's and CuPy's round trips.

    python benchmarks/transfers.py [--out DIR]          on a GPU (run_gpu.sh stage "transfers")
    python benchmarks/transfers.py --tune [--out DIR]   the chunk size and copy threads, swept
    python benchmarks/transfers.py --timeline [--out DIR]   one call traced by CUPTI
    python benchmarks/transfers.py --tridiag [--out DIR]    tridiag.solve of numpy batches
    python benchmarks/transfers.py --quick              tiny sizes on the simulator, to test the script

A whole call from a numpy array to a numpy array, on the host clock: ``ps.scan(x)``
(:mod:`prefixsum.scans.transfers`), torch's ``torch.cumsum(torch.from_numpy(x).cuda(), 0).cpu().numpy()``
CuPy's ``cupy.asnumpy(cupy.cumsum(cupy.asarray(x)))`` and CUB's inclusive sum through
``cuda.compute`` between kept device buffers (:func:`cub_round_trip`; left out with a note where it
cannot run), n = 2^20..2^28, float32 and int32,
every result checked first (median of 25 calls, fewer for the largest arrays). Writes
``transfers.csv`` (variant, dtype, n, median_us, gbps = 2 n x itemsize / time, the bytes that
cross PCIe, correct, the run's metadata).

``--timeline`` writes ``transfers_timeline.csv`` instead: one ps.scan call of 2^24 float32 traced
by CUPTI (torch.profiler), each copy and kernel with its stream, and each of the host's copies
into pinned memory, with its start and end in microseconds from the call's first event
(chapter 09 draws it).

``--tune`` writes ``transfers_tune.csv`` instead: ps.scan at 2^19..2^22 and 2^24 float32 through the
pinned slots for each chunking (:data:`TUNE_CHUNKINGS`) and number of copy threads, beside the
plain way and torch's round trip (the table the defaults of :mod:`prefixsum.scans.transfers`
come from).

``--tridiag`` writes ``transfers_tridiag.csv`` instead: whole ``tridiag.solve`` calls on numpy
batches (:mod:`prefixsum.tridiag.transfers`) against torch's round trip through cuSPARSE
(``torch.from_numpy(v).cuda()`` for a, b, c, d, ``gtsv2StridedBatch`` on the tensors, which
overwrites d's copy with x, ``.cpu().numpy()``; its buffer is kept between calls, as a user
would), batch x n of :data:`TRIDIAG_CASES`, float32 and float64; beside them the plain way with
the caller's arrays copied straight from pageable memory and packed into page-locked memory on
the copy threads first (:func:`prefixsum.core.overlap.send_packed`, in its pieces of 32 MiB and
of 8 MiB), and the chunked way cut into 2 and 4 chunks whatever the size (the table the defaults
of :mod:`prefixsum.tridiag.transfers` and of ``send_packed`` come from). Every result's relative
residual is checked first (at most 64 eps), then the median of 51 calls on the host clock (9 from
64 MiB of inputs on), the variants of a shape taken in turn, a call of each per round in an order shuffled each
round.
"""

import contextlib
import functools
import json
import os
import shlex
import sys
import tempfile
import time

import cub_rows  # noqa: E402  (beside this script)
import numpy as np

import prefixsum as ps  # before numba.cuda: prefixsum chooses the GPU or the simulator
from prefixsum.cli.metadata import run_metadata
from prefixsum.cli.results import print_table, report_wrong, write_csv
from prefixsum.cli.timing import QUICK_REPEATS, REPEATS, gpu_library, host_us, host_us_in_turn, script_arguments
from prefixsum.core import overlap
from prefixsum.scans import transfers
from prefixsum.scans.testing import expected_scan, random_input, wrong_indices
from prefixsum.tridiag import transfers as tridiag_transfers

SIZES = tuple(1 << k for k in range(20, 29, 2))
DTYPES = ("float32", "int32")
QUICK_SIZES = (1000, 9000)
TUNE_SIZES = (1 << 19, 1 << 20, 1 << 21, 1 << 22, 1 << 24)
TUNE_CHUNKINGS = (
    (256 << 10, 4 << 20, 8),
    (512 << 10, 4 << 20, 8),
    (1 << 20, 4 << 20, 4),
    (1 << 20, 16 << 20, 4),
    (512 << 10, 2 << 20, 16),
)
"""(MIN_CHUNK_BYTES, CHUNK_BYTES, TARGET_CHUNKS) of :mod:`prefixsum.scans.transfers`, swept by ``--tune``."""
TUNE_THREADS = (4, 8)
TIMELINE_N = 1 << 24
TRIDIAG_CASES = ((4096, 256), (512, 512), (64, 8192), (1, 1 << 20), (16384, 64), (16384, 256))
TRIDIAG_QUICK_CASES = ((7, 16), (1, 40))
TRIDIAG_CHUNKINGS = (2, 4)
"""TARGET_CHUNKS of :mod:`prefixsum.tridiag.transfers` swept by ``--tridiag`` (with no bounds on a chunk's bytes)."""
TRIDIAG_REPEATS = 51
"""Calls of each variant per shape under 64 MiB of inputs: there the variants differ by a few per
cent, about what the median of 25 calls moved between two runs of one machine."""
CUSPARSE = "torch round trip (cuSPARSE gtsv2StridedBatch)"
HOST_COPY = "host copy into pinned memory"
CALL = "ps.scan call"


def repeats_for(n, quick):
    """Fewer calls for the largest arrays (torch's round trip of 2^28 float32 takes about a second)."""
    if quick:
        return QUICK_REPEATS
    return REPEATS if n <= 1 << 22 else 9 if n <= 1 << 24 else 5 if n <= 1 << 26 else 3


def not_overlapped(x):
    """ps.scan with one copy each way and one launch (the path below transfers.MIN_BYTES)."""
    kept = transfers.MIN_BYTES
    transfers.MIN_BYTES = 1 << 62
    try:
        return ps.scan(x)
    finally:
        transfers.MIN_BYTES = kept


DTYPE = {"float32": lambda torch: torch.float32, "int32": lambda torch: torch.int32}
"""torch's dtype for a numpy one: torch.cumsum of int32 gives int64 unless told (numpy's rule too)."""


CUB_ROUND_TRIP = "CUB round trip (cuda.compute; buffers, temporary storage kept)"


def cub_round_trip():
    """CUB's inclusive sum (``cuda.compute``, :mod:`cub_rows`) as a function of a numpy array: the
    array copied to a device buffer kept per length and dtype, scanned into another with CUB's
    temporary storage kept, copied back; None (with a note) where CUB cannot be built."""
    from numba import cuda

    built = {}

    def buffers(n, dtype):
        if (n, dtype) not in built:
            source, target = cuda.device_array(n, dtype), cuda.device_array(n, dtype)
            built[(n, dtype)] = source, target, cub_rows.scan(source, target)
        return built[(n, dtype)]

    if cub_rows.attempt("inclusive sum", lambda: buffers(1024, np.dtype(np.float32))) is None:
        return None

    def call(x):
        source, target, scan = buffers(x.shape[0], x.dtype)
        source.copy_to_device(x)
        scan()
        return target.copy_to_host()

    return call


def round_trips(torch, cupy):
    """name -> function of a numpy array returning its inclusive add scan as a numpy array."""
    calls = {"ps.scan": ps.scan, "ps.scan, copies not overlapped": not_overlapped}
    cub = cub_round_trip()
    if cub is not None:
        calls[CUB_ROUND_TRIP] = cub
    if torch is not None:
        calls["torch round trip"] = lambda x: (
            torch.cumsum(torch.from_numpy(x).cuda(), 0, dtype=DTYPE[x.dtype.name](torch)).cpu().numpy()
        )
    if cupy is not None:
        calls["cupy round trip"] = lambda x: cupy.asnumpy(cupy.cumsum(cupy.asarray(x), dtype=x.dtype))
    return calls


def measure(calls, sizes, dtypes, quick, meta, rng):
    """Rows of every call at every size and dtype, each result checked before it is timed."""
    rows = []
    for dtype in map(np.dtype, dtypes):
        for n in sizes:
            x = random_input(n, "add", dtype, rng)
            expected, allowed = expected_scan(x)
            for name, call in calls.items():
                correct = wrong_indices(call(x), expected, allowed).size == 0
                us = host_us(lambda: call(x), repeats=repeats_for(n, quick))
                rows.append(
                    {
                        "variant": name,
                        "dtype": dtype.name,
                        "n": n,
                        "median_us": round(us, 1),
                        "gbps": round(2 * n * dtype.itemsize / us / 1e3, 2),
                        "correct": correct,
                        "timing": "host clock, numpy in and out",
                        **meta,
                    }
                )
                print(f"{name:<18} {dtype.name:<8} n={n:<10} {us:>11.1f} us{'' if correct else '  WRONG'}", flush=True)
    return rows


def _owner(name):
    """The module that holds the setting ``name``: the copy threads are shared (:mod:`prefixsum.core.overlap`)."""
    return overlap if name == "STAGING_THREADS" else transfers


def tune(torch, quick, meta, rng):
    """ps.scan through the chunks (every size, MIN_BYTES 0) at each chunking and thread count, and
    torch's round trip and the plain way (one pageable copy each way), float32."""
    rows = []
    sizes = QUICK_SIZES if quick else TUNE_SIZES
    chunkings, thread_counts = (((64, 4096, 4),), (1, 2)) if quick else (TUNE_CHUNKINGS, TUNE_THREADS)
    names = ("MIN_CHUNK_BYTES", "CHUNK_BYTES", "TARGET_CHUNKS", "STAGING_THREADS", "MIN_BYTES")
    defaults = {name: getattr(_owner(name), name) for name in names}
    try:
        for low, high, target in chunkings:
            for threads in thread_counts:
                for name, value in zip(names, (low, high, target, threads, 0)):
                    setattr(_owner(name), name, value)
                overlap._pool.clear()  # a pool of the new size
                variant = f"ps.scan chunks={target} of {low}..{high} bytes threads={threads}"
                rows += [
                    {**row, "variant": variant}
                    for row in measure({"ps.scan": ps.scan}, sizes, ("float32",), quick, meta, rng)
                ]
    finally:
        for name, value in defaults.items():
            setattr(_owner(name), name, value)
        overlap._pool.clear()
    calls = {"ps.scan, copies not overlapped": not_overlapped}
    if torch is not None:
        calls.update(round_trips(torch, None))
        calls.pop("ps.scan")
    return rows + measure(calls, sizes, ("float32",), quick, meta, rng)


SEND_SETTINGS = ("PACK_PIECE_BYTES",)
"""Settings of :func:`prefixsum.core.overlap.send_packed` that ``--tridiag`` sweeps (the rest are
:mod:`prefixsum.tridiag.transfers`')."""


@contextlib.contextmanager
def tridiag_settings(**values):
    """The settings of :mod:`prefixsum.tridiag.transfers` and :data:`SEND_SETTINGS` changed for the
    calls inside, then restored."""

    def owner(name):
        return overlap if name in SEND_SETTINGS else tridiag_transfers

    kept = {name: getattr(owner(name), name) for name in values}
    for name, value in values.items():
        setattr(owner(name), name, value)
    try:
        yield
    finally:
        for name, value in kept.items():
            setattr(owner(name), name, value)


def with_settings(**values):
    """``tridiag.solve`` under :func:`tridiag_settings` ``(**values)``."""

    def call(a, b, c, d):
        with tridiag_settings(**values):
            return ps.tridiag.solve(a, b, c, d)

    return call


def cusparse_round_trip(torch, cupy):
    """torch's round trip through cuSPARSE's gtsv2StridedBatch, as a function of a, b, c, d."""
    from tridiag_cusparse import cusparse_routine

    routines, buffers = {}, {}

    def call(a, b, c, d):
        batch, n = d.shape
        if d.dtype not in routines:
            routines[d.dtype] = cusparse_routine(cupy, "gtsv2StridedBatch", d.dtype)
        handle, solver, sizer = routines[d.dtype]
        tensors = [torch.from_numpy(v).cuda() for v in (a, b, c, d)]
        args = (n, *(t.data_ptr() for t in tensors), batch, n)
        key = (batch, n, d.dtype)
        if key not in buffers:
            buffers[key] = torch.empty(max(sizer(handle, *args), 1), dtype=torch.uint8, device="cuda")
        solver(handle, *args, buffers[key].data_ptr())  # on the legacy default stream, torch's too
        return tensors[3].cpu().numpy()

    return call


def tridiag_calls(torch, cupy):
    """name -> function of numpy a, b, c, d (batch, n) returning x as a numpy array."""
    plain, packed, pageable = dict(MIN_BYTES=1 << 62), dict(PACKED_FROM_BYTES=0), dict(PACKED_FROM_BYTES=1 << 62)
    calls = {
        "tridiag.solve": ps.tridiag.solve,
        "tridiag.solve, copies not overlapped, pageable in": with_settings(**plain, **pageable),
        "tridiag.solve, copies not overlapped, packed in pieces": with_settings(**plain, **packed),
        "tridiag.solve, copies not overlapped, packed in pieces of 8 MiB": with_settings(
            **plain, **packed, PACK_PIECE_BYTES=8 << 20
        ),
    }
    for target in TRIDIAG_CHUNKINGS:
        for way, setting in (("packed in pieces", packed), ("pageable in", pageable)):
            calls[f"tridiag.solve chunks={target}, {way}"] = with_settings(
                MIN_BYTES=0, MIN_CHUNK_BYTES=0, CHUNK_BYTES=1 << 62, TARGET_CHUNKS=target, **setting
            )
    if torch is not None and cupy is not None:
        calls[CUSPARSE] = cusparse_round_trip(torch, cupy)
    return calls


def measure_tridiag(calls, cases, quick, meta, rng):
    """Rows of every call at every (batch, n) and dtype, each result's residual checked first, the
    calls of a shape timed in turn (:func:`prefixsum.cli.timing.host_us_in_turn`)."""
    from tridiag_systems import RESIDUAL_EPS, residual, system

    rows = []
    for dtype in map(np.dtype, ("float32", "float64")):
        for batch, n in cases:
            a, b, c, d = system(batch, n, dtype, rng)
            shape_calls = {
                name: functools.partial(call, a, b, c, d)
                for name, call in calls.items()
                if batch > 1 or not name.startswith("tridiag.solve chunks")
            }  # one system is never cut
            correct = {
                name: bool(residual(a, b, c, d, call()) <= RESIDUAL_EPS * np.finfo(dtype).eps)
                for name, call in shape_calls.items()
            }
            repeats = QUICK_REPEATS if quick else TRIDIAG_REPEATS if 4 * a.nbytes < 64 << 20 else 9
            for name, us in host_us_in_turn(shape_calls, repeats=repeats).items():
                rows.append(
                    {
                        "variant": name,
                        "dtype": dtype.name,
                        "batch": batch,
                        "n": n,
                        "median_us": round(us, 1),
                        "gbps": round(5 * batch * n * dtype.itemsize / us / 1e3, 2),
                        "correct": correct[name],
                        "timing": "host clock, numpy in and out, calls in a shuffled order",
                        **meta,
                    }
                )
                print(
                    f"{name:<60} {dtype.name:<8} {batch:>6} x {n:<8} {us:>10.1f} us"
                    f"{'' if correct[name] else '  WRONG'}",
                    flush=True,
                )
    return rows


def timeline(torch, n, rng):
    """Rows ``(engine, name, stream, method, start_us, end_us)`` of one traced ps.scan of ``n``
    float32: every copy and kernel CUPTI saw, and the host's copies into pinned memory, times
    from the call's first event.

    The host's copies run on the copy threads, where ``torch.profiler.record_function`` does not
    show in the trace (and the process crashed in ``free()`` at exit when it was used there): each
    copy's start and end are read on ``time.perf_counter_ns`` instead and placed on the trace's
    clock by one mark on the calling thread, :data:`CALL`, whose start is read on both clocks.
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    x = random_input(n, "add", np.dtype("float32"), rng)
    ps.scan(x)  # compiled, buffers made
    copy, spans = overlap.host_copy, []

    def timed(target, source):
        begin = time.perf_counter_ns()
        copy(target, source)
        spans.append((begin, time.perf_counter_ns()))

    overlap.host_copy = timed
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as traced:
            with record_function(CALL):
                origin = time.perf_counter_ns()
                ps.scan(x)
    finally:
        overlap.host_copy = copy
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        traced.export_chrome_trace(path)
        with open(path) as handle:
            events = json.load(handle)["traceEvents"]
    marks = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e["name"] == CALL]
    found = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy")]
    found += [
        {"name": HOST_COPY, "cat": "host", "ts": marks[0]["ts"] + (begin - origin) / 1e3, "dur": (end - begin) / 1e3}
        for begin, end in spans
    ]
    start = min(e["ts"] for e in found)
    method = "cupti trace (torch.profiler); host copies on perf_counter, placed by a record_function mark"
    rows = []
    for e in sorted(found, key=lambda e: e["ts"]):
        name = e["name"]
        engine = (
            "host copy"
            if name == HOST_COPY
            else "copy in"
            if "HtoD" in name
            else "copy out"
            if "DtoH" in name
            else "SMs (scan)"
            if e["cat"] == "kernel"
            else "other copy"
        )
        rows.append(
            {
                "engine": engine,
                "name": name[:60],
                "stream": e.get("args", {}).get("stream", ""),
                "method": method,
                "start_us": round(e["ts"] - start, 2),
                "end_us": round(e["ts"] + e["dur"] - start, 2),
            }
        )
    return rows


def main(argv=None):
    args = script_arguments(
        argv,
        "tiny sizes and 2 repeats on the simulator, to test the script",
        lambda parser: (
            parser.add_argument("--tune", action="store_true"),
            parser.add_argument("--timeline", action="store_true"),
            parser.add_argument("--tridiag", action="store_true"),
        ),
    )
    torch, cupy = gpu_library("torch"), gpu_library("cupy")
    meta = run_metadata(
        ("torch", "cupy", "cub"),
        shlex.join(["python", "benchmarks/transfers.py", *(sys.argv[1:] if argv is None else argv)]),
    )
    rng = np.random.default_rng(29)
    if args.tune:
        rows = tune(torch, args.quick, meta, rng)
        write_csv(rows, f"{args.out}/transfers_tune.csv")
        return report_wrong(rows, lambda row: f"{row['variant']} n={row['n']}")
    if args.tridiag:
        rows = measure_tridiag(
            tridiag_calls(torch, cupy), TRIDIAG_QUICK_CASES if args.quick else TRIDIAG_CASES, args.quick, meta, rng
        )
        write_csv(rows, f"{args.out}/transfers_tridiag.csv")
        times = {(r["variant"], r["dtype"], r["batch"], r["n"]): r["median_us"] for r in rows}
        print_table(
            [
                {
                    "dtype": dtype,
                    "batch x n": f"{batch} x {n}",
                    "tridiag.solve_us": us,
                    "of torch+cuSPARSE": round(us / times.get((CUSPARSE, dtype, batch, n), float("nan")), 3),
                }
                for (variant, dtype, batch, n), us in times.items()
                if variant == "tridiag.solve"
            ],
            ["dtype", "batch x n", "tridiag.solve_us", "of torch+cuSPARSE"],
            title="tridiag.solve(numpy) against torch's round trip (time ratio, < 1: faster):",
        )
        return report_wrong(rows, lambda row: f"{row['variant']} {row['dtype']} {row['batch']} x {row['n']}")
    if args.timeline:
        if torch is None:
            raise SystemExit("--timeline needs torch's profiler (CUPTI) on a GPU")
        write_csv([{**row, **meta} for row in timeline(torch, TIMELINE_N, rng)], f"{args.out}/transfers_timeline.csv")
        return 0
    rows = measure(round_trips(torch, cupy), QUICK_SIZES if args.quick else SIZES, DTYPES, args.quick, meta, rng)
    write_csv(rows, f"{args.out}/transfers.csv")
    print_table(
        ratios(rows),
        ["dtype", "n", "ps.scan_us", "of torch", "of cupy"],
        title="ps.scan(numpy) against the round trips (time ratio, < 1: faster):",
    )
    return report_wrong(rows, lambda row: f"{row['variant']} {row['dtype']} n={row['n']}")


def ratios(rows):
    """For each dtype and size: ps.scan's time, and its fraction of torch's and cupy's round trips."""
    times = {(r["variant"], r["dtype"], r["n"]): r["median_us"] for r in rows}
    return [
        {
            "dtype": dtype,
            "n": n,
            "ps.scan_us": us,
            "of torch": round(us / times.get(("torch round trip", dtype, n), float("nan")), 3),
            "of cupy": round(us / times.get(("cupy round trip", dtype, n), float("nan")), 3),
        }
        for (variant, dtype, n), us in times.items()
        if variant == "ps.scan"
    ]


if __name__ == "__main__":
    sys.exit(main())
