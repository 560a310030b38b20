"""Batched tridiagonal solves on the GPU: prefixsum's methods against cuSPARSE's five solvers, on dominant and
indefinite systems.

    python benchmarks/tridiag.py [--out DIR] [--quick] [--only-pivoting [--sweep] | --only-hybrid | --jax-kernels]
    (on a GPU machine; --quick: tiny, on the simulator too; --only-pivoting: the pivoting
    comparison alone (below); --sweep: with every chunk length of the pivoting solver forced;
    --only-hybrid: the hybrid's rows and cuSPARSE's gtsv2StridedBatch alone; --jax-kernels: which
    cuSPARSE routine JAX runs per case, by kernel name, and its kernels by CUPTI, in tridiag_jax.csv)

Two families of systems (the ``family`` column; :mod:`tridiag_systems` makes them and checks the results):
``dominant`` (``|b| = |a| + |c| + u``, u uniform in [0.5, 1.5]: every method is right) and ``indefinite`` (a, b and c
uniform in [-1, 1]: only the pivoting solvers are). Cases (batch x n): :data:`CASES` (``--case BATCHxN`` picks some),
float32 and float64. Every result is checked: on dominant systems its relative
residual, on indefinite ones its normwise backward error ``max |T x - d| / (max |T| max |x| + max
|d|)``, must be at most :data:`tridiag_systems.RESIDUAL_EPS` x eps (``correct``; the script exits with 1 if one of
ours is not; a library's wrong row is printed, not fatal).

Ours, on dominant systems: PCR, CR, Thomas, the hybrid (with, in the full run, its
:func:`~prefixsum.tridiag.hybrid.hybrid_shared` path alone at 2, 4 and 8 rows a thread, the block solver alone at each
chunk length, the partition method at R = 4, 8 and 16 with the block solver's R for its reduced systems, and without the
block solver), ``"pivoting"`` and ``"auto"`` (the hybrid with its dominance test, then the pivoting solver masked to the
systems it routed: none here); on indefinite systems ``"pivoting"`` and ``"auto"`` (every system routed), with
``--sweep`` the pivoting solver at each chunk length forced (``pivoting:one_thread``, ``pivoting:pairs=R``,
``pivoting:pair_pairs=P``, which :func:`prefixsum.tridiag.pivoting.plan` was chosen from). Each as its kernels (``ours
(kernels)``: the kernels' durations summed from CUPTI's trace, ``--method cupti``, the default, every variant and
baseline of a case traced together, in turn, each timed call right after an untimed one of its own; or CUDA events
around queued launches, ``--method events``: :func:`prefixsum.cli.timing.kernel_us`) and as a whole ``tridiag.solve``
call on device arrays, on the host clock (``ours (whole call)``); ``"auto"`` also from numpy arrays to a numpy array
(``ours (whole call, numpy)``).

cuSPARSE (:mod:`tridiag_cusparse`, through CuPy, its device time measured the same way, in the
same trace): ``gtsv2StridedBatch`` and ``gtsvInterleavedBatch`` with algo 0 (Thomas) on dominant
systems; ``gtsvInterleavedBatch`` with algo 1 (LU, partial pivoting) and 2 (QR) and ``gtsv2``
(SPIKE with diagonal pivoting, a call per system, up to 64 systems) on both families. JAX's
``jax.lax.linalg.tridiagonal_solve`` (cuSPARSE inside; :mod:`tridiag_jax`, which also runs ``--jax-kernels``) as a
whole call on dominant systems, with x64 on (a "float64" row whose result came back in float32 says so in its method
name).

``--only-pivoting`` (the pivoting comparison: how the committed rows of the pivoting solver were
measured) runs :data:`PIVOTING_CASES`: on dominant systems the hybrid, ``"pivoting"`` and
``"auto"`` and every cuSPARSE solver, on indefinite ones ``"pivoting"`` and ``"auto"`` and
cuSPARSE's pivoting solvers. Median of :data:`prefixsum.cli.timing.REPEATS`; the ``timing`` column
says how each row was measured. Writes ``tridiag.csv``; prints, last, the hybrid against
``gtsv2StridedBatch`` and ``"pivoting"`` and ``"auto"`` against the pivoting solver the issue names
for each shape (``prefixsum.tridiag.registry.pivoting_baselines``).
"""

import functools
import os
import shlex
import statistics
import sys
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ["JAX_ENABLE_X64"] = "1"  # read when jax is imported; without it JAX computes "float64" in float32
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tridiag_cusparse and the others, beside this script

import numpy as np  # noqa: E402
from compaction_rows import exit_skipping_teardown  # noqa: E402
from tridiag_cusparse import (  # noqa: E402
    BASELINES,
    against_cusparse,
    cusparse_solver,
    pivoting_against_cusparse,
    routines_for,
)
from tridiag_jax import jax_kernels, jax_time  # noqa: E402
from tridiag_systems import FAMILIES, RESIDUAL_EPS, backward_error, family_system, residual  # noqa: E402

from prefixsum import tridiag  # noqa: E402
from prefixsum.cli import cupti  # noqa: E402
from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.cli.results import print_table, write_csv  # noqa: E402
from prefixsum.cli.timing import (  # noqa: E402
    QUICK_REPEATS,
    REPEATS,
    WARMUP,
    gpu_library,
    host_us,
    kernel_us,
    queued_library,
    script_arguments,
)
from prefixsum.core.device import simulating  # noqa: E402
from prefixsum.tridiag import auto, block, hybrid, partition, pivoting, warp  # noqa: E402

CASES = ((512, 512), (4096, 256), (16384, 64), (1, 1 << 20), (100, 1000), (64, 8192), (7, 100000), (1000, 1000))
THOMAS_MAX_ROWS = 1 << 16
"""Longer systems skip "thomas": one thread walks each, milliseconds, not a comparison."""
ONE_THREAD_MAX_ROWS = 8192
"""Longer systems skip ``pivoting:one_thread`` in the sweep, for the same reason."""
QUICK_CASES = ((4, 32), (1, 2048))  # a batch in shared memory; one system with global PCR steps (and levels)
PIVOTING_CASES = (
    (512, 512),
    (4096, 256),
    (16384, 64),
    (1000, 1000),
    (100, 1000),
    (64, 8192),
    (1, 1 << 16),
    (1, 1 << 20),
    (7, 100000),
)
"""The shapes of issue 44: batches against cuSPARSE's interleaved LU and QR, long systems against gtsv2."""
THOMAS_ROWS = hybrid.THOMAS_ROWS
PARTITION_ROWS = dict(partition.ROWS_PER_THREAD), partition.ONE_LEVEL_ROWS
BLOCK_ROWS = dict(block.TARGET_ROWS)
RETIRED = {
    "auto (hybrid)": "2026-11-27: 'auto' named by the method it took then, the hybrid",
    "pivoting:pairs=2": "2026-12-06: the pivoting solver's chunks of 2 pairs, slower but at one shape",
    "pivoting:pair_pairs=2": "2026-12-06: its reduced systems' chunks of 2 pairs, slower everywhere",
}
"""Labels of the committed ``tridiag.csv`` that this script no longer writes, and why."""


KERNEL_METHODS = (*(name for name in tridiag.METHODS if name != auto.METHOD.name), "auto")
"""The methods whose kernels a full run times: every registered one, the routed one (:mod:`.auto`)
under the label its rows have had since before it had a name, ``"auto"``."""


def variants(method, shape, dtype, family="dominant", sweep=False, full=True):
    """``(label, run, THOMAS_ROWS, partition R, block R)`` for the kernel rows of ``method`` on
    ``family``: any method once, as ``tridiag.solve`` runs it (``"auto"``: :func:`.auto.run`); in
    the full run (``full``), for the hybrid also its shared-memory path alone
    (:func:`~prefixsum.tridiag.hybrid.run_shared`, which the hybrid leaves for the warp solver,
    the block solver and the partition method) at its default and at half and twice as many rows
    per thread (which :data:`prefixsum.tridiag.hybrid.THOMAS_ROWS` was chosen from); where n is
    longer than a warp's, the block solver (:mod:`prefixsum.tridiag.block`) alone at each chunk
    length that holds n (``block:rows=R``; its lanes follow from n and R), and where the partition
    method runs, each chunk length at every level, the block solver at its own R and at each R
    for the reduced systems (``hybrid:partition_rows=P,block_rows=R``), and the partition method
    without the block solver (``hybrid:no_block``: the route before it) (which
    :func:`prefixsum.tridiag.partition.rows_per_thread` and :data:`prefixsum.tridiag.block.TARGET_ROWS`
    were chosen from; None: the module's own choice); for "pivoting" on indefinite systems with
    ``sweep`` (or in the full run) each of its paths forced (:func:`pivoting_sweep`)."""
    n = shape[1]
    run = auto.run if method == "auto" else tridiag.METHODS[method].run
    own = [(method, run, THOMAS_ROWS, None, None)]
    if method == "pivoting":
        return own + (pivoting_sweep(shape, dtype) if family == "indefinite" and (sweep or full) else [])
    if method != "hybrid" or not full:
        return own
    shared = [
        (f"hybrid_shared{'' if r == THOMAS_ROWS else f':thomas_rows={r}'}", hybrid.run_shared, r, None, None)
        for r in (THOMAS_ROWS // 2, THOMAS_ROWS, 2 * THOMAS_ROWS)
    ]
    if n <= warp.MAX_ROWS:
        return own + shared
    blocks = [
        (f"block:rows={r}", functools.partial(block.run, rows=r), THOMAS_ROWS, None, None)
        for r in block.ROWS_PER_THREAD
        if n <= block.max_rows(dtype, r)
    ]
    chunks = (
        [
            (f"hybrid:partition_rows={p}" + (f",block_rows={r}" if r else ""), hybrid.run, THOMAS_ROWS, p, r)
            for p in (4, 8, 16)
            for r in (None, *block.ROWS_PER_THREAD)
        ]
        if n > block.max_rows(dtype)
        else []
    )
    return own + shared + blocks + chunks + [("hybrid:no_block", without_block, THOMAS_ROWS, None, None)]


def pivoting_sweep(shape, dtype):
    """The pivoting solver with each path forced: one thread per system (up to
    :data:`ONE_THREAD_MAX_ROWS` rows), each chunk length of the system's chunks at its default
    elsewhere (``pivoting:pairs=R``), and where the solve takes levels, each chunk length of the
    reduced systems' (``pivoting:pair_pairs=P``)."""
    batch, n = shape
    forced = [("pivoting:one_thread", functools.partial(pivoting.run, pairs=0))] if n <= ONE_THREAD_MAX_ROWS else []
    if pivoting.plan(batch, n, dtype):
        forced += [(f"pivoting:pairs={r}", functools.partial(pivoting.run, pairs=r)) for r in pivoting.ALL_ROW_PAIRS]
    if pivoting.takes_levels(batch, n, dtype):
        forced += [(f"pivoting:pair_pairs={p}", functools.partial(with_pair_pairs, p)) for p in pivoting.ALL_PAIR_PAIRS]
    return [(label, run, THOMAS_ROWS, None, None) for label, run in forced]


def with_pair_pairs(pairs, *args):
    """``pivoting.run`` with :data:`prefixsum.tridiag.pivoting.PAIR_PAIRS` set to ``pairs``."""
    kept = pivoting.PAIR_PAIRS
    pivoting.PAIR_PAIRS = pairs
    try:
        pivoting.run(*args)
    finally:
        pivoting.PAIR_PAIRS = kept


def without_block(*args):
    """``hybrid.run`` with :data:`prefixsum.tridiag.hybrid.BLOCK_ROWS` 0: levels of the partition
    method down to the warp solver, as before the block solver."""
    hybrid.BLOCK_ROWS = 0
    try:
        hybrid.run(*args)
    finally:
        hybrid.BLOCK_ROWS = None


def configured(rows_per_thread, chunk_rows, block_rows, dtype):
    """Set the hybrid's knobs for one variant (:func:`variants`), or back to the defaults (all None)."""
    hybrid.THOMAS_ROWS = rows_per_thread or THOMAS_ROWS
    partition.ROWS_PER_THREAD.update(PARTITION_ROWS[0])
    partition.ONE_LEVEL_ROWS = PARTITION_ROWS[1]
    block.TARGET_ROWS.update(BLOCK_ROWS)
    if chunk_rows:  # every level at this R
        partition.ROWS_PER_THREAD[np.dtype(dtype).itemsize] = chunk_rows
        partition.ONE_LEVEL_ROWS = ()
    if block_rows:  # the block solver's R for the reduced systems (longer if they need it)
        block.TARGET_ROWS[np.dtype(dtype).itemsize] = (block_rows, block_rows)


def device_times(launches, how, repeats):
    """``{label: (microseconds, timing)}`` of each launch's GPU work: by CUPTI every launch traced
    in turn in one trace (:func:`traced_together`), or by :func:`prefixsum.cli.timing.kernel_us`
    with CUDA events, one after the other. On the simulator NaN comes back, nothing launched: the
    simulator times nothing, and :func:`case_rows` has run each launch once for its result."""
    if simulating():
        return {label: (float("nan"), "simulator") for label in launches}
    if how == "cupti":
        return {
            label: (us, "cupti, kernels summed per call") for label, us in traced_together(launches, repeats).items()
        }
    times = {}
    for label, launch in launches.items():
        measured = kernel_us(launch, repeats=repeats, method=how)
        times[label] = measured.us, measured.timing
    return times


def traced_together(launches, repeats):
    """Median kernel time of each launch from one CUPTI trace: ``repeats`` rounds, each calling
    every launch twice in turn, the device synchronised and a boundary kernel after each call
    (:func:`prefixsum.cli.cupti.per_call_us`), the second call of each pair timed: one trace a
    case instead of one a variant, and each timed call finds its data where its own previous call
    left it (the L2 cache holds some of these cases whole), as a variant timed alone would."""
    from numba import cuda
    from torch.profiler import ProfilerActivity, profile

    for launch in launches.values():
        for _ in range(WARMUP):
            launch()
    cupti.call_boundary[1, 1]()
    cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as traced:
        for _ in range(repeats):
            for launch in launches.values():
                for _ in range(2):
                    launch()
                    cuda.synchronize()
                    cupti.call_boundary[1, 1]()
                    cuda.synchronize()
    calls = cupti.per_call_us(traced.events())
    count = len(launches)
    if len(calls) != 2 * repeats * count or min(calls, default=0.0) <= 0.0:
        raise RuntimeError(
            f"the trace held {len(calls)} calls for {2 * repeats * count} made, with kernel times "
            f"{calls[:5]}...: it did not see every kernel"
        )
    return {label: statistics.median(calls[2 * k + 1 :: 2 * count]) for k, label in enumerate(launches)}


def main(argv=None):
    args = script_arguments(
        argv,
        f"cases {QUICK_CASES}, {QUICK_REPEATS} repeats; runs on the simulator too",
        lambda parser: (
            parser.add_argument("--case", action="append", help="BATCHxN (repeatable; default: every case of CASES)"),
            parser.add_argument(
                "--only-pivoting",
                action="store_true",
                help="only the pivoting comparison (PIVOTING_CASES): the hybrid, "
                "'pivoting', 'auto' and cuSPARSE's five solvers",
            ),
            parser.add_argument(
                "--sweep", action="store_true", help="with --only-pivoting: the pivoting solver's paths forced"
            ),
            parser.add_argument(
                "--only-hybrid",
                action="store_true",
                help="only method='hybrid' (its variants) and cuSPARSE's gtsv2StridedBatch, no JAX",
            ),
            parser.add_argument(
                "--jax-kernels",
                action="store_true",
                help="only JAX: which cuSPARSE routine it runs per case, its kernels by CUPTI (tridiag_jax.csv)",
            ),
        ),
    )
    cases = (
        [tuple(map(int, case.split("x"))) for case in args.case]
        if args.case
        else (QUICK_CASES if args.quick else PIVOTING_CASES if args.only_pivoting else CASES)
    )
    repeats = QUICK_REPEATS if args.quick else REPEATS
    meta = run_metadata(
        ["cupy", "jax", "torch"],
        shlex.join(["python", "benchmarks/tridiag.py", *(sys.argv[1:] if argv is None else argv)]),
    )
    if args.jax_kernels:
        return jax_kernels(args, meta, cases)
    cupy, _ = queued_library("cupy")
    jax = None if args.only_pivoting or args.only_hybrid else gpu_library("jax")
    full = not (args.only_pivoting or args.only_hybrid)
    rows = []
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        for batch, n in cases:
            for family in ("dominant",) if args.only_hybrid else FAMILIES:
                rows += case_rows(args, meta, cupy, jax, full, family, dtype, batch, n, repeats, rng)
    write_csv(rows, os.path.join(args.out, "tridiag.csv"))
    print_table(
        against_cusparse(rows),
        ["measured_by", "dtype", "batch", "n", "hybrid_us", "cusparse_us", "vs cusparse"],
        title="the hybrid's kernels against cuSPARSE gtsv2StridedBatch, dominant systems (time ratio, > 1: faster):",
    )
    print_table(
        pivoting_against_cusparse(rows),
        ["method", "family", "measured_by", "dtype", "batch", "n", "us", "routine", "cusparse_us", "vs cusparse"],
        title="'pivoting' and 'auto' against cuSPARSE's pivoting solver for the shape (time ratio, > 1: faster):",
    )
    wrong = [row for row in rows if not row["correct"]]
    for row in wrong:
        print(
            f"{'WRONG' if row['kind'] != 'library' else 'wrong (a baseline)'}: {row['method']} {row['kind']} "
            f"{row['family']} {row['dtype']} {row['batch']} x {row['n']}: residual {row['relative_residual']}, "
            f"backward error {row['backward_error']}"
        )
    return 1 if any(row["kind"] != "library" for row in wrong) else 0


def case_rows(args, meta, cupy, jax, full, family, dtype, batch, n, repeats, rng):
    """Every row of one case, family and dtype (module docstring)."""
    from numba import cuda

    a, b, c, d = family_system(family, batch, n, dtype, rng)
    device = [cuda.to_device(v) for v in (a, b, c, d)]
    eps = np.finfo(dtype).eps
    rows = []

    def add(method, kind, micros, timing, x, measured_by="host clock"):
        res, error = residual(a, b, c, d, x), backward_error(a, b, c, d, x)
        correct = bool((res if family == "dominant" else error) <= RESIDUAL_EPS * eps)
        rows.append(
            {
                "method": method,
                "kind": kind,
                "family": family,
                "dtype": np.dtype(dtype).name,
                "batch": batch,
                "n": n,
                "median_us": round(micros, 2),
                "relative_residual": f"{res:.2e}",
                "backward_error": f"{error:.2e}",
                "correct": correct,
                "measured_by": measured_by,
                "timing": timing,
                **meta,
            }
        )
        print(
            f"{method:<38} {kind:<18} {family:<10} {np.dtype(dtype).name:<8} {batch:>6} x {n:<8} {micros:>10.1f} us  "
            f"residual {res:.1e}  backward error {error:.1e}  {timing}{'' if correct else '  WRONG'}",
            flush=True,
        )

    if args.only_hybrid:
        methods = ["hybrid"]
    elif family == "indefinite":
        methods = ["pivoting", "auto"]
    else:
        methods = list(KERNEL_METHODS) if full else ["hybrid", "pivoting", "auto"]
    launches, results = {}, {}
    for method in methods:
        if method == "thomas" and n > THOMAS_MAX_ROWS:
            continue
        for label, run, rows_per_thread, chunk_rows, block_rows in variants(
            method, (batch, n), dtype, family, args.sweep, full
        ):
            out, flags = cuda.device_array((batch, n), dtype), cuda.device_array(batch, np.int32)

            def launch(run=run, out=out, flags=flags, knobs=(rows_per_thread, chunk_rows, block_rows)):
                configured(*knobs, dtype)
                run(*device, out, flags)

            launch()
            results[label] = out
            launches[label] = launch
    libraries = (
        routines_for(batch, family)
        if cupy and not args.only_hybrid
        else (["cusparse gtsv2StridedBatch"] if cupy else [])
    )
    for label in libraries:
        launch, _, solution = cusparse_solver(cupy, a, b, c, d, *BASELINES[label])
        launch()
        launches[label], results[label] = launch, solution
    for how in args.method:
        for label, (micros, timing) in device_times(launches, how, repeats).items():
            configured(None, None, None, dtype)
            x = results[label]() if callable(results[label]) else results[label].copy_to_host()
            add(label, "library" if label in BASELINES else "ours (kernels)", micros, timing, x, how)
    configured(None, None, None, dtype)
    for method in [m for m in methods if m != "thomas" or n <= THOMAS_MAX_ROWS] if full else ["auto", "pivoting"]:
        x = tridiag.solve(*device, method=method).copy_to_host()
        add(
            method,
            "ours (whole call)",
            host_us(lambda: tridiag.solve(*device, method=method), repeats=repeats),
            "host clock",
            x,
        )
    if full and family == "dominant":
        x = tridiag.solve(a, b, c, d)
        add(
            "auto",
            "ours (whole call, numpy)",
            host_us(lambda: tridiag.solve(a, b, c, d), repeats=repeats),
            "host clock",
            x,
        )
        if jax:
            micros, x = jax_time(jax, a, b, c, d, repeats)
            label = "jax tridiagonal_solve" + ("" if x.dtype == dtype else f" (computed in {x.dtype})")
            add(label, "library", micros, "host clock", x)
    return rows


if __name__ == "__main__":
    exit_skipping_teardown(main())  # torch.profiler's CUPTI teardown aborted a run after every row was written
