"""The hybrid's shared-memory kernel compiled with other options, timed side by side (issue 16).

Nsight Compute shows ``hybrid_shared`` bound by instruction issue (SM throughput 70% at 4096 x 256
float32, DRAM 7%) with 66 (float32) or 86 (float64) registers a thread, which cap a SM at three
blocks (occupancy 28-38%). This script recompiles the kernel's Python source with ``fastmath``
(approximate division and reciprocal) and with register caps, and times each on the batch cases
of ``benchmarks/tridiag.py`` (events, queued; the residual checked), so that a change to the
package is chosen from measurements. A probe, not a claim: the claims come from
``benchmarks/tridiag.py``.

Run: ``python benchmarks/tridiag_variants.py [--quick]`` on a GPU.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import prefixsum  # noqa: E402,F401  (chooses the GPU or the simulator before numba.cuda loads)

# isort: split
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum.cli.timing import kernel_us, require_gpu, script_arguments  # noqa: E402
from prefixsum.tridiag import hybrid  # noqa: E402

VARIANTS = {
    "as shipped": {},
    "fastmath": {"fastmath": True},
    "max_registers=40": {"max_registers": 40},
    "max_registers=48": {"max_registers": 48},
    "max_registers=56": {"max_registers": 56},
    "fastmath, max_registers=48": {"fastmath": True, "max_registers": 48},
    "fastmath, max_registers=56": {"fastmath": True, "max_registers": 56},
}
CASES = ((512, 512), (4096, 256), (16384, 64))


def main(argv=None):
    args = script_arguments(argv, "one small case; runs on the simulator too")
    require_gpu(args.quick)
    rng = np.random.default_rng(3)
    variants = {"as shipped": {}} if args.quick else VARIANTS  # the simulator takes no compile options
    kernels = {name: cuda.jit(**options)(hybrid.hybrid_shared.py_func) for name, options in variants.items()}
    for dtype in (np.float32, np.float64):
        for batch, n in ((4, 32),) if args.quick else CASES:
            a, c = rng.uniform(-1, 1, (2, batch, n))
            b = np.abs(a) + np.abs(c) + 1 + rng.uniform(0, 1, (batch, n))
            d = rng.normal(size=(batch, n))
            host = [v.astype(dtype) for v in (a, b, c, d)]
            device = [cuda.to_device(v) for v in host]
            x, info = cuda.device_array((batch, n), dtype), cuda.to_device(np.zeros(batch, np.int32))
            blocks, threads, shared, m, per_block, lanes = hybrid.plan(batch, n, 1, dtype)
            a64, b64, c64, d64 = (v.astype(np.float64) for v in host)
            for name, kernel in kernels.items():

                def launch():
                    kernel[blocks, threads, 0, shared](*device, x, info, 1, m, per_block, lanes)

                launch()
                got = x.copy_to_host().astype(np.float64)
                r = b64 * got - d64
                r[:, 1:] += a64[:, 1:] * got[:, :-1]
                r[:, :-1] += c64[:, :-1] * got[:, 1:]
                residual = np.abs(r).max() / np.abs(d64).max()
                registers = 0 if args.quick else max(kernel.get_regs_per_thread().values())  # one overload per dtype
                us = kernel_us(launch).us
                print(
                    f"{np.dtype(dtype).name} {batch:>5} x {n:<4} {name:<28} {us:8.2f} us  {registers:3d} registers  "
                    f"residual {residual:.1e}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
