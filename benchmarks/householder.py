"""Batched Householder tridiagonalization and symmetric solves on the GPU, against PyTorch.

    python benchmarks/householder.py [--out DIR] [--quick] [--calls]      (on a GPU machine; --quick: tiny, on the
    simulator too)

Batches of 10,000 matrices of n = 16, 32, 64 and 100 of n = 512, float32 and float64, random symmetric positive
definite. ``householder(A)`` and ``solve_symmetric(A, rhs)`` take host arrays, so their times are whole calls (host ->
device copy, kernels, device -> host copy), on the host clock; ``householder (reduction, events)`` is the reduction's
launches (with their output allocations) on a matrix already on the device, queued behind a busy kernel between CUDA
events (:func:`prefixsum.cli.timing.kernel_us`). PyTorch: ``torch.linalg.eigh`` (which starts with the same reduction,
then finds the eigenvalues), ``torch.linalg.solve`` (LU) and Cholesky (``torch.linalg.cholesky_ex``, which does not
synchronise to check the factorization, then ``torch.cholesky_solve``: the fair baseline for a symmetric positive
definite solve, a third of LU's arithmetic) on tensors already on the device, timed the same way on torch's stream; a
call that synchronises (to check for errors) cannot be queued, and the ``timing`` column then says "events, not queued".
Median of ``REPEATS`` (``eigh`` takes seconds at n = 64).

``--calls`` measures instead what a call costs beyond its kernels, for 10,000 x 64 and
100 x 512: ``householder`` and ``solve_symmetric`` as whole calls from device arrays (results
left on the device, synchronized) and from numpy arrays, beside the reduction's kernels; it
writes ``householder_calls.csv``. Every result is checked first: its error relative to the matrix must be at
most ``ERROR_EPS`` x n x eps (``correct``; the script exits with 1 if one is not). Writes
``householder.csv``.
"""

import importlib
import os
import sys

import numpy as np

from prefixsum import tridiag
from prefixsum.cli.metadata import run_metadata
from prefixsum.cli.results import print_table, report_wrong, write_csv
from prefixsum.cli.timing import QUICK_REPEATS, host_us, kernel_us, queued_library, script_arguments

# The module: prefixsum.tridiag's name householder is the function.
reduction = importlib.import_module("prefixsum.tridiag.householder")._tridiagonalize

CASES = ((10000, 16), (10000, 32), (10000, 64), (100, 512))
CALL_CASES = ((10000, 64), (100, 512))  # --calls: the case, and the global-memory path
# --quick tests the script (CI runs it on the simulator): one shared-memory case. The global-memory
# path of n > max_shared_n is O(n^3) a matrix there (two minutes for one 80 x 80); its tests reach it
# with a smaller shared budget (tests/test_householder.py::test_global_memory_path).
QUICK_CASES = ((4, 16),)
REPEATS = 5
# Backward-stable reductions and solves: errors of a few n eps at most on these well-conditioned
# matrices (torch's eigenvalues at n = 512 in float32: 3.6 n eps); a wrong result is off by O(1).
ERROR_EPS = 16


def spd(batch, n, dtype, rng):
    m = rng.normal(size=(batch, n, n))
    return (m @ np.swapaxes(m, 1, 2) / n + np.eye(n)).astype(dtype)


def reduction_error(A, d, e, Q):
    """``max |Q^T A Q - T| / max |A|`` for the reduction ``d, e, Q`` of ``A``."""
    n = A.shape[-1]
    T = np.zeros(A.shape, np.float64)
    idx = np.arange(n)
    T[:, idx, idx] = d
    T[:, idx[1:], idx[:-1]] = e
    T[:, idx[:-1], idx[1:]] = e
    Qd = Q.astype(np.float64)
    return float(np.max(np.abs(np.swapaxes(Qd, 1, 2) @ A.astype(np.float64) @ Qd - T)) / np.max(np.abs(A)))


def solve_error(A, x, rhs):
    """``max |A x - rhs| / max |rhs|``."""
    return float(np.max(np.abs(np.einsum("bij,bj->bi", A.astype(np.float64), x) - rhs)) / np.max(np.abs(rhs)))


def synchronized(call):
    """``call`` followed by a wait for the device: a whole call whose results stay on the device."""
    from numba import cuda

    return lambda: (call(), cuda.synchronize())


def calls(args, rng):
    """The ``--calls`` run: whole calls from device arrays and from numpy arrays beside the
    reduction's kernels, for :data:`CALL_CASES`; writes ``householder_calls.csv``."""
    from numba import cuda

    repeats = QUICK_REPEATS if args.quick else REPEATS
    meta = run_metadata([])
    rows = []
    for dtype in (np.float32, np.float64):
        for batch, n in QUICK_CASES if args.quick else CALL_CASES:
            A = spd(batch, n, dtype, rng)
            rhs = rng.normal(size=(batch, n)).astype(dtype)
            A_dev, rhs_dev = cuda.to_device(A), cuda.to_device(rhs)
            q, d, bands = reduction(A_dev)
            e = bands[: batch * n].copy_to_host().reshape(batch, n)[:, 1:]
            measured = kernel_us(lambda: reduction(A_dev), repeats=repeats)
            error = reduction_error(A, d.copy_to_host(), e, q.copy_to_host())
            timed = [("householder (reduction, events)", measured.us, error, measured.timing)]
            error = reduction_error(A, *(r.copy_to_host() for r in tridiag.householder(A_dev)))
            timed.append(
                (
                    "householder (whole call, device arrays)",
                    host_us(synchronized(lambda: tridiag.householder(A_dev)), repeats=repeats),
                    error,
                    "host clock",
                )
            )
            error = reduction_error(A, *tridiag.householder(A))
            timed.append(
                (
                    "householder (whole call, numpy)",
                    host_us(lambda: tridiag.householder(A), repeats=repeats),
                    error,
                    "host clock",
                )
            )
            error = solve_error(A, tridiag.solve_symmetric(A_dev, rhs_dev).copy_to_host(), rhs)
            timed.append(
                (
                    "solve_symmetric (whole call, device arrays)",
                    host_us(synchronized(lambda: tridiag.solve_symmetric(A_dev, rhs_dev)), repeats=repeats),
                    error,
                    "host clock",
                )
            )
            error = solve_error(A, tridiag.solve_symmetric(A, rhs), rhs)
            timed.append(
                (
                    "solve_symmetric (whole call, numpy)",
                    host_us(lambda: tridiag.solve_symmetric(A, rhs), repeats=repeats),
                    error,
                    "host clock",
                )
            )
            for what, micros, error, timing in timed:
                correct = bool(error <= ERROR_EPS * n * np.finfo(dtype).eps)
                rows.append(
                    {
                        "what": what,
                        "dtype": np.dtype(dtype).name,
                        "batch": batch,
                        "n": n,
                        "median_us": round(micros, 1),
                        "check": f"{error:.1e}",
                        "correct": correct,
                        "timing": timing,
                        **meta,
                    }
                )
                print(
                    f"{what:<44} {np.dtype(dtype).name:<8} {batch:>6} x {n:<4} {micros:>12.1f} us  "
                    f"check {error:.1e}  {timing}{'' if correct else '  WRONG'}",
                    flush=True,
                )
    write_csv(rows, os.path.join(args.out, "householder_calls.csv"))
    return report_wrong(rows, lambda row: f"{row['what']} {row['dtype']} {row['batch']} x {row['n']}")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    whole_calls = "--calls" in argv
    if whole_calls:
        argv.remove("--calls")
    args = script_arguments(argv, f"cases {QUICK_CASES}, two repeats; runs on the simulator too")
    if whole_calls:
        return calls(args, np.random.default_rng(7))
    from numba import cuda

    repeats = QUICK_REPEATS if args.quick else REPEATS
    meta = run_metadata(["torch"])
    torch, stream = queued_library("torch")
    rng = np.random.default_rng(5)
    rows = []

    def add(what, dtype, batch, n, micros, error, timing):
        correct = bool(error <= ERROR_EPS * n * np.finfo(dtype).eps)
        rows.append(
            {
                "what": what,
                "dtype": np.dtype(dtype).name,
                "batch": batch,
                "n": n,
                "median_us": round(micros, 1),
                "check": f"{error:.1e}",
                "correct": correct,
                "timing": timing,
                **meta,
            }
        )
        print(
            f"{what:<34} {np.dtype(dtype).name:<8} {batch:>6} x {n:<4} {micros:>12.1f} us  check {error:.1e}  "
            f"{timing}"
            f"{'' if correct else '  WRONG'}",
            flush=True,
        )

    for dtype in (np.float32, np.float64):
        for batch, n in QUICK_CASES if args.quick else CASES:
            A = spd(batch, n, dtype, rng)
            rhs = rng.normal(size=(batch, n)).astype(dtype)
            error = reduction_error(A, *tridiag.householder(A))
            add(
                "householder (whole call)",
                dtype,
                batch,
                n,
                host_us(lambda: tridiag.householder(A), repeats=repeats),
                error,
                "host clock",
            )
            A_dev = cuda.to_device(A)
            q, d, bands = reduction(A_dev)
            e = bands[: batch * n].copy_to_host().reshape(batch, n)[:, 1:]
            measured = kernel_us(lambda: reduction(A_dev), repeats=repeats)
            add(
                "householder (reduction, events)",
                dtype,
                batch,
                n,
                measured.us,
                reduction_error(A, d.copy_to_host(), e, q.copy_to_host()),
                measured.timing,
            )
            error = solve_error(A, tridiag.solve_symmetric(A, rhs), rhs)
            micros = host_us(lambda: tridiag.solve_symmetric(A, rhs), repeats=repeats)
            add("solve_symmetric (whole call)", dtype, batch, n, micros, error, "host clock")
            if torch is None:
                continue
            At, bt = torch.from_numpy(A).cuda(), torch.from_numpy(rhs).cuda()
            w = torch.linalg.eigvalsh(At).cpu().numpy()
            ref = np.linalg.eigvalsh(A.astype(np.float64))
            measured = kernel_us(lambda: torch.linalg.eigh(At), stream=stream, warmup=1, repeats=repeats)
            add(
                "torch.linalg.eigh",
                dtype,
                batch,
                n,
                measured.us,
                float(np.max(np.abs(w - ref)) / np.max(np.abs(ref))),
                measured.timing,
            )
            error = solve_error(A, torch.linalg.solve(At, bt).cpu().numpy(), rhs)
            measured = kernel_us(lambda: torch.linalg.solve(At, bt), stream=stream, warmup=1, repeats=repeats)
            add("torch.linalg.solve", dtype, batch, n, measured.us, error, measured.timing)

            def cholesky_solve():
                return torch.cholesky_solve(bt[..., None], torch.linalg.cholesky_ex(At).L)[..., 0]

            error = solve_error(A, cholesky_solve().cpu().numpy(), rhs)
            measured = kernel_us(cholesky_solve, stream=stream, warmup=1, repeats=repeats)
            add("torch cholesky_ex + cholesky_solve", dtype, batch, n, measured.us, error, measured.timing)
    write_csv(rows, os.path.join(args.out, "householder.csv"))
    print_table(
        [row for row in rows if row["dtype"] == "float64"],
        ["what", "batch", "n", "median_us", "check", "correct", "timing"],
        title="float64 (median us):",
    )
    return report_wrong(rows, lambda row: f"{row['what']} {row['dtype']} {row['batch']} x {row['n']}")


if __name__ == "__main__":
    sys.exit(main())
