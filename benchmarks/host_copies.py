"""Host -> device copies of one array, the ways a numpy call can send it.

    python benchmarks/host_copies.py [--out DIR]    on a GPU (run_gpu.sh stage "host_copies")
    python benchmarks/host_copies.py --quick        tiny sizes on the simulator, to test the script

What limits ``tridiag.solve`` and ``ps.scan`` on numpy arrays, whose inputs must cross PCIe. Per
size (4, 16 and 64 MiB of float32), on the host clock around a synchronize, median of 15 taken
in turn (a call of each way per round, in an order shuffled each round):

- a copy from pageable memory (the driver stages it through its own pinned buffer, on the
  calling thread);
- a copy from page-locked memory (the copy engine alone);
- numpy's ``copyto`` into page-locked memory on 1, 2, 4 and 8 host threads at once (numpy
  releases the GIL while it copies), no copy to the device;
- packed on 8 threads, then one page-locked copy; the same in 2 and 4 pieces, each piece sent
  while the next is packed;
- :func:`prefixsum.core.overlap.send_packed`;
- pageable copies of 2, 4 and 8 parts from as many threads at once;
- a pageable copy of the first 25, 40 or 55 % on the calling thread while 8 threads pack the
  rest, then the rest's page-locked copy;
- the array registered in place (``cuda.pinned``: page-locked for the copy), then copied;
- torch's ``torch.from_numpy(x).cuda()`` (pageable), where torch is installed.

Writes ``host_copies.csv`` (size_mib, way, median_us, gbps, correct, the run's metadata); every
way's device copy is checked element by element once before it is timed.
"""

import concurrent.futures
import shlex
import sys

import numpy as np

import prefixsum  # noqa: F401  (before numba.cuda: prefixsum chooses the GPU or the simulator)

from numba import cuda  # noqa: E402  (isort: skip)
from prefixsum.cli.metadata import run_metadata
from prefixsum.cli.results import print_table, report_wrong, write_csv
from prefixsum.cli.timing import QUICK_REPEATS, gpu_library, host_us_in_turn, script_arguments
from prefixsum.core import overlap

SIZES_MIB = (4, 16, 64)
QUICK_SIZES_MIB = (1 / 64,)
THREADS = (1, 2, 4, 8)
REPEATS = 15


def main(argv=None):
    args = script_arguments(argv, "tiny sizes and few calls on the simulator, to test the script")
    torch = gpu_library("torch")
    meta = run_metadata(
        ("torch",), shlex.join(["python", "benchmarks/host_copies.py", *(sys.argv[1:] if argv is None else argv)])
    )
    pool = concurrent.futures.ThreadPoolExecutor(max(THREADS))
    stream = cuda.default_stream()
    rows = []
    for mib in QUICK_SIZES_MIB if args.quick else SIZES_MIB:
        n = int(mib * (1 << 18))
        source = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        device = cuda.device_array(n, np.float32)
        pinned = cuda.pinned_array(n, np.float32)

        def pack(threads, lo=0, hi=n):
            edges = np.linspace(lo, hi, threads + 1).astype(np.int64)
            jobs = [pool.submit(np.copyto, pinned[a:b], source[a:b]) for a, b in zip(edges[:-1], edges[1:])]
            for job in jobs:
                job.result()

        def pinned_copy():
            device.copy_to_device(pinned, stream=stream)
            stream.synchronize()

        def pieces(count):
            """Pack piece k on every thread, then queue its copy while piece k + 1 is packed."""
            edges = np.linspace(0, n, count + 1).astype(np.int64)
            for lo, hi in zip(edges[:-1], edges[1:]):
                pack(max(THREADS), lo, hi)
                device[lo:hi].copy_to_device(pinned[lo:hi], stream=stream)
            stream.synchronize()

        def pageable_parts(threads):
            """A pageable copy of each of ``threads`` parts, from as many threads at once."""
            edges = np.linspace(0, n, threads + 1).astype(np.int64)
            jobs = [pool.submit(device[a:b].copy_to_device, source[a:b]) for a, b in zip(edges[:-1], edges[1:])]
            for job in jobs:
                job.result()
            cuda.synchronize()

        def split(share):
            """A pageable copy of the first ``share`` of the array on this thread while the copy
            threads pack the rest into page-locked memory; then the rest's page-locked copy."""
            cut = int(n * share)
            edges = np.linspace(cut, n, max(THREADS) + 1).astype(np.int64)
            jobs = [pool.submit(np.copyto, pinned[a:b], source[a:b]) for a, b in zip(edges[:-1], edges[1:])]
            device[:cut].copy_to_device(source[:cut])
            for job in jobs:
                job.result()
            device[cut:].copy_to_device(pinned[cut:], stream=stream)
            stream.synchronize()

        def registered():
            with cuda.pinned(source):
                device.copy_to_device(source, stream=stream)
                stream.synchronize()

        def sent():
            return bool(np.array_equal(device.copy_to_host(), source))

        def packed():
            return bool(np.array_equal(pinned, source))

        def torch_copy():
            kept[:] = [torch.from_numpy(source).cuda()]
            torch.cuda.synchronize()

        kept = []
        ways = {
            "pageable copy": (lambda: (device.copy_to_device(source), cuda.synchronize()), sent),
            "page-locked copy": (pinned_copy, sent),
        }
        ways.update(
            {
                f"copyto into page-locked memory, {t} threads (no copy to the device)": (lambda t=t: pack(t), packed)
                for t in THREADS
            }
        )
        ways[f"copyto on {max(THREADS)} threads, then a page-locked copy"] = (
            lambda: (pack(max(THREADS)), pinned_copy()),
            sent,
        )
        for count in (2, 4):
            ways[f"{count} pieces, each packed on {max(THREADS)} threads then sent"] = (lambda c=count: pieces(c), sent)
        ways["overlap.send_packed"] = (
            lambda: (overlap.send_packed(device, 0, [source.reshape(1, n)], stream), stream.synchronize()),
            sent,
        )
        ways.update(
            {
                f"pageable copies of {t} parts from {t} threads at once": (lambda t=t: pageable_parts(t), sent)
                for t in (2, 4, 8)
            }
        )
        ways.update(
            {
                f"{share:.0%} pageable on the calling thread while {max(THREADS)} threads pack the rest, then "
                "its page-locked copy": (lambda share=share: split(share), sent)
                for share in (0.25, 0.4, 0.55)
            }
        )
        ways["registered in place (cuda.pinned), then copied"] = (registered, sent)
        if torch is not None:
            ways["torch.from_numpy(x).cuda() (pageable)"] = (
                torch_copy,
                lambda: bool(np.array_equal(kept[0].cpu().numpy(), source)),
            )
        correct = {}
        for way, (call, check) in ways.items():
            device.copy_to_device(np.full(n, np.nan, np.float32))
            pinned[:] = source if way == "page-locked copy" else np.nan
            call()
            correct[way] = check()
        pinned[:] = source  # the page-locked copy's source; the other ways overwrite it with the same
        for way, us in host_us_in_turn(
            {way: call for way, (call, _) in ways.items()}, repeats=QUICK_REPEATS if args.quick else REPEATS
        ).items():
            rows.append(
                {
                    "size_mib": mib,
                    "way": way,
                    "median_us": round(us, 1),
                    "gbps": round(n * 4 / us / 1e3, 2),
                    "correct": correct[way],
                    "timing": "host clock, ways in a shuffled order",
                    **meta,
                }
            )
            print(f"{mib:>6} MiB  {way:<66} {us:>9.1f} us{'' if correct[way] else '  WRONG'}", flush=True)
    pool.shutdown()
    write_csv(rows, f"{args.out}/host_copies.csv")
    print_table(
        [{key: row[key] for key in ("size_mib", "way", "median_us", "gbps")} for row in rows],
        ["size_mib", "way", "median_us", "gbps"],
        title="host -> device copies (GB/s of the array's bytes):",
    )
    return report_wrong(rows, lambda row: f"{row['way']} at {row['size_mib']} MiB")


if __name__ == "__main__":
    sys.exit(main())
