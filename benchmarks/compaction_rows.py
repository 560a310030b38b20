"""The compaction rows of ``applications.py``: ``apps.compact`` and ``compact_indices`` against torch and CuPy.

For every size and dtype, with half the flags set at random, inputs already on the device:

* whole calls on the host clock, synchronised (what a user waits for: allocation, launches, the
  read of the output's length, Python): ``apps.compact`` (``sync=True``: the kept elements,
  exactly), ``apps.compact(..., sync=False)`` then a synchronisation (the buffer and a device
  count), ``x[mask]`` in torch and in CuPy; ``apps.compact_indices`` against ``nonzero`` in
  torch and ``flatnonzero`` in CuPy (bool masks, the indices as int64); and CUB's select,
  ``cuda.compute.select`` of the elements ``x > 0`` (about half of the normal ``x``, as half the
  flags are set) with its temporary storage kept, and the count read back, as ``compact`` reads
  it (:mod:`cub_rows`; left out with a note where ``cuda.compute`` cannot run);
* device time by CUPTI (:func:`prefixsum.cli.cupti.cupti_us`, every kernel and copy of a call
  summed, median over the calls) for
  ``apps.compact``, torch's and CuPy's ``x[mask]``, when torch is there; the kernels seen are
  printed, so that the log shows what each library launches.
"""

import os
import sys

import cub_rows
import numpy as np

from prefixsum import apps
from prefixsum.cli import cupti

SIZES = (1 << 20, 1 << 22, 1 << 24, 1 << 26)
QUICK_SIZES = (3000,)
DTYPES = ("float32", "int32", "float64")
CUB_SELECT = "CUB select x > 0 (cuda.compute, temporary storage kept)"
READABLE_AT = (1 << 24, "float32")  # the three-launch compact_by_scan at one size, the slow one (quick: its size)


def cupti_device_us(call, repeats):
    """Device microseconds per ``call()`` by CUPTI (:func:`prefixsum.cli.cupti.cupti_us`): every kernel,
    copy and memset it queued, summed, median over the calls.

    Returns ``(us, kernels)``, ``kernels`` the names seen with their launches per call; ``(nan, "")``
    when CUPTI saw no device work (a profiler that drops activity it cannot tie to torch's ops).
    """
    seen = {}
    try:
        us = cupti.cupti_us(call, warmup=1, repeats=repeats, copies=True, seen=seen)
    except RuntimeError:
        return float("nan"), ""
    return us, "; ".join(f"{name[:60]} x{count:g}" for name, count in seen.items())


def run_compaction(cuda, torch, cupy, quick, repeats, rng, add, timed):
    """Time the compaction rows, calling ``add(task, method, dtype, n, micros, correct, device_us=...)``."""
    for n in QUICK_SIZES if quick else SIZES:
        mask = rng.random(n) < 0.5
        dmask = cuda.to_device(mask)
        tmask = torch.from_numpy(mask).cuda() if torch else None
        cmask = cupy.asarray(mask) if cupy else None
        for dtype in DTYPES:
            x = (rng.normal(size=n) * 1000).astype(dtype)
            expected = x[mask]
            dx = cuda.to_device(x)
            calls = [
                ("prefixsum apps.compact", lambda: apps.compact(dx, dmask), lambda got: got.copy_to_host()),
                (
                    "prefixsum apps.compact (sync=False)",
                    lambda: _waited(cuda, apps.compact(dx, dmask, sync=False)),
                    lambda got: got[0][: int(got[1].copy_to_host()[0])].copy_to_host(),
                ),
            ]
            if dtype == READABLE_AT[1] and (quick or n == READABLE_AT[0]):  # quick: its one size
                calls.append(
                    (
                        "prefixsum apps.compact_by_scan (readable)",
                        lambda: apps.compact_by_scan(dx, dmask),
                        lambda got: got.copy_to_host(),
                    )
                )
            if torch:
                tx = torch.from_numpy(x).cuda()
                calls.append(("torch x[mask]", lambda: _waited_torch(torch, tx[tmask]), lambda got: got.cpu().numpy()))
            if cupy:
                cx = cupy.asarray(x)
                calls.append(("cupy x[mask]", lambda: _waited_cupy(cupy, cx[cmask]), cupy.asnumpy))
            wanted = {}
            out, count = cuda.device_array(n, x.dtype), cuda.to_device(np.zeros(2, np.int64))
            select = cub_rows.attempt("select", lambda: cub_rows.select(dx, out, count, cub_rows.positive(dtype)))
            if select is not None:

                def cub_call(select=select, out=out, count=count):
                    select()
                    return out[: int(count.copy_to_host()[0])]

                calls.append((CUB_SELECT, cub_call, lambda got: got.copy_to_host()))
                wanted[CUB_SELECT] = x[x > 0]
            for method, call, to_host in calls:
                ok = np.array_equal(to_host(call()), wanted.get(method, expected))
                device_us, kernels = float("nan"), ""
                if torch and "sync=False" not in method and "readable" not in method:
                    device_us, kernels = cupti_device_us(call, repeats)
                add("compact", method, dtype, n, timed(call, repeats=repeats), ok, device_us=device_us)
                if kernels:
                    print(f"    CUPTI: {kernels}")
        expected = np.flatnonzero(mask)
        calls = [
            ("prefixsum apps.compact_indices", lambda: apps.compact_indices(dmask), lambda got: got.copy_to_host())
        ]
        if torch:
            calls.append(
                (
                    "torch nonzero",
                    lambda: _waited_torch(torch, tmask.nonzero().squeeze(1)),
                    lambda got: got.cpu().numpy(),
                )
            )
        if cupy:
            calls.append(("cupy flatnonzero", lambda: _waited_cupy(cupy, cupy.flatnonzero(cmask)), cupy.asnumpy))
        for method, call, to_host in calls:
            ok = np.array_equal(to_host(call()), expected)
            add("nonzero", method, "bool", n, timed(call, repeats=repeats), ok)


def _waited(cuda, result):
    cuda.synchronize()
    return result


def _waited_torch(torch, result):
    torch.cuda.synchronize()
    return result


def _waited_cupy(cupy, result):
    cupy.cuda.Device().synchronize()
    return result


def exit_skipping_teardown(status):
    """Exit with ``status`` now, without the interpreter's teardown, once every result is written.

    After a ``torch.profiler`` session, torch frees CUPTI activity buffers that CUPTI may still
    write at shutdown, which can abort the process with a heap corruption (pytorch/pytorch pull
    requests 195207 and 195471): the abort would replace the script's own exit status.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
