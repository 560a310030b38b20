"""Batched Householder tridiagonalization and symmetric solves on the GPU, against PyTorch.

    python benchmarks/householder.py --out DIR      (on a GPU machine)

Batches of 10,000 matrices of n = 16, 32, 64 and 100 of n = 512, float32 and float64, random
symmetric positive definite. ``householder(A)`` and ``solve_symmetric(A, rhs)`` take host
arrays, so their times are whole calls (host -> device copy, kernels, device -> host copy),
measured on the host; ``reduction_us`` is the reduction kernel alone, timed with CUDA events
on data already on the device. PyTorch: ``torch.linalg.eigh`` (which starts with the same
reduction, then finds the eigenvalues) and ``torch.linalg.solve`` on tensors already on the
device, timed with CUDA events. Every result is checked first. Writes ``householder.csv``.
"""
import argparse
import datetime
import os
import statistics

import numpy as np

import prefixsum as ps
from prefixsum import tridiag
from prefixsum.cli.bench import host_us, torch_events_us, write_csv

CASES = ((10000, 16), (10000, 32), (10000, 64), (100, 512))
REPEATS = 5


def spd(batch, n, dtype, rng):
    m = rng.normal(size=(batch, n, n))
    return (m @ np.swapaxes(m, 1, 2) / n + np.eye(n)).astype(dtype)


def reduction_events(A):
    """The reduction kernel's time: CUDA events around ``_tridiagonalize`` minus the copy of A."""
    import importlib

    from numba import cuda

    module = importlib.import_module("prefixsum.tridiag.householder")
    module._tridiagonalize(A)
    cuda.synchronize()
    start, stop = cuda.event(), cuda.event()
    times = []
    for _ in range(REPEATS):
        start.record()
        cuda.to_device(A)
        stop.record()
        stop.synchronize()
        copy = cuda.event_elapsed_time(start, stop)
        start.record()
        module._tridiagonalize(A)
        stop.record()
        stop.synchronize()
        times.append((cuda.event_elapsed_time(start, stop) - copy) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks")
    args = parser.parse_args()
    import torch

    info = ps.device_info()
    rng = np.random.default_rng(5)
    rows = []

    def add(what, dtype, batch, n, micros, error):
        rows.append({"what": what, "dtype": np.dtype(dtype).name, "batch": batch, "n": n, "median_us": round(micros, 1),
                     "check": f"{error:.1e}", "device": info["name"], "torch": torch.__version__,
                     "date": datetime.date.today().isoformat()})
        print(f"{what:<34} {np.dtype(dtype).name:<8} {batch:>6} x {n:<4} {micros:>12.1f} us  check {error:.1e}", flush=True)

    for dtype in (np.float32, np.float64):
        for batch, n in CASES:
            A = spd(batch, n, dtype, rng)
            rhs = rng.normal(size=(batch, n)).astype(dtype)
            d, e, Q = tridiag.householder(A)
            T = np.zeros_like(A, dtype=np.float64)
            idx = np.arange(n)
            T[:, idx, idx] = d
            T[:, idx[1:], idx[:-1]] = e
            T[:, idx[:-1], idx[1:]] = e
            Qd = Q.astype(np.float64)
            err = float(np.max(np.abs(np.swapaxes(Qd, 1, 2) @ A.astype(np.float64) @ Qd - T)) / np.max(np.abs(A)))
            add("householder (whole call)", dtype, batch, n, host_us(lambda: tridiag.householder(A), repeats=REPEATS), err)
            add("householder (reduction, events)", dtype, batch, n, reduction_events(A), err)
            x = tridiag.solve_symmetric(A, rhs)
            res = float(np.max(np.abs(np.einsum("bij,bj->bi", A.astype(np.float64), x) - rhs)) / np.max(np.abs(rhs)))
            add("solve_symmetric (whole call)", dtype, batch, n, host_us(lambda: tridiag.solve_symmetric(A, rhs), repeats=REPEATS), res)
            At, bt = torch.from_numpy(A).cuda(), torch.from_numpy(rhs).cuda()
            w = torch.linalg.eigvalsh(At).cpu().numpy()
            ref = np.linalg.eigvalsh(A.astype(np.float64))
            add("torch.linalg.eigh", dtype, batch, n, torch_events_us(lambda: torch.linalg.eigh(At), torch, repeats=REPEATS),
                float(np.max(np.abs(w - ref)) / np.max(np.abs(ref))))
            xt = torch.linalg.solve(At, bt).cpu().numpy()
            add("torch.linalg.solve", dtype, batch, n, torch_events_us(lambda: torch.linalg.solve(At, bt), torch, repeats=REPEATS),
                float(np.max(np.abs(np.einsum("bij,bj->bi", A.astype(np.float64), xt) - rhs)) / np.max(np.abs(rhs))))
    write_csv(rows, os.path.join(args.out, "householder.csv"))


if __name__ == "__main__":
    main()
