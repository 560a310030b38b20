"""``python -m prefixsum``: every registered algorithm against the reference, as a table.

On a GPU nearly all the time goes to compiling kernels (one set per algorithm, operator and
dtype: 144 rows), which is Python on one core. The rows are therefore shared among worker
processes, one per core up to :data:`GPU_WORKERS`, each with its own CUDA context; the table is
printed in the same order either way. On the simulator the rows run here, one after another.
"""

import itertools
import multiprocessing
import os

import numpy as np

import prefixsum as ps

from ..scans.testing import random_input, run_poisoned

GPU_WORKERS = 8
"""Most worker processes on a GPU machine; each holds a CUDA context of a few hundred MiB."""
_SEED = 2026


def check_one(algorithm, n, op, dtype, rng, inclusive=True, reverse=False):
    """Run one scan on poisoned output; return ``(passed, seconds, detail)``."""
    x = random_input(n, op, dtype, rng)
    run = run_poisoned(algorithm.run, x, op, inclusive=inclusive, reverse=reverse, **algorithm.options)
    detail = "" if run.bad.size == 0 else f"{run.bad.size} wrong, first at index {run.bad[0]}"
    return run.bad.size == 0, run.seconds, detail


def check_rows(rows, n):
    """:func:`check_one` for each ``(row number, name, op, dtype)``; returns ``[(row number, passed, seconds,
    detail)]``."""
    simulator = ps.device_info()["simulator"]
    results = []
    for number, name, op, dtype in rows:
        rng = np.random.default_rng([_SEED, number])
        algorithm = ps.ALGORITHMS[name]
        if not simulator:
            # Compile outside the timed run. Kernels compile per type, not per size, and 2^16
            # elements already launch every kernel a larger n does (several levels of tiles,
            # kstep's multi-block path), for a fraction of the host's checking time.
            check_one(algorithm, min(n, 1 << 16), op, dtype, rng)
        results.append((number, *check_one(algorithm, n, op, dtype, rng)))
    return results


def _workers(simulator, rows):
    if simulator:
        return 1
    return max(
        1,
        min(
            GPU_WORKERS,
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
            len(rows),
        ),
    )


def main(n=None, algorithms=None, out=print, workers=None):
    """Print the table; return 0 if every row passed, else 1.

    ``workers`` processes share the rows (default: one per core up to :data:`GPU_WORKERS` on a
    GPU, one on the simulator).
    """
    info = ps.device_info()
    n = n or ps.size_for_device(simulator=1000, gpu=1 << 22)
    names = algorithms or list(ps.ALGORITHMS)
    rows = [
        (number, name, op, dtype)
        for number, (name, op, dtype) in enumerate(itertools.product(names, ps.OPS, ps.DTYPES))
    ]
    device = "simulator" if info["simulator"] else info["name"]
    workers = workers or _workers(info["simulator"], rows)
    if workers == 1:
        results = check_rows(rows, n)
    else:
        # Every worker gets every workers-th row, so the slow algorithms are spread evenly.
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            parts = pool.starmap(check_rows, [(rows[k::workers], n) for k in range(workers)])
        results = sorted(itertools.chain.from_iterable(parts))
    out(f"{'algorithm':<14} {'n':>9} {'op':<4} {'dtype':<8} {'device':<22} {'result':<6} {'time':>10}")
    failed = 0
    for (_, name, op, dtype), (_, passed, seconds, detail) in zip(rows, results):
        failed += not passed
        out(
            f"{name:<14} {n:>9} {op:<4} {dtype.name:<8} {device[:22]:<22} {'PASS' if passed else 'FAIL':<6} "
            f"{seconds * 1e3:>8.2f}ms {detail}".rstrip()
        )
    suffix = f" ({workers} worker processes)" if workers > 1 else ""
    out(f"{'all passed' if not failed else f'{failed} FAILED'} on {device}{suffix}")
    return 1 if failed else 0
