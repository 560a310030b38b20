"""Whole ps.scan calls on device arrays against torch.cumsum's, and where the host time of a call goes.

    python benchmarks/scan_calls.py [--out DIR]     on a GPU (run_gpu.sh stage "scan_calls")
    python benchmarks/scan_calls.py --quick         tiny sizes on the simulator, to test the script

On the host clock, median of 200 calls after a warm-up, float32, n = 2^10, 2^16, 2^20, every
result checked first:

- ``ps.scan(x)`` then ``cuda.synchronize()`` (numba's), then ``torch.cuda.synchronize()``, then
  numba's ``cuda.default_stream().synchronize()`` (the stream ps.scan launches on);
- ``torch.cumsum(t, 0)`` (a new result, as ps.scan's) and ``torch.cumsum(t, 0, out=y)``, then
  ``torch.cuda.synchronize()``;
- CUB's inclusive sum through ``cuda.compute`` with its temporary storage kept, into a kept
  result, then ``cuda.synchronize()`` and alone (host time): the library's own call, without
  torch's dispatch (:mod:`cub_rows`; left out with a note where ``cuda.compute`` cannot run);
- the parts: each synchronize on an idle GPU, ``ps.scan(x)`` without one (host time alone: the
  GPU keeps up), ``lookback.run`` into a kept result, and ``torch.cumsum(t, 0)`` without one.

Writes ``scan_calls.csv`` (variant, n, median_us, correct, the run's metadata; ``correct`` is empty
where no result was checked: an idle synchronize, the pieces of a call) and
``scan_calls_profile.txt``: cProfile's 25 costliest functions over 2000 calls of
``ps.scan(x)`` + ``cuda.synchronize()`` at 2^16.
"""

import cProfile
import io
import pstats
import shlex
import sys

import numpy as np

import prefixsum as ps  # before numba.cuda: prefixsum chooses the GPU or the simulator

from numba import cuda  # noqa: E402  (isort: skip)
import cub_rows  # noqa: E402  (beside this script)

from prefixsum.cli.metadata import run_metadata
from prefixsum.cli.results import print_table, report_wrong, write_csv
from prefixsum.cli.timing import HOST_WARMUP, QUICK_REPEATS, gpu_library, host_us, script_arguments
from prefixsum.scans.testing import expected_scan, poisoned, random_input, wrong_indices

SIZES = (1 << 10, 1 << 16, 1 << 20)
QUICK_SIZES = (1000,)
CALLS = 200
WARMUP_CALLS = 20
PROFILED = 2000


def main(argv=None):
    args = script_arguments(
        argv,
        "tiny sizes and few calls on the simulator, to test the script",
        lambda parser: parser.add_argument(
            "--parts", action="store_true", help="also time the pieces of a call (a GPU only)"
        ),
    )
    torch = gpu_library("torch")
    meta = run_metadata(
        ("torch", "cub"), shlex.join(["python", "benchmarks/scan_calls.py", *(sys.argv[1:] if argv is None else argv)])
    )
    repeats, warmup = (QUICK_REPEATS, HOST_WARMUP) if args.quick else (CALLS, WARMUP_CALLS)
    rng = np.random.default_rng(10)
    rows = []

    def add(variant, n, call, correct=None):
        """A row of ``call``'s host time; ``correct``: the check of its result, None where none ran."""
        us = host_us(call, warmup=warmup, repeats=repeats)
        rows.append(
            {
                "variant": variant,
                "dtype": "float32",
                "n": n,
                "median_us": round(us, 2),
                "correct": correct,
                "timing": "host clock",
                **meta,
            }
        )
        print(f"{variant:<46} n={n:<9} {us:>9.2f} us{'  WRONG' if correct is False else ''}", flush=True)

    sync = torch.cuda.synchronize if torch is not None else cuda.synchronize
    stream = cuda.default_stream()  # numba's stream synchronize: cuStreamSynchronize, no context lookup
    add("cuda.default_stream().synchronize() idle", 0, stream.synchronize)
    add("cuda.synchronize() idle", 0, cuda.synchronize)
    if torch is not None:
        add("torch.cuda.synchronize() idle", 0, torch.cuda.synchronize)
    for n in QUICK_SIZES if args.quick else SIZES:
        x = random_input(n, "add", np.dtype("float32"), rng)
        expected, allowed = expected_scan(x)
        source = cuda.to_device(x)

        def check(result):
            return wrong_indices(result, expected, allowed).size == 0

        correct = check(ps.scan(source).copy_to_host())
        add("ps.scan + cuda.synchronize", n, lambda: (ps.scan(source), cuda.synchronize()), correct)
        add("ps.scan + torch.cuda.synchronize", n, lambda: (ps.scan(source), sync()), correct)
        add("ps.scan + default_stream().synchronize()", n, lambda: (ps.scan(source), stream.synchronize()), correct)
        add("ps.scan alone (host)", n, lambda: ps.scan(source), correct)
        kept = cuda.device_array(n, np.float32)
        lookback = ps.ALGORITHMS["lookback"]
        options = lookback.resolve_options({})
        kept.copy_to_device(poisoned(n, np.dtype("float32")))
        lookback.run(source, kept, "add", True, False, **options)
        correct = check(kept.copy_to_host())
        add("lookback.run alone (host)", n, lambda: lookback.run(source, kept, "add", True, False, **options), correct)
        cuda.synchronize()
        target = cuda.device_array(n, np.float32)
        cub = cub_rows.attempt("inclusive sum", lambda: cub_rows.scan(source, target))
        if cub is not None:
            cub()
            correct = check(target.copy_to_host())
            add("CUB call (temporary storage kept) + cuda.synchronize", n, lambda: (cub(), cuda.synchronize()), correct)
            add("CUB call (temporary storage kept) alone (host)", n, cub, correct)
            cuda.synchronize()
        if args.parts and not ps.device_info()["simulator"]:  # the direct launch's pieces exist on a GPU only
            parts(add, n, source, kept)
        if torch is not None:
            t = torch.from_numpy(x).cuda()
            y = torch.empty_like(t)
            correct = check(torch.cumsum(t, 0).cpu().numpy())
            add("torch.cumsum + torch.cuda.synchronize", n, lambda: (torch.cumsum(t, 0), sync()), correct)
            add("torch.cumsum(out=) + torch.cuda.synchronize", n, lambda: (torch.cumsum(t, 0, out=y), sync()), correct)
            add("torch.cumsum + cuda.synchronize", n, lambda: (torch.cumsum(t, 0), cuda.synchronize()), correct)
            add("torch.cumsum alone (host)", n, lambda: torch.cumsum(t, 0), correct)
            sync()
    write_csv(rows, f"{args.out}/scan_calls.csv")

    n = QUICK_SIZES[0] if args.quick else 1 << 16
    source = cuda.to_device(random_input(n, "add", np.dtype("float32"), rng))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20 if args.quick else PROFILED):
        ps.scan(source)
        cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
    with open(f"{args.out}/scan_calls_profile.txt", "w") as handle:
        handle.write(
            f"# cProfile of {PROFILED} calls of ps.scan(x) + cuda.synchronize(), n = {n}, float32; "
            f"{meta['device']}, {meta['date']}\n"
        )
        handle.write(text.getvalue())
    print(text.getvalue()[:3000])
    print_table(
        ratios(rows),
        ["n", "ps.scan_us", "torch_us", "ratio"],
        title="whole calls with a synchronize, ps.scan against torch.cumsum (< 1.1 is the target):",
    )
    return report_wrong(rows, lambda row: f"{row['variant']} n={row['n']}")


def parts(add, n, source, kept):
    """Host time of the pieces of a look-back call: the result's memory, the tile states, the
    Launcher's parameter block (filled with one ``struct.pack_into``) and a whole Launcher call
    (the block and ``cuLaunchKernel``)."""
    from prefixsum.core.arrays import result_array
    from prefixsum.scans import lookback

    dtype = np.dtype("float32")
    add("part: result_array", n, lambda: result_array(n, dtype))
    items = lookback.tile_items(dtype, 128, None)
    tiles = -(-n // (128 * items))
    add("part: tile states", n, lambda: lookback.states(dtype, tiles))
    launch = lookback.launcher("add", dtype, True, False, 128, items)
    status, values, counter, epoch = lookback.states(dtype, tiles)
    arguments = (source, kept, status, values, counter, n, epoch, 0)
    launch(tiles, 128, *arguments)
    cuda.synchronize()
    block = launch._local.block
    add("part: parameter block fill", n, lambda: block.fill(arguments))
    add("part: Launcher call (fill + cuLaunchKernel)", n, lambda: launch(tiles, 128, *arguments))
    cuda.synchronize()


def ratios(rows):
    """ps.scan + cuda.synchronize over torch.cumsum + torch.cuda.synchronize, at each size."""
    times = {(r["variant"], r["n"]): r["median_us"] for r in rows}
    return [
        {
            "n": n,
            "ps.scan_us": us,
            "torch_us": times.get(("torch.cumsum + torch.cuda.synchronize", n)),
            "ratio": round(us / times.get(("torch.cumsum + torch.cuda.synchronize", n), float("nan")), 3),
        }
        for (variant, n), us in times.items()
        if variant == "ps.scan + cuda.synchronize"
    ]


if __name__ == "__main__":
    sys.exit(main())
