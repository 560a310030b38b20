"""Batched tridiagonal solves on the GPU: prefixsum's PCR, CR and Thomas against cuSPARSE.

    python benchmarks/tridiag.py --out DIR      (on a GPU machine; see ../shared/specs/gpu.md)

Cases (batch x n): 512 x 512, 4096 x 256, 16384 x 64, 1 x 2^20, in float32 and float64, on
random diagonally dominant systems. Every result is checked (relative residual) before it is
timed. Ours: CUDA events around the method's launches on numba device arrays allocated once
(``kernel_us``: what the kernels cost, the figure to set beside cuSPARSE's device time), and
around a whole ``tridiag.solve`` call on device arrays (``call_us``: checks, allocations and the
copy of the failure flags included). cuSPARSE: ``gtsv2StridedBatch`` through CuPy with
CUDA events (the library's device time), and JAX's ``jax.lax.linalg.tridiagonal_solve`` (which
calls cuSPARSE) as a whole call, timed on the host after ``block_until_ready``. Writes
``tridiag.csv``.
"""
import argparse
import datetime
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402

import prefixsum as ps  # noqa: E402
from prefixsum import tridiag  # noqa: E402
from prefixsum.cli.bench import cupy_events_us, host_us, numba_events_us, write_csv  # noqa: E402

CASES = ((512, 512), (4096, 256), (16384, 64), (1, 1 << 20))
REPEATS = 20


def system(batch, n, dtype, rng):
    a = rng.uniform(-1, 1, (batch, n)).astype(dtype)
    c = rng.uniform(-1, 1, (batch, n)).astype(dtype)
    b = (np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))).astype(dtype)
    d = rng.normal(size=(batch, n)).astype(dtype)
    a[:, 0] = 0
    c[:, -1] = 0
    return a, b, c, d


def residual(a, b, c, d, x):
    x = x.astype(np.float64)
    r = b * x - d
    r[:, 1:] += a[:, 1:] * x[:, :-1]
    r[:, :-1] += c[:, :-1] * x[:, 1:]
    return float(np.linalg.norm(r) / np.linalg.norm(d))


def cusparse_time(a, b, c, d):
    import cupy
    from cupy_backends.cuda.libs import cusparse

    batch, n = d.shape
    dl, dd, du, x = (cupy.asarray(v) for v in (a, b, c, d))
    handle = cupy.cuda.device.get_cusparse_handle()
    single = d.dtype == np.float32
    size = (cusparse.sgtsv2StridedBatch_bufferSizeExt if single else cusparse.dgtsv2StridedBatch_bufferSizeExt)(
        handle, n, dl.data.ptr, dd.data.ptr, du.data.ptr, x.data.ptr, batch, n)
    buffer = cupy.empty(size, cupy.uint8)
    solve = cusparse.sgtsv2StridedBatch if single else cusparse.dgtsv2StridedBatch
    work = cupy.empty_like(x)

    def launch():
        work[...] = x
        solve(handle, n, dl.data.ptr, dd.data.ptr, du.data.ptr, work.data.ptr, batch, n, buffer.data.ptr)

    launch()
    result = cupy.asnumpy(work)
    with_copy = cupy_events_us(launch, cupy, repeats=REPEATS)  # gtsv2 overwrites d: copy it back each time

    def refill():
        work[...] = x
    return with_copy - cupy_events_us(refill, cupy, repeats=REPEATS), result


def jax_time(a, b, c, d):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    args = [jnp.asarray(v) for v in (a, b, c)] + [jnp.asarray(d)[..., None]]
    solve = jax.jit(jax.lax.linalg.tridiagonal_solve)
    result = np.asarray(solve(*args).block_until_ready())[..., 0]
    return host_us(lambda: solve(*args).block_until_ready(), repeats=REPEATS), result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks")
    args = parser.parse_args()
    from numba import cuda

    info = ps.device_info()
    rng = np.random.default_rng(3)
    rows = []

    def add(method, kind, dtype, batch, n, micros, res):
        rows.append({"method": method, "kind": kind, "dtype": np.dtype(dtype).name, "batch": batch, "n": n,
                     "median_us": round(micros, 2), "relative_residual": f"{res:.2e}", "device": info["name"],
                     "date": datetime.date.today().isoformat()})
        print(f"{method:<26} {np.dtype(dtype).name:<8} {batch:>6} x {n:<8} {micros:>10.1f} us  residual {res:.1e}", flush=True)

    for dtype in (np.float32, np.float64):
        for batch, n in CASES:
            a, b, c, d = system(batch, n, dtype, rng)
            device = [cuda.to_device(v) for v in (a, b, c, d)]
            for method in tridiag.METHODS:
                if method == "thomas" and batch == 1:
                    continue  # one thread walks 2^20 rows: hundreds of ms, not a comparison
                x = tridiag.solve(*device, method=method).copy_to_host()
                run, out, flags = tridiag.api._method(method), cuda.device_array((batch, n), dtype), cuda.device_array(batch, np.int32)
                micros = numba_events_us(lambda: run(*device, out, flags), repeats=REPEATS)
                add(method, "ours (kernels)", dtype, batch, n, micros, residual(a, b, c, d, x))
                micros = numba_events_us(lambda: tridiag.solve(*device, method=method), repeats=REPEATS)
                add(method, "ours (whole call)", dtype, batch, n, micros, residual(a, b, c, d, x))
            for name, timer in (("cusparse gtsv2StridedBatch", cusparse_time), ("jax tridiagonal_solve", jax_time)):
                try:
                    micros, x = timer(a, b, c, d)
                except Exception as error:  # a missing library must not lose the other rows
                    print(f"{name}: {type(error).__name__}: {error}")
                    continue
                add(name, "library", dtype, batch, n, micros, residual(a, b, c, d, x))
    write_csv(rows, os.path.join(args.out, "tridiag.csv"))


if __name__ == "__main__":
    main()
