"""A new scan is one new file: dropped into a copy of the package, it registers, passes the
generic suite (tests/test_scan.py, unedited) and compiles to PTX, with no other file edited.

The new algorithm is built from the primitives alone (one element per thread, the block scan of
:mod:`prefixsum.primitives.block`, tiles carried by :func:`prefixsum.scans.tiles.register_tiled`).
"""

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
NEW_MODULE = '''
"""One element per thread, scanned by the block primitive; tiles carried by register_tiled."""
import functools

from numba import cuda

from ..core.registry import Capability
from ..primitives.block import block_scan, position
from ..primitives.ops import device_op, identity
from .tiles import register_tiled


@functools.lru_cache(maxsize=None)
def tile_kernel(op, dtype, inclusive, reverse, block_size):
    combine = device_op(op, dtype)
    neutral = identity(op, dtype)
    where = position(reverse)
    scan_block = block_scan(op, dtype, block_size)

    def block_primitives_tile(x, out, totals, n):
        i = cuda.blockIdx.x * block_size + cuda.threadIdx.x
        value = x[where(i, n)] if i < n else neutral
        exclusive, total = scan_block(value)
        if i < n:
            out[where(i, n)] = combine(exclusive, value) if inclusive else exclusive
        if cuda.threadIdx.x == 0:
            totals[cuda.blockIdx.x] = total

    return cuda.jit(block_primitives_tile)


ALGORITHM = register_tiled("block_primitives", tile_kernel, options={"block_size": 64},
                           summary="one element per thread, the block scan primitive",
                           capabilities=Capability.WARP_INTRINSICS)
'''


@pytest.fixture(scope="module")
def copy_with_new_algorithm(tmp_path_factory):
    """The package and the generic tests copied, and one new module written into the copy's scans."""
    root = tmp_path_factory.mktemp("drop_in")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "prefixsum", root / "prefixsum", ignore=ignore)
    (root / "tests").mkdir()
    for name in ("conftest.py", "ptx_worker.py", "test_scan.py"):
        shutil.copy(ROOT / "tests" / name, root / "tests" / name)
    (root / "prefixsum" / "scans" / "block_primitives.py").write_text(NEW_MODULE)
    return root


def run_in(root, args, **env):
    environment = {**os.environ, "PYTHONPATH": str(root), **env}
    return subprocess.run(
        [sys.executable, *args], cwd=root, env=environment, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow  # a copy of the package and the generic suite in a child process: about 25 s
def test_a_dropped_in_module_registers_and_passes_the_generic_suite(copy_with_new_algorithm):
    root = copy_with_new_algorithm
    child = run_in(root, ["-c", "import prefixsum as ps; print(ps.__file__); print(list(ps.ALGORITHMS))"])
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.startswith(str(root / "prefixsum")), child.stdout  # the copy, not the original
    assert "'block_primitives'" in child.stdout and "'lookback'" in child.stdout
    suite = run_in(
        root,
        [
            "-m",
            "pytest",
            "-p",
            "no:nbval",
            "-p",
            "no:cacheprovider",
            "-q",
            "-x",
            "tests/test_scan.py",
            "-k",
            "block_primitives",
        ],
    )
    assert suite.returncode == 0, suite.stdout[-3000:] + suite.stderr[-3000:]
    assert "14 passed" in suite.stdout, suite.stdout[-500:]  # 10 sizes and 4 operators


def test_a_dropped_in_module_compiles_to_ptx(copy_with_new_algorithm, ptx_compiler):
    code = textwrap.dedent("""
        import sys
        from prefixsum.cli import ptx
        sys.exit(1 if ptx.compile_all(capabilities=((9, 0),), algorithms=("block_primitives",)) else 0)
    """)
    child = run_in(copy_with_new_algorithm, ["-c", code], NUMBA_ENABLE_CUDASIM="0")
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    assert "ok   sm_90 block_primitives:block_primitives_tile" in child.stdout, child.stdout[-2000:]
