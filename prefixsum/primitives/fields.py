"""Elements of several fields: the one readable source of a device function, rewritten per field.

A user operator (:mod:`prefixsum.scans.user_ops`) scans tuples held as a structure of arrays:
``x = (a, b)`` is the sequence of pairs ``(a[i], b[i])``. In registers such an element is a
numba tuple, which the readable device functions already pass around like a scalar (``combine``,
``neutral``, ``value if c else neutral``). Only memory and shuffles need one operation per field:
a shared or local array, a global array, a shuffle and the bits of a look-back state. So the
primitives and kernels are written once, for one value, and :func:`device_function` and
:func:`kernel` compile them as they are for a dtype, or rewrite their syntax tree for a tuple of
dtypes:

* an *element array* (a parameter named in ``arrays``, or a ``cuda.shared.array`` /
  ``cuda.local.array`` of the element type) becomes one array per field, ``a`` into ``a__0,
  a__1, ...``, in the parameters, the constructors and the arguments of calls; so does a row
  ``b[r]`` of a 2-D one passed to a call, into ``b__0[r], b__1[r], ...``;
* ``a[i]`` read is the tuple ``(a__0[i], a__1[i], ...)``, ``a[i] = v`` stores ``v`` field by field;
* a call of a *per-field function* (a :class:`Fieldwise` in the closure: the shuffle carriers,
  the bits of a state) is made once per field, ``back(shfl(m, to(v), d))`` into
  ``(back__0(shfl(m, to__0(v[0]), d)), ...)``, and a statement that calls one without using a
  value (``cuda.atomic.exch(values, i, to_bits(v))``) is repeated per field.

Everything else (control flow, indices, flags, the operator's calls) is left as written, so a
tuple kernel is the scalar kernel, field by field where memory is touched: one source per
algorithm. The rewritten source is registered with :mod:`linecache`, so tracebacks, the tracer
and ``inspect.getsource`` show it.
"""

import ast
import copy
import functools
import inspect
import itertools
import linecache
import textwrap
from typing import NamedTuple

import numba
import numpy as np
from numba import cuda

_counter = itertools.count()
_CONSTRUCTORS = {"shared", "local"}


class Operator(NamedTuple):
    """A user operator as the kernels see it.

    Attributes
    ----------
    op : numba device function
        The user's ``op(p, q)``; on tuples unless ``bare``.
    dtypes : tuple of numpy.dtype
        The fields' dtypes.
    identity : tuple of numpy scalars
        The identity, one scalar per field, each of its field's dtype.
    bare : bool
        The input was one array, not a tuple: ``op`` takes and returns scalars.
    """

    op: object
    dtypes: tuple
    identity: tuple
    bare: bool

    @property
    def arity(self):
        return len(self.dtypes)


class Fieldwise(tuple):
    """Per-field device functions (one per field), called per field by the rewritten source."""


class FieldTypes(tuple):
    """The numba types of an element's fields: what ``element`` is in a rewritten source."""


def is_fields(dtype):
    """Whether ``dtype`` stands for an element of several fields (a tuple of dtypes)."""
    return isinstance(dtype, tuple)


def element_bytes(dtype):
    """Bytes of one element: the dtype's, or the sum of the fields'."""
    return sum(np.dtype(d).itemsize for d in dtype) if is_fields(dtype) else np.dtype(dtype).itemsize


def define(source, name, namespace):
    """Define function ``name`` from ``source`` with ``namespace`` as globals, its source kept by linecache.

    Also how the classroom's mutants compile a kernel's source with a mistake made in it.
    """
    filename = f"<prefixsum {name} {next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {"cuda": cuda, **namespace}
    exec(compile(source, filename, "exec"), scope)  # noqa: S102  (the package's own sources)
    return scope[name]


@functools.lru_cache(maxsize=None)
def user_combine(operator):
    """Device function ``combine_in_dtype(p, q)``: the user's op on tuples, each field cast to its dtype.

    The cast is needed because numba widens int32 arithmetic to 64 bits (as
    :func:`prefixsum.primitives.ops.device_op` does for the built-in operators). A single
    array's scalar op is wrapped so that every kernel sees tuples. The name is the built-in
    operators', so that the tracer counts its calls as combines.
    """
    casts = ", ".join(f"cast{k}(r[{k}])" for k in range(operator.arity))
    call = "(op(p[0], q[0]),)" if operator.bare else "op(p, q)"
    source = f"def combine_in_dtype(p, q):\n    r = {call}\n    return ({casts},)\n"
    fn = define(
        source, "combine_in_dtype", {"op": operator.op, **{f"cast{k}": dt.type for k, dt in enumerate(operator.dtypes)}}
    )
    return cuda.jit(device=True)(fn)


def device_function(fn, dtype, arrays=()):
    """``cuda.jit(device=True)`` of ``fn`` for one value of ``dtype``, or of its rewrite for a tuple of dtypes.

    ``arrays`` names the parameters that hold elements (see the module's docstring); for a
    dtype it is not looked at, and ``fn`` is compiled exactly as written.
    """
    return cuda.jit(device=True)(rewrite(fn, dtype, arrays) if is_fields(dtype) else fn)


def kernel(fn, dtype, arrays=()):
    """:func:`device_function` for a kernel."""
    return cuda.jit(rewrite(fn, dtype, arrays) if is_fields(dtype) else fn)


def rewrite(fn, dtypes, arrays):
    """``fn`` rewritten for elements of ``dtypes`` (one per field); see the module's docstring."""
    namespace = dict(fn.__globals__)
    namespace.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    definition = tree.body[0]
    definition.decorator_list = []
    arity = len(dtypes)
    for name, value in list(namespace.items()):
        if isinstance(value, Fieldwise):
            namespace.update({f"{name}__{k}": value[k] for k in range(arity)})
    namespace.update({f"T__{k}": numba.from_dtype(np.dtype(d)) for k, d in enumerate(dtypes)})
    _Rewriter(arity, set(arrays), namespace).rewrite(definition)
    return define(ast.unparse(ast.fix_missing_locations(tree)), definition.name, namespace)


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class _Rewriter:
    """Rewrites one function definition in place for ``arity`` fields."""

    def __init__(self, arity, arrays, namespace):
        self.arity = arity
        self.arrays = arrays
        self.dimensions = dict.fromkeys(arrays, 1)  # the parameters hold 1-D global arrays
        self.fieldwise = {name for name, value in namespace.items() if isinstance(value, Fieldwise)}
        self.element_types = {name for name, value in namespace.items() if isinstance(value, FieldTypes)}

    def rewrite(self, definition):
        unknown = self.arrays - {a.arg for a in definition.args.args}
        if unknown:
            raise ValueError(f"{definition.name} has no parameter {sorted(unknown)[0]!r} to hold elements")
        args = []
        for a in definition.args.args:
            args.extend([ast.arg(name) for name in self.split(a.arg)] if a.arg in self.arrays else [a])
        definition.args.args = args
        definition.body = self.block(definition.body)

    def split(self, name):
        return [f"{name}__{k}" for k in range(self.arity)]

    def block(self, statements):
        out = []
        for statement in statements:
            out.extend(self.statement(statement))
        return out

    def statement(self, node):
        for attribute in ("body", "orelse", "finalbody"):
            if isinstance(getattr(node, attribute, None), list):
                setattr(node, attribute, self.block(getattr(node, attribute)))
        if isinstance(node, ast.Assign) and self.constructs_element(node.value):
            (target,) = node.targets
            self.arrays.add(target.id)
            shape = node.value.args[0]
            self.dimensions[target.id] = len(shape.elts) if isinstance(shape, ast.Tuple) else 1
            return [
                ast.Assign([ast.Name(name, ast.Store())], self.constructor(node.value, k))
                for k, name in enumerate(self.split(target.id))
            ]
        if isinstance(node, ast.Expr) and self.calls_fieldwise(node.value):
            return [ast.Expr(self.field(copy.deepcopy(node.value), k)) for k in range(self.arity)]
        if isinstance(node, ast.Assign):
            node.targets = [self.target(t) for t in node.targets]
            node.value = self.value(node.value)
            return [node]
        for attribute in ("value", "test", "iter"):
            if isinstance(getattr(node, attribute, None), ast.expr):
                setattr(node, attribute, self.value(getattr(node, attribute)))
        return [node]

    def constructs_element(self, node):
        """Whether ``node`` is ``cuda.shared.array(size, element)`` or ``cuda.local.array(...)`` of the element type."""
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "array"
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr in _CONSTRUCTORS
            and len(node.args) == 2
            and isinstance(node.args[1], ast.Name)
            and node.args[1].id in self.element_types
        )

    def constructor(self, node, k):
        return ast.Call(node.func, [node.args[0], ast.Name(f"T__{k}", ast.Load())], [])

    def calls_fieldwise(self, node):
        return any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in self.fieldwise
            for n in ast.walk(node)
        )

    def target(self, node):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in self.arrays:
            return ast.Tuple(
                [
                    ast.Subscript(ast.Name(name, ast.Load()), self.value(node.slice), ast.Store())
                    for name in self.split(node.value.id)
                ],
                ast.Store(),
            )
        if isinstance(node, ast.Tuple):
            node.elts = [self.target(t) for t in node.elts]
        return node

    def row(self, node):
        """Whether ``node`` indexes an element array by fewer indices than it has dimensions (a row of it)."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in self.arrays):
            return False
        indices = len(node.slice.elts) if isinstance(node.slice, ast.Tuple) else 1
        return indices < self.dimensions[node.value.id]

    def value(self, node):
        """An expression outside any per-field call: element reads become tuples, element arrays expand in calls."""
        if self.row(node):
            raise ValueError(f"row {ast.unparse(node)!r} of an element array is used as a value; pass it to a call")
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in self.arrays:
            index = self.value(node.slice)
            return ast.Tuple(
                [ast.Subscript(ast.Name(name, ast.Load()), index, ast.Load()) for name in self.split(node.value.id)],
                ast.Load(),
            )
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.fieldwise:
            return ast.Tuple([self.field(copy.deepcopy(node), k) for k in range(self.arity)], ast.Load())
        if isinstance(node, ast.Call):
            args = []
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in self.arrays:
                    args.extend(ast.Name(name, ast.Load()) for name in self.split(arg.id))
                elif self.row(arg):
                    index = self.value(arg.slice)
                    args.extend(
                        ast.Subscript(ast.Name(name, ast.Load()), copy.deepcopy(index), ast.Load())
                        for name in self.split(arg.value.id)
                    )
                else:
                    args.append(self.value(arg))
            node.args = args
            node.keywords = [ast.keyword(k.arg, self.value(k.value)) for k in node.keywords]
            return node
        if isinstance(node, ast.Name) and node.id in self.arrays:
            raise ValueError(f"element array {node.id!r} is used as a value; index it or pass it to a call")
        for name, child in ast.iter_fields(node):
            if isinstance(child, ast.expr):
                setattr(node, name, self.value(child))
            elif isinstance(child, list):
                setattr(node, name, [self.value(c) if isinstance(c, ast.expr) else c for c in child])
        return node

    def field(self, node, k):
        """Field ``k`` of an expression that calls per-field functions: arrays and those functions by field."""
        if isinstance(node, ast.Name) and (node.id in self.arrays or node.id in self.fieldwise):
            return ast.Name(f"{node.id}__{k}", ast.Load())
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.fieldwise:
            (arg,) = node.args
            inner = (
                self.field(arg, k)
                if _names(arg) & (self.arrays | self.fieldwise)
                else ast.Subscript(self.value(arg), ast.Constant(k), ast.Load())
            )
            return ast.Call(ast.Name(f"{node.func.id}__{k}", ast.Load()), [inner], [])
        for name, child in ast.iter_fields(node):
            if isinstance(child, ast.expr):
                setattr(node, name, self.field(child, k))
            elif isinstance(child, list):
                setattr(node, name, [self.field(c, k) if isinstance(c, ast.expr) else c for c in child])
        return node
