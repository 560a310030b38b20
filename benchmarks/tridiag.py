"""Batched tridiagonal solves on the GPU: prefixsum's PCR, CR, Thomas, hybrid and pivoting against cuSPARSE.

    python benchmarks/tridiag.py [--out DIR] [--quick] [--only-pivoting | --only-hybrid | --jax-kernels]
    (on a GPU machine; --quick: tiny, on the simulator too; --only-pivoting: the pivoting rows
    alone; --only-hybrid: the hybrid's rows and cuSPARSE's gtsv2StridedBatch alone; --jax-kernels: which cuSPARSE routine JAX runs per case, by kernel name, and its
    kernels by CUPTI, in tridiag_jax.csv)

Cases (batch x n): 512 x 512, 4096 x 256, 16384 x 64, 1 x 2^20, 100 x 1000, 64 x 8192, 7 x 100000
and 1000 x 1000 (``--case BATCHxN`` picks some), in float32 and float64, on random diagonally
dominant systems. Every result is checked before it is timed: its relative
residual must be at most ``RESIDUAL_EPS`` x eps (``correct``; the script exits with 1 if one
is not). Ours: the method's launches on numba device arrays, queued behind a busy kernel between
CUDA events (``ours (kernels)``, :func:`prefixsum.cli.bench.kernel_us`: what the kernels cost, the
figure to set beside cuSPARSE's device time; by each ``--method``: ``cupti``, the default, sums the
kernels' durations from torch.profiler's trace, ``events`` times them with CUDA events; the
``method`` column says which), and a whole ``tridiag.solve`` call on device arrays
on the host clock (``ours (whole call)``: checks, allocations and the copy of the failure flags
included); the hybrid's kernels (for n <= 512 the warp solver's, :mod:`prefixsum.tridiag.warp`),
and :func:`~prefixsum.tridiag.hybrid.hybrid_shared`'s path alone at its default and at half and
twice its rows per thread (``hybrid_shared``, ``hybrid_shared:thomas_rows=R``, whatever n); and
``method="auto"`` from numpy arrays to a numpy array (``ours (whole call, numpy)``: the one
transfer in and the one out included). cuSPARSE: ``gtsv2StridedBatch`` through CuPy, queued the
same way on CuPy's stream
(the library's device time), and JAX's ``jax.lax.linalg.tridiagonal_solve`` (which calls
cuSPARSE) as a whole call, on the host clock after ``block_until_ready``, with x64 on (a
"float64" row whose result came back in float32 says so in its method name). ``method="pivoting"``
(:mod:`prefixsum.tridiag.pivoting`: chunks factored with partial pivoting and a reduced system of
their separators, or one thread per system) is set beside cuSPARSE's pivoting solvers:
``gtsv2`` (diagonal pivoting in SPIKE partitions, one call per system) for up to 64 systems and,
for a batch, ``gtsvInterleavedBatch`` with ``algo=1`` (LU with partial pivoting, the batch
interleaved), with
each of its paths forced (``pivoting:one_thread``, ``pivoting:spike_rows=S`` for every chunk ``S``
that takes the shape, ``pivoting:levels`` without the one-block solve), which
:func:`prefixsum.tridiag.pivoting.plan` was chosen from;
``--only-pivoting`` runs :data:`PIVOTING_CASES` unless ``--case`` names others. The systems are
the diagonally dominant ones of the other methods, so no row is ever interchanged: the pivoting
solvers pay for the comparisons, not for the swaps. Median of
:data:`prefixsum.cli.bench.REPEATS`; the ``timing`` column says how each row was measured. Writes
``tridiag.csv``.
"""
import os
import shlex
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ["JAX_ENABLE_X64"] = "1"  # read when jax is imported; without it JAX computes "float64" in float32

import numpy as np  # noqa: E402

from prefixsum import tridiag  # noqa: E402
import functools  # noqa: E402

from prefixsum.tridiag import block, hybrid, partition, pivoting, warp  # noqa: E402
from prefixsum.cli.bench import (QUICK_REPEATS, REPEATS, gpu_library, host_us,  # noqa: E402
                                 kernel_us, queued_library, script_arguments)
from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.cli.results import print_table, report_wrong, write_csv  # noqa: E402

CASES = ((512, 512), (4096, 256), (16384, 64), (1, 1 << 20), (100, 1000), (64, 8192), (7, 100000), (1000, 1000))
THOMAS_MAX_ROWS = 1 << 16
"""Longer systems skip "thomas": one thread walks each, milliseconds, not a comparison."""
QUICK_CASES = ((4, 32), (1, 2048))  # a batch in shared memory; one system with global PCR steps
# Diagonally dominant systems are well conditioned: the residuals seen are about one eps; a
# wrong solve is off by far more than this.
RESIDUAL_EPS = 64
PIVOTING_CASES = ((1, 1 << 20), (1, 1 << 16), (7, 100000), (64, 8192), (512, 512), (4096, 256), (16384, 64))
THOMAS_ROWS = hybrid.THOMAS_ROWS
PARTITION_ROWS = dict(partition.ROWS_PER_THREAD), partition.ONE_LEVEL_ROWS
BLOCK_ROWS = dict(block.TARGET_ROWS)


def variants(method, shape, dtype):
    """``(label, run, THOMAS_ROWS, partition R, block R)`` for the kernel rows of ``method``: any
    method once, as ``tridiag.solve`` runs it; for the hybrid also its shared-memory path alone
    (:func:`~prefixsum.tridiag.hybrid.run_shared`, which the hybrid leaves for the warp solver,
    the block solver and the partition method) at its default and at half and twice as many rows
    per thread (which :data:`prefixsum.tridiag.hybrid.THOMAS_ROWS` was chosen from); where n is
    longer than a warp's, the block solver (:mod:`prefixsum.tridiag.block`) alone at each chunk
    length that holds n (``block:rows=R``; its lanes follow from n and R), and where the partition
    method runs, each chunk length at every level, the block solver at its own R and at each R
    for the reduced systems (``hybrid:partition_rows=P,block_rows=R``), and the partition method
    without the block solver (``hybrid:no_block``: the route before it, levels down to the warp
    solver) (which :func:`prefixsum.tridiag.partition.rows_per_thread` and
    :data:`prefixsum.tridiag.block.TARGET_ROWS` were chosen from; None: the module's own choice);
    for "pivoting" each of its paths forced (the one-thread path only up to
    :data:`THOMAS_MAX_ROWS` rows)."""
    n = shape[1]
    own = [(method, tridiag.METHODS[method], THOMAS_ROWS, None, None)]
    if method == "pivoting":
        batch, n = shape
        forced = [("pivoting:one_thread", functools.partial(pivoting.run, rows=0), THOMAS_ROWS, None, None)
                  ] if n <= THOMAS_MAX_ROWS else []
        chunks = [(f"pivoting:spike_rows={r}", functools.partial(pivoting.run, rows=r), THOMAS_ROWS, None, None)
                  for r in pivoting.ALL_SPIKE_ROWS if pivoting.plan(batch, n, dtype, r)]
        levels = [("pivoting:levels", levels_only, THOMAS_ROWS, None, None)] if pivoting.plan(batch, n, dtype) else []
        return own + forced + chunks + levels
    if method != "hybrid":
        return own
    shared = [(f"hybrid_shared{'' if r == THOMAS_ROWS else f':thomas_rows={r}'}", hybrid.run_shared, r, None, None)
              for r in (THOMAS_ROWS // 2, THOMAS_ROWS, 2 * THOMAS_ROWS)]
    if n <= warp.MAX_ROWS:
        return own + shared
    blocks = [(f"block:rows={r}", functools.partial(block.run, rows=r), THOMAS_ROWS, None, None)
              for r in block.ROWS_PER_THREAD if n <= block.max_rows(dtype, r)]
    chunks = [(f"hybrid:partition_rows={p}" + (f",block_rows={r}" if r else ""), hybrid.run, THOMAS_ROWS, p, r)
              for p in (4, 8, 16) for r in (None, *block.ROWS_PER_THREAD)] if n > block.max_rows(dtype) else []
    return own + shared + blocks + chunks + [("hybrid:no_block", without_block, THOMAS_ROWS, None, None)]


def without_block(*args):
    """``hybrid.run`` with :data:`prefixsum.tridiag.hybrid.BLOCK_ROWS` 0: levels of the partition
    method down to the warp solver, as before the block solver."""
    hybrid.BLOCK_ROWS = 0
    try:
        hybrid.run(*args)
    finally:
        hybrid.BLOCK_ROWS = None


def levels_only(*args):
    """``pivoting.run`` with :data:`prefixsum.tridiag.pivoting.BLOCK_SOLVE` off: levels of the
    partitioned solver down to one thread per system, no system solved whole in a block."""
    pivoting.BLOCK_SOLVE = False
    try:
        pivoting.run(*args)
    finally:
        pivoting.BLOCK_SOLVE = True


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


ROUTINES = ("gtsv2StridedBatch", "gtsv2", "gtsvInterleavedBatch")
"""cuSPARSE's tridiagonal solvers: no pivoting, batched; diagonal pivoting (SPIKE), one system at
a time; LU with partial pivoting (``algo=1``), the batch interleaved."""


def cusparse_routine(cupy, routine, dtype):
    """``(handle, solve, buffer_size)``: CuPy's cuSPARSE handle and the raw calls of ``routine``
    (:data:`ROUTINES`) for ``dtype`` (``cusparseSgtsv2StridedBatch`` and its ``_bufferSizeExt``, ...)."""
    from cupy_backends.cuda.libs import cusparse

    prefix = "s" if np.dtype(dtype) == np.float32 else "d"
    solver, sizer = (getattr(cusparse, f"{prefix}{routine}{end}") for end in ("", "_bufferSizeExt"))
    return cupy.cuda.device.get_cusparse_handle(), solver, sizer


def cusparse_solver(cupy, a, b, c, d, routine):
    """``(launch, refill, solution)`` for cuSPARSE's ``routine`` (:data:`ROUTINES`) on the systems,
    through CuPy: ``launch()`` restores what the routine overwrites (``refill()``, a copy, not a
    kernel) and solves; ``solution()`` is x on the host, ``(batch, n)``.

    ``gtsv2StridedBatch`` and ``gtsv2`` overwrite d with x, ``gtsvInterleavedBatch`` its bands
    too, whose arrays are interleaved, ``(n, batch)``. ``gtsv2`` solves one system of several
    right-hand sides: called once per system of the batch.
    """
    batch, n = d.shape
    handle, solver, sizer = cusparse_routine(cupy, routine, d.dtype)
    interleaved = routine == "gtsvInterleavedBatch"
    saved = [cupy.asarray(np.ascontiguousarray(v.T) if interleaved else v) for v in (a, b, c, d)]
    work = [cupy.empty_like(v) for v in saved]
    restored = work if interleaved else work[3:]
    ptrs = [v.data.ptr for v in (work if interleaved else saved[:3] + work[3:])]
    if routine == "gtsvInterleavedBatch":
        arguments = [(1, n, *ptrs, batch)]
    elif routine == "gtsv2StridedBatch":
        arguments = [(n, *ptrs, batch, n)]
    else:
        row = d.dtype.itemsize * n
        arguments = [(n, 1, *(p + k * row for p in ptrs), n) for k in range(batch)]
    buffer = cupy.empty(max(sizer(handle, *arguments[0]), 1), cupy.uint8)

    def refill():
        for into, original in zip(restored, saved[-len(restored):]):
            into.data.copy_from_device_async(original.data, original.nbytes)

    def launch():
        refill()
        for args in arguments:
            solver(handle, *args, buffer.data.ptr)

    def solution():
        x = cupy.asnumpy(work[3])
        return x.T if interleaved else x

    return launch, refill, solution


def cusparse_time(cupy, stream, a, b, c, d, repeats, method, routine="gtsv2StridedBatch"):
    """``(device microseconds, timing, x)`` of cuSPARSE's ``routine`` on the systems, through CuPy.

    Each solve is preceded by the copies that restore its input (:func:`cusparse_solver`), which
    the ``cupti`` method leaves out by itself; ``events`` time the copies alone and subtract them.
    """
    launch, refill, solution = cusparse_solver(cupy, a, b, c, d, routine)
    launch()
    result = solution()
    solve_and_refill = kernel_us(launch, stream=stream, repeats=repeats, method=method)
    if method == "cupti":
        return solve_and_refill.us, solve_and_refill.timing, result
    return solve_and_refill.us - kernel_us(refill, stream=stream, repeats=repeats).us, solve_and_refill.timing, result


def pivoting_routine(batch):
    """cuSPARSE's pivoting solver set beside ``method="pivoting"``: ``gtsv2`` for one system,
    ``gtsvInterleavedBatch`` (LU with partial pivoting) for a batch."""
    return "gtsv2" if batch == 1 else "gtsvInterleavedBatch"


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
    from prefixsum.cli import cupti

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
            rows.append({"dtype": np.dtype(dtype).name, "batch": batch, "n": n, "jax_computed_in": x.dtype.name,
                         "cusparse_routine": routine or "none of " + "/".join(ROUTINES),
                         "jax_kernels_us": round(jax_us, 2), "routine_kernels_us": round(library_us, 2),
                         "jax_whole_call_us": round(host_us(call, repeats=REPEATS), 2),
                         "relative_residual": f"{residual(a, b, c, d, x):.2e}",
                         "jax_kernel_names": " | ".join(name[:60] for name in names), **meta})
            print({k: rows[-1][k] for k in ("dtype", "batch", "n", "cusparse_routine", "jax_kernels_us",
                                            "routine_kernels_us", "jax_whole_call_us")}, flush=True)
    write_csv(rows, os.path.join(args.out, "tridiag_jax.csv"))
    return 0


def main(argv=None):
    args = script_arguments(argv, f"cases {QUICK_CASES}, two repeats; runs on the simulator too",
                            lambda parser: (
                                parser.add_argument("--case", action="append", help="BATCHxN (repeatable; "
                                                    "default: every case of CASES)"),
                                parser.add_argument("--only-pivoting", action="store_true",
                                                    help="only method='pivoting' and cuSPARSE's pivoting solvers"),
                                parser.add_argument("--only-hybrid", action="store_true",
                                                    help="only method='hybrid' (its variants) and cuSPARSE's "
                                                         "gtsv2StridedBatch, no JAX"),
                                parser.add_argument("--jax-kernels", action="store_true",
                                                    help="only JAX: which cuSPARSE routine it runs per case, its "
                                                         "kernels by CUPTI (tridiag_jax.csv)")))
    cases = [tuple(map(int, case.split("x"))) for case in args.case] if args.case else (
        PIVOTING_CASES if args.only_pivoting else CASES)
    from numba import cuda

    repeats = QUICK_REPEATS if args.quick else REPEATS
    meta = run_metadata(["cupy", "jax", "torch"], shlex.join(["python", "benchmarks/tridiag.py",
                                                               *(sys.argv[1:] if argv is None else argv)]))
    if args.jax_kernels:
        return jax_kernels(args, meta, cases)
    cupy, cupy_stream = queued_library("cupy")
    jax = None if args.only_pivoting or args.only_hybrid else gpu_library("jax")
    methods = ["pivoting"] if args.only_pivoting else ["hybrid"] if args.only_hybrid else list(tridiag.METHODS)
    rng = np.random.default_rng(3)
    rows = []

    def add(method, kind, dtype, batch, n, micros, timing, res, measured_by="host clock"):
        correct = bool(res <= RESIDUAL_EPS * np.finfo(dtype).eps)
        rows.append({"method": method, "kind": kind, "dtype": np.dtype(dtype).name, "batch": batch, "n": n,
                     "median_us": round(micros, 2), "relative_residual": f"{res:.2e}", "correct": correct,
                     "measured_by": measured_by, "timing": timing, **meta})
        print(f"{method:<26} {kind:<18} {np.dtype(dtype).name:<8} {batch:>6} x {n:<8} {micros:>10.1f} us  "
              f"residual {res:.1e}  {timing}{'' if correct else '  WRONG'}", flush=True)

    for dtype in (np.float32, np.float64):
        for batch, n in QUICK_CASES if args.quick else cases:
            a, b, c, d = system(batch, n, dtype, rng)
            device = [cuda.to_device(v) for v in (a, b, c, d)]
            for method in methods:
                if method == "thomas" and n > THOMAS_MAX_ROWS:
                    continue
                reps = repeats
                for label, run, rows_per_thread, chunk_rows, block_rows in variants(method, (batch, n), dtype):
                    hybrid.THOMAS_ROWS = rows_per_thread
                    partition.ROWS_PER_THREAD.update(PARTITION_ROWS[0])
                    partition.ONE_LEVEL_ROWS = PARTITION_ROWS[1]
                    block.TARGET_ROWS.update(BLOCK_ROWS)
                    if chunk_rows:  # every level at this R
                        partition.ROWS_PER_THREAD[np.dtype(dtype).itemsize] = chunk_rows
                        partition.ONE_LEVEL_ROWS = ()
                    if block_rows:  # the block solver's R for the reduced systems (longer if they need it)
                        block.TARGET_ROWS[np.dtype(dtype).itemsize] = (block_rows, block_rows)
                    out, flags = cuda.device_array((batch, n), dtype), cuda.device_array(batch, np.int32)
                    run(*device, out, flags)
                    res = residual(a, b, c, d, out.copy_to_host())
                    for how in args.method:
                        measured = kernel_us(lambda: run(*device, out, flags), repeats=reps, method=how)
                        add(label, "ours (kernels)", dtype, batch, n, measured.us, measured.timing, res, how)
                hybrid.THOMAS_ROWS = THOMAS_ROWS
                partition.ROWS_PER_THREAD.update(PARTITION_ROWS[0])
                partition.ONE_LEVEL_ROWS = PARTITION_ROWS[1]
                block.TARGET_ROWS.update(BLOCK_ROWS)
                res = residual(a, b, c, d, tridiag.solve(*device, method=method).copy_to_host())
                micros = host_us(lambda: tridiag.solve(*device, method=method), repeats=reps)
                add(method, "ours (whole call)", dtype, batch, n, micros, "host clock", res)
            # gtsv2 beside the batched LU where a call per system is few calls
            for how, routine in [(how, routine) for how in (args.method if cupy else ())
                                 for routine in dict.fromkeys((pivoting_routine(batch), *(("gtsv2",) if batch <= 64 else ())))]:
                micros, timing, x = cusparse_time(cupy, cupy_stream, a, b, c, d, repeats, how, routine)
                add(f"cusparse {routine}" + (" (LU)" if routine == "gtsvInterleavedBatch" else ""), "library", dtype, batch, n, micros, timing,
                    residual(a, b, c, d, x), how)
            if args.only_pivoting:
                continue
            res = residual(a, b, c, d, tridiag.solve(a, b, c, d))
            micros = host_us(lambda: tridiag.solve(a, b, c, d), repeats=repeats)
            add(f"auto ({tridiag.api.choose('auto', batch, n, dtype)})", "ours (whole call, numpy)", dtype, batch, n,
                micros, "host clock", res)
            if cupy:
                for how in args.method:
                    micros, timing, x = cusparse_time(cupy, cupy_stream, a, b, c, d, repeats, how)
                    add("cusparse gtsv2StridedBatch", "library", dtype, batch, n, micros, timing, residual(a, b, c, d, x),
                        how)
            if jax:
                micros, x = jax_time(jax, a, b, c, d, repeats)
                label = "jax tridiagonal_solve" + ("" if x.dtype == dtype else f" (computed in {x.dtype})")
                add(label, "library", dtype, batch, n, micros, "host clock", residual(a, b, c, d, x))
    write_csv(rows, os.path.join(args.out, "tridiag.csv"))
    print_table(against_cusparse(rows), ["measured_by", "dtype", "batch", "n", "hybrid_us", "cusparse_us", "vs cusparse"],
                title="the hybrid's kernels against cuSPARSE gtsv2StridedBatch (time ratio, > 1: faster):")
    print_table(pivoting_against_cusparse(rows), ["method", "measured_by", "dtype", "batch", "n", "us", "cusparse_us",
                                                  "vs cusparse"],
                title="method='pivoting' and its paths against cuSPARSE gtsv2 / gtsvInterleavedBatch (time ratio, > 1: faster):")
    return report_wrong(rows, lambda row: f"{row['method']} {row['kind']} {row['dtype']} {row['batch']} x {row['n']}")


def against_cusparse(rows):
    """Per method of measuring, dtype and case: the hybrid's kernel time, cuSPARSE's, and cuSPARSE's over the hybrid's."""
    times = {(r["method"], r["measured_by"], r["dtype"], r["batch"], r["n"]): r["median_us"] for r in rows}
    found = []
    for (method, how, dtype, batch, n), us in times.items():
        library = times.get(("cusparse gtsv2StridedBatch", how, dtype, batch, n))
        if method == "hybrid" and how != "host clock" and library:
            found.append({"measured_by": how, "dtype": dtype, "batch": batch, "n": n, "hybrid_us": us,
                          "cusparse_us": library, "vs cusparse": round(library / us, 3)})
    return found


def pivoting_against_cusparse(rows):
    """Per kernel row of ``pivoting`` (and its forced paths): its time, the pivoting routine's
    (:func:`pivoting_routine`) measured the same way, and the routine's over ours."""
    times = {(r["method"], r["measured_by"], r["dtype"], r["batch"], r["n"]): r["median_us"] for r in rows}
    found = []
    for (method, how, dtype, batch, n), us in times.items():
        routine = pivoting_routine(batch)
        library = times.get((f"cusparse {routine}" + (" (LU)" if routine == "gtsvInterleavedBatch" else ""), how, dtype, batch, n))
        if method.startswith("pivoting") and how != "host clock" and library:
            found.append({"method": method, "measured_by": how, "dtype": dtype, "batch": batch, "n": n, "us": us,
                          "cusparse_us": library, "vs cusparse": round(library / us, 3)})
    return found


if __name__ == "__main__":
    sys.exit(main())
