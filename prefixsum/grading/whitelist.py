"""The tables of :mod:`.allowlist`: what an exercise may import, name and read of a value.

Each is a whitelist. ``tests/test_allowlist.py`` walks the attribute graph they open, from every
name a submission can reach, and finds no path to Python's machinery (``exec``, ``open``,
``os``, ``sys``, ...): a name added here is added to that walk.
"""
import ast
import builtins
import math

MAX_SOURCE = 1 << 18
"""Characters an exercise's cell may hold (an honest one holds a few thousand): the parse is bounded with it."""
ALLOWED_MODULES = ("numba", "numpy", "math")
_CUDA = frozenset(
    {
        "jit",
        "grid",
        "gridsize",
        "threadIdx",
        "blockIdx",
        "blockDim",
        "gridDim",
        "warpsize",
        "laneid",
        "syncthreads",
        "syncthreads_count",
        "syncthreads_and",
        "syncthreads_or",
        "syncwarp",
        "shared",
        "local",
        "const",
        "atomic",
        "threadfence",
        "threadfence_block",
        "threadfence_system",
        "shfl_sync",
        "shfl_up_sync",
        "shfl_down_sync",
        "shfl_xor_sync",
        "ballot_sync",
        "all_sync",
        "any_sync",
        "eq_sync",
        "match_any_sync",
        "match_all_sync",
        "activemask",
        "lanemask_lt",
        "popc",
        "clz",
        "ffs",
        "brev",
        "fma",
        "cbrt",
        "selp",
        "to_device",
        "device_array",
        "device_array_like",
        "pinned_array",
        "synchronize",
    }
)
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
_XYZ = frozenset({"x", "y", "z"})
NAMES = {"numpy": _NUMPY, "numba": _SCALARS | {"cuda"}, "numba.cuda": _CUDA,
         "numba.cuda.shared": frozenset({"array"}), "numba.cuda.local": frozenset({"array"}),
         "numba.cuda.const": frozenset({"array_like"}),
         "numba.cuda.atomic": frozenset({"add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min",
                                         "nanmax", "nanmin", "compare_and_swap", "cas"}),
         "numba.cuda.threadIdx": _XYZ, "numba.cuda.blockIdx": _XYZ, "numba.cuda.blockDim": _XYZ,
         "numba.cuda.gridDim": _XYZ,
         "math": frozenset(n for n in dir(math) if not n.startswith("_"))}
"""``{module or namespace: the names an exercise may import from it, or reach as its attribute}``.
A key is a namespace: a module, or ``cuda.shared`` and its like, which are never values either."""
VALUE_ATTRIBUTES = frozenset({
    # arrays, numpy's and the device's: shape, type and computing methods
    "shape", "size", "ndim", "dtype", "itemsize", "nbytes", "strides", "T", "real", "imag", "flat", "all", "any",
    "argmax", "argmin", "argsort", "astype", "clip", "conj", "conjugate", "copy", "cumprod", "cumsum", "diagonal",
    "dot", "fill", "flatten", "item", "max", "mean", "min", "nonzero", "prod", "ravel", "repeat", "reshape", "round",
    "searchsorted", "sort", "squeeze", "std", "sum", "swapaxes", "take", "tolist", "trace", "transpose", "var", "view",
    "copy_to_host", "copy_to_device", "is_c_contiguous", "is_f_contiguous", "split",
    # dtypes, iinfo and finfo, ufuncs
    "kind", "char", "name", "type", "bits", "eps", "tiny", "resolution", "smallest_normal", "reduce", "accumulate",
    "outer", "at", "reduceat", "identity", "nin", "nout",
    # numbers, grid indices
    "bit_length", "bit_count", "is_integer", "as_integer_ratio", "numerator", "denominator", "x", "y", "z",
    # lists, tuples, dicts, sets, strings, exceptions
    "append", "extend", "insert", "pop", "remove", "index", "count", "reverse", "clear", "get", "keys", "values",
    "items", "setdefault", "update", "add", "discard", "union", "intersection", "difference", "join", "strip",
    "lstrip", "rstrip", "startswith", "endswith", "replace", "lower", "upper", "args",
    # what the workbook's calls in the exercises return: kstep.levels(n, L)
    "sizes", "offsets", "length", "top",
})
"""The attributes an exercise may read of a value (anything that is not a module or a namespace)."""
EXERCISE_FORBIDS = {
    "01.serial-scan": (
        {"cumsum", "cumulative_sum", "accumulate", "cumprod"},
        set(),
        "the exercise is the loop itself: np.cumsum and ufunc.accumulate do the scan for you",
    ),
    "09.rank-two-update": (
        {"outer", "einsum", "matmul", "dot", "tensordot", "inner", "kron"},
        {ast.MatMult},
        "the update is the kernel's work: a numpy expression on the host does it without the kernel",
    ),
    "11.compact": (
        {"nonzero", "flatnonzero", "where", "compress", "extract", "argwhere", "take", "put", "place", "putmask"},
        {"index"},
        "the compaction is the kernel's scatter: a boolean or array index, or np.nonzero, "
        "compacts on the host without it (index only with constants outside a kernel)",
    ),
}
"""``{exercise id: (attribute or function names, operators or "index", why)}``: what does an
exercise's work for it. ``"index"`` forbids a subscript by anything but a constant outside kernels."""
SAFE_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "complex", "divmod", "enumerate", "float", "int", "isinstance", "len", "list",
    "max", "min", "pow", "range", "reversed", "round", "slice", "sorted", "str", "sum", "tuple", "zip", "print",
    "set", "frozenset", "dict", "map", "filter", "iter", "next", "repr", "ord", "chr", "hex", "bin", "oct",
    "True", "False", "None", "ArithmeticError", "AssertionError", "IndexError", "NotImplementedError",
    "RuntimeError", "TypeError", "ValueError", "ZeroDivisionError", "KeyError", "OverflowError", "Exception",
})
BUILTIN_NAMES = frozenset(dir(builtins))
# What IPython puts in a notebook's namespace: a shell, the history, the exit of the kernel.
IPYTHON_NAMES = frozenset({"get_ipython", "In", "Out", "exit", "quit", "display"})
