"""The host side of :func:`solve`: checks, transfers, dispatch to a method, failure reports."""
import numpy as np
from numba import cuda
from numba.cuda.cudadrv.driver import device_memset

from ..core.arrays import is_device_array, result_array
from . import cr, hybrid, pcr, thomas
from ._common import NOT_FINITE, ZERO_PIVOT, reused

METHODS = {"pcr": pcr.run, "cr": cr.run, "thomas": thomas.run, "hybrid": hybrid.run}
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_NAMES = "abcd"

_FAILURES = {NOT_FINITE: "a non-finite result (NaN or infinity)", ZERO_PIVOT: "a zero pivot"}


def solve(a, b, c, d, *, method="auto"):
    """Solve tridiagonal systems ``a_i x_{i-1} + b_i x_i + c_i x_{i+1} = d_i``, one or a batch.

    Parameters
    ----------
    a, b, c, d : numpy.ndarray or device array, shape (n,) or (batch, n)
        Sub-diagonal, diagonal, super-diagonal and right-hand side, all of one shape and one
        dtype, float32 or float64. ``a[..., 0]`` and ``c[..., -1]`` lie outside the matrix and
        are ignored, whatever they hold. Never modified. Device arrays (numba's, or anything with
        ``__cuda_array_interface__``) must be C-contiguous.
    method : {"auto", "hybrid", "pcr", "cr", "thomas"}
        "hybrid": PCR steps until each thread has a piece of a few rows, then Thomas on it
        (:mod:`prefixsum.tridiag.hybrid`), and for n <= 512 a partition step per thread in
        registers with PCR across a warp by shuffles (:mod:`prefixsum.tridiag.warp`); "pcr": parallel cyclic reduction
        (:mod:`prefixsum.tridiag.pcr`); "cr": cyclic reduction (:mod:`prefixsum.tridiag.cr`);
        "thomas": the sequential algorithm, one thread per system
        (:mod:`prefixsum.tridiag.thomas`); "auto" (the default): the method whose whole
        calls were fastest on an H100 (:func:`choose`). All take any n >= 1 and any batch.

    Returns
    -------
    numpy.ndarray or numba device array
        x, with ``d``'s shape and dtype: a device array when ``d`` is one, else a numpy array.
        Device inputs are used in place, not copied; host inputs take one transfer each way.

    Raises
    ------
    TypeError
        A dtype other than float32 or float64, or arrays of different dtypes.
    ValueError
        Arrays of different shapes, ndim other than 1 or 2, n = 0, a non-contiguous device
        array, or an unknown method.
    numpy.linalg.LinAlgError
        A zero pivot or a NaN or infinite result; the message names the first failing system
        (its index in the batch).

    Notes
    -----
    None of the methods pivots. They are stable for diagonally dominant
    (``|b_i| > |a_i| + |c_i|``) and symmetric positive definite systems; on others they may meet
    a zero pivot, or lose accuracy without any error.

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
    shape = arrays[3].shape
    batch, n = (1, shape[0]) if len(shape) == 1 else shape
    x = result_array((batch, n), arrays[3].dtype)
    if batch > 0:
        matrices = [_as_matrix(v, batch, n, dev) for v, dev in zip(arrays, on_device)]
        info, flags = _flags(batch)
        device_memset(info, 0, info.nbytes)
        METHODS[choose(method, batch, n, x.dtype)](*matrices, x, info)
        _report(info.copy_to_host(flags))
    if x.shape != shape:
        x = x.reshape(shape)
    return x if on_device[3] else x.copy_to_host()


def choose(method, batch, n, dtype):
    """The method that ``method`` names for (batch, n) systems of ``dtype``: itself, or for
    ``"auto"`` the one with the fastest whole calls in ``benchmarks/tridiag.csv`` (an H100): the
    hybrid at every measured shape. Where a system fits a block its kernels are also the
    fastest (1.9 to 2.5 times PCR's); on one system of 2^20 PCR's kernels are a little faster
    (364 against 399 us in float32, 516 against 596 in float64), but its whole call launches a
    global step at a time through numba's dispatcher and takes 5.2 to 5.7 ms against the
    hybrid's 1.3 to 1.5 ms."""
    return "hybrid" if method == "auto" else method


def _flags(batch):
    """A device array and a pinned host array of ``batch`` failure flags (:func:`._common.reused`:
    every call zeroes them first)."""
    return reused(("flags", batch), lambda: (cuda.device_array(batch, np.int32), cuda.pinned_array(batch, np.int32)))


def _method(method):
    if not isinstance(method, str) or (method not in METHODS and method != "auto"):
        raise ValueError(f"unknown method {method!r}; the methods are {', '.join(map(repr, (*METHODS, 'auto')))}")
    return METHODS.get(method)


def _check(a, b, c, d):
    """The four arrays (device arrays as numba's) and which are on the device, or an error."""
    on_device = [is_device_array(v) for v in (a, b, c, d)]
    arrays = []
    for name, v, dev in zip(_NAMES, (a, b, c, d), on_device):
        if dev and not cuda.devicearray.is_cuda_ndarray(v):
            v = cuda.as_cuda_array(v)
        elif not dev:
            v = np.asarray(v)
        if np.dtype(v.dtype) not in DTYPES:
            raise TypeError(f"{name} has dtype {np.dtype(v.dtype)}; the allowed dtypes are float32 and float64")
        if dev and not v.is_c_contiguous():
            raise ValueError(f"device array {name} must be C-contiguous")
        arrays.append(v)
    dtypes = [np.dtype(v.dtype).name for v in arrays]
    if len(set(dtypes)) > 1:
        raise TypeError(f"a, b, c, d must have one dtype; got {', '.join(dtypes)}")
    shapes = [tuple(v.shape) for v in arrays]
    if len(set(shapes)) > 1:
        raise ValueError(f"a, b, c, d must have one shape; got {', '.join(map(str, shapes))}")
    if len(shapes[0]) not in (1, 2):
        raise ValueError(f"a, b, c, d must have shape (n,) or (batch, n); got {shapes[0]}")
    if shapes[0][-1] < 1:
        raise ValueError(f"the systems need n >= 1 unknowns; got shape {shapes[0]}")
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
            f"{_FAILURES[int(info[first])]}. The methods do not pivot: they are meant for diagonally "
            "dominant or symmetric positive definite systems")
