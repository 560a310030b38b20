"""What every benchmark CSV records beside its numbers: the GPU, driver, versions, date and command."""

import datetime
import importlib
import os
import platform
import re
import shlex
import subprocess
import sys

import numpy as np

import prefixsum as ps
from prefixsum.core import numba_gpu


def _driver_version():
    """The NVIDIA driver's version (e.g. 580.95.05), from nvidia-smi or the kernel module."""
    try:
        lines = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.split()
        if lines:
            return lines[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/driver/nvidia/version") as handle:
            found = re.search(r"Kernel Module\s+(\S+)", handle.read())
        return found.group(1) if found else "unknown"
    except OSError:
        return "unknown"


def _cpu_name():
    """The host CPU's model name (it runs the simulator, numpy.cumsum and every launch)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cub_version():
    """The version of NVIDIA's CUB that ``cuda.compute`` builds, with its package's: ``"3.6.0
    (cuda-cccl 1.2.1)"``, from the ``CUB_VERSION`` of the headers the package carries; "absent"
    where ``cuda-cccl`` is not installed (it is a benchmark dependency only, the ``bench`` extra)."""
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    try:
        package = version("cuda-cccl")
        spec = importlib.util.find_spec("cuda.cccl")
    except (PackageNotFoundError, ImportError, ValueError):
        return "absent"
    for folder in (spec.submodule_search_locations or []) if spec else []:
        header = os.path.join(folder, "headers", "include", "cub", "version.cuh")
        if os.path.isfile(header):
            with open(header) as handle:
                found = re.search(r"#define\s+CUB_VERSION\s+(\d+)", handle.read())
            if found:
                number = int(found.group(1))  # MMMmmmpp
                return f"{number // 100000}.{number // 100 % 1000}.{number % 100} (cuda-cccl {package})"
    return f"unknown (cuda-cccl {package})"


def _version(name):
    """``name``'s version, or "absent" (the CSV says so); ``"cub"``: :func:`cub_version`."""
    if name == "cub":
        return cub_version()
    try:
        return importlib.import_module(name).__version__
    except Exception:  # not installed, or broken: either way not what was measured
        return "absent"


def run_metadata(libraries=(), command=None):
    """The columns every benchmark CSV carries, built once per run.

    Parameters
    ----------
    libraries : iterable of str
        The baselines the script uses (``"torch"``, ``"cupy"``, ``"jax"``, ``"cub"``: NVIDIA's
        CUB through ``cuda.compute``): their versions are recorded, "absent" when not installed.
    command : str, optional
        The command line that produced the file; by default ``python`` and this process's
        arguments.

    Returns
    -------
    dict
        ``device`` (the GPU's name, or the simulator's), ``cc``, ``driver`` (the NVIDIA driver),
        ``cuda`` (the CUDA version the driver supports), ``cpu``, ``date``, the versions of
        ``python``, ``numpy``, ``numba``, ``numba_cuda`` and of each library, and ``command``.
    """
    from importlib.metadata import PackageNotFoundError, version

    import numba

    info = ps.device_info()
    simulator = info["simulator"]
    try:
        numba_cuda = version("numba-cuda")
    except PackageNotFoundError:  # numba's own, older cuda target
        numba_cuda = "absent"
    if command is None:
        command = shlex.join(["python", os.path.relpath(sys.argv[0]), *sys.argv[1:]])
    meta = {
        "device": info["name"],
        "cc": "" if simulator else ".".join(map(str, info["compute_capability"])),
        "driver": "none (simulator)" if simulator else _driver_version(),
        "cuda": "" if simulator else numba_gpu.driver_version(),
        "cpu": _cpu_name(),
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "numba_cuda": numba_cuda,
    }
    meta.update({name: _version(name) for name in libraries})
    meta["command"] = command
    return meta
