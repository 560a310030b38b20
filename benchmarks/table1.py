"""The experiments of Lungu, Petrosanu and Pirjan (2011) on today's GPU: Table 1, the dtype sweep (Figure 6), the
operator sweep (Figure 7).

    python benchmarks/table1.py [--out DIR] [--quick]      (on a GPU machine; --quick: tiny, on the simulator too)

Table 1 (float32, the paper's 22 sizes from 35 to 8,388,600): numpy.cumsum on this machine's
CPU (host clock), the "hierarchical" scan's kernel time and a whole ``prefixsum.scan`` call on a
device array (host clock), torch.cumsum and a device copy (torch ``copy_``), beside the paper's
CPU, GTX 280 and GTX 480 figures (averages of 10,000 runs, in ms). Kernel times are CUDA events
around the launches queued behind a busy kernel (:func:`prefixsum.cli.timing.kernel_us`; the
``kernels_queued`` and ``timing`` columns say whether they were), median of
:data:`prefixsum.cli.timing.REPEATS`. Figures 6 and 7: the kernel time for each dtype (add) and each
operator (float32), at every third size of Table 1. Every result is checked before it is timed
(``correct``); the script exits with 1 if any was wrong. Writes table1.csv, dtypes.csv and
operators.csv.
"""

import os
import sys

import numpy as np

import prefixsum as ps
from prefixsum.cli.metadata import run_metadata
from prefixsum.cli.results import print_table, report_wrong, write_csv
from prefixsum.cli.timing import QUICK_REPEATS, REPEATS, host_us, kernel_us, queued_library, script_arguments
from prefixsum.scans.testing import mismatches, poisoned, random_input

# test no., n, CPU (i7-2600K), GTX 280, GTX 480: milliseconds, from the paper's Table 1
PAPER = [
    (1, 35, 0.004226, 0.081268, 0.039465),
    (2, 128, 0.000604, 0.076837, 0.03618),
    (3, 256, 0.001509, 0.081471, 0.039502),
    (4, 260, 0.001207, 0.0786, 0.036823),
    (5, 512, 0.002113, 0.081163, 0.036878),
    (6, 1000, 0.003924, 0.07973, 0.040742),
    (7, 1024, 0.003622, 0.078468, 0.035371),
    (8, 1030, 0.004226, 0.239555, 0.095693),
    (9, 32768, 0.108366, 0.249818, 0.107071),
    (10, 45555, 0.149117, 0.251118, 0.105261),
    (11, 65536, 0.21462, 0.24536, 0.100109),
    (12, 131072, 0.428636, 0.274529, 0.118679),
    (13, 262144, 0.85516, 0.285939, 0.140495),
    (14, 500111, 1.623384, 0.339683, 0.168711),
    (15, 524288, 1.708206, 0.349859, 0.168474),
    (16, 1048555, 3.439655, 0.444213, 0.227186),
    (17, 1048576, 3.44207, 0.42808, 0.224189),
    (18, 1048581, 3.45022, 0.597514, 0.285429),
    (19, 2097152, 6.890177, 0.791959, 0.398717),
    (20, 2097999, 6.860897, 0.827059, 0.39679),
    (21, 4194334, 13.701268, 1.127283, 0.626898),
    (22, 8388600, 27.653078, 1.814563, 1.076924),
]


def sweep_sizes(paper):
    """The sizes of the dtype and operator sweeps: every third size of ``paper``, and its last."""
    return sorted({row[1] for row in paper[::3]} | {paper[-1][1]})


def hierarchical_time(x, op, repeats):
    """``(correct, KernelTime)`` of the hierarchical scan of ``x`` with ``op``, checked first."""
    from numba import cuda

    algorithm = ps.ALGORITHMS["hierarchical"]
    x_dev, out_dev = cuda.to_device(x), cuda.to_device(poisoned(len(x), x.dtype))
    algorithm.run(x_dev, out_dev, op, True, False, **algorithm.options)
    correct = mismatches(out_dev.copy_to_host(), x, op)[0].size == 0
    return correct, kernel_us(
        lambda: algorithm.run(x_dev, out_dev, op, True, False, **algorithm.options), repeats=repeats
    )


def torch_times(torch, stream, x, repeats):
    """``(correct, KernelTime of torch.cumsum, KernelTime of torch copy)`` on ``x``, each checked first."""
    t = torch.from_numpy(x).cuda()
    target = torch.from_numpy(poisoned(len(x), x.dtype)).cuda()
    target.copy_(t)
    correct = mismatches(torch.cumsum(t, 0).cpu().numpy(), x)[0].size == 0 and np.array_equal(target.cpu().numpy(), x)
    return (
        correct,
        kernel_us(lambda: torch.cumsum(t, 0), stream=stream, repeats=repeats),
        kernel_us(lambda: target.copy_(t), stream=stream, repeats=repeats),
    )


def ms(kernel):
    """A :class:`~prefixsum.cli.timing.KernelTime` in milliseconds for the CSV; NaN where none was measured."""
    return round(kernel.us / 1e3, 6) if kernel else float("nan")


def main(argv=None):
    args = script_arguments(argv, "three sizes, two repeats; runs on the simulator too")
    from numba import cuda

    repeats = QUICK_REPEATS if args.quick else REPEATS
    paper = PAPER[:3] if args.quick else PAPER
    meta = run_metadata(["torch"])
    torch, stream = queued_library("torch")
    rng = np.random.default_rng(1)
    table = []
    for test, n, cpu, gtx280, gtx480 in paper:
        x = random_input(n, "add", np.float32, rng)
        x_dev = cuda.to_device(x)
        correct, hierarchical = hierarchical_time(x, "add", repeats)
        correct &= (
            mismatches(np.cumsum(x), x)[0].size == 0 and mismatches(ps.scan(x_dev).copy_to_host(), x)[0].size == 0
        )
        cumsum = copy = None
        if torch:
            torch_correct, cumsum, copy = torch_times(torch, stream, x, repeats)
            correct &= torch_correct
        row = {
            "test": test,
            "n": n,
            "paper_cpu_ms": cpu,
            "paper_gtx280_ms": gtx280,
            "paper_gtx480_ms": gtx480,
            "numpy_cumsum_ms": round(host_us(lambda: np.cumsum(x), repeats=repeats) / 1e3, 6),
            "hierarchical_kernel_ms": ms(hierarchical),
            "ps_scan_call_ms": round(host_us(lambda: (ps.scan(x_dev), cuda.synchronize()), repeats=repeats) / 1e3, 6),
            "torch_cumsum_ms": ms(cumsum),
            "torch_copy_ms": ms(copy),
            "correct": correct,
            "kernels_queued": all(kernel.queued for kernel in (hierarchical, cumsum, copy) if kernel),
            **meta,
        }
        table.append(row)
        measured = " ".join(f"{k}={v}" for k, v in row.items() if k.endswith("_ms") or k == "correct")
        print(f"test {test:>2} n={n:<8} {measured}", flush=True)
    write_csv(table, os.path.join(args.out, "table1.csv"))

    sizes = sweep_sizes(paper)
    sweeps = {
        "dtypes.csv": [("add", d) for d in ps.DTYPES],
        "operators.csv": [(op, np.dtype(np.float32)) for op in ps.OPS],
    }
    sweep_rows = []
    for name, configs in sweeps.items():
        rows = []
        for op, dtype in configs:
            for n in sizes:
                correct, kernel = hierarchical_time(random_input(n, op, dtype, rng), op, repeats)
                rows.append(
                    {
                        "op": op,
                        "dtype": dtype.name,
                        "n": n,
                        "hierarchical_kernel_ms": ms(kernel),
                        "correct": correct,
                        "timing": kernel.timing,
                        **meta,
                    }
                )
                print(
                    f"{name}: {op} {dtype.name} n={n} {ms(kernel)} ms  {kernel.timing}{'' if correct else '  WRONG'}",
                    flush=True,
                )
        write_csv(rows, os.path.join(args.out, name))
        sweep_rows += rows
    print_table(
        [row for row in table if row["n"] in sizes],
        [
            "test",
            "n",
            "paper_gtx480_ms",
            "numpy_cumsum_ms",
            "hierarchical_kernel_ms",
            "ps_scan_call_ms",
            "torch_cumsum_ms",
            "torch_copy_ms",
            "correct",
            "kernels_queued",
        ],
        title="Table 1 (ms), every third size:",
    )
    return report_wrong(table + sweep_rows, str)


if __name__ == "__main__":
    sys.exit(main())
