"""The semantics of numba's warp-level calls and integer operations, measured on the current device, to compare devices.

Runs one set of small kernels that exercise every warp-level call numba offers -- the four
shuffles, ``syncwarp``, the votes (``ballot_sync``, ``all_sync``, ``any_sync``, ``eq_sync``),
``match_any_sync`` and ``match_all_sync``, ``activemask`` and ``lanemask_lt`` -- with full and
partial member masks, deltas and lane operands past the end of the warp, xor patterns, CUDA C's
``width`` (8 and 16) written as index arithmetic (numba's shuffles have no ``width``), predicates,
a partial last warp, and int32, uint32, int64, uint64, float32 and float64 values (unsigned
values travel as the signed type of their width, see :func:`prefixsum.warp.carrier`); and the
integer operations the chapters use: ``popc``, ``clz``, ``ffs`` and ``brev`` of every integer type
(zero, one, all bits, the sign bit alone) and of votes and matches (a ballot of 32 lanes is the
int32 -1), shifts by 0 to 64 and the overflow of int32 and uint32 as numba types them (in 64
bits, signed if either operand is), and casts that keep the low bits.

Every result is also checked against a model of PTX's ``shfl.sync`` and ``vote.sync`` written
in plain Python (``warp_model.py``, with the cases' inputs); each output records which lanes'
results are *defined*. A lane that reads a source lane outside the mask gets an undefined value
on a GPU (the simulator returns poison), so those lanes are excluded from every comparison.
``activemask()`` depends on how the hardware happens to converge the lanes: its cases are marked
``convergence`` and compared for information only.

Usage::

    python benchmarks/warp_semantics.py --out FILE.json        # run on the current device
    python benchmarks/warp_semantics.py --compare A.json B.json

``--compare`` diffs the defined results of two runs (e.g. the simulator's and a GPU's), prints
every case that differs and a verdict, and exits with 1 when a defined result differs.
"""

import argparse
import functools
import json
import sys
from pathlib import Path

# Runs from a checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import warnings  # noqa: E402

import numpy as np  # noqa: E402

import prefixsum as ps  # noqa: E402  (chooses the device before numba.cuda is imported)

# isort: split
from numba import cuda  # noqa: E402
from warp_integers import integer_results  # noqa: E402  (benchmarks/, beside this script)
from warp_model import MASKS, lane_values, match_model, shuffle_model, vote_model, warp_masks  # noqa: E402

from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.primitives.warp import carrier  # noqa: E402
from prefixsum.scans.ops import numba_type  # noqa: E402

THREADS = 64  # two warps per block: every case checks that warps do not mix
PARTIAL = 40  # a block whose second warp has 8 lanes
SHUFFLES = ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync")
VOTES = ("ballot_sync", "all_sync", "any_sync", "eq_sync")
SHUFFLE_DTYPES = ("int32", "uint32", "int64", "uint64", "float32", "float64")
MATCH_DTYPES = ("int32", "int64", "float32", "float64")
PARTIAL_MASKS = ("low16", "odd", "mixed", "one")
# The operands that also run with every partial mask.
WITH_PARTIAL_MASKS = (
    "src=0",
    "src=31-lane",
    "src=lane+1 mod 32",
    "delta=1",
    "delta=2",
    "delta=16",
    "xor=1",
    "xor=3",
    "xor=16",
)


# The kernels. One block per case; ``mode`` picks the call, the same for every lane.


@functools.lru_cache(maxsize=None)
def shuffle_kernel(dtype):
    """Kernel ``(values, masks, operands, segs, mode, out)``; lanes outside their mask keep
    their value. ``segs[c] < 32`` emulates CUDA C's ``width`` for the up and down shuffles."""
    to, back = carrier(dtype)

    def shuffles(values, masks, operands, segs, mode, out):
        c = cuda.blockIdx.x
        t = cuda.threadIdx.x
        lane = t & 31
        v = values[t]
        mask = masks[c, t]
        b = operands[c, t]
        seg = segs[c]
        r = v
        if mask >> lane & 1:
            if mode == 0:
                r = back(cuda.shfl_sync(mask, to(v), b))
            elif mode == 1:
                r = back(cuda.shfl_up_sync(mask, to(v), b))
                if seg < 32 and lane % seg < b:
                    r = v
            elif mode == 2:
                r = back(cuda.shfl_down_sync(mask, to(v), b))
                if seg < 32 and lane % seg + b >= seg:
                    r = v
            else:
                r = back(cuda.shfl_xor_sync(mask, to(v), b))
        out[c, t] = r

    return cuda.jit(shuffles)


@cuda.jit
def votes(masks, predicates, mode, out):
    c = cuda.blockIdx.x
    t = cuda.threadIdx.x
    mask = masks[c, t]
    p = predicates[c, t] != 0
    r = -7  # lanes outside the mask
    if mask >> (t & 31) & 1:
        if mode == 0:
            r = cuda.ballot_sync(mask, p)
        elif mode == 1:
            r = 1 if cuda.all_sync(mask, p) else 0
        elif mode == 2:
            r = 1 if cuda.any_sync(mask, p) else 0
        else:
            r = 1 if cuda.eq_sync(mask, p) else 0
    out[c, t] = r


@cuda.jit
def matches(values, masks, out):
    """out[c, t, :] = match_any_sync, then match_all_sync's mask and predicate."""
    c = cuda.blockIdx.x
    t = cuda.threadIdx.x
    mask = masks[c, t]
    out[c, t, 0] = -7
    out[c, t, 1] = -7
    out[c, t, 2] = -7
    if mask >> (t & 31) & 1:
        v = values[c, t]
        out[c, t, 0] = cuda.match_any_sync(mask, v)
        same, pred = cuda.match_all_sync(mask, v)
        out[c, t, 1] = same
        out[c, t, 2] = 1 if pred else 0


@functools.lru_cache(maxsize=None)
def syncwarp_kernel(dtype):
    """Kernel ``(values, masks, out)``: the lanes of the mask store, ``syncwarp``, then read the
    slot of lane ^ 1 (in the mask for every mask used here)."""
    element = numba_type(dtype)

    def exchange(values, masks, out):
        slots = cuda.shared.array(THREADS, element)
        c = cuda.blockIdx.x
        t = cuda.threadIdx.x
        mask = masks[c, t]
        r = values[t]
        if mask >> (t & 31) & 1:
            slots[t] = values[t]
            cuda.syncwarp(mask)
            r = slots[t ^ 1]
        out[c, t] = r

    return cuda.jit(exchange)


@cuda.jit
def lane_masks(out):
    """out[:, 0] uniform activemask; 1: inside ``if lane < 10``; 2: inside ``if lane odd``;
    3: lanemask_lt."""
    t = cuda.threadIdx.x
    lane = t & 31
    out[t, 0] = cuda.activemask()
    out[t, 1] = -7
    out[t, 2] = -7
    if lane < 10:
        out[t, 1] = cuda.activemask()
    if lane % 2 == 1:
        out[t, 2] = cuda.activemask()
    out[t, 3] = cuda.lanemask_lt()


# The cases.


def _case(name, dtype, got, expected, defined, status="defined"):
    """One case's record; ``model`` (the expected results) is checked, then left out of the file."""
    return {
        "name": name,
        "dtype": str(dtype),
        "status": status,
        "values": _encode(got),
        "defined": [int(d) for d in defined],
        "model": _encode(expected),
    }


def _encode(values):
    values = np.asarray(values).ravel()
    if values.dtype.kind == "f":
        return [float(v).hex() for v in values]
    return [int(v) for v in values]


def shuffle_operands(mode, threads):
    """(label, per-thread operand, seg) for ``mode``."""
    lane = np.arange(threads) & 31
    if mode == "shfl_sync":
        return [
            ("src=0", lane * 0, 32),
            ("src=31", lane * 0 + 31, 32),
            ("src=31-lane", 31 - lane, 32),
            ("src=lane+1 mod 32", (lane + 1) % 32, 32),
            ("src=lane+33", lane + 33, 32),
            ("src=-1", lane * 0 - 1, 32),
            ("width=8 src=segment start", lane & ~7, 32),
            ("width=16 src=segment rotate 3", (lane & ~15) | ((lane + 3) & 15), 32),
        ]
    if mode == "shfl_xor_sync":
        return [(f"xor={d}", lane * 0 + d, 32) for d in (1, 2, 3, 16, 31, 32, 33)]
    plain = [(f"delta={d}", lane * 0 + d, 32) for d in (1, 2, 5, 16, 31, 32, 33, 40)]
    return plain + [(f"width={w} delta={d}", lane * 0 + d, w) for w in (8, 16) for d in (1, 3, 8, 9)]


def shuffle_cases(dtypes):
    cases = []
    for dtype in dtypes:
        for mode in SHUFFLES:
            specs = []
            for label, operand, seg in shuffle_operands(mode, THREADS):
                specs.append((f"{label} mask=full", "full", operand, seg, THREADS))
                if label in WITH_PARTIAL_MASKS:
                    specs += [(f"{label} mask={p}", p, operand, seg, THREADS) for p in PARTIAL_MASKS]
            cases += _run_shuffles(dtype, mode, specs, THREADS)
            partial = [
                (f"{label} mask=full threads={PARTIAL}", "full", operand, seg, PARTIAL)
                for label, operand, seg in shuffle_operands(mode, PARTIAL)[:3]
            ]
            cases += _run_shuffles(dtype, mode, partial, PARTIAL)
    return cases


def _run_shuffles(dtype, mode, specs, threads):
    values = lane_values(dtype, threads)
    masks = np.array([warp_masks(pattern, threads) for _, pattern, _, _, _ in specs])
    operands = np.array([operand for _, _, operand, _, _ in specs], np.int64)
    segs = np.array([seg for _, _, _, seg, _ in specs], np.int64)
    out = np.zeros((len(specs), threads), values.dtype)
    shuffle_kernel(dtype)[len(specs), threads](values, masks, operands, segs, SHUFFLES.index(mode), out)
    cases = []
    for c, (label, *_rest) in enumerate(specs):
        expected, defined = shuffle_model(mode, values, masks[c], operands[c], segs[c])
        cases.append(_case(f"{mode} {dtype} {label}", dtype, out[c], expected, defined))
    return cases


def vote_cases():
    lane = np.arange(THREADS)
    predicates = {
        "lane%3==0": lane % 3 == 0,
        "all": lane >= 0,
        "none": lane < 0,
        "lane<5": (lane & 31) < 5,
        "odd": lane % 2 == 1,
    }
    specs = [(p, m) for p in predicates for m in MASKS]
    masks = np.array([warp_masks(m, THREADS) for _, m in specs])
    preds = np.array([predicates[p] for p, _ in specs], np.int64)
    cases = []
    for mode in VOTES:
        out = np.zeros((len(specs), THREADS), np.int64)
        votes[len(specs), THREADS](masks, preds, VOTES.index(mode), out)
        for c, (p, m) in enumerate(specs):
            expected = vote_model(mode, masks[c], preds[c])
            cases.append(_case(f"{mode} predicate={p} mask={m}", "int64", out[c], expected, np.ones(THREADS)))
    return cases


def match_cases():
    lane = np.arange(THREADS)
    cases = []
    for dtype in MATCH_DTYPES:
        patterns = {"lane%3": lane % 3, "same": lane * 0 + 7, "distinct": lane, "lane<4": np.minimum(lane & 31, 4)}
        specs = [(p, m) for p in patterns for m in ("full", "low16", "odd", "mixed")]
        values = np.array([patterns[p] for p, _ in specs]).astype(dtype)
        masks = np.array([warp_masks(m, THREADS) for _, m in specs])
        out = np.zeros((len(specs), THREADS, 3), np.int64)
        matches[len(specs), THREADS](values, masks, out)
        for c, (p, m) in enumerate(specs):
            expected = match_model(values[c], masks[c])
            cases.append(
                _case(
                    f"match_any/all_sync {dtype} values={p} mask={m}", "int64", out[c], expected, np.ones(3 * THREADS)
                )
            )
    return cases


def syncwarp_cases():
    cases = []
    for dtype in ("int32", "float64"):
        specs = ("full", "low16", "pairs", "quads")
        patterns = {**MASKS, "pairs": 0x33333333, "quads": 0x0F0F0F0F}
        masks = np.array([[patterns[s] for _ in range(THREADS)] for s in specs], np.int64)
        values = lane_values(dtype, THREADS)
        out = np.zeros((len(specs), THREADS), values.dtype)
        syncwarp_kernel(dtype)[len(specs), THREADS](values, masks, out)
        for c, s in enumerate(specs):
            lane = np.arange(THREADS)
            inside = (masks[c] >> (lane & 31)) & 1 == 1
            expected = np.where(inside, values[lane ^ 1], values)
            name = f"syncwarp {dtype} exchange with lane^1 mask={s}"
            cases.append(_case(name, dtype, out[c], expected, np.ones(THREADS)))
    return cases


def lane_mask_cases():
    cases = []
    for threads in (THREADS, PARTIAL):
        out = np.zeros((threads, 4), np.int64)
        lane_masks[1, threads](out)
        lane = np.arange(threads) & 31
        warp_lanes = np.minimum(32, threads - (np.arange(threads) - lane))
        uniform = (1 << warp_lanes) - 1
        low10 = np.where(lane < 10, 0x3FF & uniform, -7)
        odd = np.where(lane % 2 == 1, 0xAAAAAAAA & uniform, -7)
        for k, (name, expected, status) in enumerate(
            (
                ("activemask() in uniform code", uniform, "convergence"),
                ("activemask() inside if lane < 10", low10, "convergence"),
                ("activemask() inside if lane odd", odd, "convergence"),
                ("lanemask_lt()", (1 << lane) - 1, "defined"),
            )
        ):
            cases.append(_case(f"{name} threads={threads}", "int64", out[:, k], expected, np.ones(threads), status))
    return cases


def integer_cases():
    """The integer cases (:func:`warp_integers.integer_results`) as records of this file."""
    return [_case(name, "int64", got, expected, defined) for name, got, expected, defined in integer_results()]


def run_all(shuffle_dtypes=SHUFFLE_DTYPES):
    """Every case on the current device: a list of dicts (name, dtype, status, values, defined, model)."""
    return (
        shuffle_cases(shuffle_dtypes)
        + vote_cases()
        + match_cases()
        + syncwarp_cases()
        + lane_mask_cases()
        + integer_cases()
    )


def model_disagreements(cases):
    """Names of the ``defined`` cases whose defined results differ from the model."""
    return [
        c["name"]
        for c in cases
        if c["status"] == "defined" and _differing(c["values"], c["model"], c["defined"], c["defined"])
    ]


def _differing(a, b, defined_a, defined_b):
    return [k for k, (x, y, da, db) in enumerate(zip(a, b, defined_a, defined_b)) if da and db and x != y]


def compare(path_a, path_b, out=None):
    """Print how the defined results of two runs differ, and a verdict, to ``out`` (default: the
    ``sys.stdout`` of the call, not of the import); return True if they agree."""
    out = out or sys.stdout
    a, b = (json.loads(Path(p).read_text()) for p in (path_a, path_b))
    print(f"A: {path_a} ({a['device']['name']})\nB: {path_b} ({b['device']['name']})", file=out)
    cases_a = {c["name"]: c for c in a["cases"]}
    cases_b = {c["name"]: c for c in b["cases"]}
    only = sorted(set(cases_a) ^ set(cases_b))
    failed, notes, compared = [], [], 0
    for name in (n for n in cases_a if n in cases_b):
        ca, cb = cases_a[name], cases_b[name]
        lanes = _differing(ca["values"], cb["values"], ca["defined"], cb["defined"])
        compared += sum(1 for da, db in zip(ca["defined"], cb["defined"]) if da and db)
        if lanes:
            shown = ", ".join(f"[{k}] {ca['values'][k]} vs {cb['values'][k]}" for k in lanes[:4])
            (failed if ca["status"] == "defined" else notes).append(f"{name}: {len(lanes)} differ: {shown}")
    for line in failed:
        print(f"DIFF {line}", file=out)
    for line in notes:
        print(f"note (depends on how the lanes converge, not a failure) {line}", file=out)
    for name in only:
        print(f"only in {'A' if name in cases_a else 'B'}: {name}", file=out)
    same = not failed and not only
    verdict = "SAME" if same else "DIFFERENT"
    both = len(set(cases_a) & set(cases_b))
    print(
        f"VERDICT: {verdict}: {compared} defined results in {both} cases compared, {len(failed)} cases "
        f"differ, {len(notes)} convergence notes, {len(only)} cases in one file only",
        file=out,
    )
    return same


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="run every case on the current device and write the results here (JSON)")
    group.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare the defined results of two runs")
    args = parser.parse_args(argv)
    if args.compare:
        return 0 if compare(*args.compare) else 1
    with warnings.catch_warnings():  # tiny grids and host arrays are on purpose here
        warnings.filterwarnings("ignore", message=".*(Grid size|Host array used)")
        cases = run_all()
    # The harness's metadata, with the device described in full (--compare reads its name).
    result = {
        **run_metadata(),
        "device": {k: (list(v) if isinstance(v, tuple) else v) for k, v in ps.device_info().items()},
    }
    wrong = model_disagreements(cases)
    for case in cases:
        del case["model"]
    # One case per line: the committed files diff case by case.
    text = json.dumps(result)[:-1] + ', "cases": [\n' + ",\n".join(json.dumps(c) for c in cases) + "\n]}\n"
    Path(args.out).write_text(text)
    defined = sum(sum(c["defined"]) for c in cases)
    print(f"{len(cases)} cases, {defined} defined results, on {result['device']['name']}; written to {args.out}")
    for name in wrong:
        print(f"differs from the PTX model: {name}")
    print(f"model check: {'all defined results agree' if not wrong else f'{len(wrong)} cases differ'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
