"""The table that "lookback"'s tile shape per element size is chosen from: every shape against torch.cumsum.

    python benchmarks/lookback_tiles.py [--out DIR] [--method cupti]    on a GPU (run_gpu.sh stage "lookback_tiles")
    python benchmarks/lookback_tiles.py --quick                         tiny sizes on the simulator, to test the script

For float32 and float64 (int32 and int64 run the same loads, scans and look-back at the same
element sizes) at n = 2^24, 2^26, 2^28: "lookback" at each tile shape of :data:`SHAPES` (threads
x elements per thread, at most :func:`prefixsum.scans.lookback.max_tile` elements), and
``torch.cumsum`` (CUB), each checked, then timed by each ``--method`` (device time: CUPTI's
kernel durations summed per call by default). Writes ``lookback_tiles.csv`` (block_size,
items_per_thread, dtype, n, median_us, vs_torch: torch.cumsum's time over the shape's, method,
timing, the run's metadata) and prints, per element size, the shape whose worst ratio over the
sizes is best: the candidate for :data:`prefixsum.scans.lookback.TILE_SHAPES`.
"""

import functools
import shlex
import sys

import numpy as np

import prefixsum as ps  # noqa: F401  before numba.cuda: prefixsum chooses the GPU or the simulator

from numba import cuda  # noqa: E402  (isort: skip)
from prefixsum.cli.metadata import run_metadata
from prefixsum.cli.results import print_table, report_wrong, write_csv
from prefixsum.cli.timing import QUICK_REPEATS, REPEATS, gpu_library, kernel_us, library_stream, script_arguments
from prefixsum.scans import lookback
from prefixsum.scans.testing import expected_scan, poisoned, random_input, wrong_indices

SIZES = (1 << 24, 1 << 26, 1 << 28)
QUICK_SIZES = (3000, 9000)
DTYPES = ("float32", "float64")
SHAPES = ((64, 32), (128, 8), (128, 16), (128, 24), (128, 32), (256, 8), (256, 16), (256, 32))


def main(argv=None):
    args = script_arguments(argv, "tiny sizes and 2 repeats on the simulator, to test the script")
    repeats = QUICK_REPEATS if args.quick else REPEATS
    torch = gpu_library("torch")
    stream = library_stream(torch) if torch is not None else None
    meta = run_metadata(
        ("torch",), shlex.join(["python", "benchmarks/lookback_tiles.py", *(sys.argv[1:] if argv is None else argv)])
    )
    rng = np.random.default_rng(29)
    rows = []
    for dtype in map(np.dtype, DTYPES):
        for n in QUICK_SIZES if args.quick else SIZES:
            x = random_input(n, "add", dtype, rng)
            expected, allowed = expected_scan(x)
            source, out = cuda.to_device(x), cuda.device_array(n, dtype)
            cub = {}
            if torch is not None:
                t = torch.from_numpy(x).cuda()
                y = torch.empty_like(t)
                torch.cumsum(t, 0, out=y)
                correct = wrong_indices(y.cpu().numpy(), expected, allowed).size == 0
                for method in args.method:
                    measured = kernel_us(
                        lambda: torch.cumsum(t, 0, out=y), stream=stream, repeats=repeats, method=method
                    )
                    cub[method] = measured.us
                    rows.append(
                        {
                            "variant": "torch.cumsum",
                            "block_size": "",
                            "items_per_thread": "",
                            "dtype": dtype.name,
                            "n": n,
                            "median_us": round(measured.us, 3),
                            "vs_torch": 1.0,
                            "correct": correct,
                            "method": method,
                            "timing": measured.timing,
                            **meta,
                        }
                    )
                del t, y
            for block_size, items in SHAPES:
                if block_size * items > lookback.max_tile(dtype):
                    continue
                launch = functools.partial(lookback.run, source, out, "add", True, False, block_size, items)
                out.copy_to_device(poisoned(n, dtype))
                launch()
                correct = wrong_indices(out.copy_to_host(), expected, allowed).size == 0
                for method in args.method:
                    measured = kernel_us(launch, repeats=repeats, method=method, ran=True)
                    ratio = cub.get(method, float("nan")) / measured.us
                    rows.append(
                        {
                            "variant": "lookback",
                            "block_size": block_size,
                            "items_per_thread": items,
                            "dtype": dtype.name,
                            "n": n,
                            "median_us": round(measured.us, 3),
                            "vs_torch": round(ratio, 3),
                            "correct": correct,
                            "method": method,
                            "timing": measured.timing,
                            **meta,
                        }
                    )
                    print(
                        f"{dtype.name:<8} n={n:<10} {block_size:>4} x {items:<3} {measured.us:>9.1f} us  "
                        f"{ratio:>6.3f}x torch  {method}{'' if correct else '  WRONG'}",
                        flush=True,
                    )
    write_csv(rows, f"{args.out}/lookback_tiles.csv")
    print_table(
        best(rows),
        ["method", "dtype", "block_size", "items_per_thread", "worst vs_torch", "ratios"],
        title="per dtype and method, the shape whose worst ratio to torch.cumsum over the sizes is best:",
    )
    return report_wrong(
        rows, lambda row: f"{row['variant']} {row['block_size']}x{row['items_per_thread']} {row['dtype']} n={row['n']}"
    )


def best(rows):
    """Per (method, dtype): the shape with the best worst-case ratio to torch.cumsum over the sizes."""
    ratios = {}
    for row in rows:
        if row["variant"] == "lookback":
            ratios.setdefault((row["method"], row["dtype"], row["block_size"], row["items_per_thread"]), []).append(
                row["vs_torch"]
            )
    found = {}
    for (method, dtype, block_size, items), values in ratios.items():
        worst = min(values)
        if (method, dtype) not in found or worst > found[method, dtype]["worst vs_torch"]:
            found[method, dtype] = {
                "method": method,
                "dtype": dtype,
                "block_size": block_size,
                "items_per_thread": items,
                "worst vs_torch": worst,
                "ratios": " ".join(f"{v:.3f}" for v in values),
            }
    return list(found.values())


if __name__ == "__main__":
    sys.exit(main())
