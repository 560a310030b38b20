"""``python -m prefixsum``: every registered algorithm against the reference, as a table."""
import itertools

import numpy as np

import prefixsum as ps
from ..scans.testing import random_input, run_poisoned


def check_one(algorithm, n, op, dtype, rng, inclusive=True, reverse=False):
    """Run one scan on poisoned output; return ``(passed, seconds, detail)``."""
    x = random_input(n, op, dtype, rng)
    run = run_poisoned(algorithm.run, x, op, inclusive=inclusive, reverse=reverse, **algorithm.options)
    detail = "" if run.bad.size == 0 else f"{run.bad.size} wrong, first at index {run.bad[0]}"
    return run.bad.size == 0, run.seconds, detail


def main(n=None, algorithms=None, out=print):
    """Print the table; return 0 if every row passed, else 1."""
    info = ps.device_info()
    n = n or ps.size_for_device(simulator=1000, gpu=1 << 22)
    names = algorithms or list(ps.ALGORITHMS)
    rng = np.random.default_rng(2026)
    device = "simulator" if info["simulator"] else info["name"]
    out(f"{'algorithm':<14} {'n':>9} {'op':<4} {'dtype':<8} {'device':<22} {'result':<6} {'time':>10}")
    failed = 0
    for name, op, dtype in itertools.product(names, ps.OPS, ps.DTYPES):
        algorithm = ps.ALGORITHMS[name]
        if not info["simulator"]:
            # Compile outside the timed run. Kernels compile per type, not per size, and 2^16
            # elements already launch every kernel a larger n does (several levels of tiles,
            # kstep's multi-block path), for a fraction of the host's checking time.
            check_one(algorithm, min(n, 1 << 16), op, dtype, rng)
        passed, seconds, detail = check_one(algorithm, n, op, dtype, rng)
        failed += not passed
        out(f"{name:<14} {n:>9} {op:<4} {dtype.name:<8} {device[:22]:<22} {'PASS' if passed else 'FAIL':<6} "
            f"{seconds * 1e3:>8.2f}ms {detail}".rstrip())
    out(f"{'all passed' if not failed else f'{failed} FAILED'} on {device}")
    return 1 if failed else 0
