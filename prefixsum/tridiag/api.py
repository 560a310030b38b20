"""The host side of :func:`solve` and :func:`solve_ex`: checks, transfers, dispatch to a method, every system's outcome."""
from typing import NamedTuple, Optional

import numpy as np
from numba import cuda

from ..core.arrays import as_numba, copy_to_host, is_device_array, result_array
from ..core.workspace import one_call_at_a_time
from . import auto, condition, cr, hybrid, pcr, pivoting, thomas, transfers
from ._common import NOT_FINITE, SINGULAR, ZERO_PIVOT, reused

METHODS = {"pcr": pcr.run, "cr": cr.run, "thomas": thomas.run, "hybrid": hybrid.run, "pivoting": pivoting.run}
"""The methods by name; ``"auto"`` (:mod:`.auto`) is the default and none of these."""
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_NAMES = "abcd"

STAGED_BYTES = 64 << 20  # the largest device buffers kept for host inputs (:func:`_staged`)

SOLVED = 0
"""``info`` of a system solved (the other codes: ``NOT_FINITE``, ``ZERO_PIVOT``, ``SINGULAR``)."""
_NO_PIVOTING = ("The non-pivoting methods are meant for diagonally dominant or symmetric positive definite "
                "systems; method='auto' or 'pivoting' solves any nonsingular one")
REASONS = {SOLVED: "solved", NOT_FINITE: "a non-finite result (NaN or infinity)",
           ZERO_PIVOT: f"a zero pivot. {_NO_PIVOTING}",
           SINGULAR: "the matrix is singular (partial pivoting found a column with no nonzero pivot)"}
"""What each ``info`` code means, as :func:`solve`'s error says it."""


class Solution(NamedTuple):
    """What :func:`solve_ex` returns: the solutions, every system's outcome, and (if asked) an
    estimate of every system's reciprocal condition number."""

    x: object
    """x, with ``d``'s shape and dtype: a device array when ``d`` is one, else a numpy array."""
    info: np.ndarray
    """int32 with ``d``'s shape but the last axis (``()`` for one system): :data:`SOLVED` (0) or
    the code of what went wrong (:data:`REASONS`), as LAPACK's ``info`` and
    ``torch.linalg.solve_ex``'s: ``NOT_FINITE`` (1), ``ZERO_PIVOT`` (2, the non-pivoting methods
    only), ``SINGULAR`` (3, ``"auto"`` and ``"pivoting"``, whose x is then NaN)."""
    rcond: Optional[np.ndarray]
    """float64 of ``info``'s shape with ``condition=True``: about ``1 / kappa_1(A)``, as LAPACK's
    ``?gtcon`` estimates it (:mod:`.condition`; 0 for a singular system); else None."""


def solve(a, b, c, d, *, method="auto"):
    """Solve tridiagonal systems ``a_i x_{i-1} + b_i x_i + c_i x_{i+1} = d_i``, one or a batch.

    Parameters
    ----------
    a, b, c, d : numpy.ndarray or device array, shape (n,) or (batch, n)
        Sub-diagonal, diagonal, super-diagonal and right-hand side, all of one shape and one
        dtype, float32 or float64. ``a[..., 0]`` and ``c[..., -1]`` lie outside the matrix and
        are ignored, whatever they hold. Never modified. Device arrays (numba's, or anything with
        ``__cuda_array_interface__``) must be C-contiguous.
    method : {"auto", "pivoting", "hybrid", "pcr", "cr", "thomas"}
        "auto" (the default): right for every nonsingular system (below), as fast as the hybrid
        on diagonally dominant ones (:mod:`prefixsum.tridiag.auto`). "pivoting": Gaussian
        elimination with partial pivoting, as LAPACK's ``?gtsv``, in parallel: one thread per
        short system, chunks and levels of reduced systems for longer ones
        (:mod:`prefixsum.tridiag.pivoting`), for any nonsingular system. The others do not pivot
        and are safe only on diagonally dominant (``|b_i| > |a_i| + |c_i|``) or symmetric
        positive definite systems; on others they may meet a zero pivot, or lose every digit
        without an error: "hybrid": PCR steps until each thread has a piece of a few rows, then
        Thomas on it (:mod:`prefixsum.tridiag.hybrid`), and for n <= 512 a partition step per
        thread in registers with PCR across a warp by shuffles (:mod:`prefixsum.tridiag.warp`);
        "pcr": parallel cyclic reduction (:mod:`prefixsum.tridiag.pcr`); "cr": cyclic reduction
        (:mod:`prefixsum.tridiag.cr`); "thomas": the sequential algorithm, one thread per system
        (:mod:`prefixsum.tridiag.thomas`). All take any n >= 1 and any batch.

    Returns
    -------
    numpy.ndarray or numba device array
        x, with ``d``'s shape and dtype: a device array when ``d`` is one, else a numpy array.
        Device inputs are used in place, not copied; host inputs take one transfer each way
        (from 32 MiB of inputs on, packed into page-locked memory on several threads first), or,
        for batches of 64 MiB of inputs or more, are cut into groups of whole systems whose
        copies overlap the solves of the others (:mod:`prefixsum.tridiag.transfers`), whatever
        the method.

    Raises
    ------
    TypeError
        A dtype other than float32 or float64, or arrays of different dtypes.
    ValueError
        Arrays of different shapes, ndim other than 1 or 2, n = 0, a non-contiguous device
        array, or an unknown method.
    numpy.linalg.LinAlgError
        A system failed: a singular matrix, a zero pivot (non-pivoting methods) or a NaN or
        infinite result; the message names the first failing system (its index in the batch).
        :func:`solve_ex` returns every system's outcome instead, and the good systems' x.

    Notes
    -----
    The guarantee of "auto" and "pivoting": for every nonsingular system, in float32 and
    float64, x is backward stable, the exact solution of a system within about ``n eps`` of the
    given one (relative, in norm, times a growth factor that partial pivoting keeps small), so
    that its error is at most about ``n eps kappa(A)``, as LAPACK's. They fail only on a
    singular system (``SINGULAR``), one singular to working precision (a huge x, or
    ``NOT_FINITE``; ``solve_ex(..., condition=True)`` estimates ``1 / kappa``), or a growth
    factor that partial pivoting's worst cases reach and practical matrices do not.

    Examples
    --------
    >>> import numpy as np
    >>> from prefixsum import tridiag
    >>> a, b, c = np.array([0.0, 1, 1]), np.array([4.0, 4, 4]), np.array([1.0, 1, 0])
    >>> tridiag.solve(a, b, c, np.array([5.0, 6, 5]))  # [[4, 1, 0], [1, 4, 1], [0, 1, 4]] x = d
    array([1., 1., 1.])
    """
    x, failed = _solve(a, b, c, d, method)
    if failed is not None:
        _report(failed)
    return x


def solve_ex(a, b, c, d, *, method="auto", condition=False):
    """:func:`solve` that never raises for a system that failed: every system's outcome instead.

    As ``torch.linalg.solve_ex`` and LAPACK's ``info``: a batch with singular systems still yields
    the good systems' x, and ``info`` says which failed and why. Arguments as :func:`solve`'s;
    ``condition=True`` also estimates each system's reciprocal condition number in the 1-norm
    (:mod:`prefixsum.tridiag.condition`, as LAPACK's ``?gtcon``: about a dozen more solves of
    the batch, O(n) each, and the bands copied to the host).

    Returns
    -------
    Solution
        ``(x, info, rcond)``: x as :func:`solve` returns it; ``info``, a numpy int32 array of
        ``d``'s shape without its last axis, 0 (:data:`SOLVED`) for a system solved, else the
        code of :data:`REASONS` (``SINGULAR``: x NaN for "auto" and "pivoting"; ``NOT_FINITE``,
        ``ZERO_PIVOT``: x not to be used); ``rcond``, float64 of the same shape, or None.

    Raises
    ------
    TypeError, ValueError
        Bad arguments, as :func:`solve`.

    Examples
    --------
    >>> import numpy as np
    >>> from prefixsum import tridiag
    >>> b = np.array([[4.0, 4, 4], [1.0, 0, 1]])  # the second: its middle row and column are 0
    >>> a = c = np.array([[1.0, 1, 1], [0.0, 0, 0]])
    >>> x, info, rcond = tridiag.solve_ex(a, b, c, np.ones((2, 3)), condition=True)
    >>> x[0].round(4), info, rcond.round(3)
    (array([0.2143, 0.1429, 0.2143]), array([0, 3], dtype=int32), array([0.389, 0.   ]))
    """
    x, failed = _solve(a, b, c, d, method)
    shape = tuple(x.shape[:-1])
    info = np.zeros(shape, np.int32) if failed is None else failed.reshape(shape)
    rcond = None
    if condition:
        rcond = _rcond(a, b, c, info).reshape(shape)
    return Solution(x, info, rcond)


@one_call_at_a_time
def _solve(a, b, c, d, method):
    """``(x, failed)``: x and, if a system failed, a copy of every system's ``info`` (else None)."""
    run = _method(method)
    arrays, on_device = _check(a, b, c, d)
    shape, dtype = tuple(arrays[3].shape), np.dtype(arrays[3].dtype)
    batch, n = (1, shape[0]) if len(shape) == 1 else shape
    if batch == 0:
        return (result_array(shape, dtype) if on_device[3] else np.empty(shape, dtype)), None
    info, flags = _flags(batch)
    result = None
    if not any(on_device) and transfers.overlapped(batch, n, dtype):  # the copies overlap the solves, chunk by chunk
        result = transfers.solve(arrays, batch, n, dtype, run, info)
    if result is None:
        if any(on_device):
            rows = [_as_matrix(v, batch, n, dev) for v, dev in zip(arrays, on_device)]
            x = result_array((batch, n), dtype)
        else:
            rows, x = _staged(arrays, batch, n, dtype)
        run(*rows, x, info)
    if result is None and not on_device[3]:
        result = transfers.to_host(x, (info, flags))
    else:
        copy_to_host(info, flags)
    failed = None
    if np.count_nonzero(flags):
        failed = flags.copy()
        flags[:] = 0
        info.copy_to_device(flags)
    if result is not None:
        return result.reshape(shape), failed
    return (x if x.shape == shape else x.reshape(shape)), failed


def _rcond(a, b, c, info):
    """:func:`.condition.reciprocal_condition` of the systems, solved by the pivoting method on
    the host copies of the bands; 0 where ``info`` says a system failed."""
    bands = [as_numba(v).copy_to_host() if is_device_array(v) else np.asarray(v) for v in (a, b, c)]
    a, b, c = (v.reshape(-1, v.shape[-1]) for v in bands)

    def batch_solve(a, b, c, rhs):
        return _solve(a, b, c, rhs, "pivoting")[0]

    rcond = condition.reciprocal_condition(batch_solve, a, b, c)
    return np.where(info.reshape(-1) == SOLVED, rcond, 0.0)


def choose(method, batch, n, dtype):
    """The method that ``method`` names for (batch, n) systems of ``dtype``: itself; ``"auto"``
    is :mod:`.auto` (the hybrid on diagonally dominant systems, the pivoting solver on the
    others, decided per system on the GPU) at every shape. In ``benchmarks/tridiag.csv`` (an
    H100) the hybrid's kernels were the fastest of the non-pivoting methods at every shape, and
    :mod:`.pivoting` beat cuSPARSE's pivoting solvers at every shape (its docstring has the
    numbers)."""
    return method


def _flags(batch):
    """A device array and a pinned host array of ``batch`` failure flags (:func:`._common.reused`),
    all zero: the kernels write only where a system fails, and :func:`solve` zeroes them again
    after a failure, so a call need not clear them before it launches."""
    return reused(("flags", batch), lambda: (cuda.to_device(np.zeros(batch, np.int32)), cuda.pinned_array(batch, np.int32)))


def _staged(arrays, batch, n, dtype):
    """Host systems sent to one (4, batch, n) device array by :func:`.transfers.send`, queued on
    the default stream: packed into page-locked memory on the copy threads, then sent, or for
    small batches of C-contiguous arrays straight from the caller's.

    Returns the four (batch, n) device rows and a device array for x (:func:`solve` copies x out
    before it returns). Up to :data:`STAGED_BYTES` of inputs they are kept for the next call of
    this shape (:func:`._common.reused`); beyond, keeping would hold on to much device memory, so
    they are made for the call.
    """
    def make():
        device = cuda.device_array((4, batch, n), dtype)
        return device, tuple(device[k] for k in range(4)), cuda.device_array((batch, n), dtype)
    kept = 4 * batch * n * dtype.itemsize <= STAGED_BYTES
    device, rows, x = reused(("staged", batch, n, dtype), make) if kept else make()
    transfers.send(device, 0, [v.reshape(batch, n) for v in arrays], cuda.default_stream(),
                   transfers.packs(batch, n, dtype))
    return rows, x


def _method(method):
    """The ``run`` of ``method`` (:data:`METHODS`, or :func:`.auto.run`), or a ValueError."""
    if method == "auto":
        return auto.run
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"unknown method {method!r}; the methods are {', '.join(map(repr, ('auto', *METHODS)))}")
    return METHODS[method]


def _check(a, b, c, d):
    """The four arrays (device arrays as numba's) and which are on the device, or an error.

    Written for the common case, four arrays alike, in a handful of comparisons: on a GPU this
    runs on every call, where each microsecond of Python is a microsecond of the whole call.
    """
    on_device = [is_device_array(v) for v in (a, b, c, d)]
    arrays = [as_numba(v) if dev else np.asarray(v) for v, dev in zip((a, b, c, d), on_device)]
    dtype, shape = arrays[3].dtype, tuple(arrays[3].shape)
    if any(v.dtype != dtype for v in arrays) or dtype not in DTYPES:
        dtypes = [np.dtype(v.dtype) for v in arrays]
        for name, v in zip(_NAMES, dtypes):
            if v not in DTYPES:
                raise TypeError(f"{name} has dtype {v}; the allowed dtypes are float32 and float64")
        raise TypeError(f"a, b, c, d must have one dtype; got {', '.join(v.name for v in dtypes)}")
    for name, v, dev in zip(_NAMES, arrays, on_device):
        if dev and not v.is_c_contiguous():
            raise ValueError(f"device array {name} must be C-contiguous")
    if any(v.shape != shape for v in arrays):
        raise ValueError(f"a, b, c, d must have one shape; got {', '.join(str(tuple(v.shape)) for v in arrays)}")
    if len(shape) not in (1, 2):
        raise ValueError(f"a, b, c, d must have shape (n,) or (batch, n); got {tuple(shape)}")
    if shape[-1] < 1:
        raise ValueError(f"the systems need n >= 1 unknowns; got shape {tuple(shape)}")
    return arrays, on_device


def _as_matrix(v, batch, n, on_device):
    """``v`` as a (batch, n) C-contiguous device array; host data is copied, so never modified."""
    if on_device:
        return v if v.shape == (batch, n) else v.reshape(batch, n)
    return cuda.to_device(np.ascontiguousarray(v.reshape(batch, n)))


def _report(info):
    failed = np.flatnonzero(info)
    if failed.size:
        first = int(failed[0])
        raise np.linalg.LinAlgError(
            f"tridiagonal solve failed in system {first} of {info.size} ({failed.size} failed in all): "
            f"{REASONS[int(info[first])]}")
