"""Seed 001's experiments on today's GPU: Table 1, the dtype sweep (Figure 6), the operator sweep (Figure 7).

    python benchmarks/table1.py --out DIR      (on a GPU machine)

Table 1 (float32, the paper's 22 sizes from 35 to 8,388,600): numpy.cumsum on this machine's
CPU, the "hierarchical" scan's kernel time (CUDA events around its launches on numba device
arrays) and a whole ``prefixsum.scan`` call, torch.cumsum and a device copy (torch ``copy_``),
beside the paper's CPU, GTX 280 and GTX 480 figures (averages of 10,000 runs, in ms). Figures 6
and 7: the kernel time for each dtype (add) and each operator (float32). Every result is checked
before it is timed. Writes table1.csv, dtypes.csv and operators.csv.
"""
import argparse
import os

import numpy as np

import prefixsum as ps
from prefixsum.cli.bench import fast_mismatches, host_us, numba_events_us, torch_events_us, write_csv
from prefixsum.scans.testing import random_input

# test no., n, CPU (i7-2600K), GTX 280, GTX 480: milliseconds, from the paper's Table 1
PAPER = [
    (1, 35, 0.004226, 0.081268, 0.039465), (2, 128, 0.000604, 0.076837, 0.03618),
    (3, 256, 0.001509, 0.081471, 0.039502), (4, 260, 0.001207, 0.0786, 0.036823),
    (5, 512, 0.002113, 0.081163, 0.036878), (6, 1000, 0.003924, 0.07973, 0.040742),
    (7, 1024, 0.003622, 0.078468, 0.035371), (8, 1030, 0.004226, 0.239555, 0.095693),
    (9, 32768, 0.108366, 0.249818, 0.107071), (10, 45555, 0.149117, 0.251118, 0.105261),
    (11, 65536, 0.21462, 0.24536, 0.100109), (12, 131072, 0.428636, 0.274529, 0.118679),
    (13, 262144, 0.85516, 0.285939, 0.140495), (14, 500111, 1.623384, 0.339683, 0.168711),
    (15, 524288, 1.708206, 0.349859, 0.168474), (16, 1048555, 3.439655, 0.444213, 0.227186),
    (17, 1048576, 3.44207, 0.42808, 0.224189), (18, 1048581, 3.45022, 0.597514, 0.285429),
    (19, 2097152, 6.890177, 0.791959, 0.398717), (20, 2097999, 6.860897, 0.827059, 0.39679),
    (21, 4194334, 13.701268, 1.127283, 0.626898), (22, 8388600, 27.653078, 1.814563, 1.076924),
]
REPEATS = 50


def kernel_ms(x_dev, out_dev, op):
    algorithm = ps.ALGORITHMS["hierarchical"]
    return numba_events_us(lambda: algorithm.run(x_dev, out_dev, op, True, False, **algorithm.options),
                           warmup=5, repeats=REPEATS) / 1e3


def checked(out_dev, x, op):
    bad = fast_mismatches(out_dev.copy_to_host(), x, op)
    if bad.size:
        raise SystemExit(f"hierarchical is wrong at n={len(x)}, op={op}, dtype={x.dtype}: first bad index {bad[0]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks")
    args = parser.parse_args()
    import torch
    from numba import cuda

    device = ps.device_info()["name"]
    rng = np.random.default_rng(1)
    table = []
    for test, n, cpu, gtx280, gtx480 in PAPER:
        x = random_input(n, "add", np.float32, rng)
        x_dev, out_dev = cuda.to_device(x), cuda.device_array(n, np.float32)
        ps.ALGORITHMS["hierarchical"].run(x_dev, out_dev, "add", True, False, **ps.ALGORITHMS["hierarchical"].options)
        checked(out_dev, x, "add")
        t, target = torch.from_numpy(x).cuda(), torch.empty(n, dtype=torch.float32, device="cuda")
        row = {"test": test, "n": n, "paper_cpu_ms": cpu, "paper_gtx280_ms": gtx280, "paper_gtx480_ms": gtx480,
               "numpy_cumsum_ms": round(host_us(lambda: np.cumsum(x), repeats=REPEATS) / 1e3, 6),
               "hierarchical_kernel_ms": round(kernel_ms(x_dev, out_dev, "add"), 6),
               "ps_scan_call_ms": round(host_us(lambda: (ps.scan(x_dev), cuda.synchronize()), repeats=REPEATS) / 1e3, 6),
               "torch_cumsum_ms": round(torch_events_us(lambda: torch.cumsum(t, 0), torch, repeats=REPEATS) / 1e3, 6),
               "torch_copy_ms": round(torch_events_us(lambda: target.copy_(t), torch, repeats=REPEATS) / 1e3, 6),
               "device": device}
        table.append(row)
        print(" ".join(f"{k}={v}" for k, v in row.items() if k != "device"), flush=True)
    write_csv(table, os.path.join(args.out, "table1.csv"))

    sweeps = {"dtypes.csv": [("add", d) for d in ps.DTYPES], "operators.csv": [(op, np.dtype(np.float32)) for op in ps.OPS]}
    for name, configs in sweeps.items():
        rows = []
        for op, dtype in configs:
            for n in sorted({row[1] for row in PAPER[::3]} | {PAPER[-1][1]}):
                x = random_input(n, op, dtype, rng)
                x_dev, out_dev = cuda.to_device(x), cuda.device_array(n, dtype)
                ps.ALGORITHMS["hierarchical"].run(x_dev, out_dev, op, True, False, **ps.ALGORITHMS["hierarchical"].options)
                checked(out_dev, x, op)
                rows.append({"op": op, "dtype": dtype.name, "n": n, "hierarchical_kernel_ms": round(kernel_ms(x_dev, out_dev, op), 6),
                             "device": device})
                print(rows[-1], flush=True)
        write_csv(rows, os.path.join(args.out, name))


if __name__ == "__main__":
    main()
