"""``python -m prefixsum``: every registered algorithm against the reference, as a table."""
import itertools
import time

import numpy as np
from numba import cuda

import prefixsum as ps
from .testing import mismatches, poisoned, random_input


def check_one(algorithm, n, op, dtype, rng, inclusive=True, reverse=False):
    """Run one scan on poisoned output; return ``(passed, seconds, detail)``."""
    x = random_input(n, op, dtype, rng)
    source = cuda.to_device(x)
    out = cuda.to_device(poisoned(n, dtype))
    start = time.perf_counter()
    algorithm.run(source, out, op, inclusive, reverse, **algorithm.options)
    cuda.synchronize()
    seconds = time.perf_counter() - start
    bad, expected = mismatches(out.copy_to_host(), x, op, inclusive=inclusive, reverse=reverse)
    detail = "" if bad.size == 0 else f"{bad.size} wrong, first at index {bad[0]}"
    return bad.size == 0, seconds, detail


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
        if not info["simulator"]:  # compile outside the timed run
            check_one(algorithm, n, op, dtype, rng)
        passed, seconds, detail = check_one(algorithm, n, op, dtype, rng)
        failed += not passed
        out(f"{name:<14} {n:>9} {op:<4} {dtype.name:<8} {device[:22]:<22} {'PASS' if passed else 'FAIL':<6} "
            f"{seconds * 1e3:>8.2f}ms {detail}".rstrip())
    out(f"{'all passed' if not failed else f'{failed} FAILED'} on {device}")
    return 1 if failed else 0
