"""What a chapter binds, and to what kind of thing: the names the allow-list (:mod:`.allowlist`) resolves to.

A name a cell reads from its globals is bound by the chapter's setup, an exercise cell before it
or the cell itself. Its *kind* decides what the cell may do with it: ``("module", path)``, a
namespace of :data:`.whitelist.NAMES` (numpy, ``cuda``, ``cuda.shared``); ``("workbook", path)``,
anything else an import binds (the workbook's ``ps``, ``kstep``, scipy); ``("value", ...)``,
what a cell binds otherwise, or a listed name it imports; ``("hidden", None)``, what a setup binds
otherwise and no exercise cell of the chapter reads. The instructor's cells are parsed once per
process (they are the same for every student).
"""

import ast
import functools
from typing import NamedTuple

from .scopes import Resolution
from .whitelist import MAX_SOURCE, NAMES

_RANK = {"hidden": 0, "value": 1, "module": 2, "workbook": 3}


def _kind_of(path):
    """``("module", path)`` for a namespace of :data:`NAMES`, ``("value", path)`` for a name listed
    in one, else ``("workbook", path)`` (a module or name of anything else: the workbook, scipy, ...)."""
    if path in NAMES:
        return ("module", path)
    parent, _, last = path.rpartition(".")
    if parent in NAMES and last in NAMES[parent]:
        return ("value", path)
    return ("workbook", path)


def _import_kinds(node):
    """``[(bound name, kind)]`` of an import statement."""
    if isinstance(node, ast.Import):
        return [
            (
                alias.asname or alias.name.split(".")[0],
                _kind_of(alias.name if alias.asname else alias.name.split(".")[0]),
            )
            for alias in node.names
        ]
    module = "." * node.level + (node.module or "")
    return [
        (alias.asname or alias.name, _kind_of(f"{module}.{alias.name}")) for alias in node.names if alias.name != "*"
    ]


def targets(statement):
    """``[(name, kind)]`` that a top-level statement binds in the cell's globals, in its compound
    statements too (``try: import x``, ``for i in ...``): imports by what they import, the rest
    values. Function and class bodies bind their own locals, and are not entered."""
    found, stack = [], [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found += _import_kinds(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((node.name, ("value", None)))
            stack.extend([*node.decorator_list, *getattr(node, "bases", ())])
        elif isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                found.append((node.id, ("value", None)))
        elif not isinstance(node, ast.Lambda):
            if isinstance(node, ast.ExceptHandler) and node.name:
                found.append((node.name, ("value", None)))
            stack.extend(ast.iter_child_nodes(node))
    return found


def merge(kinds, name, kind):
    """Bind ``name`` to ``kind`` in ``kinds``, keeping the stricter of two different bindings."""
    old = kinds.get(name)
    if old is None or old == kind:
        kinds[name] = kind
    elif old[0] == kind[0] == "module":
        kinds[name] = ("workbook", kind[1])  # two modules under one name: only the instructor's paths
    elif _RANK[kind[0]] > _RANK[old[0]]:
        kinds[name] = kind


@functools.lru_cache(maxsize=256)
def parsed(source):
    """The instructor's or setup's cell, parsed once per process (they are the same for every student)."""
    return ast.parse(source)


@functools.lru_cache(maxsize=256)
def top_level_kinds(source):
    """``{name: kind}`` a cell binds at its top (empty for a cell that does not parse)."""
    try:
        tree = ast.parse(source) if len(source) <= MAX_SOURCE else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    kinds = {}
    for node in tree.body if tree else ():
        for name, kind in targets(node):
            merge(kinds, name, kind)
    return kinds


class ChapterNames(NamedTuple):
    """What a chapter's setup and instructor's exercise cells give every submission of it."""

    setup: dict
    """``{name: kind}`` the setup binds: an import's module, namespace or listed name, else ``("hidden", None)``."""
    exercises: dict
    """``{name: kind}`` the instructor's exercise cells bind at their top."""
    exposed: dict
    """``{name: ("value", None)}``: what the setup binds otherwise that an exercise cell reads."""
    paths: frozenset
    """The attribute paths of workbook modules the exercise cells write (``"ps.exclusive_scan"``)."""


@functools.lru_cache(maxsize=64)
def chapter_names(setup_sources, chapter_sources):
    """The :class:`ChapterNames` of a chapter (``setup_sources``, ``chapter_sources``: tuples of cells)."""
    setup = {}
    for source in setup_sources:
        for node in parsed(source).body:
            for name, kind in targets(node):
                merge(setup, name, ("hidden", None) if kind[0] == "value" and kind[1] is None else kind)
    exercises, read, paths = {}, set(), set()
    for source in chapter_sources:
        tree = parsed(source)
        for name, kind in top_level_kinds(source).items():
            merge(exercises, name, kind)
        resolution = Resolution(tree)
        for scope in resolution.scopes:
            read |= {n.id for n in scope.reads if resolution.resolve(n) is None}
    roots = {**setup, **exercises}
    for source in chapter_sources:
        tree = parsed(source)
        resolution = Resolution(tree)
        parents = _parents(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and roots.get(node.id, ("",))[0] == "workbook"
                and resolution.resolve(node) is None
            ):
                top = node
                while isinstance(parents.get(id(top)), ast.Attribute):
                    top = parents[id(top)]
                paths.add(".".join([node.id, *chain(top)[1]]))
    exposed = {name: ("value", None) for name, kind in setup.items() if kind[0] == "hidden" and name in read}
    return ChapterNames(setup, exercises, exposed, frozenset(paths))


def _parents(tree):
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def chain(node):
    """``(root node, [attribute, ...])`` of an attribute path (the root is any expression)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return node, parts[::-1]


__all__ = ["ChapterNames", "chain", "chapter_names", "merge", "parsed", "targets", "top_level_kinds"]
