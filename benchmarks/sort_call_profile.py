"""Where the host time of one ``apps.radix_sort`` whole call goes: a profile, not a claim.

``benchmarks/applications.csv`` (H100, 2026-12-07) shows the sort of keys with values taking
200-500 us more per whole call than its kernels, where the sort of keys alone takes 60-80 us
more: this script looks for the difference. It sorts uint32 keys alone and with int32 values,
device arrays in and out, the two calls in turn (``prefixsum.cli.timing.host_us_in_turn``), and
prints the median whole call (host clock, synchronized) beside the device's idle synchronize,
then the functions with the most time of their own under cProfile, per kind of call. Nothing is
written: the claims come from ``benchmarks/applications.py``.

Run: ``python benchmarks/sort_call_profile.py [--calls 100] [--quick] > sort_call_profile.txt`` on a
GPU (``run_gpu.sh sort_calls``).
"""

import argparse
import cProfile
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import prefixsum  # noqa: E402,F401  (chooses the GPU or the simulator before numba.cuda loads)

# isort: split
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum import apps  # noqa: E402
from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.cli.timing import QUICK_REPEATS, host_us_in_turn, require_gpu  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--top", type=int, default=20, help="functions listed per profile")
    parser.add_argument("--quick", action="store_true", help="tiny sizes; runs on the simulator too")
    options = parser.parse_args(argv)
    require_gpu(options.quick)
    meta = run_metadata()
    print(f"# {__doc__.splitlines()[0]}")
    print("# " + ", ".join(f"{key} {value}" for key, value in meta.items() if key != "command"))
    print(f"# command: {meta['command']}")
    sizes = [40] if options.quick else [1 << 20, 1 << 24]
    calls = QUICK_REPEATS if options.quick else options.calls
    rng = np.random.default_rng(0)
    for n in sizes:
        host_keys = rng.integers(0, 1 << 32, n, dtype=np.uint32)
        host_values = rng.permutation(n).astype(np.int32)
        keys, values = cuda.to_device(host_keys), cuda.to_device(host_values)
        got_keys, got_values = apps.radix_sort(keys, values)
        order = np.argsort(host_keys, kind="stable")
        if not (
            np.array_equal(got_keys.copy_to_host(), host_keys[order])
            and np.array_equal(got_values.copy_to_host(), host_values[order])
        ):
            sys.exit(f"n = {n}: the sort with values is wrong")
        kinds = {
            "keys": lambda: apps.radix_sort(keys),
            "keys and values": lambda: apps.radix_sort(keys, values),
            "synchronize (idle)": lambda: None,
        }
        medians = host_us_in_turn({name: _synchronized(call) for name, call in kinds.items()}, repeats=calls)
        print(f"\n=== n = {n}, uint32 keys, int32 values, device arrays ({calls} calls each, in turn):")
        for name, us in medians.items():
            print(f"  {name:20s} {us:9.1f} us")
        for name in ("keys", "keys and values"):
            profile = cProfile.Profile()
            for _ in range(calls):
                profile.enable()
                kinds[name]()
                cuda.synchronize()
                profile.disable()
            print(f"\n--- n = {n}, {name}: own time per function, {calls} calls")
            pstats.Stats(profile).sort_stats("tottime").print_stats(options.top)


def _synchronized(call):
    """``call`` followed by a synchronize: a whole call as a user waits for it."""

    def whole():
        call()
        cuda.synchronize()

    return whole


if __name__ == "__main__":
    main()
