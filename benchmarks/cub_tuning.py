"""Our scans and sort beside CUB's at each size, kernel time by CUPTI: the tuning run of issue 45.

    python benchmarks/cub_tuning.py [--out DIR] [--quick] [--parts scan,sort,other]   on a GPU (stage "cub_tuning")
    python benchmarks/cub_tuning.py --profile                 one call of each, for Nsight Compute

Two parts, every result checked before it is timed:

- ``scan``: "lookback" in several tile shapes and CUB's ``DeviceScan::InclusiveSum``
  (``cuda.compute``, :mod:`cub_rows`) at n = 2^12 .. 2^28, float32 and float64: the table
  the look-back's tile per element size and n is chosen from (``scan_tiles.csv``, which the
  package reads);
- ``sort``: the onesweep radix sort with its in-warp rank by ballots (the default, as CUB's
  ``MatchAny``) and by ``match_any_sync`` (the lesson's) beside CUB's ``DeviceRadixSort``,
  uint32 keys at 2^20, 2^24 and 2^26, uint64 keys and uint32 keys with uint32 values at 2^24.

A third part, ``other``, checks and times CUB's exclusive sum, select and segmented sum once
(the other builders of :mod:`cub_rows`). The launches of one size and dtype are traced in one
profiler session (:func:`prefixsum.cli.timing.kernel_us_each`). Writes ``cub_tuning.csv``
(part, variant, dtype, n, kernel_us, correct and the run's metadata) and, when the scan part
ran, ``scan_tiles.csv`` (per element size and n, the fastest shape and its time). With
``--profile``: one launch of each kernel Nsight Compute is asked to look at (stage
``cub_tuning``'s ncu command), nothing timed.
"""

import argparse
import functools
import os
import shlex
import sys

import prefixsum as ps  # noqa: F401  (first: it chooses the GPU or the simulator before numba.cuda loads)

# isort: split

import cub_rows  # noqa: E402  (beside this script)
import numpy as np  # noqa: E402
from compaction_rows import exit_skipping_teardown  # noqa: E402
from numba import cuda  # noqa: E402

from prefixsum.apps import onesweep  # noqa: E402
from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.cli.results import print_table, report_wrong, write_csv  # noqa: E402
from prefixsum.cli.timing import QUICK_REPEATS, kernel_us, kernel_us_each  # noqa: E402
from prefixsum.scans.testing import expected_scan, poisoned, random_input, wrong_indices  # noqa: E402

REPEATS = 15
SCAN_SIZES = tuple(1 << k for k in (12, 16, 18, 20, 22, 24, 26, 28))
SCAN_DTYPES = ("float32", "float64")
SHAPES = ((128, 32), (128, 16), (256, 16), (128, 8), (256, 8))
SORTS = [
    ("uint32", None, 1 << 20),
    ("uint32", None, 1 << 24),
    ("uint32", None, 1 << 26),
    ("uint64", None, 1 << 24),
    ("uint32", "uint32", 1 << 24),
]
SORT_VARIANTS = {"rank by ballots": {}, "rank by match_any_sync": {"rank": onesweep.warp_digit_rank}}
PARTS = ("scan", "sort", "other")
QUICK = {
    "scan_sizes": (1000, 5000),
    "sorts": [("uint32", None, 3000), ("uint64", "uint32", 2000)],
    "shapes": ((32, 2), (64, 4)),
}


def shape_name(block_size, items):
    return f"lookback:block_size={block_size},items_per_thread={items}"


def scans(add, sizes, dtypes, shapes, repeats, rng):
    """Kernel times of "lookback" in ``shapes`` and of CUB's inclusive sum, each size and dtype."""
    for dtype in map(np.dtype, dtypes):
        for n in sizes:
            x = random_input(n, "add", dtype, rng)
            expected, allowed = expected_scan(x)
            source, out = cuda.to_device(x), cuda.device_array(n, dtype)
            launches, correct = {}, {}

            def checked(variant, launch):
                out.copy_to_device(poisoned(n, dtype))
                launch()
                launches[variant] = launch
                correct[variant] = wrong_indices(out.copy_to_host(), expected, allowed).size == 0

            for block_size, items in shapes:
                checked(
                    shape_name(block_size, items),
                    functools.partial(
                        ps.ALGORITHMS["lookback"].run,
                        source,
                        out,
                        "add",
                        True,
                        False,
                        block_size=block_size,
                        items_per_thread=items,
                    ),
                )
            cub = cub_rows.attempt("inclusive sum", lambda: cub_rows.scan(source, out))
            if cub is not None:
                checked("CUB inclusive sum", cub)
            for variant, measured in kernel_us_each(launches, repeats=repeats, ran=True).items():
                add("scan", variant, dtype.name, n, measured.us, correct[variant])


def _sort_input(key, value, n, rng):
    keys = rng.integers(0, np.iinfo(key).max, n, dtype=key, endpoint=True)
    values = None if value is None else rng.integers(0, np.iinfo(value).max, n, dtype=value, endpoint=True)
    return keys, values


def sorts(add, cases, variants, repeats, rng):
    """Kernel times of the onesweep variants and CUB's radix sort for each (key, value, n) case."""
    for key, value, n in cases:
        keys, values = _sort_input(np.dtype(key), None if value is None else np.dtype(value), n, rng)
        order = np.argsort(keys, kind="stable")
        want_keys, want_values = keys[order], None if values is None else values[order]
        dkeys = cuda.to_device(keys)
        dvalues = None if values is None else cuda.to_device(values)
        label = key if value is None else f"{key}+{value}"

        def check(got_keys, got_values):
            return bool(
                np.array_equal(got_keys, want_keys) and (values is None or np.array_equal(got_values, want_values))
            )

        launches, correct = {}, {}
        for name, options in variants.items():

            def launch(options=options):
                return onesweep.sort_device(dkeys, dvalues, **options)

            got = launch()
            launches[f"onesweep {name}"] = launch
            correct[f"onesweep {name}"] = check(
                got[0].copy_to_host(), None if values is None else got[1].copy_to_host()
            )
        out_keys = cuda.device_array(n, keys.dtype)
        out_values = None if values is None else cuda.device_array(n, values.dtype)
        call = cub_rows.attempt("radix sort", lambda: cub_rows.radix_sort(dkeys, out_keys, dvalues, out_values))
        if call is not None:
            call()
            launches["CUB radix sort"] = call
            correct["CUB radix sort"] = check(
                out_keys.copy_to_host(), None if values is None else out_values.copy_to_host()
            )
        for variant, measured in kernel_us_each(launches, repeats=repeats, ran=True).items():
            add("sort", variant, label, n, measured.us, correct[variant])


def other_cub_calls(add, n, repeats, rng):
    """CUB's exclusive sum, select (``x > 0``) and segmented sum at one size, checked and timed:
    the other builders of :mod:`cub_rows`, before the stages rely on them."""
    if cub_rows.load() is None:
        return
    x = random_input(n, "add", np.dtype("float32"), rng)
    source, out = cuda.to_device(x), cuda.device_array(n, np.float32)
    expected, allowed = expected_scan(x, inclusive=False)
    call = cub_rows.scan(source, out, inclusive=False)
    call()
    add(
        "other",
        "CUB exclusive sum",
        "float32",
        n,
        kernel_us(call, repeats=repeats, method="cupti").us,
        wrong_indices(out.copy_to_host(), expected, allowed).size == 0,
    )
    count = cuda.to_device(np.zeros(2, np.int64))
    call = cub_rows.select(source, out, count, cub_rows.positive("float32"))
    call()
    kept = x[x > 0]
    add(
        "other",
        "CUB select x > 0",
        "float32",
        n,
        kernel_us(call, repeats=repeats, method="cupti").us,
        count.copy_to_host()[0] == kept.size and np.array_equal(out.copy_to_host()[: kept.size], kept),
    )
    starts = np.sort(rng.choice(n, 999, replace=False)).astype(np.int64)
    starts[0] = 0
    ends = np.append(starts[1:], n).astype(np.int64)
    sums = cuda.device_array(starts.size, np.float32)
    call = cub_rows.segmented_sum(source, sums, cuda.to_device(starts), cuda.to_device(ends))
    call()
    want = np.add.reduceat(x.astype(np.float64), starts)
    add(
        "other",
        "CUB segmented sum (1000 segments)",
        "float32",
        n,
        kernel_us(call, repeats=repeats, method="cupti").us,
        np.allclose(sums.copy_to_host(), want, rtol=1e-4, atol=1e-2),
    )


def fastest_shapes(rows):
    """Per element size and n, the fastest "lookback" shape (the table ``scan_tiles.csv``)."""
    best = {}
    for row in rows:
        if row["part"] != "scan" or not row["variant"].startswith("lookback") or not row["correct"]:
            continue
        key = (np.dtype(row["dtype"]).itemsize, row["n"])
        if key not in best or row["kernel_us"] < best[key]["kernel_us"]:
            best[key] = row
    table = []
    for (itemsize, n), row in sorted(best.items()):
        options = dict(item.split("=") for item in row["variant"].split(":")[1].split(","))
        table.append(
            {
                "itemsize": itemsize,
                "n": n,
                "block_size": int(options["block_size"]),
                "items_per_thread": int(options["items_per_thread"]),
                "kernel_us": row["kernel_us"],
                "device": row["device"],
                "date": row["date"],
                "source": "cub_tuning.csv",
            }
        )
    return table


def profile():
    """One call of each kernel for Nsight Compute: lookback and CUB's scan (float64, 2^24), the
    onesweep sort (rank by ballots, the default, and by ``match_any_sync``) and CUB's (uint32, 2^24)."""
    rng = np.random.default_rng(3)
    n = 1 << 24
    x = cuda.to_device(random_input(n, "add", np.dtype("float64"), rng))
    out = cuda.device_array(n, np.float64)
    ps.ALGORITHMS["lookback"].run(x, out, "add", True, False, **ps.ALGORITHMS["lookback"].options)
    if cub_rows.load() is not None:
        cub_rows.scan(x, out)()
    keys, _ = _sort_input(np.dtype("uint32"), None, n, rng)
    dkeys = cuda.to_device(keys)
    onesweep.sort_device(dkeys)
    onesweep.sort_device(dkeys, rank=onesweep.warp_digit_rank)  # launched through numba's dispatcher
    if cub_rows.load() is not None:
        cub_rows.radix_sort(dkeys, cuda.device_array(n, np.uint32))()
    cuda.synchronize()
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/out"))
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 2 repeats: tests the script (simulator too)")
    parser.add_argument("--profile", action="store_true", help="one call of each kernel, for Nsight Compute")
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)} (default: all)"
    )
    parser.add_argument(
        "--scan-dtype", action="append", choices=SCAN_DTYPES, help="the scan part's dtypes (default: both)"
    )
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    if set(parts) - set(PARTS):
        raise SystemExit(f"unknown part in --parts {args.parts!r}; the parts are {', '.join(PARTS)}")
    if args.profile:
        return profile()
    repeats = QUICK_REPEATS if args.quick else REPEATS
    meta = run_metadata(
        ("torch", "cub"), shlex.join(["python", "benchmarks/cub_tuning.py", *(sys.argv[1:] if argv is None else argv)])
    )
    rows = []

    def add(part, variant, dtype, n, micros, correct):
        rows.append(
            {
                "part": part,
                "variant": variant,
                "dtype": dtype,
                "n": n,
                "kernel_us": round(micros, 2),
                "correct": bool(correct),
                "timing": "cupti, kernels summed per call",
                **meta,
            }
        )
        print(
            f"{part:<5} {variant:<48} {dtype:<14} n={n:<10} {micros:>10.2f} us{'' if correct else '  WRONG'}",
            flush=True,
        )

    rng = np.random.default_rng(45)
    try:
        if "scan" in parts:
            scans(
                add,
                QUICK["scan_sizes"] if args.quick else SCAN_SIZES,
                args.scan_dtype or SCAN_DTYPES,
                QUICK["shapes"] if args.quick else SHAPES,
                repeats,
                rng,
            )
        if "sort" in parts:
            sorts(add, QUICK["sorts"] if args.quick else SORTS, SORT_VARIANTS, repeats, rng)
        if "other" in parts:
            other_cub_calls(add, 1000 if args.quick else 1 << 20, repeats, rng)
    finally:  # also after a KeyboardInterrupt (timeout -s INT): what was measured is kept
        if rows:
            write_csv(rows, os.path.join(args.out, "cub_tuning.csv"))
        if "scan" in parts:
            write_csv(
                fastest_shapes(rows)
                or [
                    {
                        "itemsize": "",
                        "n": "",
                        "block_size": "",
                        "items_per_thread": "",
                        "kernel_us": "",
                        "device": meta["device"],
                        "date": meta["date"],
                        "source": "cub_tuning.csv",
                    }
                ],
                os.path.join(args.out, "scan_tiles.csv"),
            )
    print_table(
        ratios(rows),
        ["part", "dtype", "n", "ours_us", "best of ours", "cub_us", "vs CUB"],
        title="best of ours against CUB (kernel time, CUPTI; vs CUB > 1: ours faster):",
    )
    return report_wrong(rows, lambda row: f"{row['part']} {row['variant']} {row['dtype']} n={row['n']}")


def ratios(rows):
    """Per part, dtype and n: our fastest variant, CUB's time, CUB's over ours."""
    found = {}
    for row in rows:
        key = (row["part"], row["dtype"], row["n"])
        slot = found.setdefault(
            key,
            {
                "part": key[0],
                "dtype": key[1],
                "n": key[2],
                "ours_us": float("inf"),
                "best of ours": "",
                "cub_us": float("nan"),
            },
        )
        if row["variant"].startswith("CUB"):
            slot["cub_us"] = row["kernel_us"]
        elif row["kernel_us"] < slot["ours_us"]:
            slot["ours_us"], slot["best of ours"] = row["kernel_us"], row["variant"].replace("lookback:", "")
    for slot in found.values():
        slot["vs CUB"] = round(slot["cub_us"] / slot["ours_us"], 3)
    return list(found.values())


if __name__ == "__main__":
    exit_skipping_teardown(main())
