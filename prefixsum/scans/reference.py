"""Sequential scans: the truth every kernel is tested against.

Plain loops, as in seed 002 (``partial_sum_seq``) and seed 004 (``calcPrefixSums``), written to
be read. Integers wrap around exactly as numpy's arithmetic in that dtype does; floats are
accumulated in the input's dtype by :func:`scan` and in float64 by :func:`scan_float64`, which
the tests use as the reference for float kernels.
"""
import numpy as np

from .ops import check_dtype, check_op, host_ufunc, identity


def partial_sums(x):
    """Seed 002's ``partial_sum_seq`` on a copy: ``s[i] = x[0] + ... + x[i]``."""
    s = list(x)
    for i in range(1, len(s)):
        s[i] += s[i - 1]
    return s


def exclusive_partial_sums(x):
    """Seed 004's ``calcPrefixSums``: ``s[0] = 0``, ``s[i] = x[0] + ... + x[i-1]``."""
    s = [0] * len(x)
    for i in range(1, len(x)):
        s[i] = s[i - 1] + x[i - 1]
    return s


def scan(x, op="add", *, inclusive=True, reverse=False):
    """The scan of ``x`` by a sequential loop, in ``x``'s dtype.

    Parameters
    ----------
    x : array_like, 1-D
        Input; one of the dtypes in :data:`prefixsum.scans.ops.DTYPES`.
    op : {"add", "mul", "max", "min"}
    inclusive : bool
        Element i combines ``x[0..i]``; if False, ``x[0..i-1]`` and element 0 is the identity.
    reverse : bool
        Suffix scan: element i combines ``x[i..n-1]`` (or ``x[i+1..n-1]`` when exclusive).

    Returns
    -------
    numpy.ndarray of ``x``'s dtype.
    """
    x = np.asarray(x)
    check_op(op)
    dtype = check_dtype(x.dtype)
    combine = host_ufunc(op)
    order = range(len(x) - 1, -1, -1) if reverse else range(len(x))
    out = np.empty(len(x), dtype)
    acc = identity(op, dtype)
    with np.errstate(over="ignore"):
        for i in order:
            if inclusive:
                acc = combine(acc, x[i])
                out[i] = acc
            else:
                out[i] = acc
                acc = combine(acc, x[i])
    return out


def scan_float64(x, op="add", *, inclusive=True, reverse=False):
    """:func:`scan` of ``x`` converted to float64: the reference for float32 and float64 kernels."""
    return scan(np.asarray(x, dtype=np.float64), op, inclusive=inclusive, reverse=reverse)


def accumulate(x, op="add", *, inclusive=True, reverse=False):
    """:func:`scan` by numpy's ``ufunc.accumulate``: the same values, without a Python loop.

    ``accumulate`` combines left to right one element at a time, as :func:`scan`'s loop does,
    so floats round alike and integers wrap alike; for arrays of millions of elements (the
    benchmarks check results up to 2^28).
    """
    x = np.asarray(x)
    check_op(op)
    dtype = check_dtype(x.dtype)
    if reverse:
        return accumulate(x[::-1], op, inclusive=inclusive)[::-1]
    out = np.empty(len(x), dtype)
    with np.errstate(over="ignore"):
        if inclusive:
            host_ufunc(op).accumulate(x, dtype=dtype, out=out)
        elif len(x):
            out[0] = identity(op, dtype)
            host_ufunc(op).accumulate(x[:-1], dtype=dtype, out=out[1:])
    return out


def tolerance(x, op="add", *, inclusive=True, reverse=False):
    """Per-element absolute tolerance for a float scan of ``x`` against :func:`scan_float64`.

    A scan in floating point differs from the exact result by at most about (steps) x eps x the
    running sum of magnitudes; the steps of a parallel scan grow like log2(n), which 8 + 2 log2 n
    bounds with room to spare. For add the running sum is ``scan(|x|)``; for mul the magnitude is
    the running product itself; max and min are exact. Integer dtypes get zero tolerance.
    """
    x = np.asarray(x)
    dtype = check_dtype(x.dtype)
    if dtype.kind != "f" or op in ("max", "min"):
        return np.zeros(len(x))
    steps = 8 + 2 * np.log2(max(len(x), 2))
    if op == "add":
        magnitude = accumulate(np.abs(x).astype(np.float64), "add", inclusive=inclusive, reverse=reverse)
    else:
        magnitude = np.abs(accumulate(x.astype(np.float64), "mul", inclusive=inclusive, reverse=reverse))
        steps = steps * max(len(x), 1) ** 0.5
    return steps * np.finfo(dtype).eps * magnitude
