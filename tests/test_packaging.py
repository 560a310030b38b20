"""The dependency lists: pyproject.toml names everything the package and the notebooks import, and
environment.yml (conda, which installs the package with --no-deps) names everything pyproject does."""

import ast
import pathlib
import re
import sys

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# Import names whose distribution is called otherwise.
DISTRIBUTION = {"cuda": "numba-cuda"}
# GPU baselines of ``python -m prefixsum bench`` and the grader's Dask option (the test extra's
# dask[distributed]), imported only inside try blocks.
OPTIONAL = {"torch", "cupy", "distributed"}


def name_of(requirement):
    """The normalised distribution name of a requirement: no version, extra or marker."""
    return re.match(r"[A-Za-z0-9._-]+", requirement.strip()).group(0).lower().replace("_", "-")


def runtime():
    return {name_of(r) for r in PROJECT["dependencies"]}


def conda_packages():
    """The names under ``dependencies:`` in environment.yml (a line parser: pyyaml may be missing)."""
    names, inside = set(), False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if re.match(r"\S", line):
            inside = line.startswith("dependencies:")
        elif inside and (item := re.match(r"\s+-\s+([A-Za-z0-9._-]+)", line)):
            names.add(item.group(1).lower())
    return names


def imports(path):
    """``(top-level module, inside a try block)`` for every absolute import in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []

    def visit(node, guarded):
        if isinstance(node, ast.Import):
            found.extend((alias.name.split(".")[0], guarded) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.append((node.module.split(".")[0], guarded))
        for child in ast.iter_child_nodes(node):
            visit(child, guarded or isinstance(node, ast.Try))

    visit(tree, False)
    return found


def third_party(paths):
    """``{distribution: [(file, guarded), ...]}`` for the imports of ``paths`` outside the standard library."""
    found = {}
    for path in paths:
        for module, guarded in imports(path):
            if module in sys.stdlib_module_names or module == "prefixsum":
                continue
            distribution = DISTRIBUTION.get(module, module).lower().replace("_", "-")
            found.setdefault(distribution, []).append((path.relative_to(ROOT).as_posix(), guarded))
    return found


GPU_ONLY_EXTRAS = {"bench"}
"""Extras for a GPU machine only (the benchmarks' baselines), installed there with pip: not in environment.yml."""


def test_environment_yml_names_every_dependency_of_pyproject():
    extras = {
        name_of(r)
        for extra, group in PROJECT["optional-dependencies"].items()
        if extra not in GPU_ONLY_EXTRAS
        for r in group
    }
    missing = sorted((runtime() | extras) - conda_packages())
    assert not missing, f"environment.yml lacks {missing}, which pyproject.toml requires"


def test_the_package_and_the_notebooks_import_only_runtime_dependencies():
    """``pip install .`` alone must run the package and every notebook (scipy in chapter 07)."""
    paths = sorted((ROOT / "prefixsum").rglob("*.py")) + sorted((ROOT / "notebooks" / "sources").glob("*.py"))
    assert len(paths) > 30
    found = third_party(paths)
    missing = {d: [f for f, _ in where] for d, where in found.items() if d not in runtime() and d not in OPTIONAL}
    assert not missing, f"imported but not in [project] dependencies: {missing}"
    assert {"numpy", "numba", "greenlet", "cloudpickle", "matplotlib", "nbformat", "scipy"} <= set(found)


def test_optional_gpu_baselines_are_imported_only_inside_try_blocks():
    paths = sorted((ROOT / "prefixsum").rglob("*.py")) + sorted((ROOT / "notebooks" / "sources").glob("*.py"))
    unguarded = [
        (d, f) for d, where in third_party(paths).items() if d in OPTIONAL for f, guarded in where if not guarded
    ]
    assert not unguarded, f"optional modules imported outside a try block: {unguarded}"


def test_the_notebook_build_needs_only_the_dev_extra():
    needed = set(third_party([ROOT / "notebooks" / "build.py"]))
    allowed = runtime() | {name_of(r) for r in PROJECT["optional-dependencies"]["dev"]}
    assert needed - allowed == set(), (
        f"notebooks/build.py imports {sorted(needed - allowed)}; add them to the dev extra"
    )
    assert "jupytext" in needed


UPPER_BOUND = re.compile(r"<(?!=)|<=|==|~=")


def pinned_requirements(text):
    """``(requirement, its reason or None)`` for every requirement of pyproject.toml's ``text`` with
    an upper bound; the reason is an ``upper bound:`` comment on its line or in the comment lines
    right above it."""
    found, comments = [], []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped)
            continue
        requirement = re.match(r'"([^"]+)",?\s*(#.*)?$', stripped)
        if requirement and UPPER_BOUND.search(requirement.group(1).split(";")[0]):
            notes = " ".join(comments + [requirement.group(2) or ""])
            reason = re.search(r"upper bound:\s*(.{20,})", notes)
            found.append((requirement.group(1), reason.group(1).strip() if reason else None))
        comments = []
    return found


def test_every_upper_pin_says_why():
    """An upper bound stays only as long as its reason does (issue 46): each names what breaks above it."""
    pinned = pinned_requirements((ROOT / "pyproject.toml").read_text())
    assert {name_of(r) for r, _ in pinned} >= {"numba", "numba-cuda"}
    assert not [r for r, reason in pinned if reason is None], "an upper pin without an 'upper bound:' comment"


def test_a_pin_without_a_reason_is_caught():
    text = """dependencies = [
    # upper bound: the private names of numba_sim.py were looked up on 0.68
    "numba>=0.68,<0.69",
    # a note that gives no reason
    "scipy<2",
    "numpy>=1.24",
    "llvmlite==0.45",  # upper bound: numba 0.68 needs this llvmlite exactly
]"""
    assert pinned_requirements(text) == [
        ("numba>=0.68,<0.69", "the private names of numba_sim.py were looked up on 0.68"),
        ("scipy<2", None),
        ("llvmlite==0.45", "numba 0.68 needs this llvmlite exactly"),
    ]
