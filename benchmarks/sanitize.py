"""Every registered scan under compute-sanitizer: the third level of proof, on a GPU.

    compute-sanitizer --tool memcheck python benchmarks/sanitize.py     (and racecheck, synccheck, initcheck) python
    benchmarks/sanitize.py --quick                                (the same calls on the simulator, to test the script)

Runs each algorithm of the registry for every operator on float32 and float64 (NaN-propagating
max and min included), inclusive forward and exclusive reverse, at sizes of one tile, of several
tiles and of several levels of tiles, and checks each result against the reference before the
next call; prints one line per algorithm and exits 1 on a wrong result. compute-sanitizer's own
summary (its error count) is the verdict on memory errors, races, barriers and uninitialised
reads; ``run_gpu.sh sanitize`` runs the four tools and keeps their summaries.
"""

import argparse
import sys

import numpy as np

import prefixsum as ps
from prefixsum.scans.testing import random_input, run_poisoned

SIZES = (1, 33, 4097, 70001)
QUICK_SIZES = (300,)
"""The quick run tests the script, at one size: the kernels' edge sizes are the tests' own."""
DTYPES = ("float32", "float64")
DIRECTIONS = ((True, False), (False, True))  # (inclusive, reverse)


def chunked(rng, quick):
    """``ps.scan`` of numpy arrays through the overlapped copies (:mod:`prefixsum.scans.transfers`),
    two tiles a chunk, so that every size above two tiles launches the look-back once per chunk
    with its tiles' offset: every op and direction on float32 and float64. Returns the wrong results."""
    from prefixsum.scans import transfers
    from prefixsum.scans.testing import expected_scan, wrong_indices

    kept = transfers.MIN_BYTES, transfers.CHUNK_BYTES
    calls = wrong = 0
    try:
        for op in ps.OPS:
            for dtype in DTYPES:
                transfers.MIN_BYTES, transfers.CHUNK_BYTES = 0, 2 * 128 * 32 * np.dtype(dtype).itemsize
                for n in QUICK_SIZES if quick else SIZES:
                    for inclusive, reverse in DIRECTIONS:
                        x = random_input(n, op, dtype, rng)
                        expected, allowed = expected_scan(x, op, inclusive=inclusive, reverse=reverse)
                        bad = wrong_indices(
                            ps.scan(x, op, inclusive=inclusive, reverse=reverse, algorithm="lookback"),
                            expected,
                            allowed,
                        )
                        calls += 1
                        if bad.size:
                            wrong += 1
                            print(
                                f"WRONG: lookback on numpy, chunked, {op} {dtype} n={n} inclusive={inclusive} "
                                f"reverse={reverse}: {bad.size} wrong, first at {bad[0]}"
                            )
    finally:
        transfers.MIN_BYTES, transfers.CHUNK_BYTES = kept
    print(f"lookback on numpy, chunked: {calls} calls checked", flush=True)
    return wrong


def every_tile_shape(rng, quick):
    """ "lookback" in each tile shape its table may choose (:mod:`prefixsum.scans.tile_choice`;
    the calls above get the shapes of their short lengths only): add, both directions, float32
    and float64, several tiles of each. Returns the wrong results."""
    from prefixsum.scans import tile_choice

    calls = wrong = 0
    for dtype in DTYPES:
        for block_size, items in tile_choice.shapes(np.dtype(dtype).itemsize):
            if quick:
                block_size, items = 32, 2
            n = 3 * block_size * items + 17
            for inclusive, reverse in DIRECTIONS:
                run = run_poisoned(
                    ps.ALGORITHMS["lookback"].run,
                    random_input(n, "add", dtype, rng),
                    "add",
                    inclusive=inclusive,
                    reverse=reverse,
                    block_size=block_size,
                    items_per_thread=items,
                )
                calls += 1
                if run.bad.size:
                    wrong += 1
                    print(
                        f"WRONG: lookback {block_size} x {items} {dtype} n={n} inclusive={inclusive} "
                        f"reverse={reverse}: {run.bad.size} wrong, first at {run.bad[0]}"
                    )
    print(f"lookback in every tile shape of its table: {calls} calls checked", flush=True)
    return wrong


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}; runs on the simulator too")
    parser.add_argument(
        "--algorithm",
        action="append",
        choices=list(ps.ALGORITHMS),
        help="only this registered scan (repeatable; default: every one)",
    )
    args = parser.parse_args(argv)
    if ps.device_info()["simulator"] and not args.quick:
        raise SystemExit("sanitize.py needs a CUDA GPU (compute-sanitizer); --quick runs it on the simulator")
    rng = np.random.default_rng(11)
    wrong = 0
    for name in args.algorithm or ps.ALGORITHMS:
        algorithm = ps.ALGORITHMS[name]
        calls = 0
        for op in ps.OPS:
            for dtype in DTYPES:
                for n in QUICK_SIZES if args.quick else SIZES:
                    for inclusive, reverse in DIRECTIONS:
                        x = random_input(n, op, dtype, rng)
                        if op in ("max", "min") and n > 2:
                            x[n // 2] = np.nan  # the NaN-propagating combine is code too
                        run = run_poisoned(
                            algorithm.run, x, op, inclusive=inclusive, reverse=reverse, **algorithm.options
                        )
                        calls += 1
                        if run.bad.size:
                            wrong += 1
                            print(
                                f"WRONG: {name} {op} {dtype} n={n} inclusive={inclusive} reverse={reverse}: "
                                f"{run.bad.size} wrong, first at {run.bad[0]}"
                            )
        print(f"{name}: {calls} calls checked", flush=True)
        if name == "lookback":
            wrong += every_tile_shape(rng, args.quick)
            wrong += chunked(rng, args.quick)
    print(f"{'all results right' if not wrong else f'{wrong} WRONG'} on {ps.device_info()['name']}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
