"""Where a kernel's warps wait, instruction by instruction: a summary of Nsight Compute's source page.

    ncu --section SourceCounters --page source --print-source sass --csv ... > ours.csv
    python benchmarks/sass_stalls.py --keys N ours.csv [cub.csv ...]   (stage "sort_sass")

Each CSV is ``ncu --page source --print-source sass --csv``'s output for one or more kernels (a
``"Kernel Name"`` line before each kernel's table). For each kernel it prints the warp-level
instructions executed (and, with ``--keys``, SASS instructions per key: a thread's share of the
work), the stall samples by opcode beside the opcode's share of the instructions, and the
instructions where most samples fell, with how often each ran. An instruction that ran far more
often than once per warp sits in a loop: in a digit pass, the look-back's poll of a predecessor
tile's state; its samples are the time the warps spent waiting there (issue 45).
"""

import argparse
import collections
import csv
import io
import pathlib

STALLS = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def kernels(text):
    """``[(kernel name, rows), ...]``: each kernel's table of a source page CSV, in order."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith('"Kernel Name"')]
    found = []
    for k, start in enumerate(starts):
        name = next(csv.reader([lines[start]]))[1]
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        rows = [row for row in csv.DictReader(io.StringIO("\n".join(lines[start + 1 : end]))) if row.get("Source")]
        found.append((name, rows))
    return found


def _number(text):
    return float(text.replace(",", "")) if text else 0.0


def opcode(source):
    """The opcode of a SASS line, without its predicate and modifiers: ``@!P0 BRA x`` -> ``BRA``."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def summary(name, rows, keys=None, top=12):
    """The lines printed for one kernel (see the module's docstring)."""
    samples = sum(_number(r[STALLS]) for r in rows) or 1.0
    executed = sum(_number(r[EXECUTED]) for r in rows) or 1.0
    short = name.split("(")[0].split("[")[0]
    lines = [f"## {short}", f"warp instructions executed: {executed:,.0f}; stall samples: {samples:,.0f}"]
    if keys:
        lines.append(f"SASS instructions per key (a thread's, 32 a warp instruction): {32 * executed / keys:.1f}")
    by_opcode = collections.defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        entry = by_opcode[opcode(row["Source"])]
        entry[0] += _number(row[STALLS])
        entry[1] += _number(row[EXECUTED])
    lines.append("opcode      stall samples  instructions")
    for code, (stalled, ran) in sorted(by_opcode.items(), key=lambda item: -item[1][0])[:top]:
        lines.append(f"{code:<10} {100 * stalled / samples:12.1f} % {100 * ran / executed:11.1f} %")
    # Most instructions of a kernel run once a warp: the commonest count is the number of warps.
    counts = collections.Counter(_number(r[EXECUTED]) for r in rows if _number(r[EXECUTED]))
    warps = counts.most_common(1)[0][0] if counts else 1.0
    lines.append(f"the {top} instructions with most samples (runs: times executed a warp, taking {warps:,.0f} warps)")
    for row in sorted(rows, key=lambda r: -_number(r[STALLS]))[:top]:
        runs = _number(row[EXECUTED]) / warps
        source = " ".join(row["Source"].split())
        lines.append(f"{100 * _number(row[STALLS]) / samples:5.1f} %  runs {runs:6.2f}  {source}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="+", type=pathlib.Path, help="ncu --page source --print-source sass --csv output")
    parser.add_argument("--keys", type=int, help="the elements each kernel moved: prints instructions per key")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument(
        "--metadata", action="store_true", help="first, the run's device, versions, date and command (on the GPU)"
    )
    args = parser.parse_args(argv)
    if args.metadata:
        from prefixsum.cli.metadata import run_metadata

        meta = run_metadata(["cub"], command="bash benchmarks/run_gpu.sh sort_sass")
        print("# " + ", ".join(f"{key} {value}" for key, value in meta.items()), end="\n\n")
    for path in args.csv:
        found = kernels(path.read_text())
        if not found:
            raise SystemExit(f"{path}: no kernel in it (is it ncu's --page source --csv output?)")
        for name, rows in found:
            print("\n".join(summary(name, rows, args.keys, args.top)), end="\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
