"""The hybrid tridiagonal solver and the Householder kernels under compute-sanitizer, on a GPU.

    compute-sanitizer --tool memcheck python benchmarks/sanitize_tridiag.py     (and racecheck, synccheck, initcheck)
    python benchmarks/sanitize_tridiag.py --quick                                (the same calls on the simulator, to
    test the script) python benchmarks/sanitize_tridiag.py --only-hybrid                          (the hybrid's paths
    alone, no pivoting, Householder or numpy)

Runs ``hybrid.run`` (what ``tridiag.solve(method="hybrid")`` launches) into poisoned outputs on
float32 and float64 systems of shapes that take every path (the warp solver up to 512 rows; the
partition method beyond, one and two levels, one system and a batch; batches whose n is no
multiple of the chunk, padded to whole chunks in the indexing; the block solver of
:mod:`prefixsum.tridiag.block` for n up to a block's worth, alone at each chunk length that holds
:data:`BLOCK_SHAPES`, and on the partition method's reduced systems), and ``hybrid.run_shared`` on every shape
too (:func:`~prefixsum.tridiag.hybrid.hybrid_shared`: several systems a block, one system a
block; one and several :func:`~prefixsum.tridiag.hybrid.pcr_window` launches before it), and a
zero pivot;
``method="pivoting"`` (:mod:`prefixsum.tridiag.pivoting`: one thread per system, whole systems in
a block, levels of reduced systems, one to three, :mod:`prefixsum.tridiag.chunked`) on general
systems that are neither dominant nor definite, on ``tridiag(1, 1e-10, 1)``, and on a batch
with a singular system (``solve_ex``: the others solved, the singular one named, its x NaN;
``condition=True``'s solves of A and A^T); ``method="auto"`` (:mod:`prefixsum.tridiag.auto`) on
batches of dominant and indefinite systems mixed, through each of the hybrid's paths with its
dominance test and the pivoting solver masked to the routed systems;
then ``householder`` and ``solve_symmetric`` from device arrays (the on-device symmetry check,
the shared-memory and the global-memory reductions, the off-diagonal copy), ``solve_symmetric``
on indefinite matrices (the pivot-sign check, then the pivoting solve) and one non-symmetric
matrix; and ``tridiag.solve`` of numpy batches cut into about three chunks of whole systems
(:mod:`prefixsum.tridiag.transfers`, its thresholds lowered: the pinned slots, the copies on side
streams, each chunk's solve on views of the batch), hybrid and pivoting, straight from the
caller's arrays and through the pinned slots, inputs checked unchanged.
Each result is checked before the next call; one line per part, exit 1 on
a wrong result. compute-sanitizer's summary is the verdict on memory errors, races, barriers
and uninitialised reads; ``run_gpu.sh sanitize_tridiag`` runs the four tools.
"""

import argparse
import functools
import importlib
import itertools
import sys

import numpy as np
from tridiag_systems import backward_error

import prefixsum as ps
from prefixsum.core.poison import poison
from prefixsum.tridiag import _common as tridiag_common, block, hybrid, pivoting, transfers

hh = importlib.import_module("prefixsum.tridiag.householder")

PIVOTING_SHAPES = ((1, 1), (37, 31), (300, 64), (8, 512), (16, 1000), (2, 1500), (3, 3001), (1, 20000), (1, 100000))
"""The one-thread path; whole systems in a block (several a block, one of 63 or 125 chunks);
levels, one to three (:func:`.pivoting.levels`)."""
QUICK_PIVOTING_SHAPES = ((1, 1), (5, 31), (2, 200), (1, 3001))
AUTO_SHAPES = ((40, 31), (6, 700), (2, 3000))
"""``method="auto"`` through the hybrid's warp solver, block solver and partition method."""
QUICK_AUTO_SHAPES = ((8, 31), (4, 700), (2, 3000))
SHAPES = ((1, 1), (37, 31), (300, 64), (8, 512), (3, 1024), (2, 1500), (1, 5000), (1, 20000))
QUICK_SHAPES = ((1, 1), (5, 31), (2, 200), (2, 528), (1, 2000))
BLOCK_SHAPES = ((3, 700), (2, 1024))
"""The block solver alone at every chunk length that holds n (several lanes idle at 700)."""
NUMPY_SHAPES = ((37, 31), (300, 64), (8, 512), (3, 1024), (5, 1500))
QUICK_NUMPY_SHAPES = ((5, 31), (3, 200))
CHUNKED = {"MIN_BYTES": 0, "MIN_CHUNK_BYTES": 0, "CHUNK_BYTES": 1 << 40, "TARGET_CHUNKS": 3}
""":mod:`prefixsum.tridiag.transfers`' settings for the numpy part: every batch in about three chunks (whole
systems)."""
MATRICES = ((5, 16), (2, 100))
QUICK_MATRICES = ((3, 8), (1, 24))
QUICK_SHARED_BYTES = 4096
"""The quick run's shared-memory budget for the Householder part: 24 x 24 float64 matrices then
take the global-memory reduction that 100 x 100 ones take on the GPU, in a fraction of the
simulator's time (an 80 x 80 one took 8 s a call)."""


def dominant(rng, batch, n, dtype):
    a, c = rng.uniform(-1, 1, (2, batch, n))
    b = np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))
    return [v.astype(dtype) for v in (a, b, c, rng.normal(size=(batch, n)))]


def residual(a, b, c, d, x):
    """``max |T x - d| / max(|d|)`` in float64, NaN (never small) if x has a poisoned element."""
    a, b, c, d, x = (v.astype(np.float64) for v in (a, b, c, d, x))
    r = b * x - d
    r[:, 1:] += a[:, 1:] * x[:, :-1]
    r[:, :-1] += c[:, :-1] * x[:, 1:]
    return float(np.max(np.abs(r)) / np.max(np.abs(d)))


def chunked_numpy(rng, dtype, shapes, wrong):
    """``tridiag.solve`` of numpy batches through :mod:`prefixsum.tridiag.transfers`' chunks
    (:data:`CHUNKED`), hybrid, pivoting and auto, the caller's arrays copied straight (pageable)
    and packed through the pinned slots (``PACKED_FROM_BYTES``); returns the number of calls,
    appends to ``wrong``."""
    kept = {name: getattr(transfers, name) for name in (*CHUNKED, "PACKED_FROM_BYTES")}
    calls = 0
    try:
        for name, value in CHUNKED.items():
            setattr(transfers, name, value)
        for (batch, n), pageable in itertools.product(shapes, (True, False)):
            transfers.PACKED_FROM_BYTES = 1 << 62 if pageable else 0
            system = dominant(rng, batch, n, dtype)
            before = [v.copy() for v in system]
            for method in ("hybrid", "pivoting", "auto"):
                res = residual(*system, ps.tridiag.solve(*system, method=method))
                calls += 1
                unchanged = all(np.array_equal(u, v) for u, v in zip(before, system))
                if not res <= 64 * np.finfo(dtype).eps or not unchanged:
                    wrong.append(
                        f"numpy {method} {np.dtype(dtype).name} {batch} x {n} in chunks "
                        f"(pageable={pageable}): "
                        f"residual {res:.2e}, inputs {'unchanged' if unchanged else 'MODIFIED'}"
                    )
    finally:
        for name, value in kept.items():
            setattr(transfers, name, value)
    return calls


def hybrid_call(run, system, wrong):
    """``run(a, b, c, d, x, info)`` (a non-pivoting solver's device path) on ``system`` into a
    poisoned ``x``, checked; returns 1 (the call), appends to ``wrong``."""
    from numba import cuda

    batch, n = system[3].shape
    dtype = system[3].dtype
    x = cuda.to_device(poison(np.empty((batch, n), dtype)))
    info = cuda.to_device(np.zeros(batch, np.int32))
    run(*(cuda.to_device(v) for v in system), x, info)
    res = residual(*system, x.copy_to_host())
    if not res <= 64 * np.finfo(dtype).eps or info.copy_to_host().any():
        name = getattr(run, "__name__", None) or f"{run.func.__name__} {run.keywords}"
        wrong.append(f"hybrid ({name}) {dtype.name} {batch} x {n}: residual {res:.2e}")
    return 1


def pivoting_calls(rng, dtype, shapes, auto_shapes, wrong):
    """``method="pivoting"`` and ``"auto"`` on device arrays (module docstring); returns the number
    of calls, appends to ``wrong``."""
    from numba import cuda

    calls = 0
    eps = np.finfo(dtype).eps
    name = np.dtype(dtype).name

    def solved(system, method, label):
        x, info, _ = ps.tridiag.solve_ex(*(cuda.to_device(v) for v in system), method=method)
        error = backward_error(*system, x.copy_to_host())
        if info.any() or not error <= 16 * system[3].shape[1] * eps:
            wrong.append(f"{method} ({label}) {name} {system[3].shape}: backward error {error:.2e}, info {info.max()}")
        return 1

    for batch, n in shapes:
        calls += solved([v.astype(dtype) for v in rng.uniform(-1, 1, (4, batch, n))], "pivoting", "indefinite")
        tiny = [
            np.ones((batch, n), dtype),
            np.full((batch, n), 1e-10, dtype),
            np.ones((batch, n), dtype),
            rng.uniform(-1, 1, (batch, n)).astype(dtype),
        ]
        calls += solved(tiny, "pivoting", "tridiag(1, 1e-10, 1)")
    kept = pivoting.PAIR_PAIRS
    try:  # every chunk length of the chunked kernels, rows and pairs, on a block's worth and on levels
        for rows, pairs in zip(pivoting.ALL_ROW_PAIRS, pivoting.ALL_PAIR_PAIRS):
            pivoting.PAIR_PAIRS = pairs
            for batch, n in ((3, 300), (2, 3001)):
                system = [v.astype(dtype) for v in rng.uniform(-1, 1, (4, batch, n))]
                x, info = cuda.to_device(poison(np.empty((batch, n), dtype))), cuda.to_device(np.zeros(batch, np.int32))
                pivoting.run(*(cuda.to_device(v) for v in system), x, info, pairs=rows)
                calls += 1
                error = backward_error(*system, x.copy_to_host())
                if info.copy_to_host().any() or not error <= 16 * n * eps:
                    wrong.append(
                        f"pivoting:pairs={rows},pair_pairs={pairs} {name} {batch} x {n}: backward error {error:.2e}"
                    )
    finally:
        pivoting.PAIR_PAIRS = kept
    for batch, n in auto_shapes:  # every other system indefinite: routed to the pivoting solver
        mixed = dominant(rng, batch, n, dtype)
        mixed[1][1::2] = rng.uniform(-1, 1, (batch // 2, n))
        calls += solved(mixed, "auto", "mixed")
    a, b, c, d = (v.astype(dtype) for v in rng.uniform(-1, 1, (4, 3, 400)))
    a[1, 11], b[1, 10], c[1, 10], c[1, 9], a[1, 10] = 0, 0, 0, 0, 0  # system 1: row and column 10 empty, singular
    x, info, rcond = ps.tridiag.solve_ex(*(cuda.to_device(v) for v in (a, b, c, d)), condition=True)
    calls += 1
    x = x.copy_to_host()
    errors = [backward_error(*(v[[m]] for v in (a, b, c, d)), x[[m]]) for m in (0, 2)]
    if (
        list(info) != [0, ps.tridiag.SINGULAR, 0]
        or not np.isnan(x[1]).all()
        or not max(errors) <= 16 * 400 * eps
        or not (rcond[[0, 2]] > 0).all()
        or rcond[1] != 0
    ):
        wrong.append(
            f"solve_ex {name}: a singular system in a batch: info {list(info)}, backward errors {errors}, rcond {rcond}"
        )
    try:
        ps.tridiag.solve(*(cuda.to_device(v) for v in (a, b, c, d)), method="pivoting")
        wrong.append(f"pivoting {name}: a singular system went unreported")
    except np.linalg.LinAlgError:
        calls += 1
    return calls


def householder_calls(rng, dtype, shapes, quick, wrong):
    """``solve_symmetric`` on indefinite matrices, ``householder`` and ``solve_symmetric`` on
    definite ones, and a non-symmetric matrix refused, all from device arrays (in the quick run
    with :data:`QUICK_SHARED_BYTES`); returns the number of calls, appends to ``wrong``."""
    from numba import cuda

    eps = np.finfo(dtype).eps
    name = np.dtype(dtype).name
    kept = tridiag_common.SHARED_BYTES
    tridiag_common.SHARED_BYTES = QUICK_SHARED_BYTES if quick else kept
    calls = 0
    try:
        for batch, n in shapes:
            m = rng.normal(size=(batch, n, n))
            S = ((m + m.transpose(0, 2, 1)) / 2).astype(dtype)  # symmetric, indefinite
            rhs = rng.normal(size=(batch, n)).astype(dtype)
            x = ps.tridiag.solve_symmetric(cuda.to_device(S), cuda.to_device(rhs)).copy_to_host()
            calls += 1
            S64 = S.astype(np.float64)
            scale = np.max(np.abs(S64)) * n * np.max(np.abs(x)) + np.max(np.abs(rhs))
            res = np.max(np.abs(np.einsum("bij,bj->bi", S64, x) - rhs)) / scale
            if not res <= 64 * n * eps:
                wrong.append(f"solve_symmetric indefinite {name} {batch} x {n}: backward error {res:.1e}")
        for batch, n in shapes:
            m = rng.normal(size=(batch, n, n))
            A = (m @ m.transpose(0, 2, 1) / n + np.eye(n)).astype(dtype)
            rhs = rng.normal(size=(batch, n)).astype(dtype)
            d, e, Q = (r.copy_to_host() for r in ps.tridiag.householder(cuda.to_device(A)))
            T = np.zeros((batch, n, n))
            k = np.arange(n)
            T[:, k, k], T[:, k[1:], k[:-1]], T[:, k[:-1], k[1:]] = d, e, e
            Q64 = Q.astype(np.float64)
            error = np.max(np.abs(Q64.transpose(0, 2, 1) @ A @ Q64 - T)) / np.max(np.abs(A))
            x = ps.tridiag.solve_symmetric(cuda.to_device(A), cuda.to_device(rhs)).copy_to_host()
            solve_error = np.max(np.abs(np.einsum("bij,bj->bi", A.astype(np.float64), x) - rhs)) / np.max(np.abs(rhs))
            calls += 2
            if not max(error, solve_error) <= 16 * n * eps:
                wrong.append(f"householder {name} {batch} x {n}: errors {error:.1e}, {solve_error:.1e}")
        A[0, 0, 1] += 1
        try:
            ps.tridiag.householder(cuda.to_device(A))
            wrong.append(f"householder {name}: a non-symmetric matrix went unreported")
        except ValueError:
            calls += 1
    finally:
        tridiag_common.SHARED_BYTES = kept
    return calls


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"shapes {QUICK_SHAPES}; runs on the simulator too")
    parser.add_argument("--only-pivoting", action="store_true", help="only method='pivoting' (its kernels)")
    parser.add_argument(
        "--only-hybrid",
        action="store_true",
        help="only method='hybrid' (warp, block, partition, hybrid_shared) and its zero pivot",
    )
    args = parser.parse_args(argv)
    if ps.device_info()["simulator"] and not args.quick:
        raise SystemExit("sanitize_tridiag.py needs a CUDA GPU (compute-sanitizer); --quick runs it on the simulator")
    from numba import cuda

    rng = np.random.default_rng(13)
    wrong = []
    calls = 0
    for dtype in (np.float32, np.float64):
        for batch, n in () if args.only_pivoting else QUICK_SHAPES if args.quick else SHAPES:
            system = dominant(rng, batch, n, dtype)
            for run in (hybrid.run, hybrid.run_shared):
                calls += hybrid_call(run, system, wrong)
        for batch, n in () if args.only_pivoting else BLOCK_SHAPES:
            system = dominant(rng, batch, n, dtype)
            for rows in (r for r in block.ROWS_PER_THREAD if n <= block.max_rows(dtype, r)):
                calls += hybrid_call(functools.partial(block.run, rows=rows), system, wrong)
        if not args.only_hybrid:
            calls += chunked_numpy(rng, dtype, QUICK_NUMPY_SHAPES if args.quick else NUMPY_SHAPES, wrong)
        a, b, c, d = dominant(rng, 4, 40, dtype)
        b[2] = 0  # a zero diagonal: every method meets a zero pivot (a single zero need not be one)
        try:
            if not args.only_pivoting:
                ps.tridiag.solve(*(cuda.to_device(v) for v in (a, b, c, d)), method="hybrid")
                wrong.append(f"hybrid {np.dtype(dtype).name}: a zero pivot went unreported")
        except np.linalg.LinAlgError:
            calls += 1
        if args.only_hybrid:
            continue
        calls += pivoting_calls(
            rng,
            dtype,
            QUICK_PIVOTING_SHAPES if args.quick else PIVOTING_SHAPES,
            QUICK_AUTO_SHAPES if args.quick else AUTO_SHAPES,
            wrong,
        )
        if args.only_pivoting:
            continue
        calls += householder_calls(rng, dtype, QUICK_MATRICES if args.quick else MATRICES, args.quick, wrong)
    print(f"tridiag: {calls} calls checked", flush=True)
    for line in wrong:
        print("WRONG:", line)
    print(f"{'all results right' if not wrong else f'{len(wrong)} WRONG'} on {ps.device_info()['name']}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
