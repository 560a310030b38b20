"""Where each name of a cell resolves, as Python resolves it: a scope of the cell, or the cell's globals.

The allow-list (:mod:`.allowlist`) decides what a name may be used for by what it is bound to:
a module only as the root of a listed attribute path, a value freely. That needs Python's own
rule for which binding a name refers to, through every kind of binding: parameters (with their
defaults evaluated in the enclosing scope), assignments and tuple unpacking, ``for`` and
``with`` targets, ``except ... as``, nested ``def`` names, comprehension variables (a scope of
their own, whose first iterable is evaluated outside it), the walrus (which binds in the
nearest enclosing function, through comprehensions), closures (a free name resolves to the
nearest enclosing function that binds it), and ``global`` / ``nonlocal`` declarations.

:class:`Resolution` computes it in one pass over the syntax tree; ``tests/test_allowlist.py``
compares it with :mod:`symtable`, CPython's own table of every scope's names.
"""

import ast

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_MATCH_BINDERS = tuple(getattr(ast, name) for name in ("MatchAs", "MatchStar") if hasattr(ast, name))


class Scope:
    """One scope of a cell: the module (``node`` None), a function, a lambda, a class or a comprehension."""

    __slots__ = ("node", "parent", "bound", "declared_global", "declared_nonlocal", "reads")

    def __init__(self, node, parent):
        self.node, self.parent = node, parent
        self.bound, self.declared_global, self.declared_nonlocal = set(), set(), set()
        self.reads = []
        """The ``ast.Name`` nodes read (or deleted) in this scope, in the order met."""

    @property
    def is_function(self):
        return self.node is not None and not isinstance(self.node, ast.ClassDef)

    def bind(self, name):
        """Bind ``name`` here, or where a ``global`` / ``nonlocal`` declaration sends it."""
        if name not in self.declared_global and name not in self.declared_nonlocal:
            self.bound.add(name)


class Resolution:
    """Every scope of ``tree`` (an ``ast.Module``) and where each name read in it resolves.

    ``scope_of[id(name node)]`` is the scope a ``Name`` node is evaluated in; :meth:`resolve`
    says which scope's binding it reads (None for the cell's globals, builtins included).
    """

    def __init__(self, tree):
        self.module = Scope(None, None)
        self.scopes = [self.module]
        self.scope_of = {}
        self._visit_body(tree.body, self.module)

    # -- building -------------------------------------------------------------------------------
    def _new(self, node, parent):
        scope = Scope(node, parent)
        self.scopes.append(scope)
        return scope

    def _visit_body(self, statements, scope):
        # Declarations first: ``global x`` applies to the whole scope, wherever it stands.
        for statement in statements:
            for node in _own_nodes(statement):
                if isinstance(node, ast.Global):
                    scope.declared_global.update(node.names)
                elif isinstance(node, ast.Nonlocal):
                    scope.declared_nonlocal.update(node.names)
        for statement in statements:
            self._visit(statement, scope)

    def _visit(self, node, scope):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for expression in [*node.decorator_list, *_defaults(node.args), *_annotations(node)]:
                self._visit(expression, scope)
            scope.bind(node.name)
            self._function(node, scope, node.body)
        elif isinstance(node, ast.Lambda):
            for expression in _defaults(node.args):
                self._visit(expression, scope)
            self._function(node, scope, [node.body])
        elif isinstance(node, ast.ClassDef):
            for expression in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
                self._visit(expression, scope)
            scope.bind(node.name)
            inner = self._new(node, scope)
            self._visit_body(node.body, inner)
        elif isinstance(node, _COMPREHENSIONS):
            self._comprehension(node, scope)
        elif isinstance(node, ast.NamedExpr):
            self._visit(node.value, scope)
            target = scope
            while target.node is not None and isinstance(target.node, _COMPREHENSIONS):
                target = target.parent  # PEP 572: the walrus binds in the enclosing function
            target.bind(node.target.id)
            self.scope_of[id(node.target)] = target
        elif isinstance(node, ast.Name):
            self.scope_of[id(node)] = scope
            if isinstance(node.ctx, ast.Load):
                scope.reads.append(node)
            else:
                scope.bind(node.id)
                if isinstance(node.ctx, ast.Del):
                    scope.reads.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name != "*":
                    scope.bind(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler):
            if node.name:
                scope.bind(node.name)
            for child in ast.iter_child_nodes(node):
                self._visit(child, scope)
        elif _MATCH_BINDERS and isinstance(node, _MATCH_BINDERS) and node.name:
            scope.bind(node.name)
            for child in ast.iter_child_nodes(node):
                self._visit(child, scope)
        elif hasattr(ast, "MatchMapping") and isinstance(node, ast.MatchMapping) and node.rest:
            scope.bind(node.rest)
            for child in ast.iter_child_nodes(node):
                self._visit(child, scope)
        else:
            for child in ast.iter_child_nodes(node):
                self._visit(child, scope)

    def _function(self, node, scope, body):
        inner = self._new(node, scope)
        arguments = node.args
        for argument in [
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            *filter(None, (arguments.vararg, arguments.kwarg)),
        ]:
            inner.bind(argument.arg)
        self._visit_body(body, inner)

    def _comprehension(self, node, scope):
        first, *rest = node.generators
        self._visit(first.iter, scope)  # the outermost iterable is evaluated where the comprehension stands
        inner = self._new(node, scope)
        for number, generator in enumerate(node.generators):
            self._visit(generator.target, inner)
            if number:
                self._visit(generator.iter, inner)
            for condition in generator.ifs:
                self._visit(condition, inner)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self._visit(part, inner)

    # -- resolving ------------------------------------------------------------------------------
    def resolve(self, name_node):
        """The :class:`Scope` whose binding ``name_node`` reads, or None for the cell's globals."""
        scope = self.scope_of[id(name_node)]
        return self.binding(scope, name_node.id)

    def binding(self, scope, name):
        """The scope whose binding of ``name`` a read in ``scope`` gets, or None for the globals."""
        if scope.node is None or name in scope.declared_global:
            return None
        if name in scope.bound:
            return scope
        outer = scope.parent
        while outer is not None and outer.node is not None:
            # Class bodies are not enclosing scopes of the functions in them.
            if outer.is_function and name in outer.bound and name not in outer.declared_global:
                return outer
            if outer.is_function and name in outer.declared_global:
                return None
            outer = outer.parent
        return None

    def is_global(self, name_node):
        """Whether ``name_node`` reads (or binds) the cell's global ``name``."""
        scope = self.scope_of[id(name_node)]
        if isinstance(name_node.ctx, ast.Load):
            return self.resolve(name_node) is None
        return scope.node is None or name_node.id in scope.declared_global


def _defaults(arguments):
    return [*arguments.defaults, *filter(None, arguments.kw_defaults)]


def _annotations(node):
    arguments = node.args
    found = [
        a.annotation
        for a in [
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            *filter(None, (arguments.vararg, arguments.kwarg)),
        ]
        if a.annotation is not None
    ]
    return found + ([node.returns] if node.returns is not None else [])


def _own_nodes(statement):
    """The nodes of ``statement`` that belong to its own scope (not inside a nested function, class or lambda)."""
    stack = [statement]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


__all__ = ["Resolution", "Scope"]
