"""What a submitted exercise cell may contain before the grader's own process loads it.

The trusted re-check runs the instructor's check on the student's functions in a process of the
grader's. So that the student's code cannot reach into that process (replace ``ps.check``, wrap
``print``, write a file, exit), the cell is parsed and accepted only when it is made of:

* at its top: imports of the names of :data:`NAMES` only (``from numba import cuda``,
  ``import numpy as np``, ``from math import sqrt``); assignments of constants (numbers,
  strings, tuples and arithmetic of them); function definitions, plain or decorated with
  ``cuda.jit``; and any statement that the instructor's own exercise cell has word for word
  (``tile_kernel = ps.scans.blelloch.blelloch_tile_kernel(...)``);
* inside functions: ordinary code on local names, parameters, the cell's own names, a list of
  harmless builtins, what the setup cells define, numpy, math and numba. No import,
  ``global``, ``nonlocal``, class, attribute assignment or deletion, annotation, ``format``,
  no attribute whose name starts with ``_`` or reaches a file, a global setting or another
  module's internals; an attribute of ``np``, ``cuda``, ``math`` or ``numba`` only from
  :data:`NAMES`, and of a workbook name (``ps``, ``kstep``, ...) only as the instructor's cell
  writes it;
* no decorator but ``cuda.jit`` with constant arguments, no default argument but a constant;
* no top-level name that hides a builtin or a name of the setup cells (``def print``,
  ``ps = ...``), unless the instructor's cell binds it too;
* none of the library calls that do an exercise's work for it (:data:`EXERCISE_FORBIDS`).

Names, not modules: ``from numpy.ctypeslib import ctypes``, ``from numpy import __builtins__`` or
``from numba.cuda.core.config import ENABLE_CUDASIM`` name a module of the list, and no name of it.
Kernels are further compiled to PTX (:mod:`.trusted`): code a GPU compiler accepts cannot reach
Python objects at all.
"""
import ast
import builtins
import math

ALLOWED_MODULES = ("numba", "numpy", "math")
_CUDA = frozenset({
    "jit", "grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpsize", "laneid", "syncthreads",
    "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp", "shared", "local", "const", "atomic",
    "threadfence", "threadfence_block", "threadfence_system", "shfl_sync", "shfl_up_sync", "shfl_down_sync",
    "shfl_xor_sync", "ballot_sync", "all_sync", "any_sync", "eq_sync", "match_any_sync", "match_all_sync", "activemask",
    "lanemask_lt", "popc", "clz", "ffs", "brev", "fma", "cbrt", "selp", "to_device", "device_array", "device_array_like",
    "pinned_array", "synchronize"})
_SCALARS = frozenset({"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                      "uint64", "boolean", "void"})
_NUMPY = _SCALARS - {"boolean", "void"} | frozenset({
    "abs", "absolute", "add", "all", "allclose", "any", "arange", "argmax", "argmin", "argsort", "array", "array_equal",
    "asarray", "ascontiguousarray", "bitwise_and", "bitwise_or", "bitwise_xor", "bool_", "ceil", "clip", "concatenate",
    "copy", "copysign", "cos", "diff", "dtype", "e", "empty", "empty_like", "exp", "exp2", "finfo", "flip", "floor",
    "full", "full_like", "hypot", "iinfo", "inf", "int_", "intp", "invert", "isclose", "isfinite", "isinf", "isnan",
    "left_shift", "linspace", "log", "log2", "max", "maximum", "mean", "min", "minimum", "nan", "ndarray", "ones",
    "ones_like", "pi", "power", "prod", "ravel", "reshape", "right_shift", "rint", "roll", "sign", "sin", "sort",
    "sqrt", "square", "stack", "sum", "trunc", "uintp", "zeros", "zeros_like", "dot", "outer", "where", "nonzero",
    "flatnonzero", "take"})
NAMES = {"numpy": _NUMPY, "numba": _SCALARS | {"cuda"}, "numba.cuda": _CUDA,
         "math": frozenset(n for n in dir(math) if not n.startswith("_"))}
"""The names an exercise may import from each module, or reach as an attribute of it."""
EXERCISE_FORBIDS = {
    "01.serial-scan": ({"cumsum", "cumulative_sum", "accumulate", "cumprod"}, set(),
                       "the exercise is the loop itself: np.cumsum and ufunc.accumulate do the scan for you"),
    "09.rank-two-update": ({"outer", "einsum", "matmul", "dot", "tensordot", "inner", "kron"}, {ast.MatMult},
                           "the update is the kernel's work: a numpy expression on the host does it without the kernel"),
    "11.compact": ({"nonzero", "flatnonzero", "where", "compress", "extract", "argwhere", "take", "put", "place", "putmask"},
                   {"index"}, "the compaction is the kernel's scatter: a boolean or array index, or np.nonzero, "
                              "compacts on the host without it (index only with constants outside a kernel)"),
}
"""``{exercise id: (attribute or function names, operators or "index", why)}``: what does an
exercise's work for it. ``"index"`` forbids a subscript by anything but a constant outside kernels."""
SAFE_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "complex", "divmod", "enumerate", "float", "int", "isinstance", "len", "list",
    "max", "min", "pow", "range", "reversed", "round", "slice", "sorted", "str", "sum", "tuple", "zip", "print",
    "True", "False", "None", "ArithmeticError", "AssertionError", "IndexError", "NotImplementedError",
    "RuntimeError", "TypeError", "ValueError", "ZeroDivisionError",
})
# Attributes that read or write files, change a global setting, or lead into a library's internals.
DENIED_ATTRIBUTES = frozenset({
    "lib", "ctypeslib", "ctypes", "testing", "f2py", "distutils", "core", "random", "simulator", "cudadrv", "driver",
    "config", "compiler", "dispatcher", "extending", "np", "typed", "tofile", "dump", "dumps", "load", "loads",
    "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt", "fromfile", "memmap", "DataSource",
    "seterr", "seterrcall", "set_printoptions", "setbufsize", "set_state", "seed", "frame", "func_globals",
    "format", "format_map", "pythonapi", "fromregex", "frombuffer", "tracer", "f_globals", "gi_frame",
})
_IMPORTABLE = ("numpy", "math", "numba", "numba.cuda")
_BUILTIN_NAMES = frozenset(dir(builtins))
# What IPython puts in a notebook's namespace: a shell, the history, the exit of the kernel.
_IPYTHON_NAMES = frozenset({"get_ipython", "In", "Out", "exit", "quit", "display"})
_FORBIDDEN_NODES = (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ClassDef, ast.AsyncFunctionDef,
                    ast.Await, ast.Yield, ast.YieldFrom, ast.AsyncFor, ast.AsyncWith)


def _bound_names(statements):
    """Names that top-level ``statements`` bind (imports, assignments, definitions)."""
    names = set()
    for node in statements:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        else:
            for child in ast.walk(node):
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                    names.add(child.id)
    return names


def setup_names(setup_sources):
    """Names the setup cells bind at their top level."""
    names = set()
    for source in setup_sources:
        names |= _bound_names(ast.parse(source).body)
    return names


def _chain(node):
    """``"ps.primitives.warp.FULL_MASK"`` for an attribute chain rooted at a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _quote(source, node, width=60):
    """The statement's first line, shortened, in backquotes (for a message to the student)."""
    text = (ast.get_source_segment(source, node) or "").splitlines()[0]
    return f"`{text if len(text) <= width else text[:width - 3] + '...'}`"


def _is_constant(node, constants):
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.Attribute):  # np.inf, math.pi: a module's constant
        chain = _chain(node)
        return bool(chain) and chain.split(".")[0] in constants and not any(
            part.startswith("_") or part in DENIED_ATTRIBUTES for part in chain.split(".")[1:])
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_constant(e, constants) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _is_constant(node.operand, constants)
    if isinstance(node, ast.BinOp):
        return _is_constant(node.left, constants) and _is_constant(node.right, constants)
    return False


def _is_jit_decorator(node):
    """``cuda.jit``, ``numba.cuda.jit`` or either called with constant arguments."""
    target = node.func if isinstance(node, ast.Call) else node
    if _chain(target) not in ("cuda.jit", "numba.cuda.jit"):
        return False
    if isinstance(node, ast.Call):
        values = list(node.args) + [k.value for k in node.keywords]
        return all(_is_constant(v, set()) for v in values) and all(k.arg is not None for k in node.keywords)
    return True


class _Names:
    """What names a function body may read, and which attribute chains of workbook names."""

    def __init__(self, cell_names, modules, workbook, instructor_chains):
        self.cell_names, self.modules, self.workbook = cell_names, modules, workbook
        self.instructor_chains = instructor_chains


def _check_function(function, names, problems):
    local = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
    for node in ast.walk(function):
        if node is not function and isinstance(node, (ast.FunctionDef, ast.Lambda)):
            local |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            local.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            local.add(node.name)
        elif isinstance(node, ast.FunctionDef) and node is not function:
            local.add(node.name)
    for default in function.args.defaults + [d for d in function.args.kw_defaults if d is not None]:
        if not _is_constant(default, set()):
            problems.append((default.lineno, f"a default argument of {function.name} must be a constant"))
    parents = {}
    for node in ast.walk(function):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    for node in ast.walk(function):
        line = getattr(node, "lineno", function.lineno)
        if isinstance(node, ast.arg) and node.annotation is not None or isinstance(node, ast.AnnAssign) or (
                isinstance(node, ast.FunctionDef) and node.returns is not None):
            problems.append((line, f"annotations are not allowed in {function.name} (they run when it is defined)"))
        if isinstance(node, ast.FunctionDef) and node is not function and not all(map(_is_jit_decorator, node.decorator_list)):
            problems.append((line, f"{node.name}: the only decorator allowed is cuda.jit"))
        if isinstance(node, _FORBIDDEN_NODES):
            problems.append((line, f"{type(node).__name__.lower()} is not allowed inside {function.name}"))
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_") or node.attr in DENIED_ATTRIBUTES:
                problems.append((line, f"the attribute .{node.attr} is not allowed"))
            if not isinstance(node.ctx, ast.Load):
                problems.append((line, f"assigning or deleting the attribute .{node.attr} is not allowed"))
            chain = _chain(node)
            if chain and chain.split(".")[0] in names.workbook and not isinstance(parents.get(node), ast.Attribute):
                if chain not in names.instructor_chains:
                    problems.append((line, f"{chain} is not used by the exercise as the instructor wrote it"))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            name = node.id
            if name in local or name in names.cell_names or name in SAFE_BUILTINS or name in names.modules:
                continue
            # A workbook module the setup imports (even ``_common``) is reached only through the
            # instructor's own attribute chains (checked with the attributes above).
            if name in names.workbook:
                if not isinstance(parents.get(node), ast.Attribute):
                    problems.append((line, f"{name} may only be used as {name}.<attribute>, as the instructor's cell does"))
            elif name.startswith("_") or name in _BUILTIN_NAMES or name in _IPYTHON_NAMES:
                problems.append((line, f"the name {name} is not allowed in an exercise"))
            # any other name is unknown to the grader's process: reading it raises NameError there


def _modules_bound(statements):
    """``{bound name: module}`` for the imports among ``statements`` of the modules in :data:`NAMES`."""
    found = {}
    for node in statements:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in _IMPORTABLE:
                    found[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module == "numba":
            found.update({alias.asname or alias.name: "numba.cuda" for alias in node.names if alias.name == "cuda"})
    return found


def _import_problem(node):
    """Why an import statement of a submission is refused, or None."""
    if isinstance(node, ast.Import):
        bad = [a.name for a in node.names if a.name not in _IMPORTABLE]
        return f"import of {', '.join(bad)}: an exercise may import only {', '.join(_IMPORTABLE)}" if bad else None
    allowed = NAMES.get(node.module) if not node.level else None
    bad = [a.name for a in node.names if allowed is None or a.name not in allowed]
    if bad:
        return (f"from {'.' * node.level}{node.module or ''} import {', '.join(bad)}: an exercise may import only the names "
                f"listed for {', '.join(NAMES)} (prefixsum.classroom.grading.allowlist.NAMES)")
    return None


def _module_attribute_problem(chain, modules):
    """Why ``np.x.y`` (an attribute chain on a module's name) is refused, or None."""
    root, *rest = chain.split(".")
    module = modules.get(root)
    if module is None or not rest:
        return None
    if module == "numba" and rest[0] == "cuda":
        module, rest = "numba.cuda", rest[1:]
    if rest and rest[0] not in NAMES[module]:
        return f"{root}.{rest[0]} is not among the names an exercise may use from {module}"
    return None


def _exercise_problems(tree, exercise_id):
    """``[(line, why)]``: the library calls that would do ``exercise_id``'s work (:data:`EXERCISE_FORBIDS`)."""
    names, operators, why = EXERCISE_FORBIDS.get(exercise_id, ((), (), ""))
    kernels = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and any(map(_is_jit_decorator, node.decorator_list))]
    in_kernels = {id(child) for kernel in kernels for child in ast.walk(kernel)}
    launched = {kernel.name for kernel in kernels}  # kernel[blocks, threads]: a launch, not an index
    found = []
    for node in ast.walk(tree):
        used = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if used in names:
            found.append((node.lineno, f"{used} is not allowed in {exercise_id}: {why}"))
        elif isinstance(node, ast.BinOp) and type(node.op) in operators:
            found.append((node.lineno, f"the operator {type(node.op).__name__} is not allowed in {exercise_id}: {why}"))
        elif ("index" in operators and isinstance(node, ast.Subscript) and id(node) not in in_kernels
              and not (isinstance(node.value, ast.Name) and node.value.id in launched)
              and not all(_is_constant(part, set()) for part in _index_parts(node.slice))):
            found.append((node.lineno, f"an index by a variable outside a kernel is not allowed in {exercise_id}: {why}"))
    return found


def _index_parts(index):
    if isinstance(index, ast.Slice):
        return [part for part in (index.lower, index.upper, index.step) if part is not None]
    if isinstance(index, ast.Tuple):
        return [part for element in index.elts for part in _index_parts(element)]
    return [index]


def check(source, *, instructor_source, setup_sources, earlier_sources=(), exercise_id=""):
    """Problems that keep ``source`` (a submitted exercise cell) out of the grader's process.

    Parameters
    ----------
    source : str
        The submitted cell.
    instructor_source : str
        The instructor's cell of the same exercise (its statements are trusted as written).
    setup_sources : sequence of str
        The setup cells the exercise runs after.
    earlier_sources : sequence of str
        The instructor's cells of the exercises before this one (what they bind may be used).
    exercise_id : str
        The exercise, for the library calls it forbids (:data:`EXERCISE_FORBIDS`).

    Returns
    -------
    list of str
        ``"line N: what"``, empty when the cell is accepted. A cell that does not parse gives
        one problem beginning ``"syntax error"``.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return [f"syntax error at line {error.lineno}: {error.msg}"]
    except (ValueError, UnicodeError, RecursionError, MemoryError) as error:  # a lone surrogate, a null byte, depth
        return [f"syntax error at line 1: the cell cannot be parsed ({type(error).__name__}: {str(error)[:100]})"]
    try:
        return _check(tree, source, instructor_source, setup_sources, earlier_sources, exercise_id)
    except RecursionError:
        return ["line 1: the cell is nested too deeply for the grader to read"]


def _check(tree, source, instructor_source, setup_sources, earlier_sources, exercise_id):
    instructor = ast.parse(instructor_source)
    trusted = {ast.dump(node) for node in instructor.body if not isinstance(node, ast.FunctionDef)}
    instructor_names = _bound_names(instructor.body)
    instructor_chains = {_chain(n) for n in ast.walk(instructor) if isinstance(n, ast.Attribute)} - {None}
    setup_bound = setup_names(setup_sources)
    modules, workbook = set(), set()
    for setup in [*setup_sources, instructor_source, source]:
        for node in ast.parse(setup).body if setup is not source else tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                root = node.names[0].name.split(".")[0] if isinstance(node, ast.Import) else (node.module or "").split(".")[0]
                bound = {(a.asname or a.name).split(".")[0] for a in node.names}
                (modules if root in ALLOWED_MODULES else workbook).update(bound)
    # What the setup cells define themselves (a device function, a constant) may be used as it is;
    # an imported module of the workbook only through the attribute paths of the instructor's cell.
    helpers = set()
    for setup in setup_sources:
        helpers |= _bound_names([n for n in ast.parse(setup).body if not isinstance(n, (ast.Import, ast.ImportFrom))])
    workbook -= modules
    modules |= helpers - workbook
    for earlier in earlier_sources:
        modules |= _bound_names(ast.parse(earlier).body)
    problems, constants = [], set(modules)
    for node in tree.body:
        line = node.lineno
        if ast.dump(node) in trusted:
            constants |= _bound_names([node])
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            refused = _import_problem(node)
            if refused:
                problems.append((line, refused))
            constants |= _bound_names([node])
        elif isinstance(node, ast.Assign):
            targets = node.targets
            if not all(isinstance(t, ast.Name) for t in targets) or not _is_constant(node.value, constants):
                problems.append((line, f"{_quote(source, node)}: only constants may be assigned at the top of an exercise "
                                       "(numbers, strings, tuples and arithmetic of them)"))
            constants |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.FunctionDef):
            if not all(_is_jit_decorator(d) for d in node.decorator_list):
                problems.append((line, f"{node.name}: the only decorator allowed is cuda.jit"))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        else:
            problems.append((line, f"{_quote(source, node)} is not allowed at the top of an exercise: only imports of "
                                   "numba, numpy and math, constants and function definitions"))
    bound = _bound_names(tree.body)
    defined = _bound_names([n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))])
    hidden = (defined & (setup_bound | set(dir(builtins)))) - instructor_names
    if hidden:
        problems.append((1, f"the cell rebinds {', '.join(sorted(hidden))}, which the setup cells or Python define"))
    names = _Names(bound, modules, workbook, instructor_chains)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            _check_function(node, names, problems)
    module_of = {}
    for statements in [*(ast.parse(s).body for s in setup_sources), instructor.body, tree.body]:
        module_of.update(_modules_bound(statements))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(parents.get(node), ast.Attribute):
            refused = _module_attribute_problem(_chain(node) or "", module_of)
            if refused:
                problems.append((node.lineno, refused))
    problems += _exercise_problems(tree, exercise_id)
    return [f"line {line}: {what}" for line, what in sorted(set(problems))]
