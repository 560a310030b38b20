"""The single-pass scan ("lookback") against torch.cumsum and a device copy: kernels and whole calls.

    python benchmarks/lookback.py [--out DIR]       on a GPU (run_gpu.sh stage "lookback")
    python benchmarks/lookback.py --quick           tiny sizes on the simulator, to test the script

Three parts, all in one run, every result checked before it is timed (prefixsum.cli.bench):

- ``kernel``: kernel time (CUDA events around launches queued behind a busy kernel) at
  n = 2^24, 2^26, 2^28 for float32, int32, float64 and int64: "lookback" in its default tiles and
  two other shapes, "hierarchical", a numba copy kernel, ``torch.cumsum`` (CUB's decoupled
  look-back) and torch's ``copy_``;
- ``call on device``: whole calls on the host clock, synchronised, float32, n = 2^10, 2^16,
  2^20, the calls of a size in turn (:func:`prefixsum.cli.bench.host_us_in_turn`):
  ``ps.scan(device_array)`` with "lookback", "hierarchical" and "auto", ``torch.cumsum(t, 0,
  out=y)`` and ``torch.cumsum(t, 0)``; and the kernel times of the two scans at those sizes (which
  "auto" chooses between);
- ``call on numpy``: ``ps.scan(numpy_array)`` against torch's numpy -> GPU -> numpy round trip
  (``torch.from_numpy(x).cuda()``, ``cumsum``, ``.cpu().numpy()``), float32, n = 2^20, 2^24,
  the two in turn.

Kernel times are measured by each ``--method`` (``cupti``, the default: torch.profiler's kernel
durations summed per call; ``events``: CUDA events around queued launches); whole calls on the
host clock. Writes ``lookback.csv``: variant, part, dtype, n, median_us, gbps (2 n x itemsize /
time), correct, method, timing and the run's metadata.
"""
import functools
import shlex
import sys

import numpy as np

import prefixsum as ps  # before numba.cuda: prefixsum chooses the GPU or the simulator
from numba import cuda  # noqa: E402  (isort: skip)
from prefixsum.cli.bench import (REPEATS, QUICK_REPEATS, gpu_library, host_us_in_turn, kernel_us, library_stream,
                                 script_arguments)
from prefixsum.cli.metadata import run_metadata
from prefixsum.cli.results import print_table, report_wrong, write_csv
from prefixsum.scans.testing import expected_scan, poisoned, random_input, wrong_indices

from compaction_rows import exit_skipping_teardown  # noqa: E402  (beside this script)

KERNEL_SIZES = (1 << 24, 1 << 26, 1 << 28)
KERNEL_DTYPES = ("float32", "int32", "float64", "int64")
SCANS = ("lookback", "lookback:block_size=128,items_per_thread=16", "lookback:block_size=512,items_per_thread=8",
         "hierarchical")
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
        self.rows.append({"variant": variant, "part": part, "dtype": dtype.name, "n": n, "median_us": round(micros, 3),
                          "gbps": round(gbps, 2), "correct": bool(correct), "method": method, "timing": timing,
                          **self.meta})
        print(f"{part:<15} {variant:<46} {dtype.name:<8} n={n:<10} {micros:>10.1f} us {gbps:>8.1f} GB/s  {timing}"
              f"{'' if correct else '  WRONG'}", flush=True)


def kernels(table, torch, stream, sizes, dtypes, scans, repeats, rng, methods):
    """Kernel times of the scans, the copy, torch.cumsum and torch's copy_ at each size and dtype,
    by each of ``methods``."""
    for dtype in map(np.dtype, dtypes):
        for n in sizes:
            x = random_input(n, "add", dtype, rng)
            expected, allowed = expected_scan(x)
            source, out = cuda.to_device(x), cuda.device_array(n, dtype)

            def check(result):
                return wrong_indices(result, expected, allowed).size == 0

            def add(variant, correct, launch, library_stream=None, copies=False):
                for method in methods:
                    measured = kernel_us(launch, stream=library_stream, repeats=repeats, method=method, copies=copies)
                    table.add(variant, "kernel", dtype, n, measured.us, correct, measured.timing, method)

            out.copy_to_device(poisoned(n, dtype))
            blocks = -(-n // 256)
            copy_kernel[blocks, 256](source, out)
            add("copy", np.array_equal(out.copy_to_host(), x), lambda: copy_kernel[blocks, 256](source, out))
            for variant in scans:
                name, options = parse(variant)
                run = functools.partial(ps.ALGORITHMS[name].run, source, out, "add", True, False,
                                        **ps.ALGORITHMS[name].resolve_options(options))
                out.copy_to_device(poisoned(n, dtype))
                run()
                add(variant, check(out.copy_to_host()), run)
            if torch is not None:
                t = torch.from_numpy(x).cuda()
                y = torch.empty_like(t)
                torch.cumsum(t, 0, out=y)
                add("torch.cumsum", check(y.cpu().numpy()), lambda: torch.cumsum(t, 0, out=y), stream)
                y.copy_(t)
                add("torch copy", np.array_equal(y.cpu().numpy(), x), lambda: y.copy_(t), stream, copies=True)  # a memcpy


def calls_on_device(table, torch, stream, sizes, repeats, rng, methods):
    """Whole calls on device arrays (host clock, synchronised, the calls of a size in turn), and
    the two scans' kernel times."""
    dtype = np.dtype("float32")
    for n in sizes:
        x = random_input(n, "add", dtype, rng)
        expected, allowed = expected_scan(x)
        source = cuda.to_device(x)

        def check(result):
            return wrong_indices(result, expected, allowed).size == 0

        calls, correct = {}, {}
        for name in ("lookback", "hierarchical"):
            correct[f"ps.scan({name})"] = check(ps.scan(source, algorithm=name).copy_to_host())
            calls[f"ps.scan({name})"] = lambda name=name: (ps.scan(source, algorithm=name), cuda.synchronize())
            out = cuda.device_array(n, dtype)
            run = functools.partial(ps.ALGORITHMS[name].run, source, out, "add", True, False, **ps.ALGORITHMS[name].options)
            run()
            kernel_correct = check(out.copy_to_host())
            for method in methods:
                measured = kernel_us(run, repeats=repeats, method=method)
                table.add(name, "kernel", dtype, n, measured.us, kernel_correct, measured.timing, method)
        correct["ps.scan(auto)"] = check(ps.scan(source).copy_to_host())
        calls["ps.scan(auto)"] = lambda: (ps.scan(source), cuda.synchronize())
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
            table.add(variant, "call on numpy", dtype, n, micros, correct[variant], "host clock, calls in a shuffled order")


def main(argv=None):
    args = script_arguments(argv, "tiny sizes and 2 repeats on the simulator, to test the script")
    repeats = QUICK_REPEATS if args.quick else REPEATS
    torch = gpu_library("torch")
    stream = library_stream(torch) if torch is not None else None
    table = Table(run_metadata(("torch",), shlex.join(["python", "benchmarks/lookback.py", *(sys.argv[1:] if argv is None else argv)])))
    rng = np.random.default_rng(15)
    kernels(table, torch, stream, QUICK_SIZES if args.quick else KERNEL_SIZES,
            ("float32", "float64") if args.quick else KERNEL_DTYPES, SCANS, repeats, rng, args.method)
    calls_on_device(table, torch, stream, QUICK_SIZES if args.quick else CALL_SIZES, repeats, rng, args.method)
    calls_on_numpy(table, torch, QUICK_SIZES if args.quick else NUMPY_SIZES, repeats, rng)
    write_csv(table.rows, f"{args.out}/lookback.csv")
    print_table(ratios(table.rows), ["method", "dtype", "n", "lookback_us", "vs torch.cumsum", "of copy bandwidth"],
                title="lookback's kernel against torch.cumsum (time ratio, > 1: faster) and the copy (bandwidth fraction):")
    return report_wrong(table.rows, lambda row: f"{row['variant']} {row['part']} {row['dtype']} n={row['n']}")


def ratios(rows):
    """For each method, dtype and size of the kernel part: lookback's time, torch.cumsum's over it,
    copy's over it (each by the same method)."""
    times = {(r["variant"], r["method"], r["dtype"], r["n"]): r["median_us"] for r in rows if r["part"] == "kernel"}
    found = []
    for (variant, method, dtype, n), us in times.items():
        if variant == "lookback" and ("copy", method, dtype, n) in times:
            found.append({"method": method, "dtype": dtype, "n": n, "lookback_us": us,
                          "vs torch.cumsum": round(times.get(("torch.cumsum", method, dtype, n), float("nan")) / us, 3),
                          "of copy bandwidth": round(times[("copy", method, dtype, n)] / us, 3)})
    return found


if __name__ == "__main__":
    exit_skipping_teardown(main())  # torch.profiler's CUPTI teardown can abort the process after every row is written
