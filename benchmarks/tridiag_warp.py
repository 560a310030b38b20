"""The warp solver's kernels beside hybrid_shared's and cuSPARSE's, at every rows-per-thread (issue 16).

For each batch case (those of ``benchmarks/tridiag.py`` and a few more shapes of up to 512 rows),
float32 and float64: :func:`prefixsum.tridiag.hybrid.run` (the warp solver, at the R that
:func:`prefixsum.tridiag.warp.plan` picks), :func:`~prefixsum.tridiag.warp.run` at every other R
that fits, :func:`~prefixsum.tridiag.hybrid.run_shared` (the hybrid's path before the warp
solver) and cuSPARSE's ``gtsv2StridedBatch`` through CuPy, each queued behind a busy kernel and
timed by CUDA events (:func:`prefixsum.cli.timing.kernel_us`, median of 25), each result's
relative residual checked first (``WRONG`` if above 64 eps or a failure flag is set). Then the
registers per thread of each kernel. A probe, not a committed result: one of its runs on the H100
is quoted in the changelog that README.md held before issue 32 (its git history).

Run: ``python benchmarks/tridiag_warp.py [--quick]`` on a GPU (``--quick``: one tiny case, on the
simulator too).
"""

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import prefixsum  # noqa: E402,F401  (chooses the GPU or the simulator before numba.cuda loads)

# isort: split
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402
from tridiag_cusparse import cusparse_time  # noqa: E402
from tridiag_systems import RESIDUAL_EPS, residual, system  # noqa: E402

from prefixsum.cli.timing import kernel_us, queued_library, script_arguments  # noqa: E402
from prefixsum.tridiag import hybrid, warp  # noqa: E402

CASES = ((512, 512), (4096, 256), (16384, 64), (100000, 16), (65536, 32), (8192, 512), (1000, 100), (8, 300))
QUICK_CASES = ((5, 40),)


def main(argv=None):
    args = script_arguments(argv, f"cases {QUICK_CASES}; runs on the simulator too")
    cupy, cupy_stream = (None, None) if args.quick else queued_library("cupy")
    rng = np.random.default_rng(7)
    wrong = 0
    for dtype in (np.float32, np.float64):
        for batch, n in QUICK_CASES if args.quick else CASES:
            a, b, c, d = system(batch, n, dtype, rng)
            device = [cuda.to_device(v) for v in (a, b, c, d)]
            chosen = warp.plan(batch, n, dtype)[0]
            runs = [(f"hybrid (warp, R={chosen})", lambda x, info: hybrid.run(*device, x, info))]
            runs += [
                (f"warp R={rows}", lambda x, info, rows=rows: warp.run(*device, x, info, rows=rows))
                for rows in warp.ROWS_PER_THREAD
                if rows != chosen and rows * 32 >= n
            ]
            runs.append(("hybrid_shared (run_shared)", lambda x, info: hybrid.run_shared(*device, x, info)))
            for label, run in runs:
                x = cuda.to_device(np.full((batch, n), np.nan, dtype))
                info = cuda.to_device(np.zeros(batch, np.int32))
                run(x, info)
                res = residual(a, b, c, d, x.copy_to_host())
                bad = not res <= RESIDUAL_EPS * np.finfo(dtype).eps or info.copy_to_host().any()
                wrong += bad
                measured = kernel_us(lambda: run(x, info))
                print(
                    f"{np.dtype(dtype).name} {batch:>6} x {n:<4} {label:<28} {measured.us:8.2f} us  "
                    f"residual {res:.1e}  {measured.timing}{'  WRONG' if bad else ''}",
                    flush=True,
                )
            if cupy is not None:
                us, timing, x = cusparse_time(cupy, cupy_stream, a, b, c, d, 25)
                print(
                    f"{np.dtype(dtype).name} {batch:>6} x {n:<4} {'cusparse gtsv2StridedBatch':<28} {us:8.2f} us  "
                    f"residual {residual(a, b, c, d, x):.1e}  {timing}",
                    flush=True,
                )
    if not args.quick:
        for kernel, name in [(warp.KERNELS[rows], f"warp_solve R={rows}") for rows in warp.ROWS_PER_THREAD] + [
            (hybrid.hybrid_shared, "hybrid_shared")
        ]:
            registers = {str(signature[1].dtype): count for signature, count in kernel.get_regs_per_thread().items()}
            print(f"registers a thread, {name}: {registers}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
