"""Chapter 11's applications on the GPU: compaction, radix sort and cubic splines against libraries.

    python benchmarks/applications.py [--out DIR] [--quick]   (on a GPU machine; --quick: tiny, on the simulator too)

Whole calls on the host clock, synchronised (:func:`prefixsum.cli.timing.host_us`), inputs already
on the device (numba, torch or CuPy arrays; numpy for scipy), median of a few repeats (a call
that takes over a second, such as scipy's evaluation at 2^22 points, is timed once):

* compaction of 2^20..2^26 float32, int32 and float64 with half the flags set, and the indices
  of the kept flags: ``prefixsum.apps.compact`` and ``compact_indices`` (one pass) against
  ``x[mask]``, ``nonzero`` and ``flatnonzero`` in torch and CuPy, and CUB's select through
  ``cuda.compute``, with the device time of each call by CUPTI (column ``device_us``;
  :mod:`compaction_rows`);
* sorting 2^20..2^26 uint32 and float32 keys, alone and with int32 values:
  ``prefixsum.apps.radix_sort`` (onesweep) against CUB's ``DeviceRadixSort`` through
  ``cuda.compute``, ``torch.sort(stable=True)`` and ``cupy.sort`` (CUB radix sorts behind the
  libraries' dispatch), with the device time by CUPTI, and the readable one-bit sort at one
  size (:mod:`sort_rows`);
* a natural cubic spline through 2^20 knots, built (``cubic_spline``: PCR solve plus numpy
  coefficients) and evaluated at 2^22 points, against ``scipy.interpolate.CubicSpline`` on the
  CPU and ``cupyx.scipy.interpolate.CubicSpline``.

Every result is checked against numpy/scipy before it is timed (``correct``; exit status 1 if
one is not). CUB's rows are left out with a note where ``cuda.compute`` cannot run (the
simulator; not installed: it comes with the ``bench`` extra). Writes ``applications.csv``
(CUB's version in column ``cub``).
"""

import os

import numpy as np  # noqa: E402
from compaction_rows import exit_skipping_teardown, run_compaction  # noqa: E402  (beside this script)
from sort_rows import run_sorts  # noqa: E402

import prefixsum as ps  # noqa: F401  (first: it chooses the GPU or the simulator before numba.cuda loads)
from prefixsum import apps  # noqa: E402
from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.cli.results import print_table, report_wrong, write_csv  # noqa: E402
from prefixsum.cli.timing import HOST_WARMUP, QUICK_REPEATS, gpu_library, host_us, script_arguments  # noqa: E402

REPEATS = 7  # whole calls of tens of milliseconds: a few repeats give a steady median
SLOW_S = 1.0  # a call that takes longer than this (scipy on 2^22 points, cupyx's sparse solve) is timed once
SIZES = {"knots": 1 << 20, "points": 1 << 22}
QUICK_SIZES = {"knots": 200, "points": 500}


def timed(call, repeats):
    """:func:`host_us` of ``call``, or the first call's time alone when that took over :data:`SLOW_S`
    or when it is all :func:`host_us` would do (one call, no warm-up: a quick run on the simulator)."""
    first = host_us(call, warmup=0, repeats=1)
    return first if first > SLOW_S * 1e6 or (repeats, HOST_WARMUP) == (1, 0) else host_us(call, repeats=repeats)


def main(argv=None):
    args = script_arguments(argv, f"sizes {QUICK_SIZES}, {QUICK_REPEATS} repeats; runs on the simulator too")
    from numba import cuda

    repeats = QUICK_REPEATS if args.quick else REPEATS
    sizes = QUICK_SIZES if args.quick else SIZES
    meta = run_metadata(["torch", "cupy", "scipy", "cub"])
    torch, cupy = gpu_library("torch"), gpu_library("cupy")
    rng = np.random.default_rng(10)
    rows = []

    def add(task, method, dtype, n, micros, correct, device_us=float("nan")):
        rows.append(
            {
                "task": task,
                "method": method,
                "dtype": dtype,
                "n": n,
                "median_us": round(micros, 1),
                "device_us": round(device_us, 1),
                "correct": bool(correct),
                "timing": "host clock, synchronised; device_us: CUPTI (torch.profiler), kernels and copies",
                **meta,
            }
        )
        print(
            f"{task:<10} {method:<42} {dtype:<8} {n:>9} {micros:>12.1f} us  device {device_us:>10.1f} us"
            f"{'' if correct else '  WRONG'}",
            flush=True,
        )

    try:
        run_tasks(cuda, torch, cupy, sizes, repeats, rng, add)
    finally:  # what was measured is kept even if a later task fails or the run is cut short
        write_csv(rows, os.path.join(args.out, "applications.csv"))
    print_table(
        rows,
        ["task", "method", "dtype", "n", "median_us", "device_us", "correct"],
        title="whole calls (median us) and their device time:",
    )
    return report_wrong(rows, lambda row: f"{row['task']} {row['method']} {row['dtype']} n={row['n']}")


def run_tasks(cuda, torch, cupy, sizes, repeats, rng, add):
    """Time every task, calling ``add(task, method, dtype, n, micros, correct)`` for each row."""
    run_compaction(cuda, torch, cupy, sizes is QUICK_SIZES, repeats, rng, add, timed)

    run_sorts(cuda, torch, cupy, sizes is QUICK_SIZES, repeats, rng, add, timed)

    # Cubic splines.
    n, m = sizes["knots"], sizes["points"]
    knots = np.cumsum(rng.uniform(0.5, 1.5, n))
    values = np.sin(knots / 10) + rng.normal(size=n) * 0.01
    points = rng.uniform(knots[0], knots[-1], m)
    try:
        import scipy.interpolate
    except ImportError as error:
        print(f"scipy: skipped ({error}); the splines are checked against cupyx")
        scipy = None
    spline = apps.cubic_spline(knots, values)
    ours = spline(points)
    expected = []
    close = lambda got: bool(np.allclose(got, expected[0] if expected else ours, atol=1e-9))  # noqa: E731
    if scipy:
        reference = scipy.interpolate.CubicSpline(knots, values, bc_type="natural")
        expected.append(reference(points))
    dpoints = cuda.to_device(points)
    add(
        "spline",
        "prefixsum cubic_spline (build)",
        "float64",
        n,
        timed(lambda: apps.cubic_spline(knots, values), repeats=repeats),
        close(ours),
    )
    add(
        "spline",
        "prefixsum evaluate (points)",
        "float64",
        m,
        timed(lambda: (spline(dpoints), cuda.synchronize()), repeats=repeats),
        close(ours),
    )
    if scipy:
        add(
            "spline",
            "scipy CubicSpline (build, CPU)",
            "float64",
            n,
            timed(lambda: scipy.interpolate.CubicSpline(knots, values, bc_type="natural"), repeats=repeats),
            True,
        )
        add(
            "spline",
            "scipy evaluate (points, CPU)",
            "float64",
            m,
            timed(lambda: reference(points), repeats=repeats),
            True,
        )
    if cupy:
        try:
            from cupyx.scipy.interpolate import CubicSpline as CupySpline
        except ImportError as error:
            print(f"cupyx CubicSpline: skipped ({error})")
        else:
            cknots, cvalues, cpoints = cupy.asarray(knots), cupy.asarray(values), cupy.asarray(points)
            theirs = CupySpline(cknots, cvalues, bc_type="natural")
            ok = close(cupy.asnumpy(theirs(cpoints)))
            add(
                "spline",
                "cupyx CubicSpline (build)",
                "float64",
                n,
                timed(
                    lambda: (CupySpline(cknots, cvalues, bc_type="natural"), cupy.cuda.Device().synchronize()),
                    repeats=repeats,
                ),
                ok,
            )
            add(
                "spline",
                "cupyx evaluate (points)",
                "float64",
                m,
                timed(lambda: (theirs(cpoints), cupy.cuda.Device().synchronize()), repeats=repeats),
                ok,
            )


if __name__ == "__main__":
    exit_skipping_teardown(main())
