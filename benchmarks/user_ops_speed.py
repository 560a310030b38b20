"""User operators and segmented scans at speed: the look-back scan against torch's formulations.

    python benchmarks/user_ops_speed.py [--out DIR] [--quick] [--builtin-only --tree LABEL]

Inputs on the device as torch tensors (``ps.scan`` and ``apps.segmented_scan`` take them);
device time by CUPTI (:func:`prefixsum.cli.cupti.cupti_us`: every kernel of a call summed,
median of the calls), whole calls on the host clock, synchronised (:func:`prefixsum.cli.timing.host_us`):

* ``builtin``: ``ps.scan`` with the built-in add on 2^24 float32 and int32 (``lookback``) against
  CUB's ``DeviceScan::InclusiveSum`` (``cuda.compute``, temporary storage kept, :mod:`cub_rows`)
  and ``torch.cumsum``; run with ``--builtin-only --tree main`` on the code before issue 30, these
  rows show that built-in operators kept their speed when the kernels learned tuples;
* ``recurrence``: ``x[i] = a[i] x[i-1] + b[i]`` as ``ps.scan((a, b), affine)`` on ``lookback``
  (what "auto" picks), ``hierarchical`` and ``blelloch`` (the earlier "auto"), against torch's
  formulation of the same recurrence, ``P = cumprod(a); x = P * cumsum(b / P)`` (four kernels,
  exact in real numbers, inaccurate in floats once P spans many decades: the column
  ``max_rel_error`` is against a float64 loop on the host);
* ``segmented``: ``apps.segmented_scan`` (add: the four variants; max: inclusive) against torch's
  segmented inclusive sum ``c = cumsum(x); s = nonzero(flags)[cumsum(flags) - 1]; c - c[s] + x[s]``
  (torch and CuPy have no segmented scan; this is the usual formulation, exact for integers,
  rounding like the whole array's running sum in floats: ``max_rel_error`` is relative to it)
  and against ``torch.cumsum`` of the whole array, which does less work than any segmented scan
  (a lower bound, not a competitor), and ``torch.cummax`` of it (max); CUB has no segmented scan:
  its nearest twin, ``DeviceSegmentedReduce::Sum`` (one total per segment, from the heads' offsets),
  is timed beside as another lower bound.

CUB's rows are left out with a note where ``cuda.compute`` cannot run. The user operator on
pairs (the recurrence) has no CUB row: ``cuda.compute`` scans a struct with a Python operator
compiled by ``numba-cuda-mlir``, whose wheel (71 MB) does not fit the GPU machine's carried files,
or with a C++ operator on a ``gpu_struct``, not written here.

Writes ``user_ops_speed.csv``; exit status 1 if a result of ours is wrong.
"""

import os
import sys

import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

# isort: split

import cub_rows  # noqa: E402  (beside this script)
import numpy as np  # noqa: E402
from numba import cuda, njit  # noqa: E402

from prefixsum.cli import cupti  # noqa: E402
from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.cli.results import print_table, report_wrong, write_csv  # noqa: E402
from prefixsum.cli.timing import QUICK_REPEATS, gpu_library, host_us, script_arguments  # noqa: E402
from prefixsum.scans.registry import lookup  # noqa: E402

REPEATS = 20
SIZES = (1 << 20, 1 << 24)
QUICK_SIZES = (3000,)


@cuda.jit(device=True)
def affine(p, q):
    return (p[0] * q[0], q[0] * p[1] + q[1])


@njit(cache=False)
def recurrence(a, b):
    """x[i] = a[i] x[i-1] + b[i] from x[-1] = 0, in float64 on the host."""
    x = np.empty(a.size)
    state = 0.0
    for i in range(a.size):
        state = a[i] * state + b[i]
        x[i] = state
    return x


def sum_by_formulation(x, flags):
    """The segmented inclusive sum of integers by numpy: the running sum less the sum before each segment."""
    total = np.cumsum(x, dtype=x.dtype)
    start = np.maximum.accumulate(np.where(flags, np.arange(x.size), 0))
    return total - total[start] + x[start]


def relative_error(got, want):
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / max(np.max(np.abs(want)), 1e-300))


def main(argv=None):
    args = script_arguments(
        argv,
        f"n = {QUICK_SIZES}; no CUPTI; runs on the simulator too",
        more=lambda p: (
            p.add_argument(
                "--builtin-only",
                action="store_true",
                help="only the built-in rows (the code before issue 30 has no more)",
            ),
            p.add_argument(
                "--tree",
                default="this",
                help="the code measured, for the rows' column tree (this: the commit the CSV is committed with)",
            ),
        ),
    )
    torch = gpu_library("torch")
    if torch is None and not args.quick:
        raise SystemExit("user_ops_speed.py compares with torch: install it on the GPU machine")
    repeats = QUICK_REPEATS if args.quick else REPEATS
    meta = run_metadata(["torch", "cub"])
    rows = []

    def add(task, method, dtype, n, call, correct, error=float("nan")):
        device = float("nan") if args.quick else cupti.cupti_us(call, warmup=2, repeats=repeats)
        whole = host_us(lambda: (call(), cuda.synchronize()), repeats=repeats)
        rows.append(
            {
                "task": task,
                "method": method,
                "dtype": dtype,
                "n": n,
                "device_us": round(device, 1),
                "whole_us": round(whole, 1),
                "max_rel_error": f"{error:.1e}",
                "correct": bool(correct),
                "tree": args.tree,
                "timing": "device: CUPTI, kernels summed, median; whole: host clock, synchronised",
                **meta,
            }
        )
        print(
            f"{task:<10} {method:<48} {dtype:<8} {n:>9} device {device:>9.1f} us  whole {whole:>9.1f} us"
            f"{'' if correct else '  WRONG'}",
            flush=True,
        )

    device = (lambda a: torch.from_numpy(a).cuda()) if torch else cuda.to_device

    def to_host(t):
        return t.cpu().numpy() if hasattr(t, "cpu") else t.copy_to_host()

    rng = np.random.default_rng(30)
    try:
        for dtype in ("float32", "int32"):  # built-in operators: the speed before and after
            n = QUICK_SIZES[0] if args.quick else 1 << 24
            x = (rng.integers(-100, 100, n) if dtype == "int32" else rng.normal(size=n)).astype(dtype)
            dx = device(x)
            got = to_host(ps.scan(dx))
            ok = (
                np.array_equal(got, np.cumsum(x, dtype=dtype))
                if dtype == "int32"
                else np.allclose(got, np.cumsum(x, dtype=np.float64), atol=1e-5 * np.sqrt(n))
            )
            add("builtin", f"ps.scan (auto: {lookup('auto', n).name})", dtype, n, lambda: ps.scan(dx), ok)
            target = torch.empty_like(dx) if torch else cuda.device_array(n, dtype)
            cub = cub_rows.attempt("inclusive sum", lambda: cub_rows.scan(dx, target))
            if cub is not None:
                cub()
                got = to_host(target)
                ok = (
                    np.array_equal(got, np.cumsum(x, dtype=dtype))
                    if dtype == "int32"
                    else np.allclose(got, np.cumsum(x, dtype=np.float64), atol=1e-5 * np.sqrt(n))
                )
                add("builtin", "CUB inclusive sum (cuda.compute)", dtype, n, cub, ok)
            if torch:
                add("builtin", "torch.cumsum", dtype, n, lambda: torch.cumsum(dx, 0, dtype=dx.dtype), True)
        if not args.builtin_only:
            run_recurrences(torch, device, to_host, args.quick, rng, add)
            run_segmented(torch, device, to_host, args.quick, rng, add)
    finally:  # what was measured is kept even if a later part fails
        if rows:
            write_csv(rows, os.path.join(args.out, "user_ops_speed.csv"))
    print_table(
        rows,
        ["task", "method", "dtype", "n", "device_us", "whole_us", "max_rel_error", "correct"],
        title="device time (CUPTI) and whole calls, median us:",
    )
    return report_wrong(rows, lambda row: f"{row['task']} {row['method']} {row['dtype']} n={row['n']}")


def run_recurrences(torch, device, to_host, quick, rng, add):
    """``ps.scan((a, b), affine)`` on three algorithms against torch's cumprod/cumsum formulation."""
    for n in QUICK_SIZES if quick else SIZES:
        for dtype in ("float32", "float64"):
            # a close to 1 so that torch's cumprod stays within float32's range at 2^24 (P > 1e-15)
            a = rng.uniform(1 - 4e-6 * (1 << 24) / n, 1.0, n).astype(dtype)
            b = rng.normal(size=n).astype(dtype)
            want = recurrence(a.astype(np.float64), b.astype(np.float64))
            da, db = device(a), device(b)
            for algorithm in ("lookback", "hierarchical", "blelloch"):

                def call(algorithm=algorithm):
                    return ps.scan((da, db), affine, identity=(1.0, 0.0), algorithm=algorithm)

                error = relative_error(to_host(call()[1]), want)
                add(
                    "recurrence",
                    f"ps.scan((a, b), affine) {algorithm}",
                    dtype,
                    n,
                    call,
                    error < (1e-3 if dtype == "float32" else 1e-9),
                    error,
                )
            if torch:

                def formulation():
                    product = torch.cumprod(da, 0)
                    return product * torch.cumsum(db / product, 0)

                error = relative_error(to_host(formulation()), want)
                add("recurrence", "torch: cumprod(a) * cumsum(b / cumprod(a))", dtype, n, formulation, True, error)


def run_segmented(torch, device, to_host, quick, rng, add):
    """``apps.segmented_scan`` against torch's segmented sum and the unsegmented scans."""
    from prefixsum import apps
    from prefixsum.apps import segmented

    for n in QUICK_SIZES if quick else SIZES:
        flags = rng.random(n) < 0.01  # segments of 100 elements on average
        flags[0] = True
        dflags = device(flags.astype(np.int32))
        for dtype in ("float32", "int32"):
            x = (rng.integers(-5, 6, n) if dtype == "int32" else rng.normal(size=n)).astype(dtype)
            dx = device(x)
            for op, inclusive, reverse in (
                ("add", True, False),
                ("add", False, False),
                ("add", True, True),
                ("add", False, True),
                ("max", True, False),
            ):

                def call(op=op, inclusive=inclusive, reverse=reverse):
                    return apps.segmented_scan(dx, dflags, op, inclusive=inclusive, reverse=reverse)

                got = to_host(call())
                if n <= 1 << 20:  # numpy segment by segment; at 2^24 the integer sums against the formulation below
                    want = segmented.reference(x, flags, op, inclusive=inclusive, reverse=reverse)
                    ok = (
                        np.array_equal(got, want)
                        if dtype == "int32" or op == "max"
                        else np.allclose(got, want, atol=1e-4)
                    )
                elif dtype == "int32" and op == "add" and not reverse:
                    ok = np.array_equal(got, sum_by_formulation(x, flags) - (0 if inclusive else x))
                else:
                    ok = "checked at 2^20 only"
                variant = f"{'inclusive' if inclusive else 'exclusive'}{' reverse' if reverse else ''}"
                add("segmented", f"apps.segmented_scan {op} {variant}", dtype, n, call, ok)
            if torch:
                tflags = dflags.bool()

                def torch_segmented():  # each element's segment head by a cumsum of the flags, then a gather
                    heads = torch.nonzero(tflags).squeeze(1)
                    start = heads[torch.cumsum(dflags, 0) - 1]
                    total = torch.cumsum(dx, 0, dtype=dx.dtype)
                    return total - total[start] + dx[start]

                got, want = to_host(torch_segmented()), sum_by_formulation(x, flags)
                # exact for integers; in floats the difference of running sums rounds like their magnitude
                error = float(np.max(np.abs(got.astype(np.float64) - want)))
                scale = float(np.max(np.abs(np.cumsum(x, dtype=np.float64))))
                ok = error == 0 if dtype == "int32" else error <= 64 * np.finfo(np.float32).eps * max(scale, 1.0)
                add(
                    "segmented",
                    "torch: cumsum of flags, nonzero, gather, cumsum",
                    dtype,
                    n,
                    torch_segmented,
                    ok,
                    error / max(scale, 1.0),
                )
                add(
                    "segmented",
                    "torch.cumsum (unsegmented: a lower bound)",
                    dtype,
                    n,
                    lambda: torch.cumsum(dx, 0, dtype=dx.dtype),
                    True,
                )
                add(
                    "segmented",
                    "torch.cummax (unsegmented: a lower bound)",
                    dtype,
                    n,
                    lambda: torch.cummax(dx, 0).values,
                    True,
                )
            heads = np.flatnonzero(flags)
            starts, ends = device(heads.astype(np.int64)), device(np.append(heads[1:], n).astype(np.int64))
            totals = (
                torch.empty(heads.size, dtype=dx.dtype, device=dx.device)
                if torch
                else cuda.device_array(heads.size, dtype)
            )
            cub = cub_rows.attempt("segmented sum", lambda: cub_rows.segmented_sum(dx, totals, starts, ends))
            if cub is not None:
                cub()
                want = np.add.reduceat(x.astype(np.float64), heads)
                got = to_host(totals)
                ok = np.array_equal(got, want.astype(dtype)) if dtype == "int32" else np.allclose(got, want, atol=1e-3)
                add(
                    "segmented",
                    "CUB segmented sum (DeviceSegmentedReduce: totals only, a lower bound)",
                    dtype,
                    n,
                    cub,
                    ok,
                )


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    os._exit(status)  # skip the teardown after torch.profiler (see compaction_rows.exit_skipping_teardown)
