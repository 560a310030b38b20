"""Level 2 of proof: every kernel in the registry compiles to PTX for real GPUs.

The simulator accepts Python that the GPU compiler rejects, so the compile runs without the
simulator: ``python -m prefixsum ptx`` itself, run once per session (``ptx_command`` in
conftest.py; it is also the command's smoke test), and small programs in the session's PTX
worker (``ptx_child``). Skipped on macOS only (no numba-cuda wheels); elsewhere a missing
compiler fails the tests.
"""

import collections
import json
import pathlib
import re
import textwrap

import prefixsum as ps
from prefixsum.tridiag import block, chunked, pivoting, warp


def test_python_m_prefixsum_ptx_compiles_every_registered_kernel_for_sm75_and_sm90(ptx_command):
    assert ptx_command.returncode == 0, ptx_command.stdout[-3000:] + ptx_command.stderr[-3000:]
    assert ptx_command.stdout.rstrip().endswith("0 failures")
    for name in ps.ALGORITHMS:
        for cc in ("sm_75", "sm_90"):
            assert f"ok   {cc} {name}:" in ptx_command.stdout, f"no kernel of {name} compiled for {cc}"


def test_it_compiles_every_tridiagonal_kernel_for_sm75_and_sm90(ptx_command):
    """tridiag.ptx_kernels(), each for float32 and float64."""
    assert ptx_command.returncode == 0, ptx_command.stdout[-3000:] + ptx_command.stderr[-3000:]
    per_rows = {
        "warp_solve": len(warp.ROWS_PER_THREAD),
        "block_solve": len(block.ROWS_PER_THREAD),
        **dict.fromkeys(chunked.ROW_KERNELS, len(pivoting.ALL_ROW_PAIRS)),
        **dict.fromkeys(chunked.PAIR_KERNELS, len(pivoting.ALL_PAIR_PAIRS)),
    }
    for name in (
        "pcr_shared",
        "pcr_global_step",
        "cr_shared",
        "thomas",
        "hybrid_shared",
        "pcr_window",
        "warp_solve",
        "block_solve",
        "gtsv_tiled",
        *chunked.ROW_KERNELS,
        *chunked.PAIR_KERNELS,
        "positive_definite",
    ):
        for cc in ("sm_75", "sm_90"):
            # a line per dtype; a kernel per R for the warp and block solvers and for the pivoting chunks
            expected = 2 * per_rows.get(name, 1)
            assert ptx_command.stdout.count(f"ok   {cc} tridiag:{name}\n") == expected, (name, cc)


def test_a_kernel_the_simulator_accepts_but_the_gpu_compiler_rejects_is_reported(ptx_child):
    # compile_all on the broken kernel beside one good one: the failure is reported, the good
    # kernel still compiles after it. (The registry is left as it was: the worker runs on.)
    child = ptx_child(
        textwrap.dedent("""
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
        everything = ptx.kernels_to_compile
        ptx.kernels_to_compile = lambda *args, **kwargs: [("broken", broken, tile_kernel_argtypes("float32")), good]
        try:
            report = io.StringIO()
            failures = ptx.compile_all(capabilities=((9, 0),), out=report)
        finally:
            ptx.kernels_to_compile = everything
        print(report.getvalue())
        sys.exit(0 if [f[0] for f in failures] == ["broken"] and f"ok   sm_90 {good[0]}" in report.getvalue() else 1)
    """)
    )
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    assert "FAIL sm_90 broken:" in child.stdout


IN_REGISTERS = (
    "warp_solve",
    "block_solve",
    "partition_reduce",
    "partition_substitute",
    "gtsv_tiled",
    *chunked.ROW_KERNELS,
    *chunked.PAIR_KERNELS,
)
"""Tridiagonal kernels that keep their rows in registers (or their chunks in shared memory): no local memory."""
FLOAT64_ARITHMETIC = re.compile(r"\b(add|sub|mul|div|fma|neg|abs)(\.rn)?\.f64")
LOCAL_MEMORY = re.compile(r"^\s*(ld|st)\.local|^\s*\.local", re.M)


def test_float32_tridiagonal_kernels_compute_in_float32_and_the_chunks_stay_in_registers(ptx_command):
    """What the command's PTX for sm_90 says (neither depends on the capability): no float64
    arithmetic in a float32 kernel (an untyped 0 or 1 would promote), no local memory in the
    register-resident solvers."""
    assert ptx_command.returncode == 0, ptx_command.stdout[-3000:] + ptx_command.stderr[-3000:]
    kept = pathlib.Path(ptx_command.args[ptx_command.args.index("--keep") + 1])
    checked = collections.Counter()
    for entry in json.loads((kept / "index.json").read_text()):
        name, single = entry["kernel"], "float32" in entry["argtypes"][1]
        if not entry["label"].startswith("tridiag:") or entry["cc"] != "sm_90" or not (single or name in IN_REGISTERS):
            continue
        ptx = (kept / entry["file"]).read_text()
        if single:
            assert not FLOAT64_ARITHMETIC.search(ptx), entry
        if name in IN_REGISTERS:
            assert not LOCAL_MEMORY.search(ptx), entry
        checked[name, "float32" if single else "float64"] += 1
    assert checked["warp_solve", "float32"] == checked["warp_solve", "float64"] == len(warp.ROWS_PER_THREAD)
    assert checked["block_solve", "float32"] == checked["block_solve", "float64"] == len(block.ROWS_PER_THREAD)
    assert checked["partition_reduce", "float64"] and checked["pcr_shared", "float32"]
    for name in ("gtsv_tiled", "positive_definite"):
        assert checked[name, "float32"]
    for names, pairs in (
        (chunked.ROW_KERNELS, pivoting.ALL_ROW_PAIRS),
        (chunked.PAIR_KERNELS, pivoting.ALL_PAIR_PAIRS),
    ):
        for name in names:
            assert checked[name, "float32"] == checked[name, "float64"] == len(pairs)


def test_a_ptx_that_promotes_to_float64_or_spills_is_seen():
    """The two patterns above match what the compiler writes for them."""
    promoted = "\tadd.rn.f64 \t%fd3, %fd1, %fd2;\n"
    spilled = "\t.local .align 8 .b8 \t__local_depot0[32];\n\tst.local.f32 \t[%rd1], %f1;\n"
    assert FLOAT64_ARITHMETIC.search(promoted) and not FLOAT64_ARITHMETIC.search(promoted.replace("f64", "f32"))
    assert LOCAL_MEMORY.search(spilled) and not LOCAL_MEMORY.search(spilled.replace("local", "shared"))
