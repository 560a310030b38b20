"""Stone's tridiagonal solve (1973): the LU factorization and both triangular solves as scans.

``a_i x_(i-1) + b_i x_i + c_i x_(i+1) = d_i`` is ``A = L U`` without pivoting, ``L`` unit lower
bidiagonal (``l_i`` below the diagonal), ``U`` upper bidiagonal (pivots ``u_i`` on the diagonal,
``c_i`` above). Gaussian elimination computes them one after the other::

    u_0 = b_0,   u_i = b_i - a_i c_(i-1) / u_(i-1),   l_i = a_i / u_(i-1),

a sequential recurrence. Stone's observation (H. S. Stone, "An efficient parallel algorithm for
the solution of a tridiagonal linear system", J. ACM 20(1), 1973): ``u_i = q_i / q_(i-1)`` for
the leading principal minors ``q_i = b_i q_(i-1) - a_i c_(i-1) q_(i-2)``, a *linear* recurrence
of order 2, so ``(q_i, q_(i-1)) = M_i (q_(i-1), q_(i-2))`` with ``M_i = [[b_i, -a_i c_(i-1)], [1, 0]]``,
and every pivot comes from one prefix product ``M_i ... M_0`` (``M_0 = [[b_0, 0], [1, 0]]``):
a scan of 2x2 matrices. Read on the pivots, ``M_i`` is the Moebius map
``u -> (b_i u - a_i c_(i-1)) / u``, and composing Moebius maps is multiplying their matrices.
Only the direction of a product matters (``u_i`` is the ratio of its first column), so
:func:`mobius` scales each product by a power of two that brings its largest entry into
[0.5, 1): exact, and the products of a long system neither overflow nor underflow (the minors
``q_i`` themselves grow or shrink geometrically). Then ``L y = d`` (``y_i = d_i - l_i y_(i-1)``)
and ``U x = y`` (``x_i = (y_i - c_i x_(i+1)) / u_i``) are first-order linear recurrences, two
scans of affine maps (:func:`affine_segments`), the second one reversed. Three scans in all:
O(n) work, O(log n) depth. A batch is one long sequence: the first row of every system starts a
new product (a flag, as in a segmented scan), so nothing of one system reaches the next.

Stability
---------
No pivoting: Stone's method computes the ``L`` and ``U`` of Gaussian elimination without
pivoting, in another order, so it is meant for the systems where that elimination is stable:
diagonally dominant (``|b_i| > |a_i| + |c_i|``: every ``|l_i| < 1`` and ``|c_i / u_i| < 1``, so
both recurrences contract) and symmetric positive definite ones (positive pivots). Off that
class a small pivot ruins it without an error, as it does every non-pivoting solver of
:mod:`prefixsum.tridiag`; only an exactly zero pivot or a non-finite result raises. Measured on
the simulator against LAPACK (``scipy.linalg.solve_banded``; ``tests/test_stone.py``): on random
diagonally dominant systems and random symmetric positive definite ones ``B B^T`` (``B`` lower
bidiagonal, many rows not dominant), n from 1 to 2^16, float32 and float64 (the tests run
2^16 rows on float64 dominant systems and on float32 positive definite ones), the normwise
backward error ``|A x - d|_inf / (|A|_inf |x|_inf + |d|_inf)`` stays below ``eps`` and the
error below ``0.5 n eps kappa`` (below ``10^-4 n eps kappa`` from n = 1000 on). It is not
as stable as the sequential elimination, though: the pivots come from products of many
matrices, not from the contracting map
``u -> b_i - a_i c_(i-1) / u`` one step at a time, and when the two solutions of the minors'
recurrence grow at nearly the same rate the products' rounding errors move the pivots. On
``tridiag(-1, 2 + delta, -1)``, n = 4096, float64, the pivots' largest relative error was about
60, 5000 and 80000 eps for delta = 1e-2, 1e-4 and 1e-6 (the sequential recurrence: 4, 37 and
10), and the backward error about 8, 1000 and 17000 eps; the error stayed within
``0.003 n eps kappa`` (kappa = 4e2, 4e4, 3e6), the bound the tests hold it to being
``100 n eps kappa``. The products are scaled as they are scanned, a power of two at each combine
(:func:`unit_scale`), so they never overflow: unscaled, the minors ``q_i`` grow or shrink
geometrically and leave the floating-point range after some hundreds of rows.

The *shooting* scan of :func:`.recurrences.tridiagonal_scan`, which runs the three-term
recurrence forward from ``x_0``, is the unstable scan-based solve: its error grows
geometrically with n on these very systems (chapter 11).
"""

import functools
import math

import numpy as np
from numba import cuda, types

from ..core.arithmetic import quiet_arithmetic
from ..core.arrays import result_array
from ..core.streams import as_stream, launch_stream
from ..primitives.ops import numba_type
from ..scans.api import scan
from ..tridiag.checks import check_solution_out, check_systems
from ._arrays import grid

SEGMENT_IDENTITY = (0.0, 1.0, 0.0)
"""The identity of :func:`affine_segments`: no system start, the map ``x -> x``."""

MOBIUS_IDENTITY = (0.0, 1.0, 0.0, 0.0, 1.0)
"""The identity of :func:`mobius`: no system start, the identity matrix."""


@functools.lru_cache(maxsize=None)
def unit_scale(dtype):
    """Device function ``scale(largest)``: the power of two ``2**-e`` that brings ``largest > 0``
    into [0.5, 1), as a ``dtype``; 1 for 0 and for a non-finite ``largest`` (left for the
    failure check). Multiplying by it is exact."""
    element = numba_type(dtype)

    @cuda.jit(device=True)
    def scale(largest):
        if largest > 0 and largest < math.inf:
            _, exponent = math.frexp(largest)
            return element(math.ldexp(1.0, -exponent))
        return element(1.0)

    return scale


@functools.lru_cache(maxsize=None)
def mobius(dtype):
    """The operator of the pivot scan for ``dtype``: apply ``p``, then ``q``.

    Elements are ``(start, m00, m01, m10, m11)``: a 2x2 matrix and whether the element's first
    row starts a system. Composing is the product ``Mq Mp``, scaled by :func:`unit_scale` (the
    map stays the same); an element that starts a system discards what came before it, as a
    segmented scan does. Associative (matrix products are, and a positive scale commutes with
    them); the identity :data:`MOBIUS_IDENTITY` is exact on elements whose largest entry lies in
    [0.5, 1), which :func:`pivot_maps` makes.
    """
    scale = unit_scale(dtype)

    @cuda.jit(device=True)
    def compose(p, q):
        if q[0] != 0:
            return q
        r00 = q[1] * p[1] + q[2] * p[3]
        r01 = q[1] * p[2] + q[2] * p[4]
        r10 = q[3] * p[1] + q[4] * p[3]
        r11 = q[3] * p[2] + q[4] * p[4]
        s = scale(max(max(abs(r00), abs(r01)), max(abs(r10), abs(r11))))
        return (p[0], r00 * s, r01 * s, r10 * s, r11 * s)

    return compose


@cuda.jit(device=True)
def affine_segments(p, q):
    """Apply ``p``, then ``q``, for maps ``x -> a x + b`` stored as ``(start, a, b)``.

    :func:`.recurrences.affine` with a flag: an element that starts a system discards what came
    before it, so no value of one system (not even a NaN of a failed one, which ``0 * NaN``
    would pass on) reaches the next.
    """
    if q[0] != 0:
        return q
    return (p[0], p[1] * q[1], q[1] * p[2] + q[2])


@functools.lru_cache(maxsize=None)
def pivot_maps(dtype):
    """Kernel ``(a, b, c, n, start, m00, m01, m10, m11)``: element i of the pivot scan, for rows
    flattened from systems of ``n``: ``M_i = [[b_i, -a_i c_(i-1)], [1, 0]]``, or
    ``[[b_i, 0], [1, 0]]`` with ``start`` 1 on a system's first row, scaled by :func:`unit_scale`."""
    element = numba_type(dtype)
    scale = unit_scale(dtype)

    @cuda.jit
    def maps(a, b, c, n, start, m00, m01, m10, m11):
        i = cuda.grid(1)
        if i < b.shape[0]:
            first = i % n == 0
            coupling = element(0) if first else -a[i] * c[i - 1]
            s = scale(max(max(abs(b[i]), abs(coupling)), element(1)))
            start[i] = element(1) if first else element(0)
            m00[i] = b[i] * s
            m01[i] = coupling * s
            m10[i] = s
            m11[i] = element(0)

    return maps


@functools.lru_cache(maxsize=None)
def lower_maps(dtype):
    """Kernel ``(a, p00, p10, n, start, lower, pivots)``: from the pivot scan's first columns, the
    pivots ``u_i = p00_i / p10_i`` and ``-l_i = -a_i / u_(i-1)``, the coefficient of the forward
    recurrence ``y_i = d_i - l_i y_(i-1)``; a system's first row starts a segment (``y_0 = d_0``)."""
    element = numba_type(dtype)

    @cuda.jit
    def maps(a, p00, p10, n, start, lower, pivots):
        i = cuda.grid(1)
        if i < p00.shape[0]:
            pivots[i] = p00[i] / p10[i]
            first = i % n == 0
            start[i] = element(1) if first else element(0)
            lower[i] = element(0) if first else -a[i] * p10[i - 1] / p00[i - 1]

    return maps


@functools.lru_cache(maxsize=None)
def upper_maps(dtype):
    """Kernel ``(c, y, pivots, n, start, upper, scaled)``: the maps of ``U x = y`` read backwards,
    ``x_i = -(c_i / u_i) x_(i+1) + y_i / u_i``; a system's last row starts a segment of the
    reverse scan (``x_(n-1) = y_(n-1) / u_(n-1)``)."""
    element = numba_type(dtype)

    @cuda.jit
    def maps(c, y, pivots, n, start, upper, scaled):
        i = cuda.grid(1)
        if i < y.shape[0]:
            last = i % n == n - 1
            start[i] = element(1) if last else element(0)
            upper[i] = element(0) if last else -c[i] / pivots[i]
            scaled[i] = y[i] / pivots[i]

    return maps


@cuda.jit
def flag_failures(x, pivots, n, failed):
    """``failed[system] = 1`` where a pivot of the system is 0 or not finite, or an x is not finite."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        if pivots[i] == 0 or not math.isfinite(pivots[i]) or not math.isfinite(x[i]):
            failed[i // n] = 1


def kernels(dtype):
    """Every ``(dispatcher, argtypes)`` of the element-wise kernels for ``dtype``, for compiling to PTX."""
    element = types.Array(numba_type(dtype), 1, "C")
    yield pivot_maps(dtype), (element, element, element, types.int64, *[element] * 5)
    yield lower_maps(dtype), (element, element, element, types.int64, element, element, element)
    yield upper_maps(dtype), (element, element, element, types.int64, element, element, element)
    yield flag_failures, (element, element, types.int64, types.Array(types.int32, 1, "C"))


def stone_solve(a, b, c, d, *, out=None, stream=None):
    """Solve tridiagonal systems ``a_i x_(i-1) + b_i x_i + c_i x_(i+1) = d_i`` by Stone's method.

    The pivots of ``A = L U`` by one scan of 2x2 matrices (Moebius maps), then ``L y = d`` and
    ``U x = y`` by two scans of affine maps: O(n) work, O(log n) depth (module docstring).

    Parameters
    ----------
    a, b, c, d : numpy.ndarray or device array, shape (n,) or (batch, n)
        As :func:`prefixsum.tridiag.solve` takes them: sub-diagonal, diagonal, super-diagonal and
        right-hand side, one shape, one dtype (float32 or float64); ``a[..., 0]`` and
        ``c[..., -1]`` lie outside the matrix and are ignored. Never modified.
    out : array, optional
        Where x goes, as :func:`prefixsum.tridiag.solve` takes it: ``d``'s kind, shape and dtype,
        contiguous, sharing no memory with the inputs.
    stream : optional
        The stream the solve is queued on (any form :func:`prefixsum.scan` takes); the call waits
        for it only, to read the failure flags.

    Returns
    -------
    numpy.ndarray or numba device array
        x, with ``d``'s shape and dtype: a device array when ``d`` is one; ``out`` when given.

    Raises
    ------
    TypeError, ValueError
        As :func:`prefixsum.tridiag.solve`: a dtype other than float32 or float64, mixed dtypes
        or shapes, ndim other than 1 or 2, n = 0, a non-contiguous device array, a wrong ``out``
        or ``stream``.
    numpy.linalg.LinAlgError
        A zero or non-finite pivot, or a non-finite x; the message names the first failing
        system.

    Notes
    -----
    It does not pivot: stable for diagonally dominant and symmetric positive definite systems,
    measured in the module docstring; other systems may lose accuracy without an error
    (``tridiag.solve(..., method="pivoting")`` solves any nonsingular one).

    Examples
    --------
    >>> import numpy as np
    >>> from prefixsum import apps
    >>> a, b, c = np.array([0.0, 1, 1]), np.array([4.0, 4, 4]), np.array([1.0, 1, 0])
    >>> apps.stone_solve(a, b, c, np.array([5.0, 6, 5]))  # [[4, 1, 0], [1, 4, 1], [0, 1, 4]] x = d
    array([1., 1., 1.])
    """
    arrays, on_device = check_systems(a, b, c, d)
    where = as_stream(stream)
    shape, dtype = tuple(arrays[3].shape), np.dtype(arrays[3].dtype)
    if out is not None:
        out = check_solution_out(out, arrays, on_device, shape, dtype)
    batch, n = (1, shape[0]) if len(shape) == 1 else shape
    if batch == 0:
        return out if out is not None else result_array(shape, dtype, where) if on_device[3] else np.empty(shape, dtype)
    size, on = batch * n, launch_stream(where)
    a, b, c, d = (
        v.reshape(size) if dev else cuda.to_device(np.ascontiguousarray(v).reshape(size), stream=on)
        for v, dev in zip(arrays, on_device)
    )
    into = out.reshape(size) if out is not None and on_device[3] else None
    with quiet_arithmetic(divide="ignore"):  # a zero pivot divides by zero, as a GPU does, and is reported below
        blocks, threads = grid(size)
        fields = [cuda.device_array(size, dtype) for _ in range(5)]
        pivot_maps(dtype)[blocks, threads, on](a, b, c, n, *fields)
        _, p00, _, p10, _ = scan(tuple(fields), mobius(dtype), identity=MOBIUS_IDENTITY, stream=where)
        start, lower, pivots = (cuda.device_array(size, dtype) for _ in range(3))
        lower_maps(dtype)[blocks, threads, on](a, p00, p10, n, start, lower, pivots)
        _, _, y = scan((start, lower, d), affine_segments, identity=SEGMENT_IDENTITY, stream=where)
        upper, scaled = cuda.device_array(size, dtype), cuda.device_array(size, dtype)
        upper_maps(dtype)[blocks, threads, on](c, y, pivots, n, start, upper, scaled)
        _, _, x = scan(
            (start, upper, scaled),
            affine_segments,
            identity=SEGMENT_IDENTITY,
            reverse=True,
            out=(None, None, into),
            stream=where,
        )
        failed = cuda.to_device(np.zeros(batch, np.int32), stream=on)
        flag_failures[blocks, threads, on](x, pivots, n, failed)
    flags = failed.copy_to_host(stream=on)
    where.synchronize()
    failures = np.flatnonzero(flags)
    if failures.size:
        raise np.linalg.LinAlgError(
            f"Stone's solve failed in system {failures[0]} of {batch} ({failures.size} failed in all): a zero or "
            "non-finite pivot, or a non-finite x. It does not pivot: it is meant for diagonally dominant or symmetric "
            "positive definite systems; tridiag.solve(..., method='pivoting') solves any nonsingular one"
        )
    if on_device[3]:
        return out if out is not None else x.reshape(shape)
    host = x.copy_to_host(out.reshape(size) if out is not None else None, stream=on)
    where.synchronize()
    return out if out is not None else host.reshape(shape)
