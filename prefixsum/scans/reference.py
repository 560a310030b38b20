"""Sequential scans: the truth every kernel is tested against.

Two kinds of code give the same answers. The loops -- :func:`partial_sums` (the partial-sum
notebook's ``partial_sum_seq``), :func:`exclusive_partial_sums` (the lab sheet's ``calcPrefixSums``) and
:func:`scan_loop` -- are written to be read, and the notebooks show them. :func:`scan`, which the
tests, the demo and the checker use, runs the same sequential loop inside numpy's ufunc
``accumulate`` (``np.add.accumulate`` and friends, in C), thousands of times faster: the demo
checks 2^22 elements per row on a GPU in milliseconds instead of minutes. The tests hold the
two to the same results, bit for bit.

Integers wrap around exactly as numpy's arithmetic in that dtype does; floats are accumulated in
the input's dtype by :func:`scan` and in float64 by :func:`scan_float64`, which the tests use as
the reference for float kernels. max and min propagate NaN as ``np.maximum.accumulate`` does,
and inf + -inf is NaN, as in numpy; neither prints numpy's RuntimeWarning (a GPU never warns).
Arrays in the other byte order are accepted (numpy's ``cumsum`` accepts them) and the result is
in this machine's byte order, of the same kind and width.
"""

import numpy as np

from ..core.arithmetic import quiet_arithmetic
from .ops import check_dtype, check_op, host_ufunc, identity, native


def partial_sums(x):
    """``partial_sum_seq`` of the notebook of partial-sum experiments, on a copy: ``s[i] = x[0] + ... + x[i]``."""
    s = list(x)
    for i in range(1, len(s)):
        s[i] += s[i - 1]
    return s


def exclusive_partial_sums(x):
    """``calcPrefixSums`` of the lab sheet on prefix sums: ``s[0] = 0``, ``s[i] = x[0] + ... + x[i-1]``."""
    s = [0] * len(x)
    for i in range(1, len(x)):
        s[i] = s[i - 1] + x[i - 1]
    return s


def _prepare(x, op):
    """``(x, dtype)``: ``x`` as a native numpy array of a supported dtype, or the API's errors."""
    x = native(np.asarray(x))
    check_op(op)
    return x, check_dtype(x.dtype)


def scan_loop(x, op="add", *, inclusive=True, reverse=False):
    """The scan of ``x`` by a sequential loop, in ``x``'s dtype: :func:`scan` written to be read.

    Parameters and result as :func:`scan`, which gives the same values, much faster.
    """
    x, dtype = _prepare(x, op)
    combine = host_ufunc(op)
    order = range(len(x) - 1, -1, -1) if reverse else range(len(x))
    out = np.empty(len(x), dtype)
    acc = identity(op, dtype)
    with quiet_arithmetic():
        for i in order:
            if inclusive:
                acc = combine(acc, x[i])
                out[i] = acc
            else:
                out[i] = acc
                acc = combine(acc, x[i])
    return out


def scan(x, op="add", *, inclusive=True, reverse=False):
    """The scan of ``x``, computed sequentially in ``x``'s dtype (numpy's ufunc ``accumulate``).

    The same values as :func:`scan_loop`: the accumulation starts from the identity, as the loop
    does, so that even the sign of a zero sum agrees.

    Parameters
    ----------
    x : array_like, 1-D
        Input; one of the dtypes in :data:`prefixsum.ops.DTYPES`, in either byte order.
    op : {"add", "mul", "max", "min"}
    inclusive : bool
        Element i combines ``x[0..i]``; if False, ``x[0..i-1]`` and element 0 is the identity.
    reverse : bool
        Suffix scan: element i combines ``x[i..n-1]`` (or ``x[i+1..n-1]`` when exclusive).

    Returns
    -------
    numpy.ndarray of ``x``'s dtype, in this machine's byte order.
    """
    x, dtype = _prepare(x, op)
    ordered = x[::-1] if reverse else x
    with quiet_arithmetic():
        # accumulate over (identity, x0, x1, ...): element k + 1 combines x[0..k], element k x[0..k-1]
        running = host_ufunc(op).accumulate(np.concatenate((np.full(1, identity(op, dtype)), ordered)), dtype=dtype)
    out = running[1:] if inclusive else running[:-1]
    return np.ascontiguousarray(out[::-1] if reverse else out)


def scan_float64(x, op="add", *, inclusive=True, reverse=False):
    """:func:`scan` of ``x`` converted to float64: the reference for float32 and float64 kernels."""
    return scan(np.asarray(x, dtype=np.float64), op, inclusive=inclusive, reverse=reverse)


def tolerance(x, op="add", *, inclusive=True, reverse=False):
    """Per-element absolute tolerance for a float scan of ``x`` against :func:`scan_float64`.

    A scan in floating point differs from the exact result by at most about (steps) x eps x the
    running sum of magnitudes; the steps of a parallel scan grow like log2(n), which 8 + 2 log2 n
    bounds with room to spare. For add the running sum is ``scan(|x|)``; for mul the magnitude is
    the running product itself; max and min are exact. Integer dtypes get zero tolerance.
    """
    x = native(np.asarray(x))
    dtype = check_dtype(x.dtype)
    if dtype.kind != "f" or op in ("max", "min"):
        return np.zeros(len(x))
    steps = 8 + 2 * np.log2(max(len(x), 2))
    if op == "add":
        magnitude = scan(np.abs(x).astype(np.float64), "add", inclusive=inclusive, reverse=reverse)
    else:
        magnitude = np.abs(scan(x.astype(np.float64), "mul", inclusive=inclusive, reverse=reverse))
        steps = steps * max(len(x), 1) ** 0.5
    return steps * np.finfo(dtype).eps * magnitude
