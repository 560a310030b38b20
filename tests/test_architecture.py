"""The layers of ARCHITECTURE.md: no module imports a layer above its own, and its table names every
module of each layer and nothing that is gone."""

import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "prefixsum"

# What each layer may import (besides itself); ARCHITECTURE.md's table.
ALLOWED = {
    "core": {"core"},
    "primitives": {"core", "primitives"},
    "scans": {"core", "primitives", "scans"},
    "tridiag": {"core", "primitives", "tridiag"},
    "classroom": {"core", "primitives", "scans", "tridiag", "classroom"},
    "grading": {"core", "primitives", "scans", "tridiag", "classroom", "grading"},
    "apps": {"core", "primitives", "scans", "tridiag", "apps"},
    "cli": {"core", "primitives", "scans", "tridiag", "classroom", "grading", "apps", "cli"},
}
# The simulator sits at the bottom of the classroom: it runs any kernel and knows no algorithm.
SIMULATOR = "prefixsum.classroom.sim"
SIMULATOR_ALLOWED = ("prefixsum.core", SIMULATOR)
# Who may import the facade ``prefixsum`` itself: the command line, and the child process that
# must choose its device and install the simulator exactly as an ``import prefixsum`` does.
FACADE_ALLOWED = ("prefixsum.cli", "prefixsum.classroom.child")


def module_name(path):
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def imported_modules(name, is_package, source):
    """Every ``prefixsum...`` name module ``name`` imports, relative imports resolved, function bodies too."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = node.module
            if node.level:
                parts = package.split(".")
                target = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {existing(m) for m in found if m == "prefixsum" or m.startswith("prefixsum.")}


def existing(module):
    """``module`` if it names a module or package of prefixsum, else its parent (an imported name)."""
    path = PACKAGE.parent.joinpath(*module.split("."))
    if path.with_suffix(".py").exists() or (path / "__init__.py").exists():
        return module
    return module.rpartition(".")[0]


def violations(name, is_package, source):
    """The imports of module ``name`` (with ``source``) that go against ARCHITECTURE.md."""
    layer = name.split(".")[1]
    wrong = []
    for module in sorted(imported_modules(name, is_package, source)):
        target = module.split(".")[1] if "." in module else None
        if target is None:
            if not name.startswith(FACADE_ALLOWED):
                wrong.append(f"{module} (the facade: import the layer's module instead)")
        elif target not in ALLOWED[layer]:
            wrong.append(f"{module} (layer {target!r}; {layer!r} may import {sorted(ALLOWED[layer])})")
        elif name.startswith(SIMULATOR) and not module.startswith(SIMULATOR_ALLOWED):
            wrong.append(f"{module} (the simulator may import only {', '.join(SIMULATOR_ALLOWED)})")
    return wrong


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE)


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_imports_follow_the_layers(path):
    wrong = violations(module_name(path), path.name == "__init__.py", path.read_text())
    assert not wrong, f"{module_name(path)} imports against ARCHITECTURE.md: " + "; ".join(wrong)


def test_every_layer_is_known():
    layers = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert layers == set(ALLOWED)


@pytest.mark.parametrize(
    "name, source, message",
    [
        ("prefixsum.scans.ops", "from ..classroom import sim", "layer 'classroom'"),
        ("prefixsum.tridiag.api", "from ..scans.api import scan", "layer 'scans'"),
        ("prefixsum.core.device", "import prefixsum.scans.ops", "layer 'scans'"),
        ("prefixsum.primitives.block", "from ..scans.tiles import scratch", "layer 'scans'"),
        ("prefixsum.primitives.warp", "from ..tridiag import warp", "layer 'tridiag'"),
        ("prefixsum.scans.api", "def f():\n    import prefixsum\n", "the facade"),
        ("prefixsum.classroom.sim", "from ..scans import ops", "the simulator may import only"),
        ("prefixsum.scans.api", "from ..apps import compact", "layer 'apps'"),
        ("prefixsum.apps.radix", "from ..classroom import sim", "layer 'classroom'"),
        ("prefixsum.classroom.mutation", "from ..grading.cells import compiled", "layer 'grading'"),
        (
            "prefixsum.classroom.check.observed",
            "def f():\n    from ...grading import observations\n",
            "layer 'grading'",
        ),
    ],
)
def test_an_upward_import_is_caught(name, source, message):
    assert any(message in v for v in violations(name, False, source))


def test_downward_imports_pass():
    assert violations("prefixsum.classroom.check", False, "from ..scans.ops import check_op\nfrom . import sim") == []


# The one door to numba's internals on each side: only these modules assign to numba's attributes.
NUMBA_DOORS = ("prefixsum.core.numba_gpu", "prefixsum.classroom.sim.numba_sim")


def behind_a_door(name):
    """Whether module ``name`` is a door or a module of one (``numba_gpu`` is a package)."""
    return any(name == door or name.startswith(door + ".") for door in NUMBA_DOORS)


def numba_assignments(source):
    """Lines where ``source`` assigns an attribute of something imported from numba (``x.y = ...``,
    ``x.y += ...``, ``setattr(x, ...)``, ``del x.y``), ``x`` bound by an ``import numba...`` or
    ``from numba... import``."""
    tree = ast.parse(source)
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "numba")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numba":
            bound.update(a.asname or a.name for a in node.names)

    def rooted(expr):
        while isinstance(expr, ast.Attribute):
            expr = expr.value
        return isinstance(expr, ast.Name) and expr.id in bound

    lines = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            if node.args and rooted(node.args[0]):
                lines.append(node.lineno)
        lines += [node.lineno for t in targets if isinstance(t, ast.Attribute) and rooted(t)]
    return lines


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_only_the_doors_assign_to_numba(path):
    if behind_a_door(module_name(path)):
        return
    lines = numba_assignments(path.read_text())
    assert not lines, (
        f"{module_name(path)} assigns to numba's attributes at lines {lines}: only "
        f"{' and '.join(NUMBA_DOORS)} may (the one door on each side)"
    )


@pytest.mark.parametrize(
    "source",
    [
        "from numba.cuda import dispatcher\ndispatcher.get_current_device = None\n",
        "import numba.cuda.dispatcher\nnumba.cuda.dispatcher.get_current_device = None\n",
        "from numba.cuda.simulator import kernel as fake\nfake.FakeCUDAKernel.__call__ = len\n",
        "from numba import cuda\nsetattr(cuda, 'device_array', None)\n",
        "def f():\n    from numba.cuda import dispatcher\n    dispatcher.x += 1\n",
    ],
)
def test_an_assignment_to_numba_is_caught(source):
    assert numba_assignments(source)


def test_other_assignments_pass():
    assert (
        numba_assignments("from numba import cuda\nimport types\ntypes.x = 1\nout = cuda.device_array(3)\nout[0] = 1\n")
        == []
    )


# Private numba names are read only behind the two doors (issue 46): an attribute numba does not
# promise (``x._device``, ``kernel.fn``, ``kernel.dynshared_size``, ``dispatcher.targetoptions``,
# ``array.gpu_data``, ``cuda.devicearray``, ...) or a ``gpu_data=`` keyword, anywhere else, fails.
PRIVATE_NUMBA_NAMES = {
    "_device",
    "fn",
    "dynshared_size",
    "targetoptions",
    "gpu_data",
    "devicearray",
    "cudadrv",
    "_prepare_args",
    "_codelibrary",
    "_kernel_context",
    "_push_kernel_context",
    "_debug",
    "device_ctypes_pointer",
    "_cuda_memsize_",
    "_dummy",
}


def private_numba_reads(source):
    """``{name: [line, ...]}``: where ``source`` reads an attribute of :data:`PRIVATE_NUMBA_NAMES`
    or passes a ``gpu_data=`` keyword."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE_NUMBA_NAMES:
            found.setdefault(node.attr, []).append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg == "gpu_data":
            found.setdefault("gpu_data=", []).append(node.value.lineno)
    return found


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_private_numba_names_are_read_only_behind_the_doors(path):
    name = module_name(path)
    if behind_a_door(name):
        return
    reads = private_numba_reads(path.read_text())
    assert not reads, (
        f"{name} reads numba's private names {reads} (name: lines); only {' and '.join(NUMBA_DOORS)} "
        "may: add what it needs there"
    )


@pytest.mark.parametrize(
    "source, name",
    [
        ("def f(op):\n    return op._device and op.fn\n", "_device"),
        ("from numba import cuda\nx = cuda.devicearray.DeviceNDArray\n", "devicearray"),
        ("def f(a, DeviceNDArray):\n    return DeviceNDArray((1,), (4,), a.dtype, gpu_data=a.gpu_data)\n", "gpu_data="),
        ("def f(kernel):\n    return kernel.dynshared_size + len(kernel.targetoptions)\n", "targetoptions"),
    ],
)
def test_a_private_numba_read_is_caught(source, name):
    assert name in private_numba_reads(source)


# ARCHITECTURE.md's table names every module of its layer in backticks (``scheduler``, ``sim/``);
# nothing it names in backticks is gone: each is a module or subpackage of the layer, or a name one
# of the layer's modules defines.
ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"
LAYER_ROW = re.compile(r"^\| `(\w+)` \| [^|]* \| (.*) \|$", re.MULTILINE)
NAMED = re.compile(r"`([A-Za-z_]\w*(?:/|/\w+\.py)?)`")


def layer_rows(text):
    """``{layer: what ARCHITECTURE.md's table says lives there}``."""
    return dict(LAYER_ROW.findall(text))


def layer_modules(layer):
    """The modules (stems) and subpackages (``name/``) of ``prefixsum/<layer>``, at any depth."""
    root = PACKAGE / layer
    found = {p.stem for p in root.rglob("*.py") if p.name != "__init__.py"}
    return found | {f"{p.name}/" for p in root.rglob("*") if p.is_dir() and (p / "__init__.py").exists()}


def layer_identifiers(layer):
    """Every identifier the code of ``prefixsum/<layer>`` defines, binds, reads or spells as a string
    (a driver call looked up by name): what the table may name besides modules."""
    names = set()
    for path in (PACKAGE / layer).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            for field in ("id", "attr", "arg", "name"):
                if isinstance(getattr(node, field, None), str):
                    names.add(getattr(node, field))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)
    return names


def unlisted_and_stale(layer, row):
    """The modules of ``layer`` that ``row`` does not name, and what it names that does not exist."""
    named = set(NAMED.findall(row))
    modules = layer_modules(layer)
    unlisted = sorted(modules - {n.removesuffix(".py").rpartition("/")[2] or n for n in named} - named)
    stale = sorted(
        n
        for n in named
        if n not in modules
        and n.removesuffix(".py").rpartition("/")[2] not in modules
        and n not in layer_identifiers(layer)
    )
    return unlisted, stale


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_architecture_lists_every_module_of_the_layer_and_nothing_gone(layer):
    rows = layer_rows(ARCHITECTURE.read_text())
    assert layer in rows, f"ARCHITECTURE.md's table has no row for {layer}"
    unlisted, stale = unlisted_and_stale(layer, rows[layer])
    assert not unlisted, f"ARCHITECTURE.md does not name these modules of {layer}: {unlisted}"
    assert not stale, f"ARCHITECTURE.md names in {layer} what does not exist there: {stale}"


def test_a_missing_and_a_stale_module_are_caught():
    unlisted, stale = unlisted_and_stale("core", "`arithmetic` (numpy as a GPU computes), `gone_module`, `as_input`")
    assert "device" in unlisted and "arithmetic" not in unlisted
    assert stale == ["gone_module"]
