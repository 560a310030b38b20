"""JAX's ``jax.lax.linalg.tridiagonal_solve`` (cuSPARSE inside) as a baseline, for benchmarks/tridiag.py
(no script of its own): its whole call beside our rows (:func:`jax_time`), and ``--jax-kernels``
(:func:`jax_kernels`): which cuSPARSE routine it runs per case, by kernel name, and its kernels by
CUPTI, in ``tridiag_jax.csv``. benchmarks/tridiag.py turns JAX's x64 on before JAX is imported.
"""

import os

import numpy as np
from tridiag_cusparse import cusparse_solver
from tridiag_systems import residual, system

from prefixsum.cli import cupti
from prefixsum.cli.results import write_csv
from prefixsum.cli.timing import REPEATS, gpu_library, host_us, kernel_us, queued_library

ROUTINES = ("gtsv2StridedBatch", "gtsv2", "gtsvInterleavedBatch")
"""The routines ``--jax-kernels`` looks for among JAX's kernels."""


def jax_time(jax, a, b, c, d, repeats):
    """``(whole-call microseconds, x)`` of JAX's jitted ``tridiagonal_solve`` (cuSPARSE inside);
    ``x`` in the dtype JAX computed in."""
    import jax.numpy as jnp

    args = [jnp.asarray(v) for v in (a, b, c)] + [jnp.asarray(d)[..., None]]
    solve = jax.jit(jax.lax.linalg.tridiagonal_solve)
    result = np.asarray(solve(*args).block_until_ready())[..., 0]
    return host_us(lambda: solve(*args).block_until_ready(), repeats=repeats), result


def jax_kernels(args, meta, cases):
    """``--jax-kernels``: for every case, which cuSPARSE routine JAX's ``tridiagonal_solve`` runs
    (the routine of :data:`ROUTINES` whose kernels, by name, are among JAX's), JAX's kernel time
    by CUPTI beside that routine's, and JAX's whole call. Writes ``tridiag_jax.csv``."""
    cupy, _ = queued_library("cupy")
    jax = gpu_library("jax")
    if cupy is None or jax is None or not cupti.available():
        print("--jax-kernels needs a GPU with cupy, jax and torch (for CUPTI)")
        return 1
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    solve = jax.jit(jax.lax.linalg.tridiagonal_solve)
    rows = []
    for dtype in (np.float32, np.float64):
        for batch, n in cases:
            a, b, c, d = system(batch, n, dtype, rng)
            operands = [jnp.asarray(v) for v in (a, b, c)] + [jnp.asarray(d)[..., None]]

            def call():
                solve(*operands).block_until_ready()

            names = cupti.kernel_names(call)
            launches = {routine: cusparse_solver(cupy, a, b, c, d, routine)[0] for routine in ROUTINES}
            found = {routine: cupti.kernel_names(launch) for routine, launch in launches.items()}
            matched = [routine for routine, own in found.items() if own and set(own) <= set(names)]
            routine = max(matched, key=lambda r: len(found[r]), default="")
            x = np.asarray(solve(*operands))[..., 0]
            jax_us = kernel_us(call, repeats=REPEATS, method="cupti").us
            library_us = kernel_us(launches[routine], repeats=REPEATS, method="cupti").us if routine else float("nan")
            rows.append(
                {
                    "dtype": np.dtype(dtype).name,
                    "batch": batch,
                    "n": n,
                    "jax_computed_in": x.dtype.name,
                    "cusparse_routine": routine or "none of " + "/".join(ROUTINES),
                    "jax_kernels_us": round(jax_us, 2),
                    "routine_kernels_us": round(library_us, 2),
                    "jax_whole_call_us": round(host_us(call, repeats=REPEATS), 2),
                    "relative_residual": f"{residual(a, b, c, d, x):.2e}",
                    "jax_kernel_names": " | ".join(name[:60] for name in names),
                    **meta,
                }
            )
            print(
                {
                    k: rows[-1][k]
                    for k in (
                        "dtype",
                        "batch",
                        "n",
                        "cusparse_routine",
                        "jax_kernels_us",
                        "routine_kernels_us",
                        "jax_whole_call_us",
                    )
                },
                flush=True,
            )
    write_csv(rows, os.path.join(args.out, "tridiag_jax.csv"))
    return 0
