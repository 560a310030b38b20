"""One launch each of "lookback" and torch.cumsum (CUB) at one n and dtype, for Nsight Compute.

    ncu --set full -k regex:'lookback|DeviceScanKernel' -c 4 \
        python benchmarks/lookback_ncu.py [--log2 24] [--dtype float32 --dtype float64]

A profile, not a claim (issue 29 asks what limits the look-back scan at 2^24): each scan runs
once at each dtype (numba compiles on the first launch, outside the kernel that ncu profiles).
Every result is checked; exit 1 if one is wrong.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import prefixsum as ps  # noqa: E402  (chooses the GPU before numba.cuda loads)

# isort: split
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum.scans.testing import expected_scan, random_input, wrong_indices  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2", type=int, default=24)
    parser.add_argument("--dtype", action="append", choices=("float32", "float64", "int32", "int64"))
    parser.add_argument("--variant", default="lookback", help="NAME or NAME:opt=value,...")
    options = parser.parse_args(argv)
    from prefixsum.cli.bench import parse_variant
    from prefixsum.cli.timing import gpu_library

    torch = gpu_library("torch")  # None on the simulator: torch.cumsum's row is left out

    name, settings = parse_variant(options.variant)
    algorithm = ps.ALGORITHMS[name]
    resolved = algorithm.resolve_options(settings)
    rng = np.random.default_rng(0)
    wrong = 0
    for dtype in map(np.dtype, options.dtype or ["float32", "float64"]):
        x = random_input(1 << options.log2, "add", dtype, rng)
        expected, allowed = expected_scan(x)
        source, out = cuda.to_device(x), cuda.device_array(x.size, dtype)
        algorithm.run(source, out, "add", True, False, **resolved)
        results = [(options.variant, out.copy_to_host())]
        if torch is not None:
            t = torch.from_numpy(x).cuda()
            y = torch.cumsum(t, 0, dtype=t.dtype)
            torch.cuda.synchronize()
            results.append(("torch.cumsum", y.cpu().numpy()))
        for label, result in results:
            bad = wrong_indices(result, expected, allowed).size
            wrong += bad > 0
            print(f"{label} {dtype.name} n=2^{options.log2}: {'correct' if not bad else f'{bad} WRONG'}", flush=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
