"""The single-pass scan ("lookback") against NVIDIA's CUB, torch.cumsum and a device copy: kernels and whole calls.

    python benchmarks/lookback.py [--out DIR]       on a GPU (run_gpu.sh stage "lookback")
    python benchmarks/lookback.py --quick           tiny sizes on the simulator, to test the script

Three parts, all in one run, every result checked before it is timed (prefixsum.cli.timing):

- ``kernel``: kernel time at n = 2^16, 2^20, 2^24, 2^26, 2^28 for float32, int32, float64 and
  int64: "lookback" (its tile chosen per element size and length, as ``"auto"`` runs it),
  CUB's ``DeviceScan::InclusiveSum`` built by ``cuda.compute`` (:mod:`cub_rows`: built once,
  its temporary storage kept), ``torch.cumsum`` (CUB behind torch's dispatch), a numba copy
  kernel and torch's ``copy_``; "hierarchical" for float32; and the exclusive scans, ours and
  CUB's ``ExclusiveSum``, at 2^20 and 2^24;
- ``call on device``: whole calls on the host clock, synchronised, float32, n = 2^10, 2^16,
  2^20, the calls of a size in turn (:func:`prefixsum.cli.timing.host_us_in_turn`):
  ``ps.scan(device_array)`` with "lookback", "hierarchical" and "auto", CUB's call through
  ``cuda.compute`` with its temporary storage kept (the twin of our kept workspace),
  ``torch.cumsum(t, 0, out=y)`` and ``torch.cumsum(t, 0)``; and the kernel times of the two
  scans at those sizes;
- ``call on numpy``: ``ps.scan(numpy_array)`` against torch's numpy -> GPU -> numpy round trip
  (``torch.from_numpy(x).cuda()``, ``cumsum``, ``.cpu().numpy()``), float32, n = 2^20, 2^24,
  the two in turn.

Where ``cuda.compute`` cannot run (not installed: it comes with the ``bench`` extra; the
simulator) CUB's rows are left out with a note, never made up. Kernel times are measured by each
``--method`` (``cupti``, the default: torch.profiler's kernel durations summed per call;
``events``: CUDA events around queued launches; CUB's rows by CUPTI only); whole calls on the
host clock. Writes ``lookback.csv``: variant, part, dtype, n, median_us, gbps (2 n x itemsize /
time), correct, method, timing and the run's metadata (CUB's version in column ``cub``).
"""

import functools
import shlex
import sys

import numpy as np

import prefixsum as ps  # before numba.cuda: prefixsum chooses the GPU or the simulator

from numba import cuda  # noqa: E402  (isort: skip)
import cub_rows  # noqa: E402  (beside this script)
from compaction_rows import exit_skipping_teardown  # noqa: E402

from prefixsum.cli.metadata import run_metadata
from prefixsum.cli.results import print_table, report_wrong, write_csv
from prefixsum.cli.timing import (
    QUICK_REPEATS,
    REPEATS,
    gpu_library,
    host_us_in_turn,
    kernel_us_each,
    library_stream,
    script_arguments,
)
from prefixsum.scans.testing import expected_scan, poisoned, random_input, wrong_indices

KERNEL_SIZES = (1 << 16, 1 << 20, 1 << 24, 1 << 26, 1 << 28)
KERNEL_DTYPES = ("float32", "int32", "float64", "int64")
SCANS = ("lookback", "hierarchical")
ONLY_FLOAT32 = ("hierarchical",)  # timed for float32 alone (chapter 10 plots it beside the look-back)
EXCLUSIVE_SIZES = (1 << 20, 1 << 24)
CALL_SIZES = (1 << 10, 1 << 16, 1 << 20)
NUMPY_SIZES = (1 << 20, 1 << 24)
QUICK_SIZES = (1000, 5000)
CALLS_TIMING = "host clock, synchronized, calls in a shuffled order"


@cuda.jit
def copy_kernel(source, target):
    i = cuda.grid(1)
    if i < source.shape[0]:
        target[i] = source[i]


def parse(variant):
    """``"lookback:block_size=128,items_per_thread=16"`` -> ``("lookback", {...})``."""
    name, _, rest = variant.partition(":")
    return name, {key: int(value) for key, value in (item.split("=") for item in filter(None, rest.split(",")))}


class Table:
    """The rows of the CSV, printed as they come."""

    def __init__(self, meta):
        self.meta, self.rows = meta, []

    def add(self, variant, part, dtype, n, micros, correct, timing, method="host clock"):
        dtype = np.dtype(dtype)
        gbps = 2 * n * dtype.itemsize / micros / 1e3
        self.rows.append(
            {
                "variant": variant,
                "part": part,
                "dtype": dtype.name,
                "n": n,
                "median_us": round(micros, 3),
                "gbps": round(gbps, 2),
                "correct": bool(correct),
                "method": method,
                "timing": timing,
                **self.meta,
            }
        )
        print(
            f"{part:<15} {variant:<46} {dtype.name:<8} n={n:<10} {micros:>10.1f} us {gbps:>8.1f} GB/s  {timing}"
            f"{'' if correct else '  WRONG'}",
            flush=True,
        )


def kernels(table, torch, stream, sizes, dtypes, scans, repeats, rng, methods, exclusive_sizes):
    """Kernel times of the scans, CUB's, the copy, torch.cumsum and torch's copy_ at each size and
    dtype, by each of ``methods`` (CUB's by CUPTI); the exclusive scans at ``exclusive_sizes``.
    Every launch is checked first; by CUPTI the launches of a size and dtype are traced together
    (:func:`prefixsum.cli.timing.kernel_us_each`)."""
    for dtype in map(np.dtype, dtypes):
        for n in sizes:
            x = random_input(n, "add", dtype, rng)
            expected, allowed = expected_scan(x)
            source, out = cuda.to_device(x), cuda.device_array(n, dtype)
            launches, correct, streams = {}, {}, {}

            def check(result, expected=expected, allowed=allowed):
                return wrong_indices(result, expected, allowed).size == 0

            def scan(variant, launch, read=out.copy_to_host, want=check):
                out.copy_to_device(poisoned(n, dtype))
                launch()
                launches[variant], correct[variant] = launch, want(read())

            blocks = -(-n // 256)
            scan("copy", lambda: copy_kernel[blocks, 256](source, out), want=lambda got: np.array_equal(got, x))
            for variant in scans:
                name, options = parse(variant)
                if name not in ONLY_FLOAT32 or dtype == np.float32:
                    scan(
                        variant,
                        functools.partial(
                            ps.ALGORITHMS[name].run,
                            source,
                            out,
                            "add",
                            True,
                            False,
                            **ps.ALGORITHMS[name].resolve_options(options),
                        ),
                    )
            cub = cub_rows.attempt("inclusive sum", lambda: cub_rows.scan(source, out))
            if cub is not None:
                scan("CUB inclusive sum", cub)
            if n in exclusive_sizes:
                reference, reference_allowed = expected_scan(x, inclusive=False)
                before = functools.partial(check, expected=reference, allowed=reference_allowed)
                scan(
                    "lookback (exclusive)",
                    functools.partial(
                        ps.ALGORITHMS["lookback"].run,
                        source,
                        out,
                        "add",
                        False,
                        False,
                        **ps.ALGORITHMS["lookback"].options,
                    ),
                    want=before,
                )
                cub = cub_rows.attempt("exclusive sum", lambda: cub_rows.scan(source, out, inclusive=False))
                if cub is not None:
                    scan("CUB exclusive sum", cub, want=before)
            if torch is not None:
                t = torch.from_numpy(x).cuda()
                y = torch.empty_like(t)
                scan("torch.cumsum", lambda: torch.cumsum(t, 0, out=y), read=lambda: y.cpu().numpy())
                scan(
                    "torch copy",
                    lambda: y.copy_(t),
                    read=lambda: y.cpu().numpy(),  # a memcpy
                    want=lambda got: np.array_equal(got, x),
                )
                streams = {"torch.cumsum": stream, "torch copy": stream}
            for method in methods:
                timed = {v: launch for v, launch in launches.items() if method == "cupti" or not v.startswith("CUB")}
                for variant, measured in kernel_us_each(
                    timed, repeats=repeats, method=method, stream=streams, copies=("torch copy",), ran=True
                ).items():
                    table.add(variant, "kernel", dtype, n, measured.us, correct[variant], measured.timing, method)


def calls_on_device(table, torch, stream, sizes, repeats, rng, methods, kernel_sizes):
    """Whole calls on device arrays (host clock, synchronised, the calls of a size in turn), and
    the two scans' kernel times at the sizes the kernel part did not time (``kernel_sizes``)."""
    dtype = np.dtype("float32")
    for n in sizes:
        x = random_input(n, "add", dtype, rng)
        expected, allowed = expected_scan(x)
        source = cuda.to_device(x)

        def check(result):
            return wrong_indices(result, expected, allowed).size == 0

        calls, correct, runs, kernel_correct = {}, {}, {}, {}
        for name in ("lookback", "hierarchical"):
            correct[f"ps.scan({name})"] = check(ps.scan(source, algorithm=name).copy_to_host())
            calls[f"ps.scan({name})"] = lambda name=name: (ps.scan(source, algorithm=name), cuda.synchronize())
            out = cuda.device_array(n, dtype)
            runs[name] = functools.partial(
                ps.ALGORITHMS[name].run, source, out, "add", True, False, **ps.ALGORITHMS[name].options
            )
            runs[name]()
            kernel_correct[name] = check(out.copy_to_host())
        for method in methods if n not in kernel_sizes else ():
            for name, measured in kernel_us_each(runs, repeats=repeats, method=method, ran=True).items():
                table.add(name, "kernel", dtype, n, measured.us, kernel_correct[name], measured.timing, method)
        correct["ps.scan(auto)"] = check(ps.scan(source).copy_to_host())
        calls["ps.scan(auto)"] = lambda: (ps.scan(source), cuda.synchronize())
        target = cuda.device_array(n, dtype)
        cub = cub_rows.attempt("inclusive sum", lambda: cub_rows.scan(source, target))
        if cub is not None:
            cub()
            correct["CUB call (temporary storage kept)"] = check(target.copy_to_host())
            calls["CUB call (temporary storage kept)"] = lambda cub=cub: (cub(), cuda.synchronize())
        if torch is not None:
            t = torch.from_numpy(x).cuda()
            y = torch.empty_like(t)
            torch.cumsum(t, 0, out=y)
            correct["torch.cumsum(out=)"] = correct["torch.cumsum"] = check(y.cpu().numpy())
            calls["torch.cumsum(out=)"] = lambda: (torch.cumsum(t, 0, out=y), torch.cuda.synchronize())
            calls["torch.cumsum"] = lambda: (torch.cumsum(t, 0), torch.cuda.synchronize())
        for variant, micros in host_us_in_turn(calls, repeats=repeats).items():
            table.add(variant, "call on device", dtype, n, micros, correct[variant], CALLS_TIMING)


def calls_on_numpy(table, torch, sizes, repeats, rng):
    """Whole calls from a numpy array to a numpy array, ps.scan and torch's round trip in turn."""
    dtype = np.dtype("float32")
    for n in sizes:
        x = random_input(n, "add", dtype, rng)
        expected, allowed = expected_scan(x)

        def check(result):
            return wrong_indices(result, expected, allowed).size == 0

        calls = {"ps.scan(auto)": lambda: ps.scan(x)}
        if torch is not None:
            calls["torch round trip"] = lambda: torch.cumsum(torch.from_numpy(x).cuda(), 0).cpu().numpy()
        correct = {variant: check(call()) for variant, call in calls.items()}
        for variant, micros in host_us_in_turn(calls, repeats=repeats).items():
            table.add(
                variant, "call on numpy", dtype, n, micros, correct[variant], "host clock, calls in a shuffled order"
            )


def main(argv=None):
    args = script_arguments(argv, "tiny sizes and 2 repeats on the simulator, to test the script")
    repeats = QUICK_REPEATS if args.quick else REPEATS
    torch = gpu_library("torch")
    stream = library_stream(torch) if torch is not None else None
    table = Table(
        run_metadata(
            ("torch", "cub"),
            shlex.join(["python", "benchmarks/lookback.py", *(sys.argv[1:] if argv is None else argv)]),
        )
    )
    rng = np.random.default_rng(15)
    kernels(
        table,
        torch,
        stream,
        QUICK_SIZES if args.quick else KERNEL_SIZES,
        ("float32", "float64") if args.quick else KERNEL_DTYPES,
        SCANS,
        repeats,
        rng,
        args.method,
        QUICK_SIZES[:1] if args.quick else EXCLUSIVE_SIZES,
    )
    calls_on_device(
        table,
        torch,
        stream,
        QUICK_SIZES if args.quick else CALL_SIZES,
        repeats,
        rng,
        args.method,
        QUICK_SIZES if args.quick else KERNEL_SIZES,
    )
    calls_on_numpy(table, torch, QUICK_SIZES if args.quick else NUMPY_SIZES, repeats, rng)
    write_csv(table.rows, f"{args.out}/lookback.csv")
    print_table(
        ratios(table.rows),
        ["method", "dtype", "n", "lookback_us", "vs CUB", "vs torch.cumsum", "of copy bandwidth"],
        title="lookback's kernel against CUB's, torch.cumsum (time ratio, > 1: faster) and the copy "
        "(bandwidth fraction):",
    )
    return report_wrong(table.rows, lambda row: f"{row['variant']} {row['part']} {row['dtype']} n={row['n']}")


def ratios(rows):
    """For each method, dtype and size of the kernel part: lookback's time, CUB's over it (by CUPTI),
    torch.cumsum's and copy's over it (each by the same method)."""
    times = {(r["variant"], r["method"], r["dtype"], r["n"]): r["median_us"] for r in rows if r["part"] == "kernel"}
    found = []
    for (variant, method, dtype, n), us in times.items():
        if variant == "lookback" and ("copy", method, dtype, n) in times:
            found.append(
                {
                    "method": method,
                    "dtype": dtype,
                    "n": n,
                    "lookback_us": us,
                    "vs CUB": round(times.get(("CUB inclusive sum", "cupti", dtype, n), float("nan")) / us, 3),
                    "vs torch.cumsum": round(times.get(("torch.cumsum", method, dtype, n), float("nan")) / us, 3),
                    "of copy bandwidth": round(times[("copy", method, dtype, n)] / us, 3),
                }
            )
    return found


if __name__ == "__main__":
    exit_skipping_teardown(main())  # torch.profiler's CUPTI teardown can abort the process after every row is written
