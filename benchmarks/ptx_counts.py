"""Instructions of the look-back scan's kernel, by kind, from its PTX (and SASS where the tools are here).

The look-back scan at 2^24 issues about 3.5 times CUB's instructions per cycle (``lookback_ncu.txt``):
numba's index arithmetic, not the memory, is what the SM spends its cycles on. This script counts
them without a GPU: it compiles the kernel of ``"lookback"`` (add, inclusive, forward and
reverse, the default tile) for sm_90 and prints, per dtype, the PTX instructions of each kind
(64-bit and 32-bit integer arithmetic, numba's negative-index wraparound ``shr.s64 x, 63``, the
global and shared loads and stores) and, when ``ptxas`` and ``nvdisasm`` are on the PATH, the
SASS instructions and registers that the GPU runs. The counts are static (both the whole-tile
and the last tile's path), so compare them between versions of the kernel, not with a profile.

Run ``NUMBA_ENABLE_CUDASIM=0 python benchmarks/ptx_counts.py [--reverse] [--dtype float32 ...]``
(it sets the variable itself when missing) on any machine with numba-cuda's compiler.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

DTYPES = ("float32", "int32", "float64", "int64")
_INSTRUCTION = re.compile(r"^\s+(?:@%p\d+\s+|@!%p\d+\s+)?([a-z][\w.]*)", re.M)
_WRAPAROUND = re.compile(r"shr\.s64\s+%rd\d+,\s*%rd\d+,\s*63;")
_INTEGER_OPS = ("add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "neg", "min", "max")


def ptx_of(dtype, reverse):
    """The PTX (sm_90) of ``"lookback"``'s kernel for add on ``dtype``, inclusive, forward or reverse,
    in the tile it takes for large arrays (2^28 elements)."""
    from prefixsum.core.numba_gpu import compiling_for  # prefixsum before numba.cuda: it picks the target
    from prefixsum.scans import lookback
    # isort: split

    import numpy as np
    from numba import cuda

    block_size, items = lookback.tile_shape(np.dtype(dtype), 1 << 28, None, None)
    ((kernel, argtypes),) = lookback.kernels("add", np.dtype(dtype), True, reverse, block_size, items)
    with compiling_for((9, 0)):
        ptx, _ = cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
    return ptx


def ptx_counts(ptx):
    """``{kind: count}`` of the PTX instructions that matter here (see the module's docstring)."""
    ops = collections.Counter(_INSTRUCTION.findall(ptx))

    def integer(width):
        return sum(
            count
            for op, count in ops.items()
            if op.split(".")[0] in _INTEGER_OPS and op.split(".")[-1] in (f"s{width}", f"u{width}", f"b{width}")
        )

    loads = {
        kind: sum(c for op, c in ops.items() if op.startswith(kind) and op.split(".")[-1][0] in "fsub")
        for kind in ("ld.global", "st.global", "ld.shared", "st.shared")
    }
    return {
        "all": sum(ops.values()),
        "int64": integer(64),
        "int32": integer(32),
        "wraparound": len(_WRAPAROUND.findall(ptx)),
        **loads,
    }


def sass_counts(ptx):
    """``{"sass": instructions, "registers": per thread}`` through ptxas and nvdisasm, or {} without them."""
    ptxas, nvdisasm = shutil.which("ptxas"), shutil.which("nvdisasm")
    if not (ptxas and nvdisasm):
        return {}
    with tempfile.TemporaryDirectory() as folder:
        source, cubin = os.path.join(folder, "k.ptx"), os.path.join(folder, "k.cubin")
        with open(source, "w") as handle:  # an older ptxas refuses a newer PTX version it would assemble
            handle.write(re.sub(r"^\.version \S+", ".version 8.0", ptx, count=1, flags=re.M))
        assembled = subprocess.run([ptxas, "-arch=sm_90", "-v", source, "-o", cubin], capture_output=True, text=True)
        if assembled.returncode != 0:
            return {}
        sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, check=True).stdout
    registers = re.search(r"Used (\d+) registers", assembled.stderr + assembled.stdout)
    return {
        "sass": len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, re.M)),
        "registers": int(registers.group(1)) if registers else None,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", action="append", choices=DTYPES, help="repeatable; default: all four")
    parser.add_argument("--reverse", action="store_true", help="the reverse (suffix) scan's kernel")
    args = parser.parse_args(argv)
    rows = []
    for dtype in args.dtype or DTYPES:
        ptx = ptx_of(dtype, args.reverse)
        rows.append({"dtype": dtype, **ptx_counts(ptx), **sass_counts(ptx)})
    columns = list(dict.fromkeys(key for row in rows for key in row))
    print(" ".join(f"{c:>10}" for c in columns))
    for row in rows:
        print(" ".join(f"{row.get(c, ''):>10}" for c in columns))


if __name__ == "__main__":
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "0":
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"})
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
