"""The measured numbers of the README and of docs/performance.md, computed from the committed CSVs.

    python benchmarks/readme_tables.py            # print them
    python benchmarks/readme_tables.py --write    # put them into both files between the markers

The README carries one generated paragraph (the default scan and the radix sort against NVIDIA's
CUB itself, and against torch.cumsum), the book's performance page the full tables. "CUB" names
only rows that timed CUB (``cuda.compute``); torch.cumsum and torch.sort call CUB behind torch's
own dispatch and are named as what was timed. tests/test_readme_tables.py fails when either file differs
from what this prints, so neither can drift from the measurements.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from prefixsum.cli import results  # noqa: E402
from prefixsum.tridiag import registry  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # sort_rows, beside this script
from sort_rows import CUB_SORT  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- measured:begin (python benchmarks/readme_tables.py --write) -->", "<!-- measured:end -->"
SIZES = (24, 26)
SCANS = ("hierarchical", "blelloch", "blelloch:conflict_free=False", "ladder", "folding", "hillis_steele", "kstep")
BASELINES = ("torch.cumsum", "cupy.cumsum", "torch copy", "copy")
NAMES = {
    "torch.cumsum": "torch.cumsum",
    "torch copy": "device copy, torch `copy_`",
    "copy": "device copy, numba kernel",
    "blelloch:conflict_free=False": "`blelloch`, no padding",
    "hierarchical": "`hierarchical`",
    "kstep": "`kstep` (default L)",
}


def _both(name, variant, column, fmt, dtype="float32"):
    return " (".join(fmt.format(results.value(name, column, variant=variant, dtype=dtype, n=2**k)) for k in SIZES) + ")"


def kernel_table():
    lines = [
        f"| n = 2^{SIZES[0]} (2^{SIZES[1]}), float32 | kernel time | GB/s | vs torch.cumsum |",
        "| --- | --- | --- | --- |",
    ]

    def median_us(variant, k):
        return results.value("scan_throughput.csv", "median_us", variant=variant, dtype="float32", n=2**k)

    for variant in SCANS + BASELINES:
        name = NAMES.get(variant, f"`{variant}`")
        ratio = " (".join(f"{median_us('torch.cumsum', k) / median_us(variant, k):.2f}x" for k in SIZES) + ")"
        lines.append(
            f"| {name} | {_both('scan_throughput.csv', variant, 'median_us', '{:.0f} us')} | "
            f"{_both('scan_throughput.csv', variant, 'gbps', '{:.0f}')} | "
            f"{ratio if variant != 'torch.cumsum' else '1'} |"
        )
    return "\n".join(lines)


def large_and_calls():
    name = "hierarchical_bench.csv"
    at = dict(dtype="float32", n=2**28)
    best = min(results.read(name, kind="ours", **at), key=lambda row: row["median_us"])
    cumsum = results.value(name, "median_us", variant="torch.cumsum", **at)
    copy = results.value(name, "median_us", variant="torch copy", **at)
    calls = [
        (
            k,
            results.value(name, "median_us", variant="ps.scan(hierarchical) call", dtype="float32", n=2**k),
            results.value(name, "median_us", variant="hierarchical", dtype="float32", n=2**k),
        )
        for k in (20, 24, 28)
    ]
    device = results.value(name, "device", variant="torch.cumsum", **at)
    return (
        f"At 2^28 the fastest `hierarchical` shape (`{best['variant']}`) takes {best['median_us']:.0f} us against "
        f"torch.cumsum's {cumsum:.0f} us ({cumsum / best['median_us']:.2f}x) and a copy's {copy:.0f} us. A whole "
        f"`ps.scan(device_array)` call, synchronized, on the host clock: "
        + ", ".join(f"{call:.0f} us at 2^{k} (kernels {kernels:.0f} us)" for k, call, kernels in calls)
        + f"; the difference is host work (Python, launches, allocating the output). All on one {device}."
    )


CUB_SCAN_SIZES = (12, 16, 18, 20, 22, 24, 26, 28)
SORT_CASES = (("uint32", 20), ("uint32", 24), ("uint32", 26), ("uint64", 24), ("uint32+uint32", 24))


def _cub_run(name="cub_tuning.csv"):
    """The rows of the run of each part: scans without a since-reverted variant, sorts, CUB's."""
    return [row for row in results.read(name) if "[" not in row["variant"]]


def cub_scan_table(name="cub_tuning.csv"):
    """Our scan kernel (the tile the package chooses: the fastest of five shapes) against CUB's, per n."""
    rows = _cub_run(name)

    def at(dtype, k):
        same = [r for r in rows if r["part"] == "scan" and r["dtype"] == dtype and r["n"] == 2**k]
        ours = min((r for r in same if r["variant"].startswith("lookback:")), key=lambda r: r["kernel_us"])
        cub = next(r for r in same if r["variant"] == "CUB inclusive sum")
        return ours["kernel_us"], cub["kernel_us"]

    lines = [
        "| inclusive sum, kernel us (ours / CUB, CUB's time over ours) | "
        + " | ".join(f"2^{k}" for k in CUB_SCAN_SIZES)
        + " |",
        "| --- |" + " --- |" * len(CUB_SCAN_SIZES),
    ]
    for dtype in ("float32", "float64"):
        cells = []
        for k in CUB_SCAN_SIZES:
            ours, cub = at(dtype, k)
            cells.append(f"{_us(ours)} / {_us(cub)} ({cub / ours:.2f}x)")
        lines.append(f"| {dtype} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _us(value):
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def cub_sort_table(name="cub_tuning.csv"):
    """The onesweep sort (its two in-warp ranks) against CUB's DeviceRadixSort."""
    rows = [r for r in _cub_run(name) if r["part"] == "sort"]

    def us(variant, dtype, k):
        return next(r["kernel_us"] for r in rows if r["variant"] == variant and r["dtype"] == dtype and r["n"] == 2**k)

    lines = [
        "| radix sort, kernel us | onesweep (rank by ballots, the default) | onesweep (rank by `match_any_sync`) "
        "| CUB `DeviceRadixSort` | CUB's time over ours |",
        "| --- | --- | --- | --- | --- |",
    ]
    for dtype, k in SORT_CASES:
        ours, lesson, cub = (
            us(v, dtype, k) for v in ("onesweep rank by ballots", "onesweep rank by match_any_sync", "CUB radix sort")
        )
        label = "uint32 keys, uint32 values" if "+" in dtype else f"{dtype} keys"
        lines.append(f"| {label}, n = 2^{k} | {ours:.0f} | {lesson:.0f} | {cub:.0f} | {cub / ours:.2f}x |")
    return "\n".join(lines)


def sort_against_cub(name="applications.csv", n=2**24):
    """Our sort's and CUB's device time of ``n`` uint32 keys in ``name``, as a clause."""
    device = {
        row["method"]: float(row["device_us"])
        for row in results.read(name, task="sort", dtype="uint32", n=n)
        if row["method"] in ("onesweep", CUB_SORT)
    }
    ours, cub = device["onesweep"], device[CUB_SORT]
    return f"{ours:.0f} us of device time against CUB's {cub:.0f} us (CUB's time over ours {cub / ours:.2f}x)"


def cub_paragraph(name="cub_tuning.csv"):
    meta = _cub_run(name)[0]
    return (
        f"Against NVIDIA's CUB itself: CUB {meta['cub']} built for the GPU by `cuda.compute` in the same process "
        f"(`benchmarks/cub_rows.py`: built once, its temporary storage kept), kernel times by CUPTI (the kernels "
        f"of a call summed, median of 15), every result checked first; one {meta['device']}, {meta['date']}, "
        f"`benchmarks/cub_tuning.csv` (`python benchmarks/cub_tuning.py`). Ours is the tile the package chooses "
        "for the element size and length (`benchmarks/scan_tiles.csv`: the fastest of five shapes); int32 and "
        "int64 run the kernels of float32 and float64 with integer adds."
    )


def lookback_table(name="lookback.csv"):
    """The single-pass scan against torch.cumsum and the two copies, and whole calls (lookback.csv,
    or the H200's h200/lookback.csv)."""

    def us(variant, dtype, n, part="kernel"):
        return results.value(name, "median_us", variant=variant, part=part, dtype=dtype, n=n)

    timed_cub = bool(results.read(name, variant="CUB inclusive sum"))
    lines = [
        "| kernel time, n = 2^24 / 2^26 / 2^28 | `lookback` (auto) | CUB (`cuda.compute`) | vs CUB | torch.cumsum "
        "| "
        "vs torch.cumsum | of torch `copy_` bandwidth | of numba copy bandwidth |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for dtype in ("float32", "int32", "float64", "int64"):
        sizes = [2**k for k in (24, 26, 28)]
        ours = [us("lookback", dtype, n) for n in sizes]
        cub = [us("CUB inclusive sum", dtype, n) for n in sizes] if timed_cub else None
        cumsum = [us("torch.cumsum", dtype, n) for n in sizes]
        torch_copy = [us("torch copy", dtype, n) for n in sizes]
        copy = [us("copy", dtype, n) for n in sizes]
        against_cub = (
            f"{' / '.join(f'{v:.0f}' for v in cub)} us | " + " / ".join(f"{c / o:.2f}x" for c, o in zip(cub, ours))
            if cub
            else "not timed in this run | -"
        )
        lines.append(
            f"| {dtype} | {' / '.join(f'{v:.0f}' for v in ours)} us | {against_cub} | "
            f"{' / '.join(f'{v:.0f}' for v in cumsum)} us | "
            + " / ".join(f"{c / o:.2f}x" for c, o in zip(cumsum, ours))
            + " | "
            + " / ".join(f"{c / o:.0%}" for c, o in zip(torch_copy, ours))
            + " | "
            + " / ".join(f"{c / o:.0%}" for c, o in zip(copy, ours))
            + " |"
        )
    calls = []
    for k in (10, 16, 20):
        mine, theirs = (
            us("ps.scan(auto)", "float32", 2**k, "call on device"),
            us("torch.cumsum", "float32", 2**k, "call on device"),
        )
        against = [f"torch.cumsum and a synchronize {theirs:.0f} us, {mine / theirs:.2f}x its time"]
        if timed_cub:
            cub = us("CUB call (temporary storage kept)", "float32", 2**k, "call on device")
            against.append(f"CUB's call with its temporary storage kept {cub:.0f} us, {mine / cub:.2f}x")
        calls.append(f"{mine:.0f} us at 2^{k} ({'; '.join(against)})")
    numpy_calls = []
    for k in (20, 24):
        mine, theirs = (
            us("ps.scan(auto)", "float32", 2**k, "call on numpy"),
            us("torch round trip", "float32", 2**k, "call on numpy"),
        )
        numpy_calls.append(f"{mine:.0f} us against {theirs:.0f} us at 2^{k} ({mine / theirs:.2f}x)")
    return (
        "\n".join(lines)
        + "\n\nWhole calls, float32, host clock: `ps.scan(device_array)` plus a synchronize takes "
        + ", ".join(calls)
        + "; `ps.scan(numpy_array)` takes "
        + ", ".join(numpy_calls)
        + f" for torch's numpy -> GPU -> numpy round trip. From `benchmarks/{name}` "
        f"(`python benchmarks/lookback.py`), one run on one {results.read(name)[0]['device']}; kernel times by "
        f"{' and '.join(sorted({row['method'] for row in results.read(name, part='kernel')}))} "
        "(cupti: the kernels' durations in torch.profiler's trace, summed per call). "
        + (
            "The tile per element size and length comes from `benchmarks/scan_tiles.csv`."
            if timed_cub
            else "That run predates CUB's rows and the tile chosen per length: its tile, 128 x 32 for every length, "
            "came from `benchmarks/lookback_tiles.csv` (an H200)."
        )
    )


def pivoting_table():
    """``method="pivoting"`` against cuSPARSE's pivoting routines on indefinite systems (tridiag.csv)."""
    lines = [
        "| systems (batch x n) | dtype | `pivoting`, kernel us | cuSPARSE routine | its kernel us "
        "| its time over ours |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in registry.against_cusparse("pivoting"):
        shape = f"{row['batch']} x {row['n']}"
        for routine, us, ratio in row["library"]:
            lines.append(
                f"| {shape} | {row['dtype']} | {_us(row['ours_us'])} | `{routine}` | {_us(us)} | {ratio:.2f}x |"
            )
    return "\n".join(lines)


def tables():
    meta = results.read("scan_throughput.csv", variant="copy", dtype="float32", n=2 ** SIZES[0])[0]
    return "\n\n".join(
        [
            f"One {meta['device']} (driver {meta['driver']}, numba-cuda {meta['numba_cuda']}, {meta['date']}); "
            "kernel times with the launches queued behind a busy kernel, median of 25; GB/s = 2 n x 4 bytes / time; "
            "from `benchmarks/scan_throughput.csv` and `benchmarks/hierarchical_bench.csv`.",
            kernel_table(),
            large_and_calls(),
            cub_paragraph(),
            cub_scan_table(),
            cub_sort_table(),
            "That run predates the digit pass's unsigned indices and 32-bit rank (issue 45); the later run of "
            "`benchmarks/applications.csv` (same GPU, CUB beside it) times the sort of 2^24 uint32 keys at "
            + sort_against_cub()
            + ".",
            'The single-pass scan with decoupled look-back, `lookback` (`"auto"` since issue 15), in a later run on '
            "the same GPU, beside torch.cumsum, torch's `copy_` and a numba copy kernel measured in that run:",
            lookback_table(),
            "The same script on an H200:",
            lookback_table("h200/lookback.csv"),
            'The tridiagonal solver that pivots, `method="pivoting"`, against cuSPARSE\'s routines that pivot, on '
            "random indefinite systems (b uniform in [-1, 1]), kernel time by CUPTI, from the H100's rows of "
            "`benchmarks/tridiag.csv` (`tridiag.py --only-pivoting --sweep`): `gtsv2` for systems of 2^16 rows "
            "and more, `gtsvInterleavedBatch` with LU (algorithm 1) and QR (algorithm 2) for batches of shorter ones. "
            "Its rows were timed with chunks of R = 8 pairs (4 in float64 where levels follow); the solver now "
            "takes at each shape the R that the same run's `pivoting:pairs=R` rows found fastest, so where that "
            "is another R its time is at most the one shown:",
            pivoting_table(),
        ]
    )


def summary():
    """The README's paragraph: the default scan's kernel against torch.cumsum's, from lookback.csv
    and the H200's h200/lookback.csv (the same script)."""

    def card(name):
        meta = results.read(name, variant="lookback", part="kernel", dtype="float32", n=2**26)[0]

        def ratio(dtype, k):
            at = dict(part="kernel", dtype=dtype, n=2**k)
            return results.value(name, "median_us", variant="torch.cumsum", **at) / results.value(
                name, "median_us", variant="lookback", **at
            )

        speeds = "; ".join(
            f"{dtype} {' / '.join(f'{ratio(dtype, k):.2f}x' for k in (24, 26, 28))}"
            for dtype in ("float32", "int32", "float64", "int64")
        )
        # the 8-byte scans' one-word tile states (issue 45) landed on 2026-12-06: runs before it say so
        before = ", a run before the 8-byte tile states of issue 45" if meta["date"] < "2026-12-06" else ""
        return f"one {meta['device']} ({meta['date']}{before}): {speeds}"

    rows = _cub_run()

    def spread(part, dtypes):
        ratios = []
        for dtype in dtypes:
            for n in sorted({r["n"] for r in rows if r["part"] == part and r["dtype"] == dtype}):
                same = [r for r in rows if r["part"] == part and r["dtype"] == dtype and r["n"] == n]
                cub = next(r["kernel_us"] for r in same if r["variant"].startswith("CUB"))
                ours = min(
                    r["kernel_us"] for r in same if r["variant"].startswith(("lookback:", "onesweep rank by ballots"))
                )
                ratios.append(cub / ours)
        return f"{min(ratios):.2f}x to {max(ratios):.2f}x"

    meta = rows[0]
    return (
        "Against NVIDIA's CUB itself (CUB " + meta["cub"].replace(" (", ", ").rstrip(")") + ", from Python through "
        "`cuda.compute`, same process, kernels "
        f"from CUPTI, one {meta['device']}, {meta['date']}), the default scan runs at "
        f"{spread('scan', ('float32',))} CUB's speed for float32 and {spread('scan', ('float64',))} for float64 "
        "at n = 2^12 to 2^28, and the onesweep radix sort at "
        f"{spread('sort', ('uint32', 'uint64', 'uint32+uint32'))} CUB's `DeviceRadixSort` (2^20 to 2^26), "
        "measured before its digit pass's unsigned indices and 32-bit rank; a later run, "
        "`benchmarks/applications.csv`, times 2^24 uint32 keys at " + sort_against_cub() + ". "
        "The default scan (`lookback`, one pass with decoupled look-back) runs at these multiples of "
        f"torch.cumsum's speed at n = 2^24 / 2^26 / 2^28, kernels from CUPTI, on {card('lookback.csv')}; "
        f"on {card('h200/lookback.csv')}. The full tables, beside "
        "CuPy and a device copy: `docs/performance.md`."
    )


def blocks():
    """``{file: text}``: what goes between the markers of each file that quotes measurements."""
    return {ROOT / "README.md": summary(), ROOT / "docs" / "performance.md": tables()}


def between(text, block):
    """``text`` with the part between the markers replaced by ``block``."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + block + "\n" + text[end:]


def main(argv):
    for path, text in blocks().items():
        if argv[1:] == ["--write"]:
            path.write_text(between(path.read_text(), text))
            print(f"wrote the measurements into {path}")
        else:
            print(f"{path.relative_to(ROOT)}:\n{text}\n")


if __name__ == "__main__":
    main(sys.argv)
