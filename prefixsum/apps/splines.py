"""Cubic splines: a tridiagonal solve for the second derivatives, a scan for the antiderivative.

A cubic spline through ``(x_i, y_i)``, i = 0..n-1, is a cubic on each of the n - 1 pieces, with
continuous first and second derivatives. With ``M_i`` its second derivative at ``x_i`` and
``h_i = x_(i+1) - x_i``, continuity of the first derivative at the interior knots gives

    h_(i-1) M_(i-1) + 2 (h_(i-1) + h_i) M_i + h_i M_(i+1) = 6 (D_i - D_(i-1)),  D_i = (y_(i+1) - y_i) / h_i,

a strictly diagonally dominant tridiagonal system, on which every method of :func:`prefixsum.tridiag.solve`
is stable: the fastest measured for its size solves it (:func:`prefixsum.tridiag.registry.fastest`).
A natural spline has ``M_0 = M_(n-1) = 0``; a clamped one prescribes the first derivative at
both ends, which gives the first and last rows. Piece i is then, in ``s = x - x_i``,

    y_i + (D_i - h_i (2 M_i + M_(i+1)) / 6) s + M_i / 2 s^2 + (M_(i+1) - M_i) / (6 h_i) s^3.

:class:`PiecewisePolynomial` stores the coefficients as scipy's ``PPoly`` does (``c[k, i]``,
highest power first). Its antiderivative integrates every piece from its left end, and the
constant of piece i is the integral over all pieces before it: an exclusive scan (add) of the
pieces' integrals, where CuPy's ``PPoly.antiderivative`` runs one thread along the pieces.
"""

import numpy as np
from numba import cuda

from ..core.inputs import as_input
from ..core.streams import as_stream, launch_stream
from ..scans.api import exclusive_scan
from ..tridiag import solve
from ..tridiag.registry import fastest
from ._arrays import back, device_copy, grid


@cuda.jit
def evaluate_pieces(breaks, c, points, out):
    """``out[j]``: the piecewise polynomial at ``points[j]``; a binary search, then Horner's rule.

    Points outside ``[breaks[0], breaks[-1]]`` use the first or last piece (extrapolation, as
    scipy's default).
    """
    j = cuda.grid(1)
    if j < points.shape[0]:
        x = points[j]
        lo = 0
        hi = breaks.shape[0] - 2
        while lo < hi:  # the last piece whose left end is <= x
            mid = (lo + hi + 1) // 2
            if breaks[mid] <= x:
                lo = mid
            else:
                hi = mid - 1
        s = x - breaks[lo]
        value = c[0, lo]
        for k in range(1, c.shape[0]):
            value = value * s + c[k, lo]
        out[j] = value


class PiecewisePolynomial:
    """Polynomials on the pieces ``[x[i], x[i+1]]``, in the local variable ``s = t - x[i]``.

    Parameters
    ----------
    x : numpy.ndarray, shape (m + 1,)
        Increasing breakpoints.
    c : numpy.ndarray, shape (k + 1, m)
        ``c[j, i]`` multiplies ``s ** (k - j)`` on piece i (scipy's ``PPoly`` layout).
    """

    def __init__(self, x, c):
        self.x = np.asarray(x, np.float64)
        self.c = np.asarray(c, np.float64)
        if self.c.ndim != 2 or self.c.shape[1] != len(self.x) - 1:
            raise ValueError(f"c must have shape (k + 1, {len(self.x) - 1}); got {self.c.shape}")

    def __call__(self, t, nu=0, *, stream=None):
        """The polynomial (or its ``nu``-th derivative) at the points ``t``, on the device.

        ``t`` a numpy array (any real dtype, read as float64) gives a numpy array; a device array
        gives a device array. ``stream``: the stream the evaluation is queued on (any form
        :func:`prefixsum.scan` takes; a numpy result waits for it only).
        """
        poly = self
        for _ in range(nu):
            poly = poly.derivative()
        where = as_stream(stream)
        points, on_device = as_input(t, "t")
        points = device_copy(points if on_device else np.asarray(points, np.float64), on_device, where)
        out = cuda.device_array(points.shape[0], np.float64)
        if points.shape[0]:
            on = launch_stream(where)
            evaluate_pieces[grid(points.shape[0]) + (on,)](
                cuda.to_device(poly.x, stream=on), cuda.to_device(np.ascontiguousarray(poly.c), stream=on), points, out
            )
        return back(out, on_device, where)

    def derivative(self):
        """The derivative: each coefficient times its power, one degree less."""
        k = self.c.shape[0] - 1
        if k == 0:
            return PiecewisePolynomial(self.x, np.zeros_like(self.c))
        powers = np.arange(k, 0, -1)[:, None]
        return PiecewisePolynomial(self.x, self.c[:-1] * powers)

    def antiderivative(self):
        """The antiderivative that is 0 at ``x[0]``: pieces integrated, constants by an exclusive scan.

        Piece i's constant is the integral of all pieces before it, ``exclusive_scan`` of the
        pieces' own integrals (float64 add), so the result is continuous.
        """
        k = self.c.shape[0] - 1
        powers = np.arange(k + 1, 0, -1)[:, None]
        integrated = self.c / powers
        h = np.diff(self.x)
        piece_integrals = np.sum(integrated * h**powers, axis=0)
        constants = exclusive_scan(piece_integrals)
        return PiecewisePolynomial(self.x, np.vstack([integrated, constants]))

    def integrate(self, a, b):
        """The integral from ``a`` to ``b``."""
        antiderivative = self.antiderivative()
        low, high = antiderivative(np.array([a, b], np.float64))
        return high - low


def cubic_spline(x, y, bc_type="natural", *, stream=None):
    """The cubic spline through ``(x[i], y[i])``; coefficients from a tridiagonal solve (the fastest method measured).

    Parameters
    ----------
    x : numpy.ndarray, 1-D, n >= 2
        Strictly increasing knots.
    y : numpy.ndarray, 1-D, length n
    bc_type : "natural" or ((1, left_slope), (1, right_slope))
        Natural: zero second derivative at both ends. Clamped: the first derivative given at both
        ends, in scipy's notation.
    stream : optional
        The stream the solve is queued on (any form :func:`prefixsum.scan` takes); the call waits
        for it only (the coefficients are a numpy array).

    Returns
    -------
    PiecewisePolynomial
        Cubic pieces, as ``scipy.interpolate.CubicSpline(x, y, bc_type=...)``'s ``c``.

    Examples
    --------
    >>> import numpy as np
    >>> spline = cubic_spline(np.arange(4.0), np.arange(4.0) ** 2)
    >>> float(spline(np.array([1.5]))[0])
    2.2
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.ndim != 1 or x.shape != y.shape or len(x) < 2:
        raise ValueError(f"x and y must be 1-D, of one length n >= 2; got shapes {x.shape} and {y.shape}")
    h = np.diff(x)
    if not np.all(h > 0):
        raise ValueError("x must be strictly increasing")
    n = len(x)
    slope = np.diff(y) / h
    a, b, c, d = np.zeros(n), np.ones(n), np.zeros(n), np.zeros(n)
    a[1:-1], b[1:-1], c[1:-1] = h[:-1], 2 * (h[:-1] + h[1:]), h[1:]
    d[1:-1] = 6 * np.diff(slope)
    if bc_type != "natural":
        try:
            (left_order, left), (right_order, right) = bc_type
        except (TypeError, ValueError):
            left_order = None
        if left_order != 1 or right_order != 1:
            raise ValueError(f"bc_type must be 'natural' or ((1, left_slope), (1, right_slope)); got {bc_type!r}")
        b[0], c[0], d[0] = 2 * h[0], h[0], 6 * (slope[0] - left)
        a[-1], b[-1], d[-1] = h[-1], 2 * h[-1], 6 * (right - slope[-1])
    m = solve(a, b, c, d, method=fastest(1, n, np.float64, pivots=False).name, stream=stream)
    coefficients = np.vstack([(m[1:] - m[:-1]) / (6 * h), m[:-1] / 2, slope - h * (2 * m[:-1] + m[1:]) / 6, y[:-1]])
    return PiecewisePolynomial(x, coefficients)
