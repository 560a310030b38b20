"""Speed of :mod:`prefixsum.sim` against numba's stock CUDA simulator, side by side.

Every kernel runs on the same inputs in three or four ways: numba's stock simulator as it
comes, the stock simulator with ``sys.setswitchinterval(1e-4)`` during the launch (the best known
tuning of it), with ``--before PATH`` the prefixsum.sim of another checkout (e.g. a worktree at
``main``, to measure what a change costs: run in a child process, in ``--rounds`` rounds that
alternate with this checkout's runs), and this checkout's prefixsum.sim (with its default
device model: ``resident_blocks`` blocks at once). The results must agree; the times (best of
``--repeat`` runs a round for the fast runs, one run of each stock variant; wall clock, and for
the two prefixsum.sim the process's CPU time too, which a busy shared machine disturbs less:
``now_vs_before_cpu`` compares those) are written to ``sim_speed.csv`` under ``--out`` (with
:func:`prefixsum.cli.timing.run_metadata`: the CPU is what it measures) and printed as a table.

Run: ``python benchmarks/sim_speed.py [--out DIR] [--quick] [--before PATH]`` on any machine:
CPU only, the GPU is not used (about a minute on two cores, mostly the stock runs; ``--quick``:
512 elements and a 32 x 32 transpose, seconds, to test the script).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
# Runs from a checkout without installing the package: this one, or the one --package names (the
# child process that times another checkout's simulator).
_PACKAGE = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--package=")), None)
sys.path.insert(0, _PACKAGE or str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from numba import cuda, float32  # noqa: E402

from prefixsum import sim  # noqa: E402
from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.cli.results import print_table, write_csv  # noqa: E402
from prefixsum.cli.timing import default_out  # noqa: E402

TPB = 256
N = 4096
SIDE = 64  # transpose: 64 x 64 matrix in 16 x 16 blocks
QUICK_N = 512
QUICK_SIDE = 32


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


@cuda.jit
def block_scan(x, out):
    buf = cuda.shared.array((2, TPB), float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    buf[0, t] = x[i]
    cuda.syncthreads()
    src = 0
    d = 1
    while d < TPB:
        v = buf[src, t]
        if t >= d:
            v += buf[src, t - d]
        buf[1 - src, t] = v
        src = 1 - src
        cuda.syncthreads()
        d *= 2
    out[i] = buf[src, t]


@cuda.jit(device=True)
def combine(a, b):
    return a + b


@cuda.jit
def ladder_scan(x, out):
    rungs = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    rungs[t] = x[i]
    cuda.syncthreads()
    phase = 1
    while phase < TPB:
        if t & phase:
            rungs[t] = combine(rungs[(t & ~(phase - 1)) - 1], rungs[t])
        cuda.syncthreads()
        phase <<= 1
    out[i] = rungs[t]


@cuda.jit
def block_reduce(x, out):
    part = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    part[t] = x[cuda.blockIdx.x * TPB + t]
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            part[t] += part[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = part[0]


@cuda.jit
def transpose(a, out):
    tile = cuda.shared.array((16, 17), float32)
    x, y = cuda.grid(2)
    tile[cuda.threadIdx.y, cuda.threadIdx.x] = a[y, x]
    cuda.syncthreads()
    ox = cuda.blockIdx.y * 16 + cuda.threadIdx.x
    oy = cuda.blockIdx.x * 16 + cuda.threadIdx.y
    out[oy, ox] = tile[cuda.threadIdx.x, cuda.threadIdx.y]


def cases(n=N, side=SIDE):
    """Yield (name, kernel, launch configuration, arguments, index of the output argument,
    barriers per block, elements) for ``n`` elements (a multiple of ``TPB``) and a ``side`` x
    ``side`` transpose (a multiple of 16)."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 10, n).astype(np.float32)
    blocks = n // TPB
    yield "map (axpy)", axpy, (blocks, TPB), (np.float32(2), x, x + 1, np.zeros_like(x)), 3, 0, n
    yield "block scan (Hillis-Steele)", block_scan, (blocks, TPB), (x, np.zeros_like(x)), 1, 9, n
    yield ("ladder scan (device function)", ladder_scan, (blocks, TPB), (x, np.zeros_like(x)), 1, 9, n)
    yield "block reduce", block_reduce, (blocks, TPB), (x, np.zeros(blocks, np.float32)), 1, 9, n
    a = rng.random((side, side), dtype=np.float32)
    yield (
        "transpose (2-D blocks)",
        transpose,
        ((side // 16, side // 16), (16, 16)),
        (a, np.zeros_like(a)),
        1,
        1,
        a.size,
    )


def timed(kernel, config, args, out_index, *, ours, switch=None):
    """``(seconds, CPU seconds, output)`` of one launch, in our simulator or the stock one.

    The CPU seconds are this process's: for prefixsum.sim, which runs every CUDA thread on the
    launching OS thread, they leave out the time other processes take on a shared machine.
    """
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    previous = sys.getswitchinterval()
    if switch is not None:
        sys.setswitchinterval(switch)
    try:
        with sim.enabled(ours):
            start, cpu = time.perf_counter(), time.process_time()
            kernel[config](*args)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        sys.setswitchinterval(previous)
    return seconds, cpu, args[out_index]


def ours_only(n, side, repeat, path=None):
    """Time this process's prefixsum.sim on every case: ``{"seconds<i>", "cpu<i>", "out<i>"}``,
    the best of ``repeat`` runs of case ``i`` and its output; also saved to ``path`` if given."""
    saved = {}
    for i, (_, kernel, config, args, out_index, _, _) in enumerate(cases(n, side)):
        timed(kernel, config, args, out_index, ours=True)  # warm-up: imports, first calls
        runs = [timed(kernel, config, args, out_index, ours=True) for _ in range(repeat)]
        saved[f"seconds{i}"] = min(r[0] for r in runs)
        saved[f"cpu{i}"] = min(r[1] for r in runs)
        saved[f"out{i}"] = runs[0][2]
    if path:
        np.savez(path, **saved)
    return saved


def before(checkout, n, side, repeat):
    """:func:`ours_only` for the prefixsum.sim of ``checkout``, in a child process."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "before.npz")
        command = [sys.executable, __file__, f"--package={checkout}", "--ours-only", path, "--repeat", str(repeat)] + (
            ["--quick"] if (n, side) == (QUICK_N, QUICK_SIDE) else []
        )
        subprocess.run(command, check=True)
        with np.load(path) as saved:
            return dict(saved)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of prefixsum.sim per round (best kept)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="with --before: rounds of timing the other checkout, then this one"
    )
    parser.add_argument("--out", default=default_out())
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_N} elements, a {QUICK_SIDE} x {QUICK_SIDE} transpose"
    )
    parser.add_argument("--before", metavar="PATH", help="another checkout whose prefixsum.sim to time as well")
    parser.add_argument("--package", help=argparse.SUPPRESS)  # read before the imports, above
    parser.add_argument("--ours-only", metavar="NPZ", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if not sim.install():
        sys.exit("numba's CUDA simulator is not selected (NUMBA_ENABLE_CUDASIM=0)")
    n, side = (QUICK_N, QUICK_SIDE) if options.quick else (N, SIDE)
    if options.ours_only:
        ours_only(n, side, options.repeat, options.ours_only)
        return
    meta = run_metadata()
    stock = []
    for name, kernel, config, args, out_index, barriers, elements in cases(n, side):
        stock_s, _, expected = timed(kernel, config, args, out_index, ours=False)
        switch_s, _, switch_out = timed(kernel, config, args, out_index, ours=False, switch=1e-4)
        np.testing.assert_array_equal(switch_out, expected)
        stock.append((name, config, barriers, elements, stock_s, switch_s, expected))
        print(f"done, stock: {name}", file=sys.stderr)
    # Alternate the two checkouts, so that a change in the machine's load hits both alike.
    earlier, ours = [], []
    for _ in range(options.rounds if options.before else 1):
        if options.before:
            earlier.append(before(options.before, n, side, options.repeat))
        ours.append(ours_only(n, side, options.repeat))
    rows = []
    for i, (name, config, barriers, elements, stock_s, switch_s, expected) in enumerate(stock):
        for saved in earlier + ours:
            np.testing.assert_array_equal(saved[f"out{i}"], expected)
        ours_s = min(float(saved[f"seconds{i}"]) for saved in ours)
        grid, block = config
        row = {
            "kernel": name,
            "elements": elements,
            "threads_per_block": int(np.prod(block)),
            "blocks": int(np.prod(grid)),
            "barriers_per_block": barriers,
            "resident_blocks": min(sim.DEFAULT_RESIDENT_BLOCKS, int(np.prod(grid))),
            "stock_s": round(stock_s, 4),
            "stock_switch_1e-4_s": round(switch_s, 4),
            "prefixsum_sim_s": round(ours_s, 4),
            "speedup_vs_stock": round(stock_s / ours_s, 1),
            "speedup_vs_switch": round(switch_s / ours_s, 1),
        }
        if earlier:
            before_cpu = min(float(saved[f"cpu{i}"]) for saved in earlier)
            ours_cpu = min(float(saved[f"cpu{i}"]) for saved in ours)
            row.update(
                {
                    "before_s": round(min(float(saved[f"seconds{i}"]) for saved in earlier), 4),
                    "before_cpu_s": round(before_cpu, 4),
                    "prefixsum_sim_cpu_s": round(ours_cpu, 4),
                    "now_vs_before_cpu": round(ours_cpu / before_cpu, 2),
                }
            )
        rows.append({**row, **meta})
    write_csv(rows, os.path.join(options.out, "sim_speed.csv"))
    print_table(rows, [key for key in rows[0] if key not in meta])


if __name__ == "__main__":
    main()
