"""The one door to numba-cuda's internals on the GPU side (prefixsum.core.numba_gpu), tested without a GPU.

The Launcher hands ``cuLaunchKernel`` the flat parameters numba would build, in a kept block; if numba-cuda changed its
layout, a launch would read garbage with no error. numba's own ``_Kernel._prepare_args`` is
importable and runs without a GPU in a ``NUMBA_ENABLE_CUDASIM=0`` process, so the two lists are
compared there for every argument kind the Launcher takes.
"""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from numba import cuda, types

from prefixsum.core import launch, numba_gpu

MARSHALLING = textwrap.dedent("""
    import ctypes, json, types as pytypes
    import numpy as np
    from numba import cuda, types
    from numba.cuda import dispatcher
    from prefixsum.core import numba_gpu

    def device_array(shape, dtype, address):
        # numba's device array over a made-up address: no GPU, no allocation (its size is not 0)
        dtype = np.dtype(dtype)
        strides = tuple(int(np.prod(shape[k + 1:])) * dtype.itemsize for k in range(len(shape)))
        memory = pytypes.SimpleNamespace(device_ctypes_pointer=ctypes.c_void_p(address))
        return cuda.devicearray.DeviceNDArray(shape, strides, dtype, gpu_data=memory)

    def plain(values):
        return [[type(v).__name__, v.value] if isinstance(v, ctypes._SimpleCData) else ["int", int(v)] for v in values]

    def read_back(block, args, numba_params):
        # the block cuLaunchKernel reads: each slot through its pointer, as the ctypes type numba gives
        # that parameter (an array's fields as 64-bit integers)
        block.fill(args)
        slots = ctypes.cast(block.address, ctypes.POINTER(ctypes.c_void_p))
        return plain([type(p).from_address(slots[k]) if isinstance(p, ctypes._SimpleCData)
                      else ctypes.c_int64.from_address(slots[k]).value for k, p in enumerate(numba_params)])

    cases = [
        (types.Array(types.float64, 2, "C"), device_array((5, 3), "float64", 0x10000)),
        (types.Array(types.float32, 1, "C"), device_array((7,), "float32", 0x20000)),
        (types.Array(types.uint64, 1, "C"), device_array((1,), "uint64", 0x30000)),
        (types.Array(types.int32, 3, "C"), device_array((2, 3, 4), "int32", 0x40000)),
        (types.Array(types.boolean, 1, "C"), device_array((9,), "bool", 0x50000)),
        (types.int64, -(2 ** 40) - 3),
        (types.int32, -7),
        (types.uint32, 2 ** 31 + 5),
        (types.uint64, 2 ** 63 + 9),
    ]
    kernel = pytypes.SimpleNamespace(extensions=())  # what _prepare_args reads of its kernel
    result = []
    for argtype, value in cases:
        numba_params = []
        dispatcher._Kernel._prepare_args(kernel, argtype, value, 0, [], numba_params)
        result.append([str(argtype), plain(numba_params), plain(numba_gpu.marshaller((argtype,))([value]))])
        result[-1].append(read_back(numba_gpu.ParamBlock((argtype,)), [value], numba_params))
    together = []  # two arguments in one list: each lays out after the other
    dispatcher._Kernel._prepare_args(kernel, cases[0][0], cases[0][1], 0, [], together)
    dispatcher._Kernel._prepare_args(kernel, cases[5][0], cases[5][1], 0, [], together)
    both = (cases[0][0], cases[5][0])
    result.append(["(5, 3) float64 and an int64", plain(together),
                   plain(numba_gpu.marshaller(both)([cases[0][1], cases[5][1]])),
                   read_back(numba_gpu.ParamBlock(both), [cases[0][1], cases[5][1]], together)])
    print(json.dumps(result))
""")


def test_the_launchers_marshalling_is_numbas_for_every_argument_kind_it_takes():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    child = subprocess.run([sys.executable, "-c", MARSHALLING], env=env, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    cases = json.loads(child.stdout.strip().splitlines()[-1])
    assert len(cases) == 10
    for argtype, numba_params, ours, in_block in cases:
        assert ours == numba_params, argtype
        assert in_block == numba_params, f"{argtype}: the parameter block"
    by_kind = {argtype: params for argtype, params, _, _ in cases}
    # what the comparison covers: numba's layout of a 2-D array and of an int64, spelled out
    assert by_kind["array(float64, 2d, C)"] == [
        ["int", 0],
        ["int", 0],
        ["int", 15],
        ["int", 8],
        ["int", 0x10000],
        ["int", 5],
        ["int", 3],
        ["int", 24],
        ["int", 8],
    ]
    assert by_kind["int64"] == [["c_long", -(2**40) - 3]]


@pytest.fixture
def fresh_warning(monkeypatch):
    monkeypatch.setattr(numba_gpu, "_warned", [])


def test_a_missing_name_warns_once_and_the_launcher_uses_the_dispatcher(fresh_warning, monkeypatch):
    @cuda.jit
    def twice(x, out, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = 2 * x[i]

    def renamed(jitted, argtypes):
        raise AttributeError("'_Kernel' object has no attribute 'library'")

    monkeypatch.setattr(numba_gpu, "launch_parts", renamed)
    arr = types.Array(types.float32, 1, "C")
    x = np.arange(100, dtype=np.float32)
    with pytest.warns(RuntimeWarning, match="no attribute 'library'.*through numba's dispatcher") as caught:
        for _ in range(2):
            launcher = launch.Launcher(twice, (arr, arr, types.int64))
            launcher._direct = True  # as on a GPU: the simulator never tries the fast path
            out = cuda.device_array(100, np.float32)
            launcher(4, 32, cuda.to_device(x), out, 100)
            np.testing.assert_array_equal(out.copy_to_host(), 2 * x)
            assert launcher._direct is False
    assert len(caught) == 1


def test_compiling_for_puts_numbas_device_lookup_back():
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        from numba.cuda import dispatcher
        from prefixsum.core.numba_gpu import compiling_for
        original = dispatcher.get_current_device
        with compiling_for((8, 6)):
            assert dispatcher.get_current_device().compute_capability == (8, 6)
        assert dispatcher.get_current_device is original
    """),
        ],
        env={**os.environ, "NUMBA_ENABLE_CUDASIM": "0"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]


def test_the_fallback_warning_is_once_per_process(fresh_warning):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert numba_gpu.warn_fallback(ImportError("cuda.core"))
        assert not numba_gpu.warn_fallback(AttributeError("library"))
    assert len(caught) == 1 and "cuda.core" in str(caught[0].message)


def test_launch_dimensions_beyond_a_c_int_are_refused_naming_them():
    """The driver's cuLaunchKernel is called without ctypes argtypes (numba_gpu.driver_launch): its
    dimensions go as C ints, so a grid of 2**31 or more is refused before any launch."""

    @cuda.jit
    def noop(x):
        pass

    launcher = launch.Launcher(noop, (types.Array(types.float32, 1, "C"),))
    assert launcher._dims((4, 2), 128, 0) == (4, 2, 1, 128, 1, 1, 0)
    with pytest.raises(ValueError, match=r"from 0 to 2\*\*31 - 1; got grid 2147483648, block 32, shared 0"):
        launcher._dims(1 << 31, 32, 0)
