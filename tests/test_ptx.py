"""Level 2 of proof: every kernel in the registry compiles to PTX for real GPUs.

The simulator accepts Python that the GPU compiler rejects, so the compile runs without the
simulator: ``python -m prefixsum ptx`` itself, run once per session (``ptx_command`` in
conftest.py; it is also the command's smoke test), and small programs in the session's PTX
worker (``ptx_child``). Skipped on macOS only (no numba-cuda wheels); elsewhere a missing
compiler fails the tests.
"""
import textwrap

import prefixsum as ps
from prefixsum.tridiag import pivoting, warp


def test_python_m_prefixsum_ptx_compiles_every_registered_kernel_for_sm75_and_sm90(ptx_command):
    assert ptx_command.returncode == 0, ptx_command.stdout[-3000:] + ptx_command.stderr[-3000:]
    assert ptx_command.stdout.rstrip().endswith("0 failures")
    for name in ps.ALGORITHMS:
        for cc in ("sm_75", "sm_90"):
            assert f"ok   {cc} {name}:" in ptx_command.stdout, f"no kernel of {name} compiled for {cc}"


def test_it_compiles_every_tridiagonal_kernel_for_sm75_and_sm90(ptx_command):
    """tridiag.ptx_kernels(), each for float32 and float64."""
    assert ptx_command.returncode == 0, ptx_command.stdout[-3000:] + ptx_command.stderr[-3000:]
    per_rows = {"warp_solve": len(warp.ROWS_PER_THREAD), **dict.fromkeys(
        ("spike_reduce", "spike_substitute", "spike_block"), len(pivoting.ALL_SPIKE_ROWS))}
    for name in ("pcr_shared", "pcr_global_step", "cr_shared", "thomas", "hybrid_shared", "pcr_window", "warp_solve",
                 "gtsv_tiled", "spike_reduce", "spike_substitute", "spike_block", "positive_definite"):
        for cc in ("sm_75", "sm_90"):
            # a line per dtype; a kernel per R for the warp solver, per S for the partitioned pivoting
            expected = 2 * per_rows.get(name, 1)
            assert ptx_command.stdout.count(f"ok   {cc} tridiag:{name}\n") == expected, (name, cc)


def test_a_kernel_the_simulator_accepts_but_the_gpu_compiler_rejects_is_reported(ptx_child):
    # compile_all on the broken kernel beside one good one: the failure is reported, the good
    # kernel still compiles after it. (The registry is left as it was: the worker runs on.)
    child = ptx_child(textwrap.dedent("""
        import io, sys
        from numba import cuda
        from prefixsum.cli import ptx
        from prefixsum.scans.tiles import tile_kernel_argtypes

        def python_only(x, out, totals, n):
            i = cuda.grid(1)
            if i < n:
                out[i] = sum([x[j] for j in range(i + 1)])

        broken = cuda.jit(python_only)
        good = ptx.kernels_to_compile()[0]
        everything, ptx.kernels_to_compile = ptx.kernels_to_compile, lambda *args, **kwargs: [("broken", broken, tile_kernel_argtypes("float32")), good]
        try:
            report = io.StringIO()
            failures = ptx.compile_all(capabilities=((9, 0),), out=report)
        finally:
            ptx.kernels_to_compile = everything
        print(report.getvalue())
        sys.exit(0 if [f[0] for f in failures] == ["broken"] and f"ok   sm_90 {good[0]}" in report.getvalue() else 1)
    """))
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    assert "FAIL sm_90 broken:" in child.stdout
