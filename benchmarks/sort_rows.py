"""The sort rows of ``applications.py``: ``apps.radix_sort`` (onesweep) against torch and CuPy.

For every size and dtype (uint32 and float32 keys drawn at random, inputs already on the device),
keys alone and keys with int32 values:

* whole calls on the host clock, synchronised: ``apps.radix_sort`` (method ``onesweep``),
  ``torch.sort(stable=True)`` (it returns the keys and their int64 indices; with values, the
  values are gathered by those indices) and ``cupy.sort`` (keys; with values ``cupy.argsort``,
  then the keys and values gathered by it). torch and CuPy both call CUB's radix sort, through
  their own dispatch; CUB itself is timed too: ``DeviceRadixSort::SortKeys`` / ``SortPairs``
  built by ``cuda.compute`` with its temporary storage kept (:mod:`cub_rows`; left out with a
  note where ``cuda.compute`` cannot run);
* device time by CUPTI (:func:`compaction_rows.cupti_device_us`: every kernel, copy and memset of the
  call summed), the kernels seen printed beside;
* the readable one-bit sort (``apps.radix_sort_one_bit``) once, at :data:`READABLE_AT` (quick: at the quick size).

Every result is checked against ``np.sort(kind="stable")`` and ``np.argsort(kind="stable")``
before it is timed.
"""

import cub_rows
import numpy as np
from compaction_rows import _waited, _waited_cupy, _waited_torch, cupti_device_us

from prefixsum import apps

SIZES = (1 << 20, 1 << 22, 1 << 24, 1 << 26)
QUICK_SIZES = (3000,)
DTYPES = ("uint32", "float32")
READABLE_AT = (1 << 22, "uint32")
QUICK_ROWS = {("uint32", False), ("float32", True)}
"""The quick run's (dtype, with values): each dtype's keys and each kind of call once, in half the sorts."""
CUB_SORT = "CUB radix sort (cuda.compute, temporary storage kept)"


def _keys(n, dtype, rng):
    if dtype == "uint32":
        return rng.integers(0, 2**32, n, dtype=np.uint32)
    return rng.normal(size=n).astype(np.float32)


def _calls(cuda, torch, cupy, dkeys, dvalues, keys, values, with_values, readable):
    """``(method, call, to_host)`` of every library for one input; ``to_host`` returns (keys, values or None)."""
    if with_values:
        calls = [
            (
                "onesweep",
                lambda: _waited(cuda, apps.radix_sort(dkeys, dvalues)),
                lambda got: (got[0].copy_to_host(), got[1].copy_to_host()),
            )
        ]
    else:
        calls = [("onesweep", lambda: _waited(cuda, apps.radix_sort(dkeys)), lambda got: (got.copy_to_host(), None))]
        if readable:
            calls.append(
                (
                    "radix_sort_one_bit (readable, 1 bit/pass)",
                    lambda: _waited(cuda, apps.radix_sort_one_bit(dkeys)),
                    lambda got: (got.copy_to_host(), None),
                )
            )
    if torch:
        try:
            tkeys = torch.from_numpy(keys).cuda()
            torch.sort(tkeys[:2], stable=True)
        except (RuntimeError, TypeError) as error:
            print(f"torch.sort {keys.dtype}: skipped ({str(error).splitlines()[0]})")
        else:
            if with_values:
                tvalues = torch.from_numpy(values).cuda()

                def torch_pairs():
                    s = torch.sort(tkeys, stable=True)
                    return _waited_torch(torch, (s.values, tvalues[s.indices]))

                calls.append(
                    ("torch.sort(stable=True)", torch_pairs, lambda got: (got[0].cpu().numpy(), got[1].cpu().numpy()))
                )
            else:
                calls.append(
                    (
                        "torch.sort(stable=True)",
                        lambda: _waited_torch(torch, torch.sort(tkeys, stable=True)),
                        lambda got: (got.values.cpu().numpy(), None),
                    )
                )
    out_keys = cuda.device_array(keys.shape[0], keys.dtype)
    out_values = cuda.device_array(values.shape[0], values.dtype) if with_values else None
    sort = cub_rows.attempt(
        "radix sort", lambda: cub_rows.radix_sort(dkeys, out_keys, dvalues if with_values else None, out_values)
    )
    if sort is not None:
        calls.append(
            (
                CUB_SORT,
                lambda: _waited(cuda, (sort(), (out_keys, out_values))[1]),
                lambda got: (got[0].copy_to_host(), None if got[1] is None else got[1].copy_to_host()),
            )
        )
    if cupy:
        ckeys = cupy.asarray(keys)
        if with_values:
            cvalues = cupy.asarray(values)

            def cupy_pairs():
                order = cupy.argsort(ckeys)
                return _waited_cupy(cupy, (ckeys[order], cvalues[order]))

            calls.append(
                ("cupy.argsort + gathers", cupy_pairs, lambda got: (cupy.asnumpy(got[0]), cupy.asnumpy(got[1])))
            )
        else:
            calls.append(
                ("cupy.sort", lambda: _waited_cupy(cupy, cupy.sort(ckeys)), lambda got: (cupy.asnumpy(got), None))
            )
    return calls


def run_sorts(cuda, torch, cupy, quick, repeats, rng, add, timed):
    """Time the sort rows, calling ``add(task, method, dtype, n, micros, correct, device_us=...)``."""
    for n in QUICK_SIZES if quick else SIZES:
        values = rng.permutation(n).astype(np.int32)
        dvalues = cuda.to_device(values)
        for dtype in DTYPES:
            keys = _keys(n, dtype, rng)
            order = np.argsort(keys, kind="stable")
            expected = keys[order], values[order]
            dkeys = cuda.to_device(keys)
            for with_values in (False, True):
                if quick and (dtype, with_values) not in QUICK_ROWS:
                    continue
                task = "sort pairs" if with_values else "sort"
                readable = not with_values and dtype == READABLE_AT[1] and (quick or n == READABLE_AT[0])
                for method, call, to_host in _calls(
                    cuda, torch, cupy, dkeys, dvalues, keys, values, with_values, readable
                ):
                    got_keys, got_values = to_host(call())
                    ok = np.array_equal(got_keys, expected[0]) and (
                        got_values is None or np.array_equal(got_values, expected[1])
                    )
                    device_us, kernels = float("nan"), ""
                    if torch and "readable" not in method:
                        device_us, kernels = cupti_device_us(call, repeats)
                    add(task, method, dtype, n, timed(call, repeats=repeats), ok, device_us=device_us)
                    if kernels:
                        print(f"    CUPTI: {kernels}")
