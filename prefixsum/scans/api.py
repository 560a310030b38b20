"""The public scans: :func:`scan`, :func:`exclusive_scan`, and their plans (:func:`plan_scan`).

A call is a plan and its launch (:mod:`prefixsum.core.plans`): :func:`scan` finds the
:class:`ScanPlan` for the input's dtype and length and the call's operator, flags, algorithm and
options in the package's one plan cache (:data:`prefixsum.core.plans.PLANS`), making it the first
time, and calls it. On a GPU, a numba device array with the defaults' keywords is looked up
first, by exactly what the plan was made for (dtype, shape, operator, the flags with their
types, the algorithm, the registry's version): a repeated call checks no argument the key
proves, and goes straight to the result's memory and the launch. A caller who scans arrays of
one kind in a loop can hold the plan itself (:func:`plan_scan`).
"""

import os
import sys
import warnings

import numpy as np

from ..core import numba_gpu
from ..core.arithmetic import quiet_arithmetic
from ..core.arrays import result_maker
from ..core.device import classroom_simulator, simulating
from ..core.inputs import as_input
from ..core.plans import PLANS, Plan, check_out, one_line_call
from ..core.registry import Capability
from ..core.streams import as_stream
from ..core.workspace import one_call_at_a_time
from . import transfers, user_ops
from .ops import check_dtype, check_op
from .registry import ALGORITHMS, SLOWEST_SIMULATION, lookup

SLOW_SIMULATION_S = 5.0
"""A scan the simulator is expected to take longer than this (seconds) for is announced first."""

_announced_slow = False
# numba's device array on a GPU (None on the simulator): its type is checked first, as asking an
# array for __cuda_array_interface__ builds a dictionary.
_NUMBA_DEVICE_ARRAY = numba_gpu.numba_array_type()
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANS_GET = PLANS.get  # the plan cache's lookup, as a module global: one name lookup on the fast path


@one_call_at_a_time
def scan(
    x, op="add", *, inclusive=True, reverse=False, algorithm="auto", identity=None, out=None, stream=None, **options
):
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
        gives element i as ``x[n-1] op ... op x[i]``.
    identity : scalar or tuple, optional
        Required with a user operator, and only allowed with one: the element e with
        ``op(e, x) == x == op(x, e)``, one value per array of a tuple.
    inclusive : bool, default True
        Element i combines ``x[0..i]``. If False, ``x[0..i-1]``, and element 0 is the identity
        (0, 1, the dtype's lowest value or -inf, its highest value or +inf).
    reverse : bool, default False
        Suffix scan: element i combines ``x[i..n-1]`` (``x[i+1..n-1]`` if exclusive).
    algorithm : str, default "auto"
        A name in :data:`prefixsum.ALGORITHMS`, or "auto" for the fastest registered one (the
        fastest whole call measured, ``benchmarks/lookback.csv``).
    out : array, optional
        Where the result goes: of ``x``'s kind (a device array for device input, a numpy array
        for numpy input), length and dtype, contiguous, sharing no memory with ``x`` (a tuple of
        them for a tuple ``x``, None where a new array will do). None: a new array.
    stream : optional
        The stream the scan is queued on: a numba stream, a PyTorch or CuPy stream, or anything
        with ``__cuda_stream__`` (:mod:`prefixsum.core.streams`). None: numba's default stream.
        A device result is returned at once (the work is queued); a numpy result waits for this
        stream only. Ignored on the simulator, where every launch runs at once.
    **options
        Parameters of the algorithm (``block_size=256`` for "ladder", ...).

    Returns
    -------
    numpy.ndarray or numba device array
        The same kind as ``x`` (numpy in, numpy out; device in, device out; a tuple of them for a
        tuple), same length and dtype, in this machine's byte order; ``out`` when given. max and
        min propagate NaN as ``np.maximum`` and ``np.minimum`` do; inf + -inf is NaN, without
        numpy's RuntimeWarning.

    Warns
    -----
    UserWarning
        Once per process, before a scan that the CUDA simulator is expected to take more than
        :data:`SLOW_SIMULATION_S` seconds for (see :func:`announce_slow_simulation`).

    Raises
    ------
    TypeError
        Unsupported dtype (bool, float16, complex, object, strings), a device array in the
        other byte order, ``out`` of the wrong kind or dtype, or ``stream`` not a stream.
    ValueError
        ``x`` not 1-D, unknown op, algorithm or option, an invalid option value, or ``out`` of
        the wrong shape.

    Notes
    -----
    Thread safety: calls from several threads, and on several streams, may run at once; each
    takes its temporary storage from its own thread's and stream's workspace
    (:mod:`prefixsum.core.workspace`).

    Examples
    --------
    >>> import numpy as np, prefixsum as ps
    >>> ps.scan(np.array([3, 2, 1, 2], dtype=np.int32))
    array([3, 5, 6, 8], dtype=int32)
    >>> ps.scan(np.array([3, 2, 1, 2], dtype=np.int32), inclusive=False, reverse=True)
    array([5, 3, 2, 0], dtype=int32)
    """
    if type(x) is _NUMBA_DEVICE_ARRAY and out is None and not options and identity is None:  # seen before?
        try:
            plan = PLANS_GET(
                (
                    "scan",
                    x.dtype,
                    x.shape,
                    op,
                    type(inclusive),
                    inclusive,
                    type(reverse),
                    reverse,
                    algorithm,
                    ALGORITHMS.version,
                )
            )
        except TypeError:  # an unhashable op or flag: the checks below refuse it
            plan = None
        if plan is not None and x.is_c_contiguous():
            return plan.run_device(x, None if stream is None else as_stream(stream))
    fields, bare, on_device = _accept(x, _user(op, identity))
    n = fields[0].shape[0]
    dtypes = np.dtype(fields[0].dtype) if bare else tuple(np.dtype(f.dtype) for f in fields)
    key = ("scan", dtypes, (n,), op, type(inclusive), inclusive, type(reverse), reverse, algorithm, ALGORITHMS.version)
    if options or identity is not None:
        key += (identity, tuple((name, type(value), value) for name, value in options.items()))
    if simulating():
        key += (classroom_simulator(),)  # what "auto" may pick: numba's stock simulator lacks warp intrinsics
    return one_line_call(
        key,
        ScanPlan,
        (dtypes, n, op),
        dict(inclusive=inclusive, reverse=reverse, algorithm=algorithm, identity=identity, **options),
        fields,
        bare,
        on_device,
        out,
        as_stream(stream),
        None,
    )


def exclusive_scan(x, op="add", **kw):
    """:func:`scan` with ``inclusive=False``: element i combines ``x[0..i-1]``."""
    return scan(x, op, inclusive=False, **kw)


def plan_scan(dtype, n, op="add", *, inclusive=True, reverse=False, algorithm="auto", identity=None, **options):
    """A :class:`ScanPlan`: :func:`scan` of ``n`` elements of ``dtype`` worked out once, to call in a loop.

    Parameters
    ----------
    dtype : numpy dtype, or a tuple of them
        The elements' dtype (a tuple: one dtype per array of a user operator's tuple).
    n : int
        Elements per call, n >= 0.
    op, inclusive, reverse, algorithm, identity, **options
        As :func:`scan`'s.

    Returns
    -------
    ScanPlan
        ``plan(x, out=None, *, stream=None, temp=None)`` scans ``x`` (numpy or device, of this
        dtype and length) as :func:`scan` would; ``plan.algorithm`` is the algorithm chosen,
        ``plan.kernels`` what it launches, ``plan.temp_bytes`` the temporary storage it takes from
        ``temp=`` (None: it takes none).

    Raises
    ------
    TypeError, ValueError
        As :func:`scan`'s, for the dtype, the operator, the flags, the algorithm and the options.

    Examples
    --------
    >>> import numpy as np, prefixsum as ps
    >>> plan = ps.plan_scan(np.int32, 4)
    >>> plan(np.array([3, 2, 1, 2], dtype=np.int32))
    array([3, 5, 6, 8], dtype=int32)
    """
    if isinstance(dtype, (list, tuple)):
        dtype = tuple(np.dtype(d) for d in dtype)
    else:
        dtype = np.dtype(dtype)
    return ScanPlan(
        dtype, n, op, inclusive=inclusive, reverse=reverse, algorithm=algorithm, identity=identity, **options
    )


class ScanPlan(Plan):
    """A scan of ``n`` elements of one dtype (or of a user operator's tuple of dtypes) with its
    arguments checked, its algorithm chosen and prepared; made by :func:`plan_scan` (and kept by
    :func:`scan`).

    Call it as ``plan(x, out=None, *, stream=None, temp=None)`` (see :mod:`prefixsum.core.plans`
    for ``out``, ``stream`` and ``temp``). It holds no per-call state: one plan may be called from
    several threads and streams at once.

    Attributes
    ----------
    dtype : numpy.dtype or tuple of numpy.dtype
    n : int
    algorithm : str
        The algorithm's name (the registry's choice for ``"auto"``).
    kernels : tuple
        Every ``(dispatcher, argtypes)`` a call may launch.
    temp_bytes : int or None
        Bytes a call takes from ``temp=``; None: the algorithm takes none.

    The constructor's ``needs`` (capability flags, :class:`prefixsum.core.registry.Capability`)
    restricts the algorithms to those that have them (the segmented scans ask for
    ``COMBINES_EVERY_RESULT``).
    """

    def __init__(
        self,
        dtype,
        n,
        op="add",
        *,
        inclusive=True,
        reverse=False,
        algorithm="auto",
        identity=None,
        needs=Capability.NONE,
        **options,
    ):
        for flag, value in (("inclusive", inclusive), ("reverse", reverse)):
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{flag} must be True or False; got {value!r}")
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
            raise ValueError(f"n must be an integer >= 0; got {n!r}")
        n = int(n)
        self.fields = isinstance(dtype, tuple)
        if self.fields or _user(op, identity):
            if isinstance(op, str):
                raise ValueError(
                    f"the built-in op {op!r} takes one array and no identity; a tuple x or an identity "
                    "needs a user operator (a @cuda.jit(device=True) function)"
                )
            dtypes = dtype if self.fields else (dtype,)
            for k, field_dtype in enumerate(dtypes):
                try:
                    check_dtype(field_dtype)
                except TypeError as error:
                    raise TypeError(f"x[{k}]: {error}" if self.fields else str(error)) from None
            op = user_ops.operator_for(op, identity, list(dtypes), not self.fields)
            chosen = lookup(algorithm, n, None, Capability.USER_OPERATOR | needs)
            dtype = op.dtypes
        else:
            dtype = check_dtype(dtype)
            check_op(op)
            chosen = lookup(algorithm, n, dtype, needs)
        resolved = chosen.resolve_options(options)
        self.dtype, self.n, self.shape, self.algorithm = dtype, n, (n,), chosen.name
        self.user = isinstance(op, user_ops.Operator)
        self.bare = not self.fields
        self._prepared = chosen.prepared(op, dtype, n, bool(inclusive), bool(reverse), resolved) if n else None
        self.temp_bytes = self._prepared.temp_bytes if n else 0
        dtypes = dtype if self.user else (dtype,)
        self._makers = [result_maker(n, d) for d in dtypes]
        self._launch = self._prepared.launch if n else None

    def _list_kernels(self):
        return self._prepared.kernels() if self._prepared else ()

    def run_device(self, x, stream):
        """The scan of numba's contiguous device array ``x`` of the plan's dtype and length on
        ``stream`` (a :class:`~prefixsum.core.streams.Stream`, or None for numba's default stream),
        for a built-in operator: the fast path of :func:`scan`, whose key proved everything else."""
        result = self._makers[0](0 if stream is None else stream.key)
        if self.n:
            self._launch(x, result, stream, None)
        return result

    @one_call_at_a_time
    def __call__(self, x, out=None, *, stream=None, temp=None):
        where = as_stream(stream)
        if (
            type(x) is _NUMBA_DEVICE_ARRAY
            and out is None
            and temp is None
            and not self.user
            and x.shape == self.shape
            and x.dtype == self.dtype
            and x.is_c_contiguous()
        ):
            return self.run_device(x, where)
        fields, bare, on_device = _accept(x, self.user)
        if self.bare != bare:
            raise ValueError(
                f"this plan scans {'one array' if self.bare else 'a tuple of arrays'}; "
                f"got {'one array' if bare else 'a tuple'}"
            )
        dtypes = self.dtype if self.user else (self.dtype,)
        got = tuple(np.dtype(f.dtype) for f in fields)
        if got != dtypes or fields[0].shape[0] != self.n:
            raise ValueError(
                f"this plan scans {self.n} elements of {_names(dtypes)}; got {fields[0].shape[0]} of {_names(got)}"
            )
        return self.run(fields, bare, on_device, out, where, None if temp is None else self.check_temp(temp))

    def run(self, fields, bare, on_device, out, stream, temp):
        """The scan of the checked arrays ``fields`` (one, or one per field; on the device when
        ``on_device``) into ``out`` (checked here) or new results, on ``stream``; the result in the
        caller's structure (one array when ``bare``)."""
        outs = _outs(out, fields, bare, on_device, self.n)
        if on_device:
            results = [o if o is not None else make(stream.key) for o, make in zip(outs, self._makers)]
            if self.n:
                self._run(fields, results, stream, temp)
        else:
            chunks = None if self.user or not self.n else self._prepared.chunks
            results = self._simulated(
                transfers.round_trip, fields, outs, stream, self._host_launch(stream, temp), chunks, temp
            )
        return results[0] if bare else tuple(results)

    def _host_launch(self, stream, temp):
        """``launch(sources, targets)`` of a numpy call's device copies (:func:`.transfers.round_trip`)."""
        if self.user:
            return lambda sources, targets: self._launch(tuple(sources), tuple(targets), stream, temp)
        return lambda sources, targets: self._launch(sources[0], targets[0], stream, temp)

    def _run(self, sources, targets, stream, temp):
        if self.user:
            self._simulated(self._launch, tuple(sources), tuple(targets), stream, temp)
        else:
            self._simulated(self._launch, sources[0], targets[0], stream, temp)

    def _simulated(self, launch, *args):
        """``launch(*args)``; on the simulator announced first when slow, and quiet."""
        if not simulating():
            return launch(*args)
        announce_slow_simulation(self.n, self.algorithm, stacklevel=_outside_the_package())
        with quiet_arithmetic():
            return launch(*args)

    def __repr__(self):
        return f"<ScanPlan {self.n} x {_names(self.dtype if self.user else (self.dtype,))}, {self.algorithm!r}>"


def _user(op, identity):
    """Whether the call takes a user operator (a device function, or an identity with a string op, which is refused)."""
    return callable(op) or identity is not None


def _accept(x, user):
    """``(fields, bare, on_device)``: the arrays of ``x`` checked (:func:`prefixsum.core.inputs.as_input`),
    one for one array, one per field for a tuple (``user``: a user operator's call), all numpy or
    all device arrays of one length."""
    bare = not isinstance(x, tuple)
    if isinstance(x, list) and user:
        raise TypeError("x is a list; give a tuple of arrays (a structure of arrays), or one array")
    if not bare and not x:
        raise ValueError("x is an empty tuple; give one array or a tuple of equal-length 1-D arrays")
    fields, kinds = [], []
    for k, field in enumerate([x] if bare else x):
        try:
            array, on_device = as_input(field, "x" if bare else f"x[{k}]", check=check_dtype)
        except TypeError as error:
            if bare:
                raise
            raise TypeError(f"x[{k}]: {error}") from None
        fields.append(array)
        kinds.append(on_device)
    if len(set(kinds)) > 1:
        raise ValueError(
            "the fields of x must be all numpy arrays or all device arrays; got "
            + ", ".join("device" if d else "host" for d in kinds)
        )
    lengths = [f.shape[0] for f in fields]
    if len(set(lengths)) > 1:
        raise ValueError(
            f"{' and '.join(f'x[{k}]' for k in range(len(fields)))} must have one length; got "
            f"{' and '.join(map(str, lengths))}"
        )
    return fields, bare, kinds[0]


def _outs(out, fields, bare, on_device, n):
    """``out`` checked against the results of ``fields`` (a list, one per field; None where a new one is made)."""
    if out is None:
        return [None] * len(fields)
    given = [out] if bare else out
    if not bare and not (isinstance(out, tuple) and len(out) == len(fields)):
        raise TypeError(f"out must be a tuple of {len(fields)} arrays, one per array of x; got {type(out).__name__}")
    return [
        None if o is None and not bare else check_out(o, n, f.dtype, on_device, f, "out" if bare else f"out[{k}]")
        for k, (o, f) in enumerate(zip(given, fields))
    ]


def _names(dtypes):
    return ", ".join(np.dtype(d).name for d in dtypes)


def _outside_the_package():
    """The ``stacklevel`` of a warning raised by the caller of this function that points at the
    first frame outside the package (the user's line)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


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
        UserWarning,
        stacklevel=stacklevel + 1,
    )
    return True
