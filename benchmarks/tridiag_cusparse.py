"""cuSPARSE's tridiagonal solvers through CuPy's low-level bindings, for benchmarks/tridiag.py (no script of its own).

Five baselines (:data:`BASELINES`), each a ``(routine, algo)`` of ``cupy_backends.cuda.libs.cusparse``:

* ``gtsv2StridedBatch``: cyclic reduction and PCR, no pivoting, the systems contiguous;
* ``gtsvInterleavedBatch`` with ``algo`` 0 (Thomas, no pivoting), 1 (LU with partial pivoting)
  and 2 (QR by Givens rotations), the batch interleaved (element ``i`` of every system together:
  the (batch, n) arrays transposed);
* ``gtsv2``: one system at a time (a call per system), pivoting: SPIKE with diagonal pivoting
  after Chang, Stratton, Kim and Hwu (2012).

The interleaved routines overwrite their bands and the others their right-hand side: each
launch restores them first (device copies, which CUPTI's kernel time leaves out).

Last, the comparisons benchmarks/tridiag.py prints from its rows: the hybrid against ``gtsv2StridedBatch``
(:func:`against_cusparse`) and the pivoting solver against the routines the issue names for the shape
(:func:`pivoting_against_cusparse`).
"""

import numpy as np

from prefixsum.tridiag import registry

BASELINES = {
    "cusparse gtsv2StridedBatch": ("gtsv2StridedBatch", None),
    "cusparse gtsvInterleavedBatch (Thomas)": ("gtsvInterleavedBatch", 0),
    "cusparse gtsvInterleavedBatch (LU)": ("gtsvInterleavedBatch", 1),
    "cusparse gtsvInterleavedBatch (QR)": ("gtsvInterleavedBatch", 2),
    "cusparse gtsv2": ("gtsv2", None),
}
"""Every baseline by its label in the CSV."""
PIVOTING = ("cusparse gtsvInterleavedBatch (LU)", "cusparse gtsvInterleavedBatch (QR)", "cusparse gtsv2")
"""The baselines that pivot: the only ones timed on systems that need it."""
GTSV2_MAX_BATCH = 64
"""``gtsv2`` is called once per system: timed on batches of at most this many."""
INTERLEAVED_MIN_BATCH = 64
"""``gtsvInterleavedBatch`` runs a thread per system: timed on batches of at least this many (on
one system of 2^20 rows a call of QR took 0.55 s in float64 on an H100)."""


def routines_for(batch, family):
    """The baselines timed on a (batch, n) case of ``family``: the pivoting ones on every family,
    the others on dominant systems only; ``gtsv2`` up to :data:`GTSV2_MAX_BATCH` systems, the
    interleaved ones from :data:`INTERLEAVED_MIN_BATCH` on."""
    labels = BASELINES if family == "dominant" else PIVOTING
    return [
        label
        for label in labels
        if (label != "cusparse gtsv2" or batch <= GTSV2_MAX_BATCH)
        and ("Interleaved" not in label or batch >= INTERLEAVED_MIN_BATCH)
    ]


def cusparse_routine(cupy, routine, dtype):
    """``(handle, solve, buffer_size)``: CuPy's cuSPARSE handle and the raw calls of ``routine``
    for ``dtype`` (``cusparseSgtsv2StridedBatch`` and its ``_bufferSizeExt``, ...)."""
    from cupy_backends.cuda.libs import cusparse

    prefix = "s" if np.dtype(dtype) == np.float32 else "d"
    solver, sizer = (getattr(cusparse, f"{prefix}{routine}{end}") for end in ("", "_bufferSizeExt"))
    return cupy.cuda.device.get_cusparse_handle(), solver, sizer


def cusparse_solver(cupy, a, b, c, d, routine, algo=1):
    """``(launch, refill, solution)`` for cuSPARSE's ``routine`` (``algo`` for the interleaved one)
    on the systems: ``launch()`` restores what the routine overwrites (``refill()``, copies, no
    kernel) and solves; ``solution()`` is x on the host, ``(batch, n)``."""
    batch, n = d.shape
    handle, solver, sizer = cusparse_routine(cupy, routine, d.dtype)
    interleaved = routine == "gtsvInterleavedBatch"
    saved = [cupy.asarray(np.ascontiguousarray(v.T) if interleaved else v) for v in (a, b, c, d)]
    work = [cupy.empty_like(v) for v in saved]
    restored = work if interleaved else work[3:]
    ptrs = [v.data.ptr for v in (work if interleaved else saved[:3] + work[3:])]
    if interleaved:
        arguments = [(algo, n, *ptrs, batch)]
    elif routine == "gtsv2StridedBatch":
        arguments = [(n, *ptrs, batch, n)]
    else:
        row = d.dtype.itemsize * n
        arguments = [(n, 1, *(p + k * row for p in ptrs), n) for k in range(batch)]
    buffer = cupy.empty(max(sizer(handle, *arguments[0]), 1), cupy.uint8)

    def refill():
        for into, original in zip(restored, saved[-len(restored) :]):
            into.data.copy_from_device_async(original.data, original.nbytes)

    def launch():
        refill()
        for args in arguments:
            solver(handle, *args, buffer.data.ptr)

    def solution():
        x = cupy.asnumpy(work[3])
        return x.T if interleaved else x

    return launch, refill, solution


def cusparse_time(cupy, stream, a, b, c, d, repeats, method, routine="gtsv2StridedBatch", algo=1):
    """``(device microseconds, timing, x)`` of one routine (benchmarks/tridiag_warp.py's baseline):
    ``cupti`` leaves the restoring copies out by itself, ``events`` times them alone and
    subtracts them."""
    from prefixsum.cli.timing import kernel_us

    launch, refill, solution = cusparse_solver(cupy, a, b, c, d, routine, algo)
    launch()
    result = solution()
    solve_and_refill = kernel_us(launch, stream=stream, repeats=repeats, method=method)
    if method == "cupti":
        return solve_and_refill.us, solve_and_refill.timing, result
    return solve_and_refill.us - kernel_us(refill, stream=stream, repeats=repeats).us, solve_and_refill.timing, result


def against_cusparse(rows):
    """Per method of measuring, dtype and case: the hybrid's kernel time, cuSPARSE's
    ``gtsv2StridedBatch``'s, and cuSPARSE's over the hybrid's (dominant systems)."""
    times = {(r["method"], r["family"], r["measured_by"], r["dtype"], r["batch"], r["n"]): r["median_us"] for r in rows}
    found = []
    for (method, family, how, dtype, batch, n), us in times.items():
        library = times.get(("cusparse gtsv2StridedBatch", family, how, dtype, batch, n))
        if method == "hybrid" and how != "host clock" and library:
            found.append(
                {
                    "measured_by": how,
                    "dtype": dtype,
                    "batch": batch,
                    "n": n,
                    "hybrid_us": us,
                    "cusparse_us": library,
                    "vs cusparse": round(library / us, 3),
                }
            )
    return found


def pivoting_against_cusparse(rows):
    """Per kernel row of ``pivoting`` (and its forced paths) and ``auto``: its time, that of each
    pivoting routine the issue names for the shape (``prefixsum.tridiag.registry.pivoting_baselines``), measured
    the same way on the same family, and the routine's over ours."""
    times = {(r["method"], r["family"], r["measured_by"], r["dtype"], r["batch"], r["n"]): r["median_us"] for r in rows}
    found = []
    for (method, family, how, dtype, batch, n), us in times.items():
        if not method.startswith(("pivoting", "auto")) or how == "host clock":
            continue
        for routine in registry.pivoting_baselines(n):
            library = times.get((routine, family, how, dtype, batch, n))
            if library:
                found.append(
                    {
                        "method": method,
                        "family": family,
                        "measured_by": how,
                        "dtype": dtype,
                        "batch": batch,
                        "n": n,
                        "us": us,
                        "routine": routine.replace("cusparse ", ""),
                        "cusparse_us": library,
                        "vs cusparse": round(library / us, 3),
                    }
                )
    return found
