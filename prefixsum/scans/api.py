"""The public scans: :func:`scan` and :func:`exclusive_scan`."""
import warnings

import numpy as np
from numba import cuda

from ..core.arithmetic import quiet_arithmetic
from ..core.arrays import as_numba, is_device_array, result_array, result_maker
from ..core.device import classroom_simulator, simulating
from ..core.workspace import latest, one_call_at_a_time
from . import transfers, user_ops
from .ops import check_dtype, check_op, native
from .registry import ALGORITHMS, SLOWEST_SIMULATION, lookup

SLOW_SIMULATION_S = 5.0
"""A scan the simulator is expected to take longer than this (seconds) for is announced first."""

_announced_slow = False


@one_call_at_a_time
def scan(x, op="add", *, inclusive=True, reverse=False, algorithm="auto", identity=None, **options):
    """Scan (prefix sum) of a 1-D array with an associative operator, on the GPU or simulator.

    Parameters
    ----------
    x : numpy.ndarray or device array, 1-D, or a tuple of them
        int32, uint32, int64, uint64, float32 or float64. Never modified. A device array is
        anything with ``__cuda_array_interface__`` (numba, CuPy, PyTorch). A numpy array in the
        other byte order (``">i4"`` on a little-endian machine) is converted to this machine's
        order first, as numpy's ``cumsum`` accepts it; a device array must be in this machine's
        order. With a user operator, a tuple of equal-length arrays (dtypes may differ) is a
        sequence of tuples, element i being ``(x[0][i], x[1][i], ...)``.
    op : {"add", "mul", "max", "min"} or numba CUDA device function
        The operator. Integer add and mul wrap around as numpy's do in that dtype. A user
        operator is a ``@cuda.jit(device=True)`` function ``op(p, q)`` of two elements returning
        one (scalars for one array, tuples for a tuple of arrays), associative; it need not be
        commutative. It runs on the algorithms that carry one (``lookback``, ``hierarchical`` and
        the classic ``ladder``, ``hillis_steele`` and ``blelloch``, each from its one source;
        ``"auto"`` picks ``lookback``; see :mod:`prefixsum.scans.user_ops`); a reverse scan with it
        gives element i as
        ``x[n-1] op ... op x[i]``.
    identity : scalar or tuple, optional
        Required with a user operator, and only allowed with one: the element e with
        ``op(e, x) == x == op(x, e)``, one value per array of a tuple.
    inclusive : bool, default True
        Element i combines ``x[0..i]``. If False, ``x[0..i-1]``, and element 0 is the identity
        (0, 1, the dtype's lowest value or -inf, its highest value or +inf).
    reverse : bool, default False
        Suffix scan: element i combines ``x[i..n-1]`` (``x[i+1..n-1]`` if exclusive).
    algorithm : str, default "auto"
        A name in :data:`prefixsum.ALGORITHMS`, or "auto" for the fastest registered one.
    **options
        Parameters of the algorithm (``block_size=256`` for "ladder", ...).

    Returns
    -------
    numpy.ndarray or numba device array
        The same kind as ``x`` (numpy in, numpy out; device in, device out; a tuple of them for a
        tuple), same length and dtype, in this machine's byte order. max and min propagate NaN as ``np.maximum`` and
        ``np.minimum`` do; inf + -inf is NaN, without numpy's RuntimeWarning.

    Warns
    -----
    UserWarning
        Once per process, before a scan that the CUDA simulator is expected to take more than
        :data:`SLOW_SIMULATION_S` seconds for (see :func:`announce_slow_simulation`).

    Raises
    ------
    TypeError
        Unsupported dtype (bool, float16, complex, object, strings), or a device array in the
        other byte order.
    ValueError
        ``x`` not 1-D, unknown op, algorithm or option, or an invalid option value.

    Examples
    --------
    >>> import numpy as np, prefixsum as ps
    >>> ps.scan(np.array([3, 2, 1, 2], dtype=np.int32))
    array([3, 5, 6, 8], dtype=int32)
    >>> ps.scan(np.array([3, 2, 1, 2], dtype=np.int32), inclusive=False, reverse=True)
    array([5, 3, 2, 0], dtype=int32)
    """
    if type(x) is _NUMBA_DEVICE_ARRAY and not options and identity is None:  # a call seen before: _device_call
        try:
            call = _DEVICE_CALLS.get(_device_key(x, op, inclusive, reverse, algorithm))
        except TypeError:  # an unhashable op or flag: the checks below refuse it
            call = None
        if call is not None and x.is_c_contiguous():
            return call(x)
    if isinstance(x, tuple) or callable(op) or identity is not None:
        return user_ops.scan(x, op, identity=identity, inclusive=inclusive, reverse=reverse,
                             algorithm=algorithm, **options)
    on_device = type(x) is _NUMBA_DEVICE_ARRAY or is_device_array(x)
    if not on_device:
        x = native(np.asarray(x))
    _check_arguments(x.dtype, op, inclusive, reverse)
    if len(x.shape) != 1:
        raise ValueError(f"x must be 1-D; got an array of shape {tuple(x.shape)} (ndim={len(x.shape)})")
    n = x.shape[0]
    chosen = lookup(algorithm, n)
    resolved = _resolved_options(chosen, options)

    if on_device:
        numba_array = type(x) is _NUMBA_DEVICE_ARRAY
        if not numba_array:
            x = as_numba(x)
        if not x.is_c_contiguous():
            raise ValueError(
                f"a device array x must be contiguous; got strides {tuple(x.strides)} for elements of "
                f"{x.dtype.itemsize} bytes; copy it first (e.g. cupy.ascontiguousarray)")
        if numba_array and not options and not simulating():
            call = _device_call(chosen, n, x.dtype, op, bool(inclusive), bool(reverse), resolved)
            if len(_DEVICE_CALLS) >= 1024:
                _DEVICE_CALLS.clear()
            _DEVICE_CALLS[_device_key(x, op, inclusive, reverse, algorithm)] = call
            return call(x)
        out = result_array(n, x.dtype)
        if n:
            _run(chosen.run, n, chosen.name, x, out, op, inclusive, reverse, resolved)
        return out
    if n and transfers.overlapped(chosen, x):  # the copies overlap the scan, chunk by chunk
        return _run(transfers.scan, n, chosen.name, x, op, inclusive, reverse, resolved)
    source, out = _numpy_call_buffers(n, x.dtype)
    transfers.to_device(source, x)
    if n:
        _run(chosen.run, n, chosen.name, source, out, op, inclusive, reverse, resolved)
    return transfers.to_host(out)


def _run(run, n, name, *args):
    """``run(*arrays, op, inclusive, reverse, **options)`` for :func:`scan`, with ``args`` = arrays,
    op, inclusive, reverse, options; on the simulator announced first when slow, and quiet."""
    *arrays, op, inclusive, reverse, options = args
    if not simulating():
        return run(*arrays, op, bool(inclusive), bool(reverse), **options)
    announce_slow_simulation(n, name, stacklevel=4)  # scan's caller, past its wrapper and this function
    with quiet_arithmetic():
        return run(*arrays, op, bool(inclusive), bool(reverse), **options)


# numba's device array on a GPU (the simulator has another class): its type is checked first,
# as asking an array for __cuda_array_interface__ builds a dictionary.
_NUMBA_DEVICE_ARRAY = getattr(cuda.devicearray, "DeviceNDArray", None)
_RESOLVED = {}
_DEVICE_CALLS = {}  # _device_key -> _device_call's function


def _device_key(x, op, inclusive, reverse, algorithm):
    """What a kept :func:`_device_call` is found by (see its docstring); unhashable for an
    unhashable op or flag, which the dictionary then refuses with TypeError."""
    return x.dtype, x.shape, op, type(inclusive), inclusive, type(reverse), reverse, algorithm, ALGORITHMS.version


def _device_call(chosen, n, dtype, op, inclusive, reverse, options):
    """``call(x)``: :func:`scan` of a contiguous numba device array ``x`` of ``n`` elements of
    ``dtype``, with arguments already checked (by the call that made it), on a GPU.

    :func:`scan` keeps it by the dtype, shape, op, flags (with their types, so that ``1`` never
    passes for ``True``), algorithm name and the registry's version (a registration may change
    what ``"auto"`` picks) of the call that passed every check: a call that
    repeats them skips the checks, which hold for it as well (only the contiguity, which the key
    does not hold, is checked again), and goes straight to the result's memory and the launch.
    """
    make_result = result_maker(n, dtype)
    if not n:
        return lambda x: make_result()
    if chosen.prepare is not None:
        scan_into = chosen.prepare(op, dtype, inclusive, reverse, **options)
    else:
        def scan_into(x, out):
            chosen.run(x, out, op, inclusive, reverse, **options)

    def call(x):
        out = make_result()
        scan_into(x, out)
        return out

    return call


def _numpy_call_buffers(n, dtype):
    """Device arrays ``(input, result)`` for a call on a numpy array of ``n`` elements of ``dtype``.

    They live only during the call (it ends by copying the result back, which waits for the
    scan), so on a GPU the pair of this thread's last call of each dtype is kept and reused by
    its next call of that length (:func:`prefixsum.core.workspace.latest`): no allocation, which
    takes longer than a small scan, and at most two arrays of the last length held per dtype.
    The simulator gets fresh arrays, for the checker.
    """
    return latest("numpy input", n, dtype), latest("numpy result", n, dtype)


_CHECKED = set()


def _check_arguments(dtype, op, inclusive, reverse):
    """Raise unless ``dtype``, ``op`` and the two flags are allowed; a combination seen before
    (with the flags' types, so that ``1`` never passes for ``True``) is not checked again."""
    try:
        key = (dtype, op, type(inclusive), inclusive, type(reverse), reverse)
        if key in _CHECKED:
            return
    except TypeError:  # an unhashable op or flag: checked, and refused
        key = None
    check_dtype(dtype)
    check_op(op)
    for flag, value in (("inclusive", inclusive), ("reverse", reverse)):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{flag} must be True or False; got {value!r}")
    if key is not None and len(_CHECKED) < 1024:
        _CHECKED.add(key)


def _resolved_options(algorithm, options):
    """``algorithm.resolve_options(options)``, remembered: a call repeated with the same options
    skips checking them again (the key holds each value's type, so ``True`` never stands for ``1``)."""
    if not options:  # the common case: the defaults, checked once per algorithm
        if algorithm.name not in _RESOLVED:
            _RESOLVED[algorithm.name] = algorithm.resolve_options({})
        return _RESOLVED[algorithm.name]
    try:
        key = (algorithm.name, tuple((name, type(value), value) for name, value in options.items()))
        hash(key)
    except TypeError:  # an unhashable option value: checked every time (and refused, by every algorithm here)
        return algorithm.resolve_options(options)
    if key not in _RESOLVED:
        if len(_RESOLVED) > 1024:
            _RESOLVED.clear()
        _RESOLVED[key] = algorithm.resolve_options(options)
    return _RESOLVED[key]


def exclusive_scan(x, op="add", **kw):
    """:func:`scan` with ``inclusive=False``: element i combines ``x[0..i-1]``."""
    return scan(x, op, inclusive=False, **kw)


def simulation_seconds(n, algorithm):
    """Estimated seconds for the simulator to scan ``n`` elements with ``algorithm``.

    Parameters
    ----------
    n : int
    algorithm : str
        A name in :data:`prefixsum.ALGORITHMS` (another name gets the default, the slowest known cost).

    Returns
    -------
    float
        From the algorithm's measured cost per element (``Algorithm.simulator_us_per_element``),
        on the classroom simulator or, when it is switched off (``sim.enabled(False)``), on numba's
        stock simulator.
    """
    known = ALGORITHMS.get(algorithm)
    classroom, stock = known.simulator_us_per_element if known else SLOWEST_SIMULATION
    per_element = classroom if classroom_simulator() or stock is None else stock
    return n * per_element * 1e-6


def announce_slow_simulation(n, algorithm, *, threshold_s=None, stacklevel=1):
    """Warn, once per process, before a scan that will keep the simulator busy for a while.

    Does nothing on a GPU, after the first warning, or when :func:`simulation_seconds` is at most
    ``threshold_s``.

    Parameters
    ----------
    n : int
        Elements to scan.
    algorithm : str
        The algorithm's name.
    threshold_s : float, optional
        Seconds; default :data:`SLOW_SIMULATION_S`.
    stacklevel : int, default 1
        Frames above the caller that the warning points at (1: the caller's line).

    Returns
    -------
    bool
        Whether it warned.
    """
    global _announced_slow
    threshold_s = SLOW_SIMULATION_S if threshold_s is None else threshold_s
    if _announced_slow or not simulating():
        return False
    seconds = simulation_seconds(n, algorithm)
    if seconds <= threshold_s:
        return False
    _announced_slow = True
    took = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
    warnings.warn(
        f"prefixsum: scanning {n:,} elements with {algorithm!r} on the CUDA simulator will take about "
        f"{took} (a GPU takes milliseconds); for a quick run use a smaller n, e.g. "
        f"ps.size_for_device(simulator=1000, gpu={n}). This notice is shown once.",
        UserWarning, stacklevel=stacklevel + 1)
    return True
