"""``python -m prefixsum bench``: time every registered scan on the GPU, beside the baselines.

Each variant is checked against a float64 / exact-integer reference before it is timed (never
on zeros), then timed with CUDA events around ``warmup`` + ``repeats`` runs on numba device
arrays; the median is reported. The baselines are measured in the same run: a device-to-device
copy (the physical limit for a single-pass scan: it reads n and writes n elements),
``torch.cumsum`` (CUB) and ``cupy.cumsum``. Throughput is 2 n x itemsize / time, the bytes a
single-pass scan must move. The CSV carries the GPU's name, the versions and the date.
"""
import argparse
import csv
import datetime
import platform
import statistics
import sys
import time

import numpy as np

import prefixsum as ps
from ..scans.testing import random_input

_ACCUMULATE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def fast_mismatches(result, x, op="add"):
    """Indices where ``result`` differs from the inclusive forward scan of ``x`` (vectorised).

    For the large arrays of a benchmark: integers exactly (numpy's wrap-around), floats within
    n-independent bounds of a float64 accumulation scaled by the running sum of magnitudes.
    """
    if x.dtype.kind == "f":
        expected = _ACCUMULATE[op].accumulate(x.astype(np.float64))
        magnitude = np.add.accumulate(np.abs(x.astype(np.float64))) if op == "add" else np.abs(expected)
        allowed = (8 + 2 * np.log2(max(len(x), 2))) * np.finfo(x.dtype).eps * magnitude * (1 if op != "mul" else len(x) ** 0.5)
        return np.flatnonzero(~(np.abs(result.astype(np.float64) - expected) <= allowed))
    with np.errstate(over="ignore"):
        expected = _ACCUMULATE[op].accumulate(x, dtype=x.dtype)
    return np.flatnonzero(result != expected)


def _copy_kernel():
    from numba import cuda

    def copy(source, target):
        i = cuda.grid(1)
        if i < source.shape[0]:
            target[i] = source[i]

    return cuda.jit(copy)


def median_event_us(launch, make_event, elapsed_ms, *, warmup=1, repeats=20):
    """Median microseconds of ``launch()`` between two device events, after ``warmup`` calls.

    ``make_event`` and ``elapsed_ms`` come from the library whose stream ``launch`` uses:
    see :func:`numba_events_us`, :func:`torch_events_us`, :func:`cupy_events_us`.
    """
    for _ in range(warmup):
        launch()
    start, stop = make_event(), make_event()
    times = []
    for _ in range(repeats):
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        times.append(elapsed_ms(start, stop) * 1e3)
    return statistics.median(times)


def numba_events_us(launch, *, warmup=1, repeats=20):
    """:func:`median_event_us` with numba's CUDA events (kernels launched by numba)."""
    from numba import cuda

    return median_event_us(launch, cuda.event, cuda.event_elapsed_time, warmup=warmup, repeats=repeats)


def torch_events_us(launch, torch, *, warmup=1, repeats=20):
    """:func:`median_event_us` with PyTorch's CUDA events."""
    return median_event_us(launch, lambda: torch.cuda.Event(enable_timing=True), lambda a, b: a.elapsed_time(b),
                           warmup=warmup, repeats=repeats)


def cupy_events_us(launch, cupy, *, warmup=1, repeats=20):
    """:func:`median_event_us` with CuPy's CUDA events."""
    return median_event_us(launch, cupy.cuda.Event, cupy.cuda.get_elapsed_time, warmup=warmup, repeats=repeats)


def host_us(call, *, warmup=1, repeats=20):
    """Median microseconds of a whole ``call()`` on the host clock (it must synchronise itself)."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def _baselines():
    found = {}
    try:
        import torch

        if torch.cuda.is_available():
            found["torch.cumsum"] = torch
    except ImportError:
        pass
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        found["cupy.cumsum"] = cupy
    except Exception:  # no cupy, or no device for it
        pass
    return found


def _time_library(name, module, x, warmup, repeats):
    """``(median microseconds, result on the host)`` of a torch or cupy baseline on ``x``."""
    if name.startswith("torch"):
        torch = module
        t = torch.from_numpy(x).cuda()
        target = torch.empty_like(t)
        check = torch.cumsum(t, 0, dtype=t.dtype).cpu().numpy()  # torch promotes int32 sums to int64 otherwise

        def launch():
            if name == "torch.copy":
                target.copy_(t)
            else:
                torch.cumsum(t, 0, dtype=t.dtype)
        return torch_events_us(launch, torch, warmup=warmup, repeats=repeats), check
    cupy = module
    t = cupy.asarray(x)
    check = cupy.asnumpy(cupy.cumsum(t, dtype=t.dtype))  # numpy's rules would promote int32 sums to int64
    return cupy_events_us(lambda: cupy.cumsum(t, dtype=t.dtype), cupy, warmup=warmup, repeats=repeats), check


def parse_variant(text):
    """``"kstep:L=4"`` -> ``("kstep", {"L": 4})``."""
    name, _, rest = text.partition(":")
    options = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        options[key] = int(value) if value.lstrip("-").isdigit() else value == "True" if value in ("True", "False") else value
    return name, options


def run(sizes, dtypes, variants, warmup=5, repeats=20, out=print):
    """Benchmark; return the rows (dicts) of the CSV."""
    from numba import cuda

    info = ps.device_info()
    if info["simulator"]:
        raise SystemExit("bench needs a CUDA GPU; on the simulator, timings mean nothing")
    import numba

    versions = {"numba": numba.__version__, "numba_cuda": _version("numba_cuda"), "numpy": np.__version__,
                "torch": _version("torch"), "cupy": _version("cupy"), "python": platform.python_version()}
    meta = {"device": info["name"], "cc": ".".join(map(str, info["compute_capability"])),
            "date": datetime.date.today().isoformat(), **versions}
    libraries = _baselines()
    rng = np.random.default_rng(7)
    rows = []
    for dtype in map(np.dtype, dtypes):
        for n in sizes:
            x = random_input(n, "add", dtype, rng)
            source = cuda.to_device(x)
            out_dev = cuda.device_array(n, dtype)
            bytes_moved = 2 * n * dtype.itemsize

            def add_row(variant, kind, micros, correct):
                rows.append({"variant": variant, "kind": kind, "dtype": dtype.name, "n": n, "median_us": round(micros, 3),
                             "gbps": round(bytes_moved / micros / 1e3, 2), "correct": correct, **meta})
                out(f"{variant:<28} {dtype.name:<8} n=2^{int(np.log2(n)):<3} {micros:>10.1f} us {bytes_moved / micros / 1e3:>8.1f} GB/s {'' if correct else 'WRONG'}")

            copy = _copy_kernel()
            blocks = (n + 255) // 256
            add_row("copy", "baseline", numba_events_us(lambda: copy[blocks, 256](source, out_dev), warmup=warmup, repeats=repeats),
                    bool(np.array_equal(out_dev.copy_to_host(), x)))
            for variant in variants:
                name, options = parse_variant(variant)
                algorithm = ps.ALGORITHMS[name]
                resolved = algorithm.resolve_options(options)
                out_dev.copy_to_device(np.full(n, ps.scans.testing.poison_value(dtype), dtype))
                algorithm.run(source, out_dev, "add", True, False, **resolved)
                correct = fast_mismatches(out_dev.copy_to_host(), x).size == 0
                micros = numba_events_us(lambda: algorithm.run(source, out_dev, "add", True, False, **resolved),
                                         warmup=warmup, repeats=repeats)
                add_row(variant, "ours", micros, correct)
            for name, module in libraries.items():
                micros, result = _time_library(name, module, x, warmup, repeats)
                add_row(name, "baseline", micros, fast_mismatches(result, x).size == 0)
            if "torch.cumsum" in libraries:
                micros = _time_library("torch.copy", libraries["torch.cumsum"], x, warmup, repeats)[0]
                add_row("torch copy", "baseline", micros, True)
            name, options = parse_variant(variants[0])
            micros = host_us(lambda: (ps.scan(source, algorithm=name, **options), cuda.synchronize()), repeats=repeats)
            add_row(f"ps.scan({variants[0]}) call", "whole call", micros, True)
    return rows


def _version(module):
    try:
        return __import__(module).__version__
    except Exception:  # not installed: the CSV says so
        return ""


def write_csv(rows, path):
    """Write ``rows`` (dicts with the same keys) to ``path`` as CSV, and say so."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m prefixsum bench", description=__doc__.splitlines()[0])
    parser.add_argument("--min-log2", type=int, default=10)
    parser.add_argument("--max-log2", type=int, default=26)
    parser.add_argument("--dtype", action="append", help="float32 and int32 by default (repeatable)")
    parser.add_argument("--variant", action="append", help="NAME or NAME:opt=value,... (default: every registered algorithm)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--csv", default="scan_throughput.csv")
    args = parser.parse_args(argv)
    variants = args.variant or list(ps.ALGORITHMS)
    sizes = [1 << k for k in range(args.min_log2, args.max_log2 + 1)]
    rows = run(sizes, args.dtype or ["float32", "int32"], variants, repeats=args.repeats)
    write_csv(rows, args.csv)
    return 0 if all(row["correct"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
