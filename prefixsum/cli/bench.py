"""``python -m prefixsum bench``: time every registered scan on the GPU, beside the baselines.

Each result is checked before it is timed (never on zeros): a scan against the float64 /
exact-integer reference (:func:`prefixsum.scans.testing.expected_scan`, vectorised), a copy element
for element. Kernel times and whole-call times are measured as :mod:`.timing` says: kernel time by
CUPTI (the default) or CUDA events around queued launches; whole ``prefixsum.scan`` calls on the
host clock, synchronised, on device arrays and on numpy arrays (method ``host clock``).

The baselines are measured in the same run: a device-to-device copy (the physical limit for a
single-pass scan: it reads n and writes n elements), PyTorch's ``copy_``, ``torch.cumsum``
and ``cupy.cumsum``. Throughput is 2 n x itemsize / time, the bytes a single-pass scan must move.
Every row carries :func:`~.metadata.run_metadata` (the GPU, driver, versions, date and command).
The run exits with 1 when any result was wrong.
"""

import argparse
import functools
import os
import shlex
import sys

import numpy as np
from numba import cuda

import prefixsum as ps

from ..scans.testing import expected_scan, poisoned, random_input, wrong_indices
from .metadata import run_metadata
from .results import print_table, report_wrong, write_csv
from .timing import (
    LIBRARIES,
    QUICK_REPEATS,
    REPEATS,
    add_method_option,
    check_methods,
    default_out,
    host_us,
    kernel_us,
    queued_library,
    require_gpu,
)

QUICK_SIZES = (1 << 10, 1 << 12)  # one tile, and several (past kstep's one-block path too)


def parse_variant(text):
    """``"kstep:L=4"`` -> ``("kstep", {"L": 4})``; ``"NAME:a=1,b=False"`` -> ``("NAME", {"a": 1, "b": False})``."""
    name, _, rest = text.partition(":")
    options = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        options[key] = _option_value(value)
    return name, options


def _option_value(text):
    """An option's value as the algorithm takes it: an int, a bool, or the text itself ("auto")."""
    if text.lstrip("-").isdigit():
        return int(text)
    if text in ("True", "False"):
        return text == "True"
    return text


@cuda.jit
def _copy(source, target):
    i = cuda.grid(1)
    if i < source.shape[0]:
        target[i] = source[i]


def _torch_rows(torch, stream, x, check, repeats, method):
    """``(variant, correct, KernelTime)`` for ``torch.cumsum`` and torch's ``copy_`` on ``x``."""
    t = torch.from_numpy(x).cuda()

    def cumsum():
        return torch.cumsum(t, 0, dtype=t.dtype)  # without the dtype, torch sums int32 into int64

    correct = check(cumsum().cpu().numpy())
    yield "torch.cumsum", correct, kernel_us(cumsum, stream=stream, repeats=repeats, method=method)
    target = torch.from_numpy(poisoned(len(x), x.dtype)).cuda()
    target.copy_(t)
    correct = bool(np.array_equal(target.cpu().numpy(), x))
    yield (
        "torch copy",
        correct,
        kernel_us(lambda: target.copy_(t), stream=stream, repeats=repeats, method=method, copies=True),
    )  # a device-to-device memcpy, not a kernel


def _cupy_rows(cupy, stream, x, check, repeats, method):
    """``(variant, correct, KernelTime)`` for ``cupy.cumsum`` on ``x``."""
    t = cupy.asarray(x)

    def cumsum():
        return cupy.cumsum(t, dtype=t.dtype)  # numpy's rules, which cupy follows, promote int32 sums to int64

    correct = check(cupy.asnumpy(cumsum()))
    yield "cupy.cumsum", correct, kernel_us(cumsum, stream=stream, repeats=repeats, method=method)


def _baselines():
    """``(rows, module, stream)`` for each library baseline that can run here."""
    found = []
    for rows, name in ((_torch_rows, "torch"), (_cupy_rows, "cupy")):
        module, stream = queued_library(name)
        if module is not None:
            found.append((rows, module, stream))
    return found


def run(sizes, dtypes, variants, *, repeats=REPEATS, command=None, methods=("cupti",)):
    """Check and time every variant and baseline at every size and dtype; return the CSV's rows.

    Rows (in this order, for each dtype and n): the numba copy kernel, each variant, the
    baselines torch.cumsum, torch copy and cupy.cumsum (each skipped with a line saying why when
    it cannot run), each once per measuring method of ``methods`` (:data:`METHODS`); and two
    whole calls of ``prefixsum.scan`` with the first variant, on a device array and on a numpy
    array (method "host clock"). The ``method`` column says which.
    """
    meta = run_metadata(LIBRARIES, command)
    baselines = _baselines()
    rng = np.random.default_rng(7)
    table = []
    for dtype in map(np.dtype, dtypes):
        for n in sizes:
            x = random_input(n, "add", dtype, rng)
            expected, allowed = expected_scan(x)
            source = cuda.to_device(x)
            out = cuda.device_array(n, dtype)
            bytes_moved = 2 * n * dtype.itemsize

            def check(result):
                return wrong_indices(result, expected, allowed).size == 0

            def add_row(variant, kind, micros, correct, timing, method="host clock"):
                table.append(
                    {
                        "variant": variant,
                        "kind": kind,
                        "dtype": dtype.name,
                        "n": n,
                        "median_us": round(micros, 3),
                        "gbps": round(bytes_moved / micros / 1e3, 2),
                        "correct": correct,
                        "method": method,
                        "timing": timing,
                        **meta,
                    }
                )
                print(
                    f"{variant:<34} {dtype.name:<8} n={n:<10} {micros:>10.1f} us "
                    f"{bytes_moved / micros / 1e3:>8.1f} GB/s  {timing}{'' if correct else '  WRONG'}",
                    flush=True,
                )

            def add_kernel_row(variant, kind, correct, measured):
                add_row(variant, kind, measured.us, correct, measured.timing, measured.method)

            blocks = -(-n // 256)
            out.copy_to_device(poisoned(n, dtype))
            copy = functools.partial(_copy[blocks, 256], source, out)
            copy()
            copied = bool(np.array_equal(out.copy_to_host(), x))
            for method in methods:
                add_kernel_row("copy", "baseline", copied, kernel_us(copy, repeats=repeats, method=method, ran=True))
            for variant in variants:
                name, options = parse_variant(variant)
                scan = functools.partial(
                    ps.ALGORITHMS[name].run,
                    source,
                    out,
                    "add",
                    True,
                    False,
                    **ps.ALGORITHMS[name].resolve_options(options),
                )
                out.copy_to_device(poisoned(n, dtype))
                scan()
                correct = check(out.copy_to_host())
                for method in methods:
                    add_kernel_row(variant, "ours", correct, kernel_us(scan, repeats=repeats, method=method, ran=True))
            for rows, module, stream in baselines:
                for method in methods:
                    for variant, correct, measured in rows(module, stream, x, check, repeats, method):
                        add_kernel_row(variant, "baseline", correct, measured)
            name, options = parse_variant(variants[0])
            correct = check(ps.scan(source, algorithm=name, **options).copy_to_host())
            micros = host_us(lambda: (ps.scan(source, algorithm=name, **options), cuda.synchronize()), repeats=repeats)
            add_row(f"ps.scan({variants[0]}) call", "whole call", micros, correct, "host clock, device arrays")
            correct = check(ps.scan(x, algorithm=name, **options))
            micros = host_us(lambda: ps.scan(x, algorithm=name, **options), repeats=repeats)
            add_row(f"ps.scan({variants[0]}) call on numpy", "whole call", micros, correct, "host clock, numpy arrays")
    return table


def summary(rows):
    """The rows of the largest n of each dtype, with each time relative to torch.cumsum's by the
    same method (whole calls: to nothing, NaN)."""
    shown = []
    for dtype in dict.fromkeys(row["dtype"] for row in rows):
        largest = max(row["n"] for row in rows if row["dtype"] == dtype)
        at = [row for row in rows if row["dtype"] == dtype and row["n"] == largest]
        cub = {row["method"]: row["median_us"] for row in at if row["variant"] == "torch.cumsum"}
        shown += [
            {**row, "vs torch.cumsum": round(cub.get(row["method"], float("nan")) / row["median_us"], 2)} for row in at
        ]
    return shown


def parser():
    """The command line of ``python -m prefixsum bench``."""
    command = argparse.ArgumentParser(prog="python -m prefixsum bench", description=__doc__.splitlines()[0])
    command.add_argument("--min-log2", type=int, default=10)
    command.add_argument("--max-log2", type=int, default=26)
    command.add_argument("--dtype", action="append", help="float32 and int32 by default (repeatable)")
    command.add_argument(
        "--variant", action="append", help="NAME or NAME:opt=value,... (default: every registered algorithm)"
    )
    command.add_argument("--repeats", type=int, default=REPEATS)
    command.add_argument(
        "--csv", default=None, help="the output (default: scan_throughput.csv in $OUT, else in benchmarks/out)"
    )
    command.add_argument(
        "--quick",
        action="store_true",
        help=f"sizes {', '.join(map(str, QUICK_SIZES))} and {QUICK_REPEATS} repeats; "
        "runs on the simulator too (tests the script)",
    )
    add_method_option(command)
    return command


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    require_gpu(args.quick)
    variants = args.variant or list(ps.ALGORITHMS)
    sizes = list(QUICK_SIZES) if args.quick else [1 << k for k in range(args.min_log2, args.max_log2 + 1)]
    rows = run(
        sizes,
        args.dtype or ["float32", "int32"],
        variants,
        repeats=QUICK_REPEATS if args.quick else args.repeats,
        command=shlex.join(["python", "-m", "prefixsum", "bench", *argv]),
        methods=check_methods(args.method or ["cupti"]),
    )
    write_csv(rows, args.csv or os.path.join(default_out(), "scan_throughput.csv"))
    print_table(
        summary(rows),
        ["variant", "dtype", "n", "median_us", "gbps", "vs torch.cumsum", "correct", "method"],
        title="the largest n of each dtype (median us; GB/s = 2 n x itemsize / time):",
    )
    return report_wrong(rows, lambda row: f"{row['variant']} {row['dtype']} n={row['n']}")


if __name__ == "__main__":
    sys.exit(main())
