"""A program that uses the package on a GPU ends cleanly: exit status 0, nothing from the C library.

The package keeps memory between calls (recycled device results, page-locked staging slots, the
numpy calls' copy threads, tile states, the pivoting solver's scratch). Freed in the wrong order
at interpreter exit, such memory aborts the process after its work is done ("double free or
corruption", status 134), which a script's caller sees as a failure. Skipped without a GPU.
"""

import os
import subprocess
import sys
import textwrap

import pytest

from prefixsum.core.device import simulating

PROGRAM = textwrap.dedent("""
    import numpy as np
    import prefixsum as ps
    from numba import cuda

    rng = np.random.default_rng(5)
    for n in (1000, 1 << 20, 3 << 21):  # a device call, a plain numpy call, a chunked numpy call
        x = rng.integers(-9, 9, n).astype(np.int32)
        assert np.array_equal(ps.scan(x), np.cumsum(x))
        kept = ps.scan(cuda.to_device(x))[: n // 2]  # a view of a recycled result outlives it
        assert np.array_equal(kept.copy_to_host(), np.cumsum(x)[: n // 2])
    keys = rng.integers(0, 1 << 30, 1 << 16).astype(np.uint32)
    assert np.array_equal(ps.apps.radix_sort(keys), np.sort(keys))
    for batch, n, method in ((64, 8192, "hybrid"), (1, 1 << 16, "pivoting"), (512, 512, "pivoting")):
        a, c = rng.normal(size=(batch, n)), rng.normal(size=(batch, n))
        b, d = 4 + np.abs(a) + np.abs(c), rng.normal(size=(batch, n))
        x = ps.tridiag.solve(a, b, c, d, method=method)
        residual = b * x - d
        residual[:, 1:] += a[:, 1:] * x[:, :-1]
        residual[:, :-1] += c[:, :-1] * x[:, 1:]
        assert np.abs(residual).max() < 1e-8, (batch, n, method)
    print("done")
""")


@pytest.mark.skipif(simulating(), reason="needs a CUDA GPU")
def test_a_program_that_scans_sorts_and_solves_exits_cleanly():
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    child = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=600)
    assert child.returncode == 0 and child.stdout.strip() == "done", child.stdout[-2000:] + child.stderr[-3000:]
    assert "free()" not in child.stderr and "corruption" not in child.stderr, child.stderr[-3000:]
