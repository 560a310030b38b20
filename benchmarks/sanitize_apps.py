"""User operators and chapter 11's applications under compute-sanitizer, on a GPU.

    compute-sanitizer --tool memcheck python benchmarks/sanitize_apps.py     (and racecheck, synccheck, initcheck)
    python benchmarks/sanitize_apps.py --quick                                (smaller, on the simulator too)

Runs every algorithm that carries a user operator (an affine map on a pair of float64 arrays,
forward and reverse, inclusive and exclusive) and each application of :mod:`prefixsum.apps`
(compaction in one pass, of values, of indices and without waiting, and the readable
compaction; radix sort with values, a linear recurrence, a segmented scan, the tridiagonal
solve as a scan, a cubic spline) on sizes of one tile and of several, each result checked against
numpy before the next call; one line per part, exit 1 on a wrong result. compute-sanitizer's
summary is the verdict on memory errors, races, barriers and uninitialised reads;
``run_gpu.sh sanitize_apps`` runs the four tools.
"""
import argparse
import sys

import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum import apps  # noqa: E402
from prefixsum.scans import user_ops  # noqa: E402

SIZES = (1, 33, 1000, 70_000)
QUICK_SIZES = (1, 33, 300)


@cuda.jit(device=True)
def affine(p, q):
    return (p[0] * q[0], q[0] * p[1] + q[1])


def affine_reference(a, b, inclusive, reverse):
    """The composed maps (A, B) by a loop in float64, in the scan's direction."""
    n = len(a)
    order = range(n - 1, -1, -1) if reverse else range(n)
    A, B = np.empty(n), np.empty(n)
    acc = (1.0, 0.0)
    for i in order:
        if not inclusive:
            A[i], B[i] = acc
        acc = (acc[0] * a[i], a[i] * acc[1] + b[i])
        if inclusive:
            A[i], B[i] = acc
    return A, B


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}; runs on the simulator too")
    args = parser.parse_args(argv)
    if ps.device_info()["simulator"] and not args.quick:
        raise SystemExit("sanitize_apps.py needs a CUDA GPU (compute-sanitizer); --quick runs it on the simulator")
    rng = np.random.default_rng(17)
    wrong, calls = [], 0
    for n in QUICK_SIZES if args.quick else SIZES:
        a, b = rng.uniform(0.5, 1.0, n), rng.normal(size=n)
        for algorithm in [algo.name for algo in user_ops.carriers()]:
            for inclusive in (True, False):
                for reverse in (False, True):
                    A, B = ps.scan((a, b), affine, identity=(1.0, 0.0), algorithm=algorithm,
                                   inclusive=inclusive, reverse=reverse)
                    calls += 1
                    wantA, wantB = affine_reference(a, b, inclusive, reverse)
                    if not (np.allclose(A, wantA, rtol=1e-9) and np.allclose(B, wantB, rtol=1e-9, atol=1e-9 * n)):
                        wrong.append(f"user operator {algorithm} n={n} inclusive={inclusive} reverse={reverse}")
        x = rng.normal(size=n).astype(np.float32)
        mask = rng.random(n) < 0.5
        if not np.array_equal(apps.compact(x, mask), x[mask]):
            wrong.append(f"compact n={n}")
        if not np.array_equal(apps.compact_by_scan(x, mask), x[mask]):
            wrong.append(f"compact_by_scan n={n}")
        if not np.array_equal(apps.compact_indices(mask), np.flatnonzero(mask)):
            wrong.append(f"compact_indices n={n}")
        x64 = rng.normal(size=n)
        buffer, count = apps.compact(cuda.to_device(x64), cuda.to_device(mask), sync=False)
        kept = buffer[:int(count.copy_to_host()[0])]  # past the count the buffer is never written: initcheck
        if not np.array_equal(kept.copy_to_host(), x64[mask]):
            wrong.append(f"compact sync=False float64 n={n}")
        calls += 3
        keys = rng.integers(-1000, 1000, n).astype(np.int32)
        values = np.arange(n, dtype=np.int32)
        got_keys, got_values = apps.radix_sort(keys, values)
        order = np.argsort(keys, kind="stable")
        if not (np.array_equal(got_keys, keys[order]) and np.array_equal(got_values, values[order])):
            wrong.append(f"radix_sort n={n}")
        rec = apps.linear_recurrence(a, b)
        want = np.empty(n)
        state = 0.0
        for i in range(n):
            state = a[i] * state + b[i]
            want[i] = state
        if not np.allclose(rec, want, rtol=1e-9, atol=1e-9 * n):
            wrong.append(f"linear_recurrence n={n}")
        values64 = rng.normal(size=n)
        flags = rng.random(n) < 0.1
        flags[0] = True
        starts = np.flatnonzero(flags)
        want = np.concatenate([np.cumsum(seg) for seg in np.split(values64, starts[1:])])
        if not np.allclose(apps.segmented_scan(values64, flags), want, atol=1e-9 * n):
            wrong.append(f"segmented_scan n={n}")
        calls += 4
        m = min(n, 8)  # the solve as a scan loses accuracy fast beyond a few rows (chapter 11)
        lower, upper = rng.uniform(-1, 1, (2, m))
        diag = np.abs(lower) + np.abs(upper) + 2.0
        d = rng.normal(size=m)
        solution = apps.tridiagonal_scan(lower, diag, upper, d)
        T = np.diag(diag) + np.diag(lower[1:], -1) + np.diag(upper[:-1], 1)
        if not np.allclose(T @ solution, d, atol=1e-8):
            wrong.append(f"tridiagonal_scan m={m}")
        calls += 1
        if n >= 4:
            knots = np.sort(rng.uniform(0, 10, n))
            knots += np.arange(n) * 1e-3
            spline = apps.cubic_spline(knots, np.sin(knots))
            if not np.allclose(spline(knots), np.sin(knots), atol=1e-9):
                wrong.append(f"cubic_spline n={n}")
            calls += 1
        print(f"n={n}: {calls} calls so far, {len(wrong)} wrong", flush=True)
    print("\n".join(wrong) if wrong else f"all results right: {calls} calls checked")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
