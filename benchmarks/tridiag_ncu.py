"""One launch of the hybrid's kernels and one of cuSPARSE's gtsv2StridedBatch, for Nsight Compute.

    ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        python benchmarks/tridiag_ncu.py [--batch 4096] [--n 256] [--dtype float32]

A profile, not a claim (issue 16 asks what limits the hybrid): each solver runs twice (the first
compiles and warms up) on one diagonally dominant batch, and the result is checked.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import prefixsum  # noqa: E402,F401  (chooses the GPU before numba.cuda loads)

# isort: split
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum.tridiag import hybrid  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    options = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    shape = (options.batch, options.n)
    a, c = rng.uniform(-1, 1, (2, *shape))
    b = np.abs(a) + np.abs(c) + 1
    d = rng.normal(size=shape)
    a[:, 0] = c[:, -1] = 0
    host = [v.astype(options.dtype) for v in (a, b, c, d)]
    device = [cuda.to_device(v) for v in host]
    x, info = cuda.device_array(shape, options.dtype), cuda.device_array(options.batch, np.int32)
    for _ in range(2):
        hybrid.run(*device, x, info)
    cuda.synchronize()
    import cupy
    from cupy_backends.cuda.libs import cusparse

    ga, gb, gc, gd = (cupy.asarray(v.ravel()) for v in host)
    handle = cupy.cuda.device.get_cusparse_handle()
    single = options.dtype == "float32"
    call = cusparse.sgtsv2StridedBatch if single else cusparse.dgtsv2StridedBatch
    size = (cusparse.sgtsv2StridedBatch_bufferSizeExt if single else cusparse.dgtsv2StridedBatch_bufferSizeExt)(
        handle, options.n, ga.data.ptr, gb.data.ptr, gc.data.ptr, gd.data.ptr, options.batch, options.n
    )
    buffer = cupy.empty(size, cupy.uint8)
    for _ in range(2):
        work = gd.copy()
        call(
            handle,
            options.n,
            ga.data.ptr,
            gb.data.ptr,
            gc.data.ptr,
            work.data.ptr,
            options.batch,
            options.n,
            buffer.data.ptr,
        )
    cupy.cuda.Device().synchronize()
    same = np.allclose(x.copy_to_host().ravel(), cupy.asnumpy(work), rtol=1e-3, atol=1e-4)
    print(f"hybrid and cuSPARSE agree on {options.batch} x {options.n} {options.dtype}: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
