"""Linear recurrences, IIR filters and a tridiagonal solve: scans of small maps.

``x[i] = a[i] x[i-1] + b[i]`` looks sequential, but each step is the affine map
``f_i(x) = a_i x + b_i``, and affine maps compose associatively: doing ``p`` then ``q`` is the
map ``x -> q_a (p_a x + p_b) + q_b = (p_a q_a) x + (q_a p_b + q_b)``, again affine. A scan of
the pairs ``(a_i, b_i)`` under this composition gives every ``f_i o ... o f_0`` at once, and its
``b`` field is ``x[i]`` for ``x[-1] = 0``. Composition is associative because composition of
functions always is; it is not commutative, so the order of the operands matters (the scans
keep it). A recurrence of order 2 is the same with 2x2 matrices (:func:`affine2`), and so is the
*shooting* solve of a tridiagonal system (:func:`tridiagonal_scan`): its rows give x_(i+1) from
x_i and x_(i-1), so a scan runs the three-term recurrence forward from an unknown x_0. That is
the unstable way to solve a tridiagonal system by scans: the recurrence has a growing solution,
and the scan's numbers grow with it (see :func:`tridiagonal_scan`). Stone's method (1973),
:mod:`.stone`, scans the pivots of the LU factorization instead and stays accurate.

Segmented scans, the same idea with (flag, value) pairs, are in :mod:`.segmented`.
"""

import numpy as np
from numba import cuda

from ..core.inputs import as_input, same_length
from ..core.streams import as_stream, launch_stream
from ..scans.api import scan


@cuda.jit(device=True)
def affine(p, q):
    """Apply ``p`` then ``q``, for maps ``x -> a x + b`` stored as ``(a, b)``."""
    return (p[0] * q[0], q[0] * p[1] + q[1])


AFFINE_IDENTITY = (1.0, 0.0)


@cuda.jit(device=True)
def affine2(p, q):
    """Apply ``p`` then ``q``, for 2-D maps ``s -> M s + v`` stored as ``(M00, M01, M10, M11, v0, v1)``.

    The result is ``(Mq Mp, Mq vp + vq)``: a product of 3x3 matrices ``[[M, v], [0, 1]]``.
    """
    return (
        q[0] * p[0] + q[1] * p[2],
        q[0] * p[1] + q[1] * p[3],
        q[2] * p[0] + q[3] * p[2],
        q[2] * p[1] + q[3] * p[3],
        q[0] * p[4] + q[1] * p[5] + q[4],
        q[2] * p[4] + q[3] * p[5] + q[5],
    )


AFFINE2_IDENTITY = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def _check_floats(*arrays, names):
    dtypes = {np.dtype(a.dtype) for a in arrays}
    if len(dtypes) != 1 or dtypes.pop() not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(
            f"{', '.join(names)} must be float32 or float64, all of one dtype; "
            f"got {', '.join(np.dtype(a.dtype).name for a in arrays)}"
        )


def linear_recurrence(a, b, x0=0.0, *, out=None, stream=None):
    """``x[i] = a[i] * x[i-1] + b[i]`` for i = 0..n-1, with ``x[-1] = x0``, by a scan of affine maps.

    Parameters
    ----------
    a, b : numpy.ndarray or device array, 1-D, one length and kind, float32 or float64
        Never modified.
    x0 : float
    out : array, optional
        Where ``x`` goes: of ``b``'s kind, length and dtype.
    stream : optional
        The stream the scan is queued on (any form :func:`prefixsum.scan` takes). None: numba's
        default stream.

    Returns
    -------
    numpy.ndarray or numba device array
        ``x``, the kind of ``b``.

    Examples
    --------
    >>> import numpy as np
    >>> linear_recurrence(np.full(4, 0.5), np.ones(4))
    array([1.   , 1.5  , 1.75 , 1.875])
    """
    (a, a_on_device), (b, on_device) = as_input(a, "a"), as_input(b, "b")
    _check_floats(a, b, names=("a", "b"))
    same_length([a, b], ["a", "b"])
    if a_on_device != on_device:
        raise ValueError("a and b must be both numpy arrays or both device arrays")
    where = as_stream(stream)
    if x0 != 0 and b.shape[0]:
        b = _fold_start(a, b, x0, on_device, where)
    _, x = scan((a, b), affine, identity=AFFINE_IDENTITY, out=None if out is None else (None, out), stream=where)
    return x


def _fold_start(a, b, x0, on_device, stream):
    """``b`` with ``x[-1] = x0`` folded into its first map: ``b[0] + a[0] x0`` (a copy; the caller's is untouched)."""
    if not on_device:
        folded = np.array(b, copy=True)
        folded[0] = folded[0] + a[0] * x0
        return folded
    on = launch_stream(stream)
    first = np.empty(2, b.dtype)
    a[:1].copy_to_host(first[:1], stream=on)
    b[:1].copy_to_host(first[1:], stream=on)
    stream.synchronize()
    folded = cuda.device_array_like(b)
    folded.copy_to_device(b, stream=on)
    folded[:1].copy_to_device(np.array([first[1] + first[0] * x0], b.dtype), stream=on)
    return folded


def lfilter(b, a, x, *, stream=None):
    """The IIR filter of :func:`scipy.signal.lfilter` with ``len(a) <= 3``, its feedback by a scan.

    ``a[0] y[n] = b[0] x[n] + ... + b[M] x[n-M] - a[1] y[n-1] - a[2] y[n-2]``, zero initial state.
    The feed-forward part is a convolution (numpy); the feedback of order 1 is a scan of affine
    maps, of order 2 a scan of 2-D affine maps (:func:`affine2`).

    Parameters
    ----------
    b, a : array_like
        Numerator and denominator; ``a[0] != 0``, at most 3 denominator coefficients.
    x : numpy.ndarray, 1-D, float64 or float32
    stream : optional
        The stream the scan is queued on (any form :func:`prefixsum.scan` takes); the result
        waits for it only.

    Returns
    -------
    numpy.ndarray of x's dtype
    """
    b, a, x = np.asarray(b, np.float64), np.asarray(a, np.float64), np.asarray(x)
    if not 1 <= len(a) <= 3 or a[0] == 0:
        raise ValueError(f"a must have 1 to 3 coefficients with a[0] != 0; got {a.tolist()}")
    _check_floats(x, names=("x",))
    b, a = b / a[0], a / a[0]
    n = len(x)
    forward = np.convolve(x.astype(np.float64), b)[:n].astype(x.dtype)
    if len(a) == 1 or not np.any(a[1:]):
        return forward
    if len(a) == 2:
        return linear_recurrence(np.full(n, -a[1], x.dtype), forward, stream=stream)
    zeros = np.zeros(n, x.dtype)
    maps = (np.full(n, -a[1], x.dtype), np.full(n, -a[2], x.dtype), np.ones(n, x.dtype), zeros, forward, zeros)
    return scan(maps, affine2, identity=AFFINE2_IDENTITY, stream=stream)[4]


def tridiagonal_scan(a, b, c, d, *, stream=None):
    """Solve ``a_i x_(i-1) + b_i x_i + c_i x_(i+1) = d_i`` by shooting, a scan of 3x3 matrices (unstable).

    Row i gives ``x_(i+1) = (d_i - a_i x_(i-1) - b_i x_i) / c_i``: the state ``(x_(i+1), x_i)`` is
    an affine map of ``(x_i, x_(i-1))``. The scan of those maps (:func:`affine2`) expresses every
    x_i as ``alpha_i x_0 + beta_i``; the last row then fixes x_0. O(n) work and O(log n) depth,
    but it solves a boundary-value problem as an initial-value one. The homogeneous recurrence
    ``c_i x_(i+1) + b_i x_i + a_i x_(i-1) = 0`` has two independent solutions; for a diagonally
    dominant matrix one grows by about ``|b_i / c_i|`` a row and the other decays. ``alpha`` is
    the solution started from ``x_0 = 1``, dominated by the growing one, and so is ``beta``; the
    true x stays of the size of ``d``, so ``x_i = alpha_i x_0 + beta_i`` is a difference of two
    numbers about ``prod |b_j / c_j|`` times larger than itself. Their rounding errors (a few eps
    of their size) become the error of x_i: it grows geometrically with n until the result is
    useless, and once ``alpha`` overflows it is ``inf - inf = NaN``. :func:`.stone.stone_solve`
    scans the LU pivots instead, :func:`prefixsum.tridiag.solve` eliminates; neither grows.

    Parameters
    ----------
    a, b, c, d : numpy.ndarray, 1-D, one length n >= 1, float32 or float64
        ``a[0]`` and ``c[-1]`` lie outside the matrix and are ignored; ``c[:-1]`` must be nonzero.
    stream : optional
        The stream the scan is queued on (any form :func:`prefixsum.scan` takes); the result
        waits for it only.

    Returns
    -------
    numpy.ndarray
        x.
    """
    a, b, c, d = (np.asarray(v) for v in (a, b, c, d))
    _check_floats(a, b, c, d, names=("a", "b", "c", "d"))
    n = len(d)
    if not n or any(len(v) != n for v in (a, b, c)):
        raise ValueError(f"a, b, c, d must have one length n >= 1; got {[len(v) for v in (a, b, c, d)]}")
    if not np.all(c[:-1]):
        raise ValueError("c[:-1] must be nonzero: each row must give x_(i+1)")
    if n == 1:
        return d / b
    a = a.copy()
    a[0] = 0  # x_(-1) does not exist
    dtype, rows = d.dtype, slice(0, n - 1)
    zeros = np.zeros(n - 1, dtype)
    maps = (
        (-b[rows] / c[rows]).astype(dtype),
        (-a[rows] / c[rows]).astype(dtype),
        np.ones(n - 1, dtype),
        zeros,
        (d[rows] / c[rows]).astype(dtype),
        zeros,
    )
    m00, _, m10, _, v0, v1 = scan(maps, affine2, identity=AFFINE2_IDENTITY, stream=stream)
    # The last prefix maps (x_0, 0) to (x_(n-1), x_(n-2)); the last row fixes x_0.
    x0 = (d[-1] - a[-1] * v1[-1] - b[-1] * v0[-1]) / (a[-1] * m10[-1] + b[-1] * m00[-1])
    return np.concatenate(([x0], m00 * x0 + v0)).astype(dtype)
