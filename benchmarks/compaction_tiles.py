"""Tile shapes of the one-pass compaction (prefixsum.apps.selection) on one GPU, beside torch's x[mask].

    python benchmarks/compaction_tiles.py [--out DIR] [--quick]

For each tile shape (threads x elements per thread), size and dtype, half the flags set: the
kernel alone (``sync=False`` calls queued behind a busy kernel, CUDA events:
:func:`prefixsum.cli.timing.kernel_us`) and the whole ``sync=True`` call on the host clock; torch's
``x[mask]`` whole, and both by CUPTI (:func:`compaction_rows.cupti_device_us`) at the default shape.
Chose the default :data:`prefixsum.apps.selection.ITEMS_PER_THREAD` and ``BLOCK_SIZE``. Writes
``compaction_tiles.csv``.
"""

import os

import numpy as np  # noqa: E402
from compaction_rows import cupti_device_us, exit_skipping_teardown  # noqa: E402  (beside this script)

import prefixsum as ps  # noqa: F401  (first: it chooses the GPU or the simulator before numba.cuda loads)
from prefixsum import apps  # noqa: E402
from prefixsum.apps import selection  # noqa: E402
from prefixsum.cli.metadata import run_metadata  # noqa: E402
from prefixsum.cli.results import report_wrong, write_csv  # noqa: E402
from prefixsum.cli.timing import QUICK_REPEATS, gpu_library, host_us, kernel_us, script_arguments  # noqa: E402

SHAPES = ((128, 8), (128, 16), (256, 8), (256, 16), (128, 24))
SIZES = (1 << 20, 1 << 24, 1 << 26)
DTYPES = ("float32", "float64")
REPEATS = 9


def main(argv=None):
    args = script_arguments(argv, "one tiny size, two repeats; runs on the simulator too")
    from numba import cuda

    repeats = QUICK_REPEATS if args.quick else REPEATS
    meta = run_metadata(["torch"])
    torch = gpu_library("torch")
    rng = np.random.default_rng(30)
    rows = []
    default = (selection.BLOCK_SIZE, selection.ITEMS_PER_THREAD)
    for n in (3000,) if args.quick else SIZES:
        mask = rng.random(n) < 0.5
        dmask = cuda.to_device(mask)
        for dtype in DTYPES:
            x = rng.normal(size=n).astype(dtype)
            dx = cuda.to_device(x)
            for shape in SHAPES:
                selection.BLOCK_SIZE, selection.ITEMS_PER_THREAD = shape
                ok = np.array_equal(apps.compact(dx, dmask).copy_to_host(), x[mask])
                kernel = kernel_us(lambda: apps.compact(dx, dmask, sync=False), repeats=repeats)
                whole = host_us(lambda: apps.compact(dx, dmask), repeats=repeats)
                device = cupti_device_us(lambda: apps.compact(dx, dmask), repeats)[0] if torch else float("nan")
                rows.append(
                    {
                        "method": "prefixsum apps.compact",
                        "block_size": shape[0],
                        "items_per_thread": shape[1],
                        "dtype": dtype,
                        "n": n,
                        "kernel_us": round(kernel.us, 1),
                        "whole_us": round(whole, 1),
                        "cupti_us": round(device, 1),
                        "correct": ok,
                        **meta,
                    }
                )
                print(
                    rows[-1]["method"],
                    shape,
                    dtype,
                    n,
                    rows[-1]["kernel_us"],
                    rows[-1]["whole_us"],
                    rows[-1]["cupti_us"],
                    ok,
                    flush=True,
                )
            selection.BLOCK_SIZE, selection.ITEMS_PER_THREAD = default
            if torch:
                tx, tmask = torch.from_numpy(x).cuda(), torch.from_numpy(mask).cuda()
                ok = np.array_equal(tx[tmask].cpu().numpy(), x[mask])
                whole = host_us(lambda: (tx[tmask], torch.cuda.synchronize()), repeats=repeats)
                device, kernels = cupti_device_us(lambda: tx[tmask], repeats)
                rows.append(
                    {
                        "method": "torch x[mask]",
                        "block_size": 0,
                        "items_per_thread": 0,
                        "dtype": dtype,
                        "n": n,
                        "kernel_us": float("nan"),
                        "whole_us": round(whole, 1),
                        "cupti_us": round(device, 1),
                        "correct": ok,
                        **meta,
                    }
                )
                print("torch x[mask]", dtype, n, whole, device, ok, kernels, flush=True)
    write_csv(rows, os.path.join(args.out, "compaction_tiles.csv"))
    return report_wrong(
        rows, lambda row: f"{row['method']} {row['block_size']}x{row['items_per_thread']} {row['dtype']} n={row['n']}"
    )


if __name__ == "__main__":
    exit_skipping_teardown(main())
