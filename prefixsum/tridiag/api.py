"""The host side of :func:`solve`: checks, transfers, dispatch to a method, failure reports."""
import numpy as np
from numba import cuda

from ..core.arrays import as_numba, copy_to_host, is_device_array, result_array
from ..core.workspace import one_call_at_a_time
from . import cr, hybrid, pcr, pivoting, thomas, transfers
from ._common import NOT_FINITE, SINGULAR, ZERO_PIVOT, reused

METHODS = {"pcr": pcr.run, "cr": cr.run, "thomas": thomas.run, "hybrid": hybrid.run, "pivoting": pivoting.run}
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_NAMES = "abcd"

STAGED_BYTES = 64 << 20  # the largest device buffers kept for host inputs (:func:`_staged`)

_NO_PIVOTING = ("The non-pivoting methods are meant for diagonally dominant or symmetric positive definite "
                "systems; method='pivoting' solves any nonsingular one")
_FAILURES = {NOT_FINITE: "a non-finite result (NaN or infinity)", ZERO_PIVOT: f"a zero pivot. {_NO_PIVOTING}",
             SINGULAR: "the matrix is singular (partial pivoting found a column with no nonzero pivot)"}


@one_call_at_a_time
def solve(a, b, c, d, *, method="auto"):
    """Solve tridiagonal systems ``a_i x_{i-1} + b_i x_i + c_i x_{i+1} = d_i``, one or a batch.

    Parameters
    ----------
    a, b, c, d : numpy.ndarray or device array, shape (n,) or (batch, n)
        Sub-diagonal, diagonal, super-diagonal and right-hand side, all of one shape and one
        dtype, float32 or float64. ``a[..., 0]`` and ``c[..., -1]`` lie outside the matrix and
        are ignored, whatever they hold. Never modified. Device arrays (numba's, or anything with
        ``__cuda_array_interface__``) must be C-contiguous.
    method : {"auto", "hybrid", "pcr", "cr", "thomas", "pivoting"}
        "hybrid": PCR steps until each thread has a piece of a few rows, then Thomas on it
        (:mod:`prefixsum.tridiag.hybrid`), and for n <= 512 a partition step per thread in
        registers with PCR across a warp by shuffles (:mod:`prefixsum.tridiag.warp`); "pcr": parallel cyclic reduction
        (:mod:`prefixsum.tridiag.pcr`); "cr": cyclic reduction (:mod:`prefixsum.tridiag.cr`);
        "thomas": the sequential algorithm, one thread per system
        (:mod:`prefixsum.tridiag.thomas`); "pivoting": LU with partial pivoting as LAPACK's
        ``?gtsv``, one thread per short system, chunks and a reduced system of their
        separators for longer ones (:mod:`prefixsum.tridiag.pivoting`), for any nonsingular
        system; "auto" (the default): the method whose whole calls were fastest on
        an H100 (:func:`choose`). All take any n >= 1 and any batch.

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
        A zero pivot (for "pivoting": a singular matrix) or a NaN or infinite result; the
        message names the first failing system (its index in the batch).

    Notes
    -----
    Only "pivoting" pivots. The others are stable for diagonally dominant
    (``|b_i| > |a_i| + |c_i|``) and symmetric positive definite systems; on others they may meet
    a zero pivot, or lose accuracy without any error. "pivoting" pivots inside chunks and checks
    their growth, solving a system again by one thread over all its rows where a chunk is
    singular or nearly (:mod:`prefixsum.tridiag.pivoting` says what stability that keeps).

    Examples
    --------
    >>> import numpy as np
    >>> from prefixsum import tridiag
    >>> a, b, c = np.array([0.0, 1, 1]), np.array([4.0, 4, 4]), np.array([1.0, 1, 0])
    >>> tridiag.solve(a, b, c, np.array([5.0, 6, 5]))  # [[4, 1, 0], [1, 4, 1], [0, 1, 4]] x = d
    array([1., 1., 1.])
    """
    _method(method)
    arrays, on_device = _check(a, b, c, d)
    shape, dtype = tuple(arrays[3].shape), np.dtype(arrays[3].dtype)
    batch, n = (1, shape[0]) if len(shape) == 1 else shape
    if batch == 0:
        return result_array(shape, dtype) if on_device[3] else np.empty(shape, dtype)
    info, flags = _flags(batch)
    run = METHODS[choose(method, batch, n, dtype)]
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
    if np.count_nonzero(flags):
        failed = flags.copy()
        flags[:] = 0
        info.copy_to_device(flags)
        _report(failed)
    if result is not None:
        return result.reshape(shape)
    return x if x.shape == shape else x.reshape(shape)


def choose(method, batch, n, dtype):
    """The method that ``method`` names for (batch, n) systems of ``dtype``: itself, or for
    ``"auto"`` the one with the fastest kernels and whole calls in ``benchmarks/tridiag.csv``
    (an H100): the hybrid at every measured shape. Its warp solver (n <= 512) took 10.7 to 25.1 us
    on the batches against PCR's 46 to 185, and its partition method 96 (float32) and 136
    (float64) us on one system of 2^20 against PCR's 363 and 515.
    """
    return "hybrid" if method == "auto" else method


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
    if not isinstance(method, str) or (method not in METHODS and method != "auto"):
        raise ValueError(f"unknown method {method!r}; the methods are {', '.join(map(repr, (*METHODS, 'auto')))}")
    return METHODS.get(method)


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
            f"{_FAILURES[int(info[first])]}")
