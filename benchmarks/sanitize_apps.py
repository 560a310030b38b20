"""User operators and chapter 11's applications under compute-sanitizer, on a GPU.

    compute-sanitizer --tool memcheck python benchmarks/sanitize_apps.py     (and racecheck, synccheck, initcheck)
    python benchmarks/sanitize_apps.py --quick                                (smaller, on the simulator too;
                                                                              the sorts once, not in each part)

Runs every algorithm that carries a user operator (an affine map on a pair of float64 arrays,
forward and reverse, inclusive and exclusive; ``lookback`` and ``hierarchical`` from their one
source) and each application of :mod:`prefixsum.apps` (compaction in one pass, of values, of
indices and without waiting, and the readable compaction; radix sort by onesweep on keys of
1, 2, 4 and 8 bytes, alone and with values of another width, and the readable one-bit sort, a linear
recurrence, the segmented scan's four one-pass variants on float64, float32 and int32, the tridiagonal
solve as a scan, a cubic spline) on sizes of one tile and of several, each result checked against
numpy before the next call; one line per part, exit 1 on a wrong result. compute-sanitizer's
summary is the verdict on memory errors, races, barriers and uninitialised reads;
``run_gpu.sh sanitize_apps`` runs the four tools.
"""

import argparse
import sys

import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

# isort: split

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum import apps  # noqa: E402
from prefixsum.apps import segmented  # noqa: E402
from prefixsum.scans import user_ops  # noqa: E402

SIZES = (1, 33, 1000, 70_000)
QUICK_SIZES = (300,)
"""The quick run tests the script, at one size: the kernels' edge sizes are the tests' own."""


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


PARTS = ("user_ops", "segmented", "apps", "sort")


def user_operators(n, rng, wrong):
    """Every carrier of a user operator, an affine map on float64 pairs, four variants; returns the calls made."""
    a, b = rng.uniform(0.5, 1.0, n), rng.normal(size=n)
    calls = 0
    for algorithm in [algo.name for algo in user_ops.carriers()]:
        for inclusive in (True, False):
            for reverse in (False, True):
                A, B = ps.scan(
                    (a, b), affine, identity=(1.0, 0.0), algorithm=algorithm, inclusive=inclusive, reverse=reverse
                )
                calls += 1
                wantA, wantB = affine_reference(a, b, inclusive, reverse)
                if not (np.allclose(A, wantA, rtol=1e-9) and np.allclose(B, wantB, rtol=1e-9, atol=1e-9 * n)):
                    wrong.append(f"user operator {algorithm} n={n} inclusive={inclusive} reverse={reverse}")
    return calls


def segmented_scans(n, rng, wrong):
    """The segmented scan's four one-pass variants on float64 (add), float32 (max) and int32 (add)."""
    values64 = rng.normal(size=n)
    flags = rng.random(n) < 0.01
    integers = rng.integers(-1000, 1000, n).astype(np.int32)
    calls = 0
    for op, values in (("add", values64), ("max", values64.astype(np.float32)), ("add", integers)):
        for inclusive in (True, False):
            for reverse in (False, True):
                got = apps.segmented_scan(values, flags, op, inclusive=inclusive, reverse=reverse)
                want = segmented.reference(values, flags, op, inclusive=inclusive, reverse=reverse)
                if not np.allclose(got, want, atol=1e-9 * n):
                    wrong.append(f"segmented_scan {op} {values.dtype} n={n} inclusive={inclusive} reverse={reverse}")
                calls += 1
    return calls


def sorts(n, rng, wrong):
    """The onesweep sort (keys alone, values of another width, 1-, 2-, 4- and 8-byte keys, NaNs and
    signed zeros) and the readable one-bit sort; returns the calls made."""
    keys = rng.integers(-1000, 1000, n).astype(np.int32)
    values = np.arange(n, dtype=np.int32)
    order = np.argsort(keys, kind="stable")
    for sort in (apps.radix_sort, apps.radix_sort_one_bit):
        got_keys, got_values = sort(keys, values)
        if not (np.array_equal(got_keys, keys[order]) and np.array_equal(got_values, values[order])):
            wrong.append(f"{sort.__name__} n={n}")
    floats = rng.normal(size=n).astype(np.float32)
    floats[::7] = np.nan
    floats[::11] = -0.0
    if not np.array_equal(apps.radix_sort(floats).view(np.uint32), np.sort(floats, kind="stable").view(np.uint32)):
        wrong.append(f"radix_sort float32 n={n}")
    for key_dtype, value_dtype in (("int8", "float64"), ("uint16", "int8"), ("uint64", "float64")):
        k = rng.integers(0, 200, n).astype(key_dtype)
        v = rng.normal(size=n).astype(value_dtype)
        got_keys, got_values = apps.radix_sort(cuda.to_device(k), cuda.to_device(v))
        o = np.argsort(k, kind="stable")
        if not (np.array_equal(got_keys.copy_to_host(), k[o]) and np.array_equal(got_values.copy_to_host(), v[o])):
            wrong.append(f"radix_sort {key_dtype} keys, {value_dtype} values n={n}")
    return 6


def sorts_alone(n, rng, wrong):
    """:func:`sorts` (whose onesweep ranks by ballots, ``onesweep.RANK``), and the onesweep sort with
    the lesson's rank by ``match_any_sync`` (``onesweep.warp_digit_rank``) on uint32 and uint64 keys
    with values; returns the calls made."""
    from prefixsum.apps import onesweep

    calls = sorts(n, rng, wrong)
    for key_dtype in ("uint32", "uint64"):
        k = rng.integers(0, 1 << 30, n).astype(key_dtype)
        v = np.arange(n, dtype=np.int32)
        got_keys, got_values = onesweep.sort_device(cuda.to_device(k), cuda.to_device(v), rank=onesweep.warp_digit_rank)
        o = np.argsort(k, kind="stable")
        if not (np.array_equal(got_keys.copy_to_host(), k[o]) and np.array_equal(got_values.copy_to_host(), v[o])):
            wrong.append(f"onesweep rank by match_any_sync {key_dtype} keys n={n}")
        calls += 1
    return calls


def applications(n, rng, wrong, with_sorts=True):
    """Compaction, radix sort (:func:`sorts`; not with ``with_sorts`` False), a linear recurrence,
    the tridiagonal scan and a spline; returns the calls made."""
    a, b = rng.uniform(0.5, 1.0, n), rng.normal(size=n)
    calls = 0
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
    kept = buffer[: int(count.copy_to_host()[0])]  # past the count the buffer is never written: initcheck
    if not np.array_equal(kept.copy_to_host(), x64[mask]):
        wrong.append(f"compact sync=False float64 n={n}")
    calls += 3
    if with_sorts:
        calls += sorts(n, rng, wrong)
    rec = apps.linear_recurrence(a, b)
    want = np.empty(n)
    state = 0.0
    for i in range(n):
        state = a[i] * state + b[i]
        want[i] = state
    if not np.allclose(rec, want, rtol=1e-9, atol=1e-9 * n):
        wrong.append(f"linear_recurrence n={n}")
    calls += 1
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
    return calls


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}; runs on the simulator too")
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)} (default: all)"
    )
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    if set(parts) - set(PARTS):
        raise SystemExit(f"unknown part in --parts {args.parts!r}; the parts are {', '.join(PARTS)}")
    if ps.device_info()["simulator"] and not args.quick:
        raise SystemExit("sanitize_apps.py needs a CUDA GPU (compute-sanitizer); --quick runs it on the simulator")
    rng = np.random.default_rng(17)
    wrong, calls = [], 0
    # A quick run with the part "sort" takes sorts() there alone: once takes its paths, and it is
    # half the run on the simulator.
    with_sorts = not (args.quick and "sort" in parts)
    runs = {
        "user_ops": user_operators,
        "segmented": segmented_scans,
        "sort": sorts_alone,
        "apps": lambda n, rng, wrong: applications(n, rng, wrong, with_sorts),
    }
    for n in QUICK_SIZES if args.quick else SIZES:
        for part in parts:
            calls += runs[part](n, rng, wrong)
        print(f"n={n}: {calls} calls so far, {len(wrong)} wrong", flush=True)
    print("\n".join(wrong) if wrong else f"all results right: {calls} calls checked")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
