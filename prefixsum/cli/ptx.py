"""Compile every kernel of the package to PTX, for real GPUs, without needing one.

The simulator runs kernels as plain Python and accepts code that the GPU compiler rejects (a
list comprehension, a float index, a closure over ``cuda``). Compiling each kernel for real
compute capabilities is the second level of proof. It needs numba-cuda's compiler (the
``cu13`` extra: libNVVM and NVRTC) and ``NUMBA_ENABLE_CUDASIM=0``; no GPU or driver.

Run ``python -m prefixsum ptx`` (it sets the environment itself and starts this module as
``python -m prefixsum.cli.ptx``), or call :func:`compile_all`.
"""

import itertools
import json
import os
import pathlib
import re
import sys

CAPABILITIES = ((7, 5), (9, 0))


def _configurations(ops, dtypes):
    """(op, dtype, inclusive, reverse) covering every op, every dtype and every direction."""
    configs = {(op, dtypes[k % len(dtypes)], True, False) for k, op in enumerate(ops)}
    configs |= {("add", dtype, True, False) for dtype in dtypes}
    configs |= {
        ("max", "float32", inclusive, reverse) for inclusive, reverse in itertools.product((True, False), repeat=2)
    }
    return sorted(configs, key=str)


def kernels_to_compile(algorithms=None):
    """Every distinct ``(label, dispatcher, argtypes)`` of the registry and the tridiagonal solvers.

    ``algorithms``: names of registered scans to take alone (no tridiagonal solver); None for all.
    """
    import prefixsum as ps

    seen = {}
    for algorithm in ps.ALGORITHMS.values():
        if algorithms is not None and algorithm.name not in algorithms:
            continue
        for op, dtype, inclusive, reverse in _configurations(ps.OPS, [d.name for d in ps.DTYPES]):
            for kernel, argtypes in algorithm.kernels(op, dtype, inclusive, reverse, **algorithm.options):
                label = (
                    f"{algorithm.name}:{kernel.py_func.__name__}[{op},{dtype},inclusive={inclusive},reverse={reverse}]"
                )
                seen.setdefault((id(kernel), argtypes), (label, kernel, argtypes))
    try:
        from prefixsum import tridiag
    except ImportError:
        tridiag = None
    if algorithms is None and tridiag is not None and hasattr(tridiag, "ptx_kernels"):
        for kernel, argtypes in tridiag.ptx_kernels():
            seen.setdefault((id(kernel), argtypes), (f"tridiag:{kernel.py_func.__name__}", kernel, argtypes))
    return list(seen.values())


def compile_all(capabilities=CAPABILITIES, out=sys.stdout, algorithms=None, keep=None):
    """Compile every kernel (of the scans named in ``algorithms``, if given) for each compute
    capability; return the list of failures.

    ``keep``: a folder to write each PTX into (``0000.sm_90.ptx``, ...), with ``index.json``
    listing ``{"label", "kernel", "argtypes", "cc", "file"}`` per file, so that tests can read
    what the compiler made without compiling again.
    """
    from numba import config, cuda

    from ..core.numba_gpu import compiling_for

    if config.ENABLE_CUDASIM:
        raise RuntimeError("PTX needs numba's real CUDA target: run with NUMBA_ENABLE_CUDASIM=0")
    failures, index = [], []
    if keep is not None:
        keep = pathlib.Path(keep)
        keep.mkdir(parents=True, exist_ok=True)
    for number, (label, kernel, argtypes) in enumerate(kernels_to_compile(algorithms)):
        for cc in capabilities:
            target = f"sm_{cc[0]}{cc[1]}"
            try:
                with compiling_for(cc):  # device functions ask the current device for its capability
                    ptx, _ = cuda.compile_ptx(kernel.py_func, argtypes, cc=cc)
                assert ".entry" in ptx
                print(f"ok   {target} {label}", file=out)
            except Exception as error:  # a report of every failure beats stopping at the first
                failures.append((label, cc, error))
                print(f"FAIL {target} {label}: {type(error).__name__}: {error}", file=out)
                continue
            if keep is not None:
                name = f"{number:04d}.{target}.ptx"
                (keep / name).write_text(ptx)
                index.append(
                    {
                        "label": label,
                        "kernel": kernel.py_func.__name__,
                        "argtypes": [str(argtype) for argtype in argtypes],
                        "cc": target,
                        "file": name,
                    }
                )
    if keep is not None:
        (keep / "index.json").write_text(json.dumps(index, indent=1))
    return failures


def compiles_in_child(kernel, signature, cc=(9, 0)):
    """Compile a module-level kernel for a real GPU in a child process (usable on the simulator).

    Parameters
    ----------
    kernel : numba kernel
        Defined at the top level of an importable module.
    signature : str
        numba signature, e.g. ``"void(float32[::1], float32[::1])"``.

    Returns
    -------
    (bool, str)
        Whether it compiled, and the last line of the compiler's complaint (or "ok").
    """
    import subprocess

    fn = kernel.py_func
    code = (
        "import importlib\n"
        "from numba import cuda\n"
        "from prefixsum.core.numba_gpu import pretend_device\n"
        f"pretend_device({cc!r})\n"
        f"kernel = getattr(importlib.import_module({fn.__module__!r}), {fn.__name__!r})\n"
        f"cuda.compile_ptx(kernel.py_func, {signature!r}, cc={cc!r})\n"
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if child.returncode == 0:
        return True, "ok"
    text = re.sub(r"\x1b\[[0-9;]*m", "", child.stderr)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = next(
        (k for k, line in enumerate(lines) if "Error:" in line and not line.startswith("File")), len(lines) - 1
    )
    return False, " ".join(lines[first : first + 2])


def main(argv=None):
    """Compile every kernel (``--algorithm NAME``, repeatable: only those scans' kernels) and
    return 0, or 1 if any failed; in a fresh process with ``NUMBA_ENABLE_CUDASIM=0`` unless
    this one has it."""
    import argparse

    argv = sys.argv[1:] if argv is None else list(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "0":
        env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
        os.execve(sys.executable, [sys.executable, "-m", "prefixsum.cli.ptx", *argv], env)
    parser = argparse.ArgumentParser(prog="python -m prefixsum ptx")
    parser.add_argument("--algorithm", action="append", help="only the kernels of these scans (repeatable)")
    parser.add_argument("--keep", metavar="DIR", help="write each PTX into DIR, with DIR/index.json naming its kernel")
    args = parser.parse_args(argv)
    failures = compile_all(algorithms=args.algorithm, keep=args.keep)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
