"""Tile shapes and look-back windows of the onesweep sort (prefixsum.apps.onesweep) on one GPU.

    python benchmarks/onesweep_tiles.py [--out DIR] [--quick]
    ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
        -k regex:digit_pass -c 2 python benchmarks/onesweep_tiles.py --profile

For each variant (threads x keys per thread of a digit pass, the look-back's window: tiles whose digit counts a thread
asks for at once, and a cap on registers per thread or none), uint32 and float32 keys at 2^22 and 2^24: the device time
of a whole sort by CUPTI (:func:`compaction_rows.cupti_device_us`), the variants launched through numba's dispatcher
(``onesweep.sort_device``'s options), the default also through the public call. Every result is checked first.
``--profile``: one sort of 2^24 uint32 keys with the default shape, after a first call that compiles, for Nsight
Compute; ``--host-profile``: where the host time of a whole call goes (cProfile). Writes ``onesweep_tiles.csv``.
"""

import os
import sys

import numpy as np  # noqa: E402
from compaction_rows import cupti_device_us, exit_skipping_teardown  # noqa: E402  (beside this script)

import prefixsum as ps  # noqa: F401  (first: it chooses the GPU or the simulator before numba.cuda loads)
from prefixsum import apps  # noqa: E402
from prefixsum.apps import onesweep  # noqa: E402
from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.cli.results import report_wrong, write_csv  # noqa: E402
from prefixsum.cli.timing import QUICK_REPEATS, gpu_library, script_arguments  # noqa: E402

VARIANTS = ((256, 16, 2, None), (256, 16, 4, None), (256, 12, 1, None), (256, 16, 1, 64), (256, 12, 1, 64))
"""(block_size, items_per_thread, window, registers: a cap on the registers per thread, or None)."""
SIZES = (1 << 22, 1 << 24)
REPEATS = 9


def profile_host(cuda, rng, calls=200, n=1 << 20):
    """cProfile of ``calls`` whole sorts of ``n`` uint32 keys, alone and with int32 values: where the host time goes."""
    import cProfile
    import pstats

    keys = cuda.to_device(rng.integers(0, 2**32, n, dtype=np.uint32))
    values = cuda.to_device(np.arange(n, dtype=np.int32))
    for args in ((keys,), (keys, values)):
        apps.radix_sort(*args)
        cuda.synchronize()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(calls):
            apps.radix_sort(*args)
        cuda.synchronize()
        profiler.disable()
        print(f"host profile of {calls} calls of apps.radix_sort, {len(args)} array(s) of {n}:")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
    return 0


def main(argv=None):
    argv = list(argv if argv is not None else sys.argv[1:])
    profile, host_profile = "--profile" in argv, "--host-profile" in argv
    argv = [a for a in argv if a not in ("--profile", "--host-profile")]
    args = script_arguments(argv, "one tiny size, two repeats; runs on the simulator too")
    from numba import cuda

    rng = np.random.default_rng(31)
    if host_profile:
        return profile_host(cuda, rng)
    if profile:
        keys = cuda.to_device(rng.integers(0, 2**32, 1 << 24, dtype=np.uint32))
        apps.radix_sort(keys)
        cuda.synchronize()
        apps.radix_sort(keys)
        cuda.synchronize()
        return 0
    repeats = QUICK_REPEATS if args.quick else REPEATS
    meta = run_metadata(["torch"])
    torch = gpu_library("torch")
    rows = []
    for n in (3000,) if args.quick else SIZES:
        for dtype in ("uint32", "float32"):
            keys = (
                rng.integers(0, 2**32, n, dtype=np.uint32)
                if dtype == "uint32"
                else rng.normal(size=n).astype(np.float32)
            )
            expected = np.sort(keys, kind="stable")
            dkeys = cuda.to_device(keys)
            calls = [
                (
                    "radix_sort (default)",
                    (onesweep.BLOCK_SIZE, onesweep.tile_items(keys.dtype, None, 256), onesweep.LOOKBACK_WINDOW, None),
                    lambda: apps.radix_sort(dkeys),
                )
            ]
            # quick: the tile variants on uint32 keys, float keys by the default alone (their transform)
            for block, items, window, registers in () if args.quick and dtype != "uint32" else VARIANTS:
                calls.append(
                    (
                        "sort_device",
                        (block, items, window, registers),
                        lambda b=block, i=items, w=window, r=registers: onesweep.sort_device(
                            dkeys, block_size=b, items_per_thread=i, window=w, registers=r
                        )[0],
                    )
                )
            for method, (block, items, window, registers), call in calls:
                ok = np.array_equal(call().copy_to_host(), expected)
                device = cupti_device_us(call, repeats)[0] if torch else float("nan")
                rows.append(
                    {
                        "method": method,
                        "block_size": block,
                        "items_per_thread": items,
                        "window": window,
                        "max_registers": registers or "",
                        "dtype": dtype,
                        "n": n,
                        "cupti_us": round(device, 1),
                        "correct": ok,
                        **meta,
                    }
                )
                print(method, block, items, window, registers, dtype, n, rows[-1]["cupti_us"], ok, flush=True)
    write_csv(rows, os.path.join(args.out, "onesweep_tiles.csv"))
    return report_wrong(
        rows,
        lambda row: (
            f"{row['method']} {row['block_size']}x{row['items_per_thread']} "
            f"window {row['window']} {row['dtype']} n={row['n']}"
        ),
    )


if __name__ == "__main__":
    exit_skipping_teardown(main())
