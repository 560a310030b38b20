"""The host side of :func:`solve`, :func:`solve_ex` and their plans (:func:`plan_solve`): checks
(:mod:`.checks`), transfers, a method's launch, every system's outcome.

A call is a plan and its launch (:mod:`prefixsum.core.plans`): :func:`solve` checks the arrays
(:func:`.checks.check_systems`, on :func:`prefixsum.core.inputs.as_input`), finds the :class:`SolvePlan`
for their dtype and shape and the method in the package's one plan cache
(:data:`prefixsum.core.plans.PLANS`), making it the first time (the registry's choice,
:mod:`.registry`), and calls it. On a GPU, four numba device arrays alike are looked up first,
by exactly what the plan was made for: a repeated call checks nothing the key proves. A caller
who solves systems of one shape in a loop can hold the plan itself (:func:`plan_solve`).
"""

from typing import NamedTuple, Optional

import numpy as np
from numba import cuda

from ..core import numba_gpu
from ..core.arrays import copy_to_host, result_array
from ..core.device import simulating
from ..core.plans import PLANS, Plan, carve, carved_bytes, one_line_call
from ..core.registry import Capability
from ..core.streams import as_stream
from ..core.workspace import one_call_at_a_time, reused
from . import condition, registry, transfers
from ._common import NOT_FINITE, SINGULAR, ZERO_PIVOT
from .checks import check_plan_shape, check_solution_out, check_systems
from .registry import METHODS

STAGED_BYTES = 64 << 20  # the largest device buffers kept for host inputs (:func:`_staged`)
# numba's device array on a GPU (None on the simulator): the fast path of :func:`solve` checks its type first.
_NUMBA_DEVICE_ARRAY = numba_gpu.numba_array_type()
_ON_DEVICE = (True,) * 4
PLANS_GET = PLANS.get  # the plan cache's lookup, as a module global: one name lookup on the fast path

SOLVED = 0
"""``info`` of a system solved (the other codes: ``NOT_FINITE``, ``ZERO_PIVOT``, ``SINGULAR``)."""
_NO_PIVOTING = (
    "The non-pivoting methods are meant for diagonally dominant or symmetric positive definite "
    "systems; method='auto' or 'pivoting' solves any nonsingular one"
)
REASONS = {
    SOLVED: "solved",
    NOT_FINITE: "a non-finite result (NaN or infinity)",
    ZERO_PIVOT: f"a zero pivot. {_NO_PIVOTING}",
    SINGULAR: "the matrix is singular (partial pivoting found a column with no nonzero pivot)",
}
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


def solve(a, b, c, d, *, method="auto", out=None, stream=None):
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
        (:mod:`prefixsum.tridiag.thomas`). All take any n >= 1 and any batch. "auto" runs the
        fastest of "pivoting" and "routed" (the hybrid with its dominance test, then the
        pivoting solver on the systems that failed it; :mod:`prefixsum.tridiag.auto`) measured
        for the call's batch, n and dtype (:mod:`prefixsum.tridiag.registry`).
    out : array, optional
        Where x goes: of ``d``'s kind (a device array when ``d`` is one, else a numpy array),
        shape and dtype, contiguous, sharing no memory with a, b, c or d. None: a new array.
    stream : optional
        The stream the solve is queued on: a numba stream, a PyTorch or CuPy stream, or anything
        with ``__cuda_stream__`` (:mod:`prefixsum.core.streams`). None: numba's default stream.
        The call waits for this stream only, to read the failure flags (and a numpy x). Ignored
        on the simulator, where every launch runs at once.

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
        A dtype other than float32 or float64, arrays of different dtypes, ``out`` of the wrong
        kind or dtype, or ``stream`` not a stream.
    ValueError
        Arrays of different shapes, ndim other than 1 or 2, n = 0, a non-contiguous device
        array, an unknown method, or ``out`` of the wrong shape or sharing memory with an input.
    numpy.linalg.LinAlgError
        A system failed: a singular matrix, a zero pivot (non-pivoting methods) or a NaN or
        infinite result; the message names the first failing system (its index in the batch).
        :func:`solve_ex` returns every system's outcome instead, and the good systems' x.

    Notes
    -----
    A call is a lookup in the package's one plan cache and a call of the plan
    (:func:`plan_solve`, :mod:`prefixsum.core.plans`). Thread safety: calls from several threads,
    and on several streams, may run at once; each takes its scratch from its own thread's and
    stream's workspace (:mod:`prefixsum.core.workspace`).

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
    if type(d) is _NUMBA_DEVICE_ARRAY and type(a) is _NUMBA_DEVICE_ARRAY and out is None:  # seen before?
        try:
            plan = PLANS_GET(("tridiag.solve", d.dtype, d.shape, method, METHODS.version))
        except TypeError:  # an unhashable method: the checks below refuse it
            plan = None
        if (
            plan is not None
            and type(b) is type(c) is _NUMBA_DEVICE_ARRAY
            and a.shape == b.shape == c.shape == d.shape
            and a.dtype == b.dtype == c.dtype == d.dtype
            and a.is_c_contiguous()
            and b.is_c_contiguous()
            and c.is_c_contiguous()
            and d.is_c_contiguous()
        ):
            x, failed = plan.run((a, b, c, d), _ON_DEVICE, None, as_stream(stream), None)
            if failed is not None:
                _report(failed)
            return x
    x, failed = _solve(a, b, c, d, method, out, stream)
    if failed is not None:
        _report(failed)
    return x


def solve_ex(a, b, c, d, *, method="auto", condition=False, out=None, stream=None):
    """:func:`solve` that never raises for a system that failed: every system's outcome instead.

    As ``torch.linalg.solve_ex`` and LAPACK's ``info``: a batch with singular systems still yields
    the good systems' x, and ``info`` says which failed and why. Arguments (``out=`` and
    ``stream=`` too) as :func:`solve`'s; ``condition=True`` also estimates each system's
    reciprocal condition number in the 1-norm (:mod:`prefixsum.tridiag.condition`, as LAPACK's
    ``?gtcon``: about a dozen more solves of the batch, O(n) each, and the bands copied to the
    host).

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
    x, failed = _solve(a, b, c, d, method, out, stream)
    shape = tuple(x.shape[:-1])
    info = np.zeros(shape, np.int32) if failed is None else failed.reshape(shape)
    rcond = None
    if condition:
        rcond = _rcond(a, b, c, info).reshape(shape)
    return Solution(x, info, rcond)


def plan_solve(dtype, shape, *, method="auto"):
    """A :class:`SolvePlan`: :func:`solve` of systems of ``shape`` and ``dtype`` worked out once, to call in a loop.

    Parameters
    ----------
    dtype : numpy dtype
        float32 or float64.
    shape : int or tuple
        ``n`` or ``(n,)`` for one system, ``(batch, n)`` for a batch; n >= 1, batch >= 0.
    method : str
        As :func:`solve`'s.

    Returns
    -------
    SolvePlan
        ``plan(a, b, c, d, out=None, *, stream=None, temp=None)`` solves as :func:`solve` would;
        ``plan.algorithm`` is the method chosen, ``plan.kernels`` what it may launch,
        ``plan.temp_bytes`` the temporary storage it takes from ``temp=`` (None: it takes none).

    Raises
    ------
    TypeError, ValueError
        A dtype other than float32 or float64, a bad shape, an unknown method.

    Examples
    --------
    >>> import numpy as np
    >>> from prefixsum import tridiag
    >>> plan = tridiag.plan_solve(np.float64, 3, method="thomas")
    >>> a, b, c = np.array([0.0, 1, 1]), np.array([4.0, 4, 4]), np.array([1.0, 1, 0])
    >>> plan(a, b, c, np.array([5.0, 6, 5]))
    array([1., 1., 1.])
    """
    return SolvePlan(dtype, shape, method=method)


class SolvePlan(Plan):
    """Tridiagonal solves of one shape and dtype with the method chosen; made by :func:`plan_solve`
    (and kept by :func:`solve`).

    Call it as ``plan(a, b, c, d, out=None, *, stream=None, temp=None)`` (``out`` and ``stream``
    as :func:`solve`'s; ``temp`` as :mod:`prefixsum.core.plans` says: a device array of at least
    :attr:`temp_bytes` bytes for the failure flags and the method's scratch, for the methods
    that take it; a numpy call's device copies of its inputs stay the workspace's). It raises
    ``LinAlgError`` for a failed system, as :func:`solve`. It holds no per-call state: one plan
    may be called from several threads and streams at once.

    Attributes
    ----------
    dtype : numpy.dtype
    shape : tuple
        ``(n,)`` or ``(batch, n)``.
    algorithm : str
        The method's name (the registry's choice for ``"auto"``).
    kernels : tuple
        Every ``(dispatcher, argtypes)`` a call may launch.
    temp_bytes : int or None
        Bytes a call takes from ``temp=``; None: the method keeps its scratch in the workspace.
    """

    def __init__(self, dtype, shape, *, method="auto"):
        dtype, shape = check_plan_shape(dtype, shape)
        self.dtype, self.shape = dtype, shape
        self.batch, self.n = (1, shape[0]) if len(shape) == 1 else shape
        self.method = registry.choose(method, self.batch, self.n, dtype)
        self.algorithm, self._run = self.method.name, self.method.run
        self._parts = None
        if Capability.CALLER_TEMP in self.method.capabilities:
            self._parts = [(self.batch, np.int32), *self.method.temp_parts(self.batch, self.n, dtype)]
            self.temp_bytes = carved_bytes(self._parts)

    def _list_kernels(self):
        return self.method.kernels(self.dtype)

    @one_call_at_a_time
    def __call__(self, a, b, c, d, out=None, *, stream=None, temp=None):
        arrays, on_device = check_systems(a, b, c, d)
        got = (tuple(arrays[3].shape), np.dtype(arrays[3].dtype))
        if got != (self.shape, self.dtype):
            raise ValueError(
                f"this plan solves systems of shape {self.shape} in {self.dtype.name}; got shape "
                f"{got[0]} in {got[1].name}"
            )
        memory = None if temp is None else self.check_temp(temp)
        x, failed = self.run(arrays, on_device, out, as_stream(stream), memory)
        if failed is not None:
            _report(failed)
        return x

    def run(self, arrays, on_device, out, stream, memory):
        """``(x, failed)`` for the checked ``arrays`` (which are on the device: ``on_device``) on
        ``stream``: x (``out``, checked here, or a new array of ``d``'s kind) and, if a system
        failed, a copy of every system's ``info`` (else None). ``memory``: the caller's checked
        ``temp``, or None."""
        shape, dtype, batch, n = self.shape, self.dtype, self.batch, self.n
        if out is not None:
            out = check_solution_out(out, arrays, on_device, shape, dtype)
        if batch == 0:
            if out is not None:
                return out, None
            return (result_array(shape, dtype, stream) if on_device[3] else np.empty(shape, dtype)), None
        run = self._run
        if memory is None:
            info, flags = _flags(batch, stream)
        else:
            info, *scratch = carve(memory, self._parts)
            _zero(info, stream)
            flags = _flags(batch, stream)[1]

            def run(*args, stream=None):
                self._run(*args, stream=stream, temp=scratch)

        result = None
        host_out = None if out is None or on_device[3] else out.reshape(-1)
        if not any(on_device) and transfers.overlapped(batch, n, dtype):  # copies overlap the solves, chunk by chunk
            result = transfers.solve(arrays, batch, n, dtype, run, info, stream, host_out)
        if result is None:
            if any(on_device):
                rows = [_as_matrix(v, batch, n, dev, stream) for v, dev in zip(arrays, on_device)]
                x = (
                    out.reshape(batch, n)
                    if out is not None and on_device[3]
                    else result_array((batch, n), dtype, stream)
                )
            else:
                rows, x = _staged(arrays, batch, n, dtype, stream)
            run(*rows, x, info, stream=stream)
        if result is None and not on_device[3]:
            result = transfers.to_host(x, (info, flags), stream, host_out)
        else:
            _read(info, flags, stream)
        failed = None
        if np.count_nonzero(flags):
            failed = flags.copy()
            if memory is None:  # the kept flags must be zero for the next call (the kernels only write failures)
                flags[:] = 0
                info.copy_to_device(flags, stream=stream.numba)
        if out is not None:
            return out, failed
        if result is not None:
            return result.reshape(shape), failed
        return (x if x.shape == shape else x.reshape(shape)), failed

    def __repr__(self):
        return f"<SolvePlan {self.shape} x {self.dtype.name}, {self.algorithm!r}>"


def choose(method, batch, n, dtype):
    """The name of the method that ``method=`` runs on (batch, n) systems of ``dtype``: itself, or
    for ``"auto"`` the fastest measured method that pivots (:func:`.registry.choose`, which
    returns the :class:`~.registry.Method`)."""
    return registry.choose(method, batch, n, dtype).name


@one_call_at_a_time
def _solve(a, b, c, d, method, out=None, stream=None):
    """``(x, failed)``: x and, if a system failed, a copy of every system's ``info`` (else None)."""
    arrays, on_device = check_systems(a, b, c, d)
    shape, dtype = tuple(arrays[3].shape), arrays[3].dtype
    key = ("tridiag.solve", dtype, shape, method, METHODS.version)
    return one_line_call(
        key, SolvePlan, (dtype, shape), {"method": method}, arrays, on_device, out, as_stream(stream), None
    )


def _rcond(a, b, c, info):
    """:func:`.condition.reciprocal_condition` of the systems, solved by ``method="auto"`` (a
    method that pivots) on the host copies of the bands; 0 where ``info`` says a system failed."""
    (a, b, c, _), on_device = check_systems(a, b, c, c)
    bands = [v.copy_to_host() if dev else v for v, dev in zip((a, b, c), on_device)]
    a, b, c = (v.reshape(-1, v.shape[-1]) for v in bands)

    def batch_solve(a, b, c, rhs):
        return _solve(a, b, c, rhs, "auto")[0]

    rcond = condition.reciprocal_condition(batch_solve, a, b, c)
    return np.where(info.reshape(-1) == SOLVED, rcond, 0.0)


def _flags(batch, stream):
    """A device array and a pinned host array of ``batch`` failure flags, kept per thread and
    stream (:func:`prefixsum.core.workspace.reused`), all zero: the kernels write only where a
    system fails, and a call zeroes them again after a failure, so a call need not clear them
    before it launches."""

    def make():
        return cuda.to_device(np.zeros(batch, np.int32)), cuda.pinned_array(batch, np.int32)

    return reused(("flags", batch), make, stream)


def _zero(info, stream):
    """Queue zeros into the caller's flags ``info`` on ``stream`` (its temporary storage holds
    anything at the start of a call)."""
    if simulating():
        info.copy_to_device(np.zeros(info.shape, info.dtype))
    else:
        numba_gpu.zero_bytes(info, info.nbytes, stream.pointer)


def _read(info, flags, stream):
    """The device flags ``info`` copied into the host's ``flags``, waiting for ``stream`` only."""
    if stream.key == 0:
        copy_to_host(info, flags)
        return
    info.copy_to_host(flags, stream=stream.numba)
    stream.synchronize()


def _staged(arrays, batch, n, dtype, stream):
    """Host systems sent to one (4, batch, n) device array by :func:`.transfers.send`, queued on
    ``stream``: packed into page-locked memory on the copy threads, then sent, or for small
    batches of C-contiguous arrays straight from the caller's.

    Returns the four (batch, n) device rows and a device array for x (:func:`solve` copies x out
    before it returns). Up to :data:`STAGED_BYTES` of inputs they are kept for the next call of
    this shape on this thread and stream (:func:`prefixsum.core.workspace.reused`); beyond,
    keeping would hold on to much device memory, so they are made for the call.
    """

    def make():
        device = cuda.device_array((4, batch, n), dtype)
        return device, tuple(device[k] for k in range(4)), cuda.device_array((batch, n), dtype)

    kept = 4 * batch * n * dtype.itemsize <= STAGED_BYTES
    device, rows, x = reused(("staged", batch, n, dtype), make, stream) if kept else make()
    transfers.send(device, 0, [v.reshape(batch, n) for v in arrays], stream.numba, transfers.packs(batch, n, dtype))
    return rows, x


def _as_matrix(v, batch, n, on_device, stream):
    """``v`` as a (batch, n) C-contiguous device array; host data is copied on ``stream``, so never modified."""
    if on_device:
        return v if v.shape == (batch, n) else v.reshape(batch, n)
    return cuda.to_device(np.ascontiguousarray(v.reshape(batch, n)), stream=stream.numba)


def _report(info):
    failed = np.flatnonzero(info)
    if failed.size:
        first = int(failed[0])
        raise np.linalg.LinAlgError(
            f"tridiagonal solve failed in system {first} of {info.size} ({failed.size} failed in all): "
            f"{REASONS[int(info[first])]}"
        )
