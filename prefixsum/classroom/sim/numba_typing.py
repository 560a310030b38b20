"""A student's kernel run with numba's integer typing: its operators rewritten to :mod:`.integers`.

numpy and numba disagree on integer arithmetic (:mod:`.integers`): in a simulated kernel
``np.int32(flag) << 32`` is 0 where a GPU keeps the flag, ``np.uint32(x) | (1 << 40)`` raises
OverflowError where a GPU computes. :func:`numba_typed` gives the function the simulator runs in
place of a kernel or device function: the same code, with every ``+ - * // % & | ^ << >>``, unary
``-`` and ``~``, augmented assignment to a variable, and call of an integer type on one value
(``np.int32(v)``, ``uint32(v)``) replaced by the function of :mod:`.integers` that computes it
as numba does. Floats, arrays and booleans go through those functions unchanged.

The rewritten function keeps the original's globals (so that the simulated ``cuda`` of its
module is the one it sees), closure cells, defaults, name, file and line numbers: a trace, an
error and the stepper name the student's lines. Functions of this package are not rewritten
(their arithmetic is written for both and checked on a GPU), nor are functions whose source
cannot be read (then numpy's rules hold).
"""

import ast
import inspect
import os
import textwrap
import types
import weakref

from . import integers

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_HELPER = "__prefixsum_integers__"
_CASTS = frozenset(
    (
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "intp",
        "uintp",
        "intc",
        "uintc",
        "longlong",
        "ulonglong",
    )
)
_BINARY = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.BitAnd: "and_",
    ast.BitOr: "or_",
    ast.BitXor: "xor",
    ast.LShift: "lshift",
    ast.RShift: "rshift",
}
_UNARY = {ast.USub: "negative", ast.Invert: "inverted"}
_INPLACE = {name: "i" + name.rstrip("_") for name in _BINARY.values()}  # iadd, ..., iand, ior, ...

_typed = weakref.WeakKeyDictionary()  # function -> the function to run (itself when not rewritten)


def numba_typed(function):
    """The function to run for ``function`` (a kernel's or device function's Python function).

    Rewritten once and kept; ``function`` itself where nothing is rewritten.
    """
    try:
        return _typed[function]
    except KeyError:
        pass
    except TypeError:  # not weakly referable: run as it is
        return function
    typed = _rewritten(function) or function
    _typed[function] = typed
    return typed


def _helper(name, node):
    """``__prefixsum_integers__.<name>`` at ``node``'s place."""
    return ast.copy_location(ast.Attribute(ast.Name(_HELPER, ast.Load()), name, ast.Load()), node)


class _Rewrite(ast.NodeTransformer):
    """Replaces integer operators by calls of :mod:`.integers`; ``changed`` says whether any was."""

    def __init__(self):
        self.changed = False

    def _call(self, name, node, *args):
        self.changed = True
        return ast.copy_location(ast.Call(_helper(name, node), list(args), []), node)

    def visit_BinOp(self, node):
        self.generic_visit(node)
        name = _BINARY.get(type(node.op))
        return node if name is None else self._call(name, node, node.left, node.right)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        name = _UNARY.get(type(node.op))
        return node if name is None else self._call(name, node, node.operand)

    def visit_AugAssign(self, node):
        # Only a variable: a store into an array element keeps the element's low bits either way.
        self.generic_visit(node)
        name = _BINARY.get(type(node.op))
        if name is None or not isinstance(node.target, ast.Name):
            return node
        value = self._call(_INPLACE[name], node, ast.Name(node.target.id, ast.Load()), node.value)
        return ast.copy_location(ast.Assign([node.target], value), node)

    def visit_Call(self, node):
        self.generic_visit(node)
        callee = node.func
        name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", None)
        if name in _CASTS and len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
            return self._call("cast", node, callee, node.args[0])
        return node


def _rewritten(function):
    """``function`` with numba's integer typing, or None (package code, no readable source, nothing to rewrite)."""
    code = getattr(function, "__code__", None)
    if code is None or os.path.abspath(code.co_filename).startswith(_PACKAGE_DIR):
        return None
    try:
        lines, first = inspect.getsourcelines(function)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, ast.FunctionDef) or definition.name != code.co_name:
        return None
    definition.decorator_list = []
    ast.increment_lineno(definition, first - 1)
    rewrite = _Rewrite()
    definition = rewrite.visit(definition)
    if not rewrite.changed:
        return None
    # Compiled inside a function whose parameters are the original's free variables and the
    # helper, so that the rewritten code finds them in closure cells.
    wrapper = ast.parse(f"def __prefixsum_wrapper__({', '.join((_HELPER, *code.co_freevars))}):\n    pass").body[0]
    wrapper.body = [definition, ast.Return(ast.Name(definition.name, ast.Load()))]
    ast.copy_location(wrapper, definition)
    module = ast.fix_missing_locations(ast.Module([wrapper], []))
    try:
        compiled = compile(module, code.co_filename, "exec")
    except (SyntaxError, ValueError):
        return None
    outer = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in outer.co_consts if isinstance(c, types.CodeType) and c.co_name == code.co_name)
    if hasattr(inner, "co_qualname"):
        inner = inner.replace(co_qualname=code.co_qualname)
    cells = dict(zip(code.co_freevars, function.__closure__ or ()))
    cells[_HELPER] = types.CellType(integers)
    typed = types.FunctionType(
        inner,
        function.__globals__,
        function.__name__,
        function.__defaults__,
        tuple(cells[name] for name in inner.co_freevars),
    )
    typed.__kwdefaults__ = function.__kwdefaults__
    return typed


__all__ = ["numba_typed"]
