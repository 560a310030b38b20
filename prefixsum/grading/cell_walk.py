"""The walk of one submitted exercise cell: its top-level statements, then every name and attribute path in it.

What the walk refuses, and why, is :mod:`.allowlist`'s docstring; :func:`.allowlist.check` parses
the cell and runs a :class:`CellWalk` on it. Names resolve through Python's scoping
(:mod:`.scopes`) to what the chapter binds (:mod:`.bindings`), and are checked against the tables
of :mod:`.whitelist`.
"""

import ast

from .bindings import chain, merge, parsed, targets, top_level_kinds
from .scopes import Resolution
from .whitelist import BUILTIN_NAMES, EXERCISE_FORBIDS, IPYTHON_NAMES, NAMES, SAFE_BUILTINS, VALUE_ATTRIBUTES

_FORBIDDEN_NODES = tuple(
    getattr(ast, name)
    for name in (
        "Global",
        "Nonlocal",
        "ClassDef",
        "AsyncFunctionDef",
        "Await",
        "Yield",
        "YieldFrom",
        "AsyncFor",
        "AsyncWith",
        "Match",
        "TypeAlias",
    )
    if hasattr(ast, name)
)
_IMPORTABLE = ("numpy", "math", "numba", "numba.cuda")


def _source_lines(source):
    """The cell's lines (split once per check: quoting a refused line never splits the source again)."""
    return source.split("\n")


def _import_problem(node):
    """Why an import statement of a submission is refused, or None."""
    if isinstance(node, ast.Import):
        bad = [a.name for a in node.names if a.name not in _IMPORTABLE]
        return f"import of {', '.join(bad)}: an exercise may import only {', '.join(_IMPORTABLE)}" if bad else None
    allowed = NAMES.get(node.module) if not node.level else None
    bad = [a.name for a in node.names if allowed is None or a.name not in allowed]
    if bad:
        return (
            f"from {'.' * node.level}{node.module or ''} import {', '.join(bad)}: an exercise may import only the "
            "names "
            f"listed for {', '.join(sorted(NAMES))} (prefixsum.grading.allowlist.NAMES)"
        )
    return None


def _literal(node):
    """A number, a string, or a tuple or arithmetic of them (a decorator's argument, an index outside kernels)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(map(_literal, node.elts))
    if isinstance(node, ast.UnaryOp):
        return _literal(node.operand)
    return isinstance(node, ast.BinOp) and _literal(node.left) and _literal(node.right)


class CellWalk:
    """The walk of one submitted cell: its top-level statements, then every name and attribute path in it."""

    def __init__(
        self, source, tree, chapter, instructor_source, earlier_sources, earlier_submitted, exercise_id, check_sources
    ):
        self.tree, self.exercise_id, self.lines = tree, exercise_id, _source_lines(source)
        self.setup, _, exposed, self.paths = chapter
        self.longest = max((path.count(".") + 1 for path in self.paths), default=0)
        instructor = parsed(instructor_source)
        self.trusted = {ast.dump(node) for node in instructor.body if not isinstance(node, ast.FunctionDef)}
        self.instructor = top_level_kinds(instructor_source)
        self.resolution = Resolution(tree)
        self.earlier = {}
        for earlier in [*earlier_sources, *earlier_submitted]:
            for name, kind in top_level_kinds(earlier).items():
                merge(self.earlier, name, kind)
        self.env = {name: ("hidden", None) for check in check_sources for name in top_level_kinds(check)}
        for kinds in (self.setup, exposed, self.earlier):
            for name, kind in kinds.items():
                merge(self.env, name, kind)
        self.statements = [
            node for node in tree.body if isinstance(node, ast.FunctionDef) or ast.dump(node) not in self.trusted
        ]
        for node in tree.body:
            for name, kind in targets(node):
                merge(self.env, name, kind)

    def _quote(self, node, width=60):
        """The statement's first line, shortened, in backquotes (for a message to the student)."""
        text = self.lines[node.lineno - 1][node.col_offset :].strip() if node.lineno <= len(self.lines) else ""
        return f"`{text if len(text) <= width else text[: width - 3] + '...'}`"

    def problems(self):
        found = []
        for node in self.statements:
            self._statement(node, found)
        stack = [(node, None) for node in self.statements]
        while stack:
            node, parent = stack.pop()
            self._node(node, parent, found)
            stack.extend((child, node) for child in ast.iter_child_nodes(node))
        return found + self._exercise_problems()

    # -- the top of the cell --------------------------------------------------------------------
    def _statement(self, node, found):
        line = node.lineno
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            refused = _import_problem(node)
            if refused:
                found.append((line, refused))
        elif isinstance(node, ast.Assign):
            if not all(
                isinstance(t, ast.Name)
                or isinstance(t, (ast.Tuple, ast.List))
                and all(isinstance(e, ast.Name) for e in t.elts)
                for t in node.targets
            ) or not self._constant(node.value):
                found.append(
                    (
                        line,
                        f"{self._quote(node)}: only constants may be assigned at the top of an exercise "
                        "(numbers, strings, tuples and arithmetic of them)",
                    )
                )
        elif not isinstance(node, ast.FunctionDef) and not (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        ):
            found.append(
                (
                    line,
                    f"{self._quote(node)} is not allowed at the top of an exercise: only imports of "
                    "numba, numpy and math, constants and function definitions",
                )
            )
        hidden = []
        for name, kind in targets(node):
            if name.startswith("_"):
                found.append(
                    (line, f"the name {name} is not allowed in an exercise (names beginning with _ are Python's)")
                )
            elif self._rebinds(name, kind):
                hidden.append(name)
        if hidden:
            found.append(
                (
                    line,
                    f"the cell rebinds {', '.join(sorted(hidden))}, which the setup cells, an earlier "
                    "exercise "
                    "or Python define",
                )
            )

    def _rebinds(self, name, kind):
        """Whether a top-level binding of ``name`` to ``kind`` changes what Python, the setup or an
        earlier exercise bound it to, other than as the instructor's cell does (a constant may be
        bound again, a module's name only to the same module)."""

        def differ(old):
            return old is not None and old != kind and not old[0] == kind[0] == "value"

        if name in self.instructor:
            return differ(self.instructor[name])
        return (
            name in BUILTIN_NAMES
            or name in IPYTHON_NAMES
            or self.setup.get(name, kind) != kind
            or differ(self.earlier.get(name))
        )

    def _constant(self, node):
        """What a top-level name or a default may be bound to: numbers, strings, values of the listed
        names and paths, tuples and arithmetic of them; no module, no call."""
        if isinstance(node, ast.Name):
            return self.resolution.resolve(node) is not None or self.env.get(node.id, ("",))[0] == "value"
        if isinstance(node, ast.Attribute):
            root, parts = chain(node)
            if not isinstance(root, ast.Name):
                return False
            kind = self.env.get(root.id, ("",)) if self.resolution.resolve(root) is None else ("value", None)
            return kind[0] in ("value", "workbook") or kind[0] == "module" and ".".join([kind[1], *parts]) not in NAMES
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(map(self._constant, node.elts))
        if isinstance(node, ast.UnaryOp):
            return self._constant(node.operand)
        if isinstance(node, ast.BinOp):
            return self._constant(node.left) and self._constant(node.right)
        return isinstance(node, ast.Constant)

    # -- every node -----------------------------------------------------------------------------
    def _node(self, node, parent, found):
        line = getattr(node, "lineno", 1)
        if isinstance(node, _FORBIDDEN_NODES):
            found.append((line, f"{type(node).__name__.lower()} is not allowed in an exercise"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and parent is not None:
            found.append((line, "import is not allowed inside a function: import at the top of the cell"))
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)):
            name = getattr(node, "name", "a lambda")
            if isinstance(node, ast.FunctionDef) and parent is not None:
                self._local_binding(name, line, found)
            if isinstance(node, ast.FunctionDef) and not all(map(self._is_jit, node.decorator_list)):
                found.append((line, f"{name}: the only decorator allowed is cuda.jit"))
            arguments = node.args
            for default in [*arguments.defaults, *filter(None, arguments.kw_defaults)]:
                if not self._constant(default):
                    found.append((default.lineno, f"a default argument of {name} must be a constant"))
            annotated = [
                a
                for a in [
                    *arguments.posonlyargs,
                    *arguments.args,
                    *arguments.kwonlyargs,
                    *filter(None, (arguments.vararg, arguments.kwarg)),
                ]
                if a.annotation is not None
            ]
            if annotated or getattr(node, "returns", None) is not None:
                found.append((line, f"annotations are not allowed in {name} (they run when it is defined)"))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self._local_binding(node.name, line, found)
        elif isinstance(node, ast.AnnAssign):
            found.append((line, "annotations are not allowed in an exercise (they run when it is defined)"))
        elif isinstance(node, ast.Name):
            self._name(node, parent, found)
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                found.append((line, f"the attribute .{node.attr} is not allowed"))
            if not isinstance(node.ctx, ast.Load):
                found.append((line, f"assigning or deleting the attribute .{node.attr} is not allowed"))
            if not (isinstance(parent, ast.Attribute) and parent.value is node):
                self._path(node, found)

    def _name(self, node, parent, found):
        name, line = node.id, node.lineno
        if not isinstance(node.ctx, ast.Load):
            if not self.resolution.is_global(node):  # a top-level binding: see _statement
                self._local_binding(name, line, found)
            return
        if self.resolution.resolve(node) is not None:
            return  # a local, a parameter, a closure's variable
        kind = self.env.get(name)
        if kind is None:
            # A name bound nowhere raises NameError when it runs; Python's and IPython's are refused.
            if name not in SAFE_BUILTINS and (name.startswith("_") or name in BUILTIN_NAMES or name in IPYTHON_NAMES):
                found.append((line, f"the name {name} is not allowed in an exercise"))
        elif kind[0] == "hidden":
            found.append(
                (line, f"{name} is a name of the chapter's setup or checks that no exercise of the chapter uses")
            )
        elif kind[0] in ("module", "workbook") and not (isinstance(parent, ast.Attribute) and parent.value is node):
            if kind[0] == "workbook" and name in self.paths:
                return
            found.append(
                (
                    line,
                    f"{name} may only be used as {name}.<attribute>, as the instructor's cell does"
                    if kind[0] == "workbook"
                    else f"{name} may only be used as {name}.<attribute>: a module is not a value an exercise "
                    "may "
                    "bind, pass or return",
                )
            )

    def _local_binding(self, name, line, found):
        if name.startswith("_") and name != "_":
            found.append((line, f"the name {name} is not allowed in an exercise (names beginning with _ are Python's)"))
        elif self.env.get(name, ("",))[0] in ("module", "workbook"):
            found.append(
                (line, f"{name} is bound here, hiding the module {name}: an exercise does not rebind a module's name")
            )

    def _path(self, node, found):
        """Check a maximal attribute path: a module's by :data:`NAMES`, a workbook module's by the
        instructor's paths, then a value's attributes by :data:`VALUE_ATTRIBUTES`."""
        root, parts = chain(node)
        kind = None
        if isinstance(root, ast.Name) and isinstance(root.ctx, ast.Load) and self.resolution.resolve(root) is None:
            kind = self.env.get(root.id)
        rest = parts
        if kind is not None and kind[0] == "module":
            where, spelled = kind[1], root.id
            while rest and where in NAMES:
                if rest[0] not in NAMES[where]:
                    found.append(
                        (
                            node.lineno,
                            f"{spelled}.{rest[0]} is not among the names an exercise may use from "
                            f"{where} "
                            "(prefixsum.grading.allowlist.NAMES)",
                        )
                    )
                    return
                spelled, where, rest = f"{spelled}.{rest[0]}", f"{where}.{rest[0]}", rest[1:]
            if where in NAMES:
                found.append((node.lineno, f"{spelled} may only be used as {spelled}.<attribute>"))
                return
        elif kind is not None and kind[0] == "workbook":
            spelled = [root.id, *parts]
            reach = next(
                (k for k in range(min(len(spelled), self.longest), 0, -1) if ".".join(spelled[:k]) in self.paths), 0
            )
            if not reach:
                found.append(
                    (node.lineno, f"{'.'.join(spelled)} is not used by the exercise as the instructor wrote it")
                )
                return
            rest = spelled[reach:]
        for attribute in rest:
            if attribute not in VALUE_ATTRIBUTES and not attribute.startswith("_"):
                found.append(
                    (
                        node.lineno,
                        f"the attribute .{attribute} is not among those an exercise may read of a "
                        "value "
                        "(prefixsum.grading.allowlist.VALUE_ATTRIBUTES)",
                    )
                )

    def _spelled(self, node):
        """The dotted path that a name or attribute path reaches (``numba.cuda.jit``), or None."""
        root, parts = chain(node)
        if not isinstance(root, ast.Name) or self.resolution.resolve(root) is not None:
            return None
        kind = self.env.get(root.id, ("", None))
        return ".".join([kind[1], *parts]) if kind[0] in ("module", "value") and kind[1] else None

    def _is_jit(self, node):
        """``cuda.jit``, ``numba.cuda.jit`` (or an imported ``jit``), bare or called with literal arguments."""
        if self._spelled(node.func if isinstance(node, ast.Call) else node) != "numba.cuda.jit":
            return False
        return not isinstance(node, ast.Call) or (
            all(map(_literal, [*node.args, *(k.value for k in node.keywords)]))
            and all(k.arg is not None for k in node.keywords)
        )

    def _exercise_problems(self):
        """``[(line, why)]``: the library calls that would do the exercise's work (:data:`EXERCISE_FORBIDS`)."""
        names, operators, why = EXERCISE_FORBIDS.get(self.exercise_id, ((), (), ""))
        if not names:
            return []
        kernels = [
            n for n in self.tree.body if isinstance(n, ast.FunctionDef) and any(map(self._is_jit, n.decorator_list))
        ]
        in_kernels = {id(child) for kernel in kernels for child in ast.walk(kernel)}
        launched = {kernel.name for kernel in kernels}  # kernel[blocks, threads]: a launch, not an index
        found = []
        for node in ast.walk(self.tree):
            used = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if used in names:
                found.append((node.lineno, f"{used} is not allowed in {self.exercise_id}: {why}"))
            elif isinstance(node, ast.BinOp) and type(node.op) in operators:
                found.append(
                    (node.lineno, f"the operator {type(node.op).__name__} is not allowed in {self.exercise_id}: {why}")
                )
            elif (
                "index" in operators
                and isinstance(node, ast.Subscript)
                and id(node) not in in_kernels
                and not (isinstance(node.value, ast.Name) and node.value.id in launched)
                and not all(map(_literal, _index_parts(node.slice)))
            ):
                found.append(
                    (
                        node.lineno,
                        f"an index by a variable outside a kernel is not allowed in {self.exercise_id}: {why}",
                    )
                )
        return found


def _index_parts(index):
    if isinstance(index, ast.Slice):
        return [part for part in (index.lower, index.upper, index.step) if part is not None]
    if isinstance(index, ast.Tuple):
        return [part for element in index.elts for part in _index_parts(element)]
    return [index]
