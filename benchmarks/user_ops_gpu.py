"""User operators on a real GPU: every carrier, large n, against numpy/scipy references.

    python benchmarks/user_ops_gpu.py [--out DIR] [--quick]

The simulator tests (tests/test_user_ops.py) run small sizes; this runs 2^20 elements (several
levels of tiles) through each algorithm that carries a user operator, on numba and CuPy device
arrays, in both directions, and prints one line per case. Writes ``user_ops_gpu.txt``.
"""

import os
import sys

import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

# isort: split

import itertools  # noqa: E402

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.cli.timing import gpu_library, script_arguments  # noqa: E402
from prefixsum.scans import user_ops  # noqa: E402


@cuda.jit(device=True)
def affine(p, q):
    return (p[0] * q[0], q[0] * p[1] + q[1])


@cuda.jit(device=True)
def four_fields(p, q):
    return (p[0] + q[0], p[1] + q[1], max(p[2], q[2]), p[3] * q[3])


def sequential(b):
    """x[i] = 0.999 x[i-1] + b[i] by a loop on the host (no scipy on every GPU image)."""
    return np.fromiter(itertools.accumulate(b, lambda x, bi: 0.999 * x + bi), np.float64, len(b))


def main(argv=None):
    args = script_arguments(argv, "n = 5000; runs on the simulator too")
    n = 5000 if args.quick else 1 << 20
    rng = np.random.default_rng(7)
    lines, failures = [], 0
    a = np.full(n, 0.999)
    b = rng.normal(size=n)
    recurrence = sequential(b)
    fields = (
        np.ones(n, np.int32),
        rng.normal(size=n),
        rng.normal(size=n).astype(np.float32),
        rng.choice([-1, 1], size=n).astype(np.int64),
    )
    cupy = gpu_library("cupy")
    for algorithm in [algo.name for algo in user_ops.carriers()] + ["auto"]:
        for reverse in (False, True):
            _, got = ps.scan((a, b), affine, identity=(1.0, 0.0), algorithm=algorithm, reverse=reverse)
            want = sequential(b[::-1])[::-1] if reverse else recurrence
            error = float(np.abs(got - want).max())
            count, total, peak, sign = ps.scan(
                fields,
                four_fields,
                identity=(0, 0.0, -np.inf, 1),
                algorithm=algorithm,
                inclusive=False,
                reverse=reverse,
            )
            ordered = [f[::-1] if reverse else f for f in fields]
            exact = [np.concatenate(([e], np.cumsum(f)[:-1])) for e, f in ((0, ordered[0]), (0.0, ordered[1]))]
            expect_peak = np.concatenate(([-np.inf], np.maximum.accumulate(ordered[2])[:-1]))
            expect_sign = np.concatenate(([1], np.cumprod(ordered[3])[:-1]))
            if reverse:
                exact, expect_peak, expect_sign = [e[::-1] for e in exact], expect_peak[::-1], expect_sign[::-1]
            ok = (
                error < 1e-9
                and np.array_equal(count, exact[0])
                and np.allclose(total, exact[1], atol=1e-8 * n)
                and np.array_equal(peak, expect_peak)
                and np.array_equal(sign, expect_sign)
            )
            failures += not ok
            lines.append(
                f"{'ok  ' if ok else 'FAIL'} {algorithm:<14} reverse={reverse!s:<5} n={n}: affine max error "
                f"{error:.1e}; four fields (int32, float64, float32, int64) exclusive"
            )
            print(lines[-1], flush=True)
    if cupy:
        A, B = ps.scan((cupy.asarray(a), cupy.asarray(b)), affine, identity=(1.0, 0.0))
        ok = float(np.abs(B.copy_to_host() - recurrence).max()) < 1e-9
        failures += not ok
        lines.append(f"{'ok  ' if ok else 'FAIL'} auto on CuPy device arrays, n={n}")
        print(lines[-1])
    meta = run_metadata(["cupy"])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "user_ops_gpu.txt"), "w") as handle:
        handle.write("".join(f"# {key}: {value}\n" for key, value in meta.items()) + "\n".join(lines) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
