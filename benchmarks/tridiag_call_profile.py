"""Where the host time of one ``tridiag.solve`` whole call goes (issue 16): a profile, not a claim.

Runs ``tridiag.solve`` on device arrays (and on numpy arrays) ``--calls`` times per shape under
cProfile and prints the functions with the most cumulative time per call, beside the median
whole call (host clock, synchronized). Nothing is written: the claims of ``benchmarks/tridiag.csv``
come from ``benchmarks/tridiag.py``.

Run: ``python benchmarks/tridiag_call_profile.py [--calls 200] [--quick]`` on a GPU.
"""

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import prefixsum  # noqa: E402,F401  (chooses the GPU or the simulator before numba.cuda loads)

# isort: split
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum import tridiag  # noqa: E402
from prefixsum.cli.timing import require_gpu  # noqa: E402


def systems(batch, n, dtype, rng):
    a, c = rng.uniform(-1, 1, (2, batch, n))
    b = np.abs(a) + np.abs(c) + 1 + rng.uniform(0, 1, (batch, n))
    return [v.astype(dtype) for v in (a, b, c, rng.normal(size=(batch, n)))]


def steps(arrays, calls):
    """Median host microseconds of each step of a whole call on device arrays, timed alone."""
    from prefixsum.core.arrays import copy_to_host, result_array
    from prefixsum.core.plans import PLANS
    from prefixsum.core.streams import default_stream
    from prefixsum.tridiag import api, checks, hybrid

    checked, _ = checks.check_systems(*arrays)
    batch, n = checked[3].shape
    x = result_array((batch, n), checked[3].dtype)
    info, flags = api._flags(batch, default_stream())
    key = ("tridiag.solve", x.dtype, (batch, n), "auto", api.METHODS.version)
    parts = {
        "check": lambda: checks.check_systems(*arrays),
        "result_array": lambda: result_array((batch, n), checked[3].dtype),
        "flags": lambda: api._flags(batch, default_stream()),
        "plan lookup": lambda: PLANS.get(key),
        "choose (a plan's making)": lambda: api.choose("auto", batch, n, x.dtype),
        "hybrid.run (launches, no wait)": lambda: hybrid.run(*checked, x, info),
        "copy flags (after a sync)": lambda: copy_to_host(info, flags),
        "numba's copy_to_host of the flags": lambda: info.copy_to_host(flags),
        "flags.any": lambda: flags.any(),
        "synchronize (idle)": cuda.synchronize,
    }
    for name, part in parts.items():
        times = []
        for _ in range(calls):
            cuda.synchronize()
            start = time.perf_counter()
            part()
            times.append(time.perf_counter() - start)
        cuda.synchronize()
        print(f"  {name:34s} {np.median(times) * 1e6:8.1f} us")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--steps", action="store_true", help="also time each step of a device-array call alone")
    parser.add_argument("--top", type=int, default=25, help="functions listed per profile")
    parser.add_argument("--quick", action="store_true", help="tiny sizes; runs on the simulator too")
    options = parser.parse_args(argv)
    require_gpu(options.quick)
    shapes = [(4, 8)] if options.quick else [(512, 512), (16384, 64), (1, 1 << 20)]
    calls = 3 if options.quick else options.calls
    rng = np.random.default_rng(0)
    for batch, n in shapes:
        host = systems(batch, n, np.float32, rng)
        device = [cuda.to_device(v) for v in host]
        if options.steps:
            print(f"\n=== float32 {batch} x {n}, device arrays, step by step:")
            steps(device, calls)
        for label, arrays in (("device arrays", device), ("numpy arrays", host)):
            for _ in range(5):
                tridiag.solve(*arrays)
            cuda.synchronize()
            plain = []
            for _ in range(calls):
                start = time.perf_counter()
                tridiag.solve(*arrays)
                cuda.synchronize()
                plain.append(time.perf_counter() - start)
            times = []
            profile = cProfile.Profile()
            for _ in range(calls):
                start = time.perf_counter()
                profile.enable()
                tridiag.solve(*arrays)
                cuda.synchronize()
                profile.disable()
                times.append(time.perf_counter() - start)
            print(
                f"\n=== float32 {batch} x {n}, {label}: median whole call {np.median(plain) * 1e6:.1f} us, "
                f"{np.median(times) * 1e6:.1f} us profiled ({calls} calls)"
            )
            stats = pstats.Stats(profile)
            stats.sort_stats("tottime").print_stats(options.top)


if __name__ == "__main__":
    main()
