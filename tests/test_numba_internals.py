"""Every numba / numba-cuda internal the package touches, named and looked up in the process kind that uses it.

The GPU fast path (the Launcher, result arrays, the simulating worker's pickling) and the
classroom simulator lean on names that numba does not promise to keep. CI has no GPU, so each is
looked up here: the simulator's in a simulating process, the real target's in a
``NUMBA_ENABLE_CUDASIM=0`` process (which needs no GPU to import, compile and look up). A scan
of the package's source requires every internal module it imports, and every attribute it reads
from one, to be in these tables, so a new use cannot slip past this test. After upgrading numba
or numba-cuda, this test is the first to run (CONTRIBUTING.md, "A new numba or numba-cuda").
"""

import ast
import json
import pathlib
import subprocess
import sys

from prefixsum.core.device import undecided_environment

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Internal modules and the attributes of theirs the package uses ("Class.attr" for a class's).
SIMULATOR = {
    "numba.cuda.simulator.kernel": [
        "FakeCUDAKernel",
        "FakeCUDAKernel.__call__",
        "FakeCUDAArray",
        "ArgHint",
        "normalize_kernel_dimensions",
        "_kernel_context",
        "_push_kernel_context",
        "__file__",
    ],
    "numba.cuda.simulator.kernelapi": [
        "FakeCUDAModule",
        "FakeCUDAAtomic",
        "FakeCUDALocal",
        "Dim3",
        "swapped_cuda_module",
    ],
    "numba.cuda.simulator.cudadrv.devicearray": ["FakeShape"],
    "numba.cuda.simulator": ["kernel", "kernelapi"],
}
REAL_TARGET = {
    "numba.cuda.dispatcher": [
        "CUDADispatcher",
        "CUDADispatcher.compile",
        "_LaunchConfiguration",
        "_Kernel",
        "_Kernel.library",
        "_Kernel._prepare_args",
        "get_current_device",
    ],
    "numba.cuda.cudadrv.driver": [
        "MemoryPointer",
        "MemoryPointer.view",
        "MemoryPointer.device_ctypes_pointer",
        "device_to_host",
        "get_version",
    ],
    "numba.cuda.cudadrv.devicearray": ["DeviceNDArray", "DeviceNDArrayBase", "is_cuda_ndarray"],
    "numba.cuda.cudadrv": ["driver", "devicearray"],
    "numba.cuda": ["dispatcher", "libdevice"],
    "numba.cuda.extending": ["intrinsic"],
    "numba.cuda.codegen": ["CUDACodeLibrary.get_cufunc"],
    "cuda.bindings": ["driver"],
    "cuda.bindings.driver": [
        "cuStreamCreate",
        "cuStreamDestroy",
        "CUstream_flags",
        "CUresult",
        "cuMemcpyHtoDAsync",
        "cuMemcpyDtoHAsync",
        "cuEventRecord",
        "cuStreamWaitEvent",
        "cuEventSynchronize",
        "cuStreamSynchronize",
        "cuMemsetD8Async",
    ],
    "numba.np.numpy_support": ["as_dtype"],
}
# Attributes of objects (not modules) that the package reads, looked up on real instances below.
INSTANCE_ATTRIBUTES = {
    "simulated kernel": ["fn", "_device", "_debug", "grid_dim", "block_dim", "dynshared_size", "extensions"],
    "dispatcher": ["py_func", "targetoptions"],
    "launch configuration": ["dispatcher", "griddim", "blockdim", "sharedmem"],
}
# The Launcher reads ``dispatcher.compile(argtypes).library.get_cufunc()`` (prefixsum.core.numba_gpu):
# a compiled kernel needs a GPU's context to exist, so its class is read instead (``_Kernel.library``
# above; the property returns what its __init__ sets).
PUBLIC = {"numba", "numba.cuda", "numba.types", "numba.core.config", "numba.config"}

LOOKUP = """
import importlib, json, sys, types
import prefixsum
from numba import cuda, types as nt
tables = json.loads(sys.argv[1])
missing = []
for module_name, names in tables.items():
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        missing.append(f"{module_name}: {error}")
        continue
    for name in names:
        found = module
        for part in name.split("."):
            found = getattr(found, part, missing)
            if found is missing:
                missing.append(f"{module_name}.{name}")
                break
instances = {}
@cuda.jit
def kernel(x):
    x[0] = 1
if prefixsum._device.simulating():
    instances["simulated kernel"] = kernel
else:
    from numba.cuda import dispatcher
    from prefixsum.core.numba_gpu import pretend_device
    pretend_device((9, 0))
    instances["dispatcher"] = kernel
    instances["launch configuration"] = kernel[1, 1]
    import inspect
    if "self._codelibrary = " not in inspect.getsource(dispatcher._Kernel.__init__):
        missing.append("_Kernel._codelibrary (what _Kernel.library returns)")
for kind, names in json.loads(sys.argv[2]).items():
    if kind in instances:
        missing += [f"{kind}.{name}" for name in names if not hasattr(instances[kind], name)]
print(json.dumps({"missing": missing, "kinds": sorted(instances)}))
"""


def look_up(tables, simulator):
    env = {**undecided_environment(), "NUMBA_ENABLE_CUDASIM": "1" if simulator else "0", "PYTHONPATH": str(ROOT)}
    child = subprocess.run(
        [sys.executable, "-c", LOOKUP, json.dumps(tables), json.dumps(INSTANCE_ATTRIBUTES)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


def test_the_simulator_internals_exist_in_a_simulating_process():
    found = look_up(SIMULATOR, simulator=True)
    assert found == {"missing": [], "kinds": ["simulated kernel"]}


def test_the_real_targets_internals_exist_without_a_gpu():
    found = look_up(REAL_TARGET, simulator=False)
    assert found == {"missing": [], "kinds": ["dispatcher", "launch configuration"]}


# The one door to numba's internals on each side (numba_gpu's and numba_sim's docstrings).
# numba_gpu is a package: each of its modules is behind the door.
DOORS = ("prefixsum/core/numba_gpu/", "prefixsum/classroom/sim/numba_sim.py")


def internal_uses(paths=None):
    """``{module: {attribute, ...}}`` for every internal numba module the package imports, from its source."""
    uses = {}
    for path in paths or sorted((ROOT / "prefixsum").rglob("*.py")):
        aliases = {}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("numba", "cuda"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if node.module not in PUBLIC:
                        uses.setdefault(node.module, set()).add(alias.name)
                    if full not in PUBLIC and importable_module(full):
                        aliases[alias.asname or alias.name] = full
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                uses.setdefault(aliases[node.value.id], set()).add(node.attr)
    return uses


def importable_module(name):
    return name in SIMULATOR or name in REAL_TARGET


def test_every_internal_the_package_uses_is_named_here():
    tables = {**SIMULATOR}
    for module, names in REAL_TARGET.items():
        tables[module] = tables.get(module, []) + names
    unnamed = {
        module: sorted(names - {name.split(".")[0] for name in tables.get(module, ())})
        for module, names in internal_uses().items()
    }
    assert {module: names for module, names in unnamed.items() if names} == {}


def test_the_scan_of_the_source_sees_the_known_uses():
    """The scan must be able to fail: it finds the uses this table was written from."""
    uses = internal_uses()
    assert {"_push_kernel_context", "normalize_kernel_dimensions"} <= uses["numba.cuda.simulator.kernel"]
    assert "MemoryPointer" in uses["numba.cuda.cudadrv.driver"]
    assert "get_current_device" in uses["numba.cuda.dispatcher"]
    assert "CUDADispatcher" in uses["numba.cuda.dispatcher"]


def test_only_the_doors_import_numbas_internals():
    """Every internal module is imported by numba_gpu (the GPU side) or numba_sim (the simulator's)."""
    paths = [
        path for path in sorted((ROOT / "prefixsum").rglob("*.py")) if not str(path.relative_to(ROOT)).startswith(DOORS)
    ]
    outside = {str(path.relative_to(ROOT)): sorted(internal_uses([path])) for path in paths}
    assert {path: modules for path, modules in outside.items() if modules} == {}
