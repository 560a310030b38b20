"""Scans with an operator of the user's own: a numba device function on tuples of fields.

Any associative operator with an identity can ride on a scan (Blelloch 1990). The user gives
``op``, a ``cuda.jit(device=True)`` function of two elements returning one, and ``identity``.
An element is a tuple of fields held as a structure of arrays: ``x = (a, b)`` is the sequence
of pairs ``(a[i], b[i])``, each field with a dtype of its own, and ``op`` takes and returns
tuples. A single array is a sequence of scalars, and ``op`` takes and returns scalars.
:func:`prefixsum.scan` takes a user operator (its plan, :class:`prefixsum.scans.api.ScanPlan`,
checks it here and launches the algorithm through the registry).

A tuple element needs one array per field in memory and one load, store and shuffle per field.
Every algorithm that carries a user operator (``Algorithm.fields``) compiles its one readable
source for tuples by rewriting its syntax tree (:mod:`prefixsum.primitives.fields`): the fast
scans (``lookback``, ``hierarchical``) and the classic ones of chapters 01-04 (``ladder``,
``hillis_steele``, ``blelloch``, whose tile kernels and carries between tiles are those of
:mod:`prefixsum.scans.tiles`); ``"auto"`` picks ``lookback``. This module checks the operator
and its identity, says which algorithms carry one, and holds the sequential reference.
"""

import numpy as np

from ..core.arithmetic import quiet_arithmetic
from ..core.inputs import as_input, same_length
from ..core.numba_gpu import python_function
from ..core.registry import Capability
from ..primitives.fields import Operator  # noqa: F401  (what a plan's operator is: user_ops.Operator)
from .ops import check_dtype
from .registry import ALGORITHMS, lookup


def carriers():
    """The registered algorithms that carry a user operator, in registration order."""
    return [a for a in ALGORITHMS.values() if a.fields]


def choose(algorithm, n=0):
    """The :class:`~prefixsum.scans.registry.Algorithm` for a user operator: "auto" is the carrier
    the registry chooses for ``n`` elements (``lookback``; warp-level ones are passed over where
    warp intrinsics are missing: numba's stock simulator); another name must carry one."""
    return lookup(algorithm, n, None, Capability.USER_OPERATOR)


def run(xs, outs, operator, inclusive, reverse, algorithm, *, stream=None, **options):
    """Scan the device arrays ``xs`` (one per field, length n >= 1) into ``outs`` with ``algorithm``,
    which compiles its one source for the operator's tuples, on ``stream``."""
    algorithm.run(tuple(xs), tuple(outs), operator, inclusive, reverse, stream=stream, **options)


def kernels(operator, inclusive, reverse, algorithm, **options):
    """Every ``(dispatcher, argtypes)`` that :func:`run` may launch, for compiling to PTX."""
    options = algorithm.resolve_options(options)
    yield from algorithm.kernels(operator, operator.dtypes, inclusive, reverse, **options)


def _fields(x):
    """``(fields, bare)``: the arrays of ``x`` (one array or a non-empty tuple of them)."""
    if isinstance(x, tuple):
        if not x:
            raise ValueError("x is an empty tuple; give one array or a tuple of equal-length 1-D arrays")
        return list(x), False
    if isinstance(x, list):
        raise TypeError("x is a list; give a tuple of arrays (a structure of arrays), or one array")
    return [x], True


def check_fields(fields):
    """The fields (arrays, a user operator's tuple ``x``) as numpy (native order) or numba device
    arrays (:func:`prefixsum.core.inputs.as_input`), all of one kind and one length, and whether
    they are on the device."""
    checked, kinds = [], []
    for k, field in enumerate(fields):
        try:
            array, on_device = as_input(field, f"x[{k}]", check=check_dtype)
        except TypeError as error:
            raise TypeError(f"x[{k}]: {error}") from None
        checked.append(array)
        kinds.append(on_device)
    if len(set(kinds)) > 1:
        raise ValueError(
            "the fields of x must be all numpy arrays or all device arrays; got "
            + ", ".join("device" if d else "host" for d in kinds)
        )
    same_length(checked, [f"x[{k}]" for k in range(len(checked))])
    return checked, kinds[0]


def _check_identity(identity, dtypes, bare):
    """The identity as a tuple of numpy scalars of the fields' dtypes, or a ValueError."""
    if identity is None:
        raise ValueError(
            "a user operator needs identity=...: the element e with op(e, x) == x == op(x, e) "
            "(a scalar for one array, a tuple with one value per array of x)"
        )
    values = (identity,) if bare else identity
    if not isinstance(values, tuple) or len(values) != len(dtypes):
        raise ValueError(f"identity must be a tuple of {len(dtypes)} values, one per array of x; got {identity!r}")
    converted = []
    for k, (value, dt) in enumerate(zip(values, dtypes)):
        try:
            with quiet_arithmetic():
                scalar = dt.type(value)
        except (TypeError, ValueError, OverflowError):
            scalar = None
        if scalar is None or (dt.kind in "iu" and scalar != value):
            raise ValueError(f"identity value {value!r} for field {k} cannot be represented in its dtype {dt.name}")
        converted.append(scalar)
    return tuple(converted)


def _check_result_shape(operator):
    """Evaluate op(identity, identity) on the host and check that it returns one element.

    Catches an operator that returns the wrong number of fields before any launch. An operator
    that cannot run on the host (it calls a GPU-only function) is left to the compiler.
    """
    fn = python_function(operator.op)
    try:
        with quiet_arithmetic():
            result = (
                fn(operator.identity[0], operator.identity[0])
                if operator.bare
                else fn(operator.identity, operator.identity)
            )
    except Exception:  # noqa: BLE001  (GPU-only code: the compiler reports it)
        return
    if operator.bare:
        if isinstance(result, tuple):
            raise ValueError(
                f"op takes and returns scalars when x is one array; op(identity, identity) returned {result!r}"
            )
    elif not isinstance(result, tuple) or len(result) != operator.arity:
        raise ValueError(
            f"op must return a tuple of {operator.arity} values, one per array of x; "
            f"op(identity, identity) returned {result!r}"
        )


def operator_for(op, identity, dtypes, bare):
    """Check ``op`` and ``identity`` for fields of ``dtypes`` and return the :class:`Operator`."""
    if python_function(op) is None:
        raise TypeError(
            f"op must be one of 'add', 'mul', 'max', 'min' or a numba CUDA device function "
            f"(decorated with @cuda.jit(device=True)); got {op!r}"
        )
    operator = Operator(op, tuple(dtypes), _check_identity(identity, dtypes, bare), bare)
    _check_result_shape(operator)
    return operator


def reference(x, op, *, identity, inclusive=True, reverse=False):
    """The scan of ``x`` with the user operator ``op``, by a sequential loop on the host.

    Calls ``op``'s Python function element by element, each field cast to its dtype, so that it
    gives what the kernels give up to rounding (the kernels combine in another order). The
    reverse scan is the forward scan of the mirrored sequence: element i is
    ``x[n-1] op ... op x[i]``. Slow (Python): for tests and checks, not for large n.

    Returns
    -------
    numpy.ndarray or tuple of them
        The same structure as ``x``.
    """
    fields, bare = _fields(x)
    arrays, on_device = check_fields(fields)
    if on_device:
        arrays = [a.copy_to_host() for a in arrays]
    operator = operator_for(op, identity, [a.dtype for a in arrays], bare)
    fn = python_function(op)
    n = arrays[0].shape[0]
    outs = [np.empty(n, a.dtype) for a in arrays]
    acc = operator.identity
    with quiet_arithmetic():
        for i in range(n - 1, -1, -1) if reverse else range(n):
            element = tuple(a[i] for a in arrays)
            after = fn(acc[0], element[0]) if bare else fn(acc, element)
            after = tuple(dt.type(v) for dt, v in zip(operator.dtypes, (after,) if bare else after))
            for out, value in zip(outs, after if inclusive else acc):
                out[i] = value
            acc = after
    return outs[0] if bare else tuple(outs)


def random_fields(n, dtypes, rng):
    """Random test elements: one array per dtype, small integers for integer fields, normal for floats.

    Integers lie in [-4, 4] ([0, 8] unsigned) so that sums and products of a few stay exact
    in every dtype; floats are normal(0, 1).
    """
    fields = []
    for dt in map(np.dtype, dtypes):
        if dt.kind == "f":
            fields.append(rng.normal(size=n).astype(dt))
        else:
            fields.append(rng.integers(0 if dt.kind == "u" else -4, 9 if dt.kind == "u" else 5, size=n).astype(dt))
    return tuple(fields)


def float64_copy(x):
    """``x`` (one array or a tuple) with its float fields as float64: the input of a float64 reference."""
    fields, bare = _fields(x)
    copies = [np.asarray(f, np.float64) if np.dtype(f.dtype).kind == "f" else np.asarray(f) for f in fields]
    return copies[0] if bare else tuple(copies)


def wrong_indices(result, expected, *, reverse=False):
    """Indices where some field of ``result`` differs from ``expected`` (same structure), in increasing order.

    Integer fields must match exactly. A float field may differ by ``(8 + 2 log2 n) * eps`` of
    its dtype times the largest magnitude of the reference so far along the scan (at least 1):
    the kernels combine in another order than the sequential reference, and a user operator
    has no running sum of magnitudes to bound the rounding with, so inputs should be of order 1.
    """
    results, _ = _fields(result)
    expecteds, _ = _fields(expected)
    n = np.shape(expecteds[0])[0]
    bad = np.zeros(n, bool)
    steps = 8 + 2 * np.log2(max(n, 2))
    for got, want in zip(results, expecteds):
        got, want = np.asarray(got), np.asarray(want)
        if got.dtype.kind != "f":
            bad |= got != want
            continue
        magnitude = np.abs(want.astype(np.float64))
        running = np.maximum.accumulate(magnitude[::-1])[::-1] if reverse else np.maximum.accumulate(magnitude)
        allowed = steps * np.finfo(got.dtype).eps * np.maximum(running, 1.0)
        with np.errstate(invalid="ignore"):
            close = np.abs(got.astype(np.float64) - want) <= allowed
        bad |= ~(close | (got == want))
    return np.flatnonzero(bad)
