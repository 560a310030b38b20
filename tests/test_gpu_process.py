"""A notebook on a GPU machine: its checks and traces run in the simulating worker, and answer as on a laptop.

CI has no GPU, but a process on numba's real CUDA target (``NUMBA_ENABLE_CUDASIM=0``) can define
kernels, compile them and pickle them without one. The same notebook-style cells run twice, in
such a process and in a simulating one; every verdict, trace summary, error and printed line must
be the same. The cells are compiled under a file name that does not exist and registered in
:mod:`linecache`, as IPython does, so the source lines quoted in errors must travel too.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from prefixsum.core.device import undecided_environment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CELLS = [
    """
    import math
    import numpy as np
    import prefixsum as ps
    from numba import cuda
    from prefixsum.primitives import warp as package_warp

    BLOCK = 64          # a module-level constant the kernels read
    """,
    """
    @cuda.jit(device=True)
    def combine(a, b):
        return a + b

    @cuda.jit
    def ladder_kernel(x, out):
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * BLOCK + t
        buf = cuda.shared.array(BLOCK, np.float32)
        buf[t] = x[i] if i < x.size else 0
        cuda.syncthreads()
        s = 1
        while s < BLOCK:
            v = buf[t - s] if t >= s else 0
            cuda.syncthreads()
            buf[t] = combine(buf[t], v)
            cuda.syncthreads()
            s *= 2
        if i < x.size:
            out[i] = buf[t]

    @cuda.jit
    def racy_kernel(x, out):
        t = cuda.threadIdx.x
        buf = cuda.shared.array(BLOCK, np.float32)
        buf[t] = x[t] if t < x.size else 0
        cuda.syncthreads()
        s = 1
        while s < BLOCK:
            if t >= s:
                buf[t] += buf[t - s]
            cuda.syncthreads()
            s *= 2
        if t < x.size:
            out[t] = buf[t]

    @cuda.jit
    def shifted_kernel(x, out):
        i = cuda.threadIdx.x
        out[i] = x[i - 1]
    """,
    '''
    def launcher(kernel):
        """A closure over the kernel, as chapter 01's checks build them."""
        def run(x):
            out = cuda.device_array_like(x)
            kernel[1, BLOCK](cuda.to_device(x), out)
            return out.copy_to_host()
        return run

    def chatty(x):
        print("host code of the student prints", x.size)
        return launcher(ladder_kernel)(x)

    configured = ladder_kernel[1, BLOCK]   # a configured launch, passed as it is

    results = {
        "closure": str(ps.check.scan(launcher(ladder_kernel), dtype=np.float32, sizes=(1, 2, 31, 33, 64),
                                     name="closure")),
        "lambda": str(ps.check.scan(lambda x: launcher(ladder_kernel)(x), dtype=np.float32, sizes=(5, 32),
                                    name="lambda")),
        "race": str(ps.check.scan(launcher(racy_kernel), dtype=np.float32, sizes=(64,), name="race")),
        "configured": str(ps.check.scan(lambda x: configured(cuda.to_device(x), y := cuda.device_array_like(x))
                                        or y.copy_to_host(),
                                        dtype=np.float32, sizes=(7,), name="configured")),
        "package kernel by name": str(ps.check.scan(lambda x: ps.scan(x, algorithm="ladder"), sizes=(100,),
                                                    name="package")),
        "shifted": str(ps.check.scan(launcher(shifted_kernel), dtype=np.float32, sizes=(5,), name="shifted")),
    }
    trace = ps.trace.record(launcher(ladder_kernel), np.arange(1, 9, dtype=np.float32))
    results["trace"] = [trace.result.tolist(), len(trace.launches), len(trace.records)]
    trace = ps.trace.record(chatty, np.arange(1, 9, dtype=np.float32))
    results["printed"] = trace.result.tolist()
    # settings of this process reach the worker's run: the classroom simulator's and the checker's
    import prefixsum.classroom.check.mode as check_module
    import prefixsum.classroom.sim.settings as sim_settings
    from prefixsum.classroom import child
    with ps.sim.resident_blocks(48), ps.check.thorough():
        results["carried"] = child.on_simulator(
            lambda: [sim_settings.settings.resident, check_module._mode["thorough"]])
    # a device function whose code depends on the device (lookback's bit carrier, inside publish)
    from prefixsum.scans import lookback
    publish, peek = lookback.state_access(np.float32)
    with_publish = lookback.look_back("add", np.dtype(np.float32), publish=publish)
    with ps.sim.resident_blocks(48):
        results["device-specific"] = str(ps.check.scan(lambda x: ps.lessons.scan_with(x, with_publish),
                                                       sizes=(1, 33, 300), name="the package's publish"))
    try:
        ps.trace.record(launcher(shifted_kernel), np.arange(8, dtype=np.float32), raise_errors=True)
    except Exception as error:
        results["error"] = [type(error).__module__, type(error).__name__, str(error)]
    ''',
]

PROGRAM = """
import json, linecache, sys, textwrap, time
import prefixsum  # first, so that it makes the device choice (or keeps the user's)
namespace = {"__name__": "__main__"}
start = time.perf_counter()
for number, cell in enumerate(json.loads(sys.argv[1])):
    source = textwrap.dedent(cell)
    name = f"/nonexistent/ipykernel_0/cell{number}.py"   # as IPython names cells: no file behind it
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), namespace)
from prefixsum.classroom import child
print(json.dumps({"results": namespace["results"], "simulating": child.simulating(),
                  "seconds": time.perf_counter() - start, "worker_started": child._current is not None}))
"""


def run_cells(simulator):
    env = {**undecided_environment(), "NUMBA_ENABLE_CUDASIM": "1" if simulator else "0", "PYTHONPATH": ROOT}
    child = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(CELLS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    *printed, last = child.stdout.strip().splitlines()
    return json.loads(last), printed, child.stderr


@pytest.fixture(scope="module")
def both():
    return run_cells(simulator=True), run_cells(simulator=False)


def test_the_parent_is_on_the_real_cuda_target(both):
    (sim, _, _), (gpu, _, _) = both
    assert sim["simulating"] and not sim["worker_started"]
    assert not gpu["simulating"] and gpu["worker_started"]


def test_every_verdict_and_trace_is_the_same_from_a_gpu_process(both):
    (sim, _, _), (gpu, _, _) = both
    assert gpu["results"] == sim["results"]
    results = gpu["results"]
    assert results["closure"].startswith("PASS") and results["lambda"].startswith("PASS")
    assert results["configured"].startswith("PASS") and results["package kernel by name"].startswith("PASS")
    assert results["race"].startswith("FAIL") and "race" in results["race"]
    assert results["shifted"].startswith("FAIL")
    assert results["trace"][:2] == [[1, 3, 6, 10, 15, 21, 28, 36], 1]
    assert results["carried"] == [48, True]
    assert results["device-specific"].startswith("PASS")


def test_an_error_keeps_its_type_message_and_source_line(both):
    (sim, _, _), (gpu, _, _) = both
    module, name, message = gpu["results"]["error"]
    assert (module, name) == ("prefixsum.classroom.sim.errors", "NegativeIndexError")
    assert "/nonexistent/ipykernel_0/cell1.py:41 in shifted_kernel" in message
    assert "out[i] = x[i - 1]" in message  # the cell's source line, from the linecache entry sent along
    assert gpu["results"]["error"] == sim["results"]["error"]


def test_what_the_simulated_run_prints_reaches_the_notebook(both):
    (_, sim_printed, _), (_, gpu_printed, gpu_stderr) = both
    assert gpu_printed == sim_printed == ["host code of the student prints 8"]
    # nothing on stderr: not the worker's import notice, not numba's warning on the one-block launch
    assert gpu_stderr == ""


def test_one_worker_serves_every_call_and_a_dead_one_is_replaced():
    code = textwrap.dedent("""
        import os, numpy as np, prefixsum as ps
        from prefixsum.classroom import child
        pids = [child.on_simulator(os.getpid) for _ in range(3)]
        child._current._process.kill(); child._current._process.wait()
        try:
            child._current.call(os.getpid, (), {})
        except RuntimeError as error:
            print("died:", "ended" in str(error))
        pids.append(child.on_simulator(os.getpid))
        print(len(set(pids[:3])), pids[3] != pids[0], os.getpid() not in pids)
    """)
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": ROOT}
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split() == ["died:", "True", "1", "True", "True"]
