"""What a GPU does with blocks that talk to each other: the chained scans of prefixsum.mutants.

Each chained tile kernel (the correct one and its cross-block mistakes: no flags, no fence, a
block waiting for a block dispatched after it, polling a flag with a plain load) runs
``--launches`` times on ``--n`` random small integers as float32 (tiles of ``mutants.BLOCK``; every
partial sum is exact in float32, so any difference from numpy's cumsum is a wrong element). The two mistakes that can
hang a GPU -- waiting for a block that never starts, and a polling loop whose plain load the
compiler may read once -- run as *bounded* variants of the package's kernels (made by
:func:`prefixsum.classroom.mutants.variant`, below): a waiting thread gives up after
``--patience`` polls and counts itself in ``gave_up`` (on a GPU the unbounded kernels hang;
these show that they would). Notebook 00 quotes the CSV next to the
stock and the classroom simulator.

Writes ``blocks_gpu.csv`` under ``--out``: one row per kernel with launches, wrong launches,
the first wrong index of the first wrong launch, blocks that gave up waiting (summed over the
launches), the GPU's SM count and the median milliseconds a launch took (host clock,
synchronized), with :func:`prefixsum.cli.metadata.run_metadata`.

Run: ``python benchmarks/blocks_gpu.py [--out DIR] [--quick]`` on a GPU (seconds);
``--quick`` runs tiny sizes, on the simulator too, to test the script.
"""

import argparse
import math
import os
import sys
import time
from pathlib import Path

# Runs from a checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import prefixsum as ps  # noqa: E402  (chooses the GPU or the simulator before numba.cuda loads)

# isort: split
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum.classroom import mutants  # noqa: E402
from prefixsum.classroom.mutants import BLOCK  # noqa: E402
from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.cli.results import print_table, write_csv  # noqa: E402
from prefixsum.cli.timing import default_out, require_gpu  # noqa: E402


def bounded(kernel, hand_off):
    """``kernel``, a chained tile kernel of :mod:`prefixsum.classroom.mutants`, with ``hand_off``
    made patient: its waiting thread gives up after ``patience`` polls (and counts itself in
    ``gave_up``) instead of hanging. Both are the package's code with these edits, no copy."""
    patient = mutants.variant(
        hand_off,
        f"patient_{hand_off.py_func.__name__}",
        ("(prefixes, flags, b, total):", "(prefixes, flags, b, total, gave_up, patience):"),
        ("    if b > 0:\n", "    if b > 0:\n        polls = 0\n"),
        (
            "            pass\n",
            "            polls += 1\n            if polls == patience:\n"
            "                cuda.atomic.add(gave_up, 0, 1)\n                break\n",
        ),
        device=True,
    )
    return mutants.variant(
        kernel,
        f"bounded_{kernel.py_func.__name__}",
        ("counter, n):", "counter, n, gave_up, patience):"),
        ("rungs[t])", "rungs[t], gave_up, patience)"),
        namespace={"hand_off": patient},
    )


BOUNDED = {
    "chained_waits_for_later_block": bounded(mutants.chained_waits_for_later_block_tile, mutants.hand_off),
    "chained_plain_poll": bounded(mutants.chained_tile, mutants.hand_off_plain_poll),
}


def launch(name, x, patience):
    """Run kernel ``name`` once on device array ``x``: ``(output, blocks that gave up)``."""
    n = x.size
    tiles = math.ceil(n / BLOCK)
    out = cuda.device_array(n, np.float32)
    prefixes = cuda.device_array(tiles, np.float32)
    flags = cuda.to_device(np.zeros(tiles, np.int32))
    counter = cuda.to_device(np.zeros(1, np.int32))
    gave_up = cuda.to_device(np.zeros(1, np.int32))
    if name in BOUNDED:
        BOUNDED[name][tiles, BLOCK](x, out, prefixes, flags, counter, n, gave_up, patience)
    else:
        KERNELS[name][tiles, BLOCK](x, out, prefixes, flags, counter, n)
    cuda.synchronize()
    return out.copy_to_host(), int(gave_up.copy_to_host()[0])


KERNELS = {
    "chained": mutants.chained_tile,
    "chained_without_flags": mutants.chained_without_flags_tile,
    "chained_without_fence": mutants.chained_without_fence_tile,
    "chained_waits_for_later_block": BOUNDED["chained_waits_for_later_block"],
    "chained_plain_poll": BOUNDED["chained_plain_poll"],
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=default_out())
    parser.add_argument("--quick", action="store_true", help="tiny sizes; runs on the simulator too")
    parser.add_argument("--n", type=int, default=1 << 20, help="elements (default 2^20: 16,384 blocks)")
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--patience", type=int, default=1 << 16, help="polls before a bounded wait gives up")
    options = parser.parse_args(argv)
    require_gpu(options.quick)
    n, launches, patience = (BLOCK * 6 + 5, 2, 50) if options.quick else (options.n, options.launches, options.patience)
    rng = np.random.default_rng(0)
    x = rng.integers(-9, 10, n).astype(np.float32)
    expected = np.cumsum(x)
    device = cuda.to_device(x)
    sms = 0 if ps.device_info()["simulator"] else cuda.get_current_device().MULTIPROCESSOR_COUNT
    meta = run_metadata()
    rows = []
    for name in KERNELS:
        wrong, first_wrong, gave_up, times = 0, -1, 0, []
        for _ in range(launches):
            start = time.perf_counter()
            result, gave = launch(name, device, patience)
            times.append((time.perf_counter() - start) * 1e3)
            bad = np.flatnonzero(result != expected)
            gave_up += gave
            if bad.size:
                wrong += 1
                first_wrong = int(bad[0]) if first_wrong < 0 else first_wrong
        rows.append(
            {
                "kernel": name,
                "n": n,
                "blocks": math.ceil(n / BLOCK),
                "sms": sms,
                "launches": launches,
                "wrong_launches": wrong,
                "first_wrong_index": first_wrong,
                "gave_up": gave_up,
                "patience": patience,
                "median_ms": round(float(np.median(times)), 3),
                **meta,
            }
        )
        print(f"done: {name}", file=sys.stderr)
    write_csv(rows, os.path.join(options.out, "blocks_gpu.csv"))
    print_table(rows, ["kernel", "blocks", "launches", "wrong_launches", "first_wrong_index", "gave_up", "median_ms"])


if __name__ == "__main__":
    main()
