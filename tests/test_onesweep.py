"""The onesweep radix sort (prefixsum.apps.onesweep) against numpy's stable sort.

Every digit pass handles 256 digit counts per tile whatever the tile's size, so the simulator's
time goes by tiles x passes: most tests take tiles of one warp x 1 key (``SMALL``), sizes around
one and a few tiles, and the many-tile test 1-byte keys (one pass). The default tile (256 x 16)
is run on one size across its boundary.
"""

import collections
import re
import textwrap

import numpy as np
import pytest
from numba import cuda

import prefixsum as ps
from prefixsum import apps, trace
from prefixsum.apps import onesweep

SMALL = {"block_size": 32, "items_per_thread": 1}
INTEGERS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOATS = ["float16", "float32", "float64"]


def _keys(n, dtype, rng):
    """Random keys with many repeats (stability shows), and for floats every special value."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        keys = (rng.normal(size=n) * 10.0 ** rng.integers(-3, 3, n)).astype(dtype)
        special = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -np.nan, -1.0, 1.0], dtype)
        keys[: min(n, 8)] = special[: min(n, 8)]
    else:
        info = np.iinfo(dtype)
        keys = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    keys[n // 2 :] = rng.permutation(np.resize(keys[: max(n // 2, 1)], n - n // 2))
    return rng.permutation(keys)


def _sorted_like_numpy(keys, values, got_keys, got_values):
    """Assert keys and values in numpy's stable order, bit for bit (-0.0, 0.0 and NaNs in their order)."""
    order = np.argsort(keys, kind="stable")
    unsigned = f"u{keys.dtype.itemsize}"
    np.testing.assert_array_equal(got_keys.view(unsigned), keys[order].view(unsigned))
    if values is not None:
        np.testing.assert_array_equal(got_values, values[order])


def _sort(keys, values=None, **shape):
    """``onesweep.sort_device`` of host arrays, back on the host."""
    got, got_values = onesweep.sort_device(
        cuda.to_device(keys), None if values is None else cuda.to_device(values), **shape
    )
    return got.copy_to_host(), None if got_values is None else got_values.copy_to_host()


@pytest.mark.parametrize("dtype", INTEGERS + FLOATS)
def test_every_key_dtype_sorts_stably_with_values_across_tiles(dtype, rng):
    n = 45  # two tiles of 32: one whole, one partial
    keys = _keys(n, dtype, rng)
    values = np.arange(n, dtype=np.int32) * 3 - 7
    before = keys.copy()
    got, got_values = _sort(keys, values, **SMALL)
    _sorted_like_numpy(keys, values, got, got_values)
    np.testing.assert_array_equal(keys.view(f"u{keys.dtype.itemsize}"), before.view(f"u{keys.dtype.itemsize}"))


@pytest.mark.parametrize("n", [1, 2, 31, 32, 33, 64, 65])
def test_sizes_around_tiles_with_values_of_other_widths(n, rng):
    keys = _keys(n, "float32", rng)
    values = [rng.normal(size=n), rng.integers(-9, 9, n).astype(np.int8), np.arange(n, dtype=np.uint32)][n % 3]
    got, got_values = _sort(keys, values, **SMALL)
    _sorted_like_numpy(keys, values, got, got_values)


def test_nan_and_signed_zero_as_numpy_sorts_them():
    keys = np.array([np.nan, 0.0, -0.0, 1.0, -np.nan, -1.0, np.inf, -np.inf, 0.0, -0.0], np.float64)
    got, order = _sort(keys, np.arange(len(keys)), **SMALL)
    np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(np.signbit(got[2:6]), np.signbit(keys[[1, 2, 8, 9]]))  # zeros in their order
    assert np.isnan(got[-2:]).all() and got[0] == -np.inf


def test_many_tiles_wait_for_digit_counts_published_later():
    seed = 1
    rng = np.random.default_rng(seed)
    n = 32 * 20 + 5
    keys = rng.integers(0, 256, n).astype(np.uint8)
    values = np.arange(n, dtype=np.int16)
    with ps.sim.block_order_seed(seed), ps.sim.resident_blocks(6):
        run = trace.record(_sort, keys, values, **SMALL)
    _sorted_like_numpy(keys, values, *run.result)
    peeks = collections.Counter(r.block for r in run.records if r.array == "status" and r.atomic)
    # without waiting, a tile publishes 512 states and peeks at most window states per digit
    assert any(count > 512 + 256 * onesweep.LOOKBACK_WINDOW for count in peeks.values())


def test_the_default_tile_across_its_boundary_and_device_arrays(rng):
    n = 256 * 16 + 33
    keys = _keys(n, "int32", rng)
    dkeys = cuda.to_device(keys)
    got = apps.radix_sort(dkeys)
    assert cuda.devicearray.is_cuda_ndarray(got)
    _sorted_like_numpy(keys, None, got.copy_to_host(), None)
    np.testing.assert_array_equal(dkeys.copy_to_host(), keys)
    assert apps.radix_sort(np.zeros(0, np.float32)).shape == (0,)
    empty_keys, empty_values = apps.radix_sort(np.zeros(0, np.int8), np.zeros(0))
    assert empty_keys.dtype == np.int8 and empty_values.shape == (0,)


def test_one_histogram_pass_then_one_pass_per_byte_racing_nowhere(rng):
    keys = _keys(40, "int16", rng)
    with ps.sim.resident_blocks(1):
        run = trace.record(_sort, keys, **SMALL)
    _sorted_like_numpy(keys, None, *run.result)
    assert [launch.kernel for launch in run.launches] == ["clear", "histogram", "digit_pass", "digit_pass"]
    assert run.races() == [] and run.uninitialized_reads() == []


def _refused(error, match, *args):
    """``apps.radix_sort(*args)`` raises before any launch and leaves its arguments as they were."""
    before = [None if a is None else np.array(a, copy=True) for a in args]
    run = trace.record(apps.radix_sort, *args)
    assert isinstance(run.error, error) and re.search(match, str(run.error)), run.error
    assert run.launches == [], [launch.kernel for launch in run.launches]
    for a, b in zip(args, before):
        if a is not None:
            np.testing.assert_array_equal(a, b)


def test_bad_input_is_refused_before_any_launch():
    keys = np.arange(5, dtype=np.float32)
    _refused(TypeError, r"unsupported key dtype 'complex64'; allowed: int8, .* float64", keys.astype(np.complex64))
    _refused(TypeError, r"unsupported key dtype 'bool'", keys > 2)
    _refused(ValueError, r"keys and values must have one length; got 5 and 4", keys, np.arange(4))
    _refused(
        TypeError,
        r"values of dtype 'complex128' \(16 bytes\) cannot be moved; allowed: any dtype of \(1, 2, 4, "
        r"8\)",
        keys,
        keys.astype(np.complex128),
    )
    _refused(ValueError, r"keys must be 1-D; got an array of shape \(1, 5\) \(ndim=2\)", keys[None])
    _refused(TypeError, r"unsupported key dtype 'object'", np.array([3, None, 2], dtype=object))


def test_the_one_bit_sort_is_kept_as_the_readable_version(rng):
    keys = _keys(40, "float32", rng)
    keys = keys[~np.isnan(keys) & ~((keys == 0) & np.signbit(keys))]  # it puts -0.0 first and NaN by its sign
    got = apps.radix_sort_one_bit(keys)
    np.testing.assert_array_equal(got, np.sort(keys, kind="stable"))


def test_the_onesweep_kernels_compile_to_ptx(ptx_child):
    code = """
        import numpy as np
        from numba import cuda
        import prefixsum
        from prefixsum.apps import onesweep
        from prefixsum.core.numba_gpu import pretend_device

        pretend_device((9, 0))
        for key, value, counts in [("uint32", None, "int32"), ("float32", "u4", "int32"), ("float64", "u8", "int64"),
                                   ("int16", "u8", "int32")]:
            key, counts = np.dtype(key), np.dtype(counts)
            value = None if value is None else np.dtype(value)
            kernel = onesweep.digit_pass_kernel(key, value, counts)
            ptx, _ = cuda.compile_ptx(kernel.py_func, onesweep.pass_argtypes(key, value, counts), cc=(9, 0))
            # the in-warp rank by 8 ballots per key of a thread (CUB's MatchAny), no match_any; the
            # look-back's words read and written relaxed (no atomics but the tile counter's two);
            # nothing spilled to local memory
            items = onesweep.tile_items(key, value, 256)
            assert ptx.count("vote.sync.ballot") == 8 * items and "match.any" not in ptx, key
            assert "ld.relaxed.gpu.global" in ptx and "st.relaxed.gpu.global" in ptx, key  # a word, or a pair (int64)
            assert ptx.count("atom.global") == 2, key
            assert "ld.local" not in ptx and "st.local" not in ptx, key
            lesson = onesweep.digit_pass_kernel(key, value, counts, rank=onesweep.warp_digit_rank)
            ptx, _ = cuda.compile_ptx(lesson.py_func, onesweep.pass_argtypes(key, value, counts), cc=(9, 0))
            assert ptx.count("match.any.sync") == items and "ld.local" not in ptx, key
            histogram = onesweep.histogram_kernel(key, counts)
            ptx, _ = cuda.compile_ptx(histogram.py_func, onesweep.histogram_argtypes(key, counts), cc=(9, 0))
            assert "atom.shared.add" in ptx and "ld.local" not in ptx, key
            print("ok", key)
        ptx, _ = cuda.compile_ptx(onesweep.clear.py_func, (onesweep._array(np.int32),), cc=(9, 0))
        print("ok clear")
    """
    child = ptx_child(textwrap.dedent(code))  # the session's PTX worker: no process and imports of its own
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.count("ok") == 5
