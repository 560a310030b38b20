"""``method="pivoting"`` launched a few times per shape, for a profiler to watch (GPU only).

    ncu --section SpeedOfLight --section Occupancy -k regex:"_rows|_pairs" python benchmarks/profile_pivoting.py
    16384x64 1x1048576

Solves random indefinite float32 systems (a, b, c uniform in [-1, 1]) of each BATCHxN shape
(float64 with ``--float64``) three times with :func:`prefixsum.tridiag.pivoting.run` (the first
call compiles) and prints each shape's path (:func:`~prefixsum.tridiag.pivoting.plan`: the pairs
of a chunk, 0 for one thread per system; whether levels follow). No timing of its own:
``benchmarks/tridiag.py`` measures; this gives Nsight Compute or Nsight Systems the launches.
"""

import argparse
import sys

import numpy as np

import prefixsum as ps
from prefixsum.tridiag import pivoting


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="+", help="BATCHxN")
    parser.add_argument("--float64", action="store_true")
    args = parser.parse_args(argv)
    if ps.device_info()["simulator"]:
        raise SystemExit("profile_pivoting.py is for a profiler on a GPU")
    from numba import cuda

    dtype = np.float64 if args.float64 else np.float32
    rng = np.random.default_rng(5)
    for shape in args.shapes:
        batch, n = map(int, shape.split("x"))
        device = [cuda.to_device(v.astype(dtype)) for v in rng.uniform(-1, 1, (4, batch, n))]
        x, info = cuda.device_array((batch, n), dtype), cuda.to_device(np.zeros(batch, np.int32))
        for _ in range(3):
            pivoting.run(*device, x, info)
        cuda.synchronize()
        print(
            f"{batch} x {n} {np.dtype(dtype).name}: R = {pivoting.plan(batch, n, dtype)}, levels "
            f"{pivoting.takes_levels(batch, n, dtype)}, flags {int(info.copy_to_host().max())}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
