"""The registry of scan algorithms.

Every algorithm is one module that builds an :class:`Algorithm` and calls :func:`register`.
The public :func:`prefixsum.scan` and its plans (:func:`prefixsum.plan_scan`), the tests, the
demo (``python -m prefixsum``), the PTX test and the benchmarks all walk :data:`ALGORITHMS`, so a
new module needs no edits elsewhere. The registry has the shape of every family's
(:class:`prefixsum.core.registry.Registry`): capabilities as flags, and ``"auto"`` chosen from the
committed measurements (:func:`call_times`).
"""

from dataclasses import dataclass
from typing import Callable, NamedTuple

from ..core import tables
from ..core.hardware import MAX_THREADS_PER_BLOCK, WARP_SIZE
from ..core.registry import Capability, Entry, Registry

SLOWEST_SIMULATION = (140, 4900)
"""The slowest simulator costs measured (microseconds per element, classroom and stock): the
default ``Algorithm.simulator_us_per_element``, and the estimate for a name not registered."""
CALL_TABLE = "lookback.csv"
"""The committed table whose whole calls on device arrays (rows ``ps.scan(NAME)``, part ``call on
device``) rank the algorithms for ``"auto"``."""


class Prepared(NamedTuple):
    """What an algorithm worked out once for one plan (:meth:`Algorithm.prepared`).

    Attributes
    ----------
    launch : callable
        ``launch(x, out, stream, temp)``: scans the device array ``x`` of the plan's n >= 1
        elements into ``out`` (tuples of arrays, one per field, for a user operator) on ``stream``
        (a :class:`~prefixsum.core.streams.Stream`), with the caller's ``temp`` (a uint8 device
        array of at least ``temp_bytes``) or, if None, the workspace's storage of this thread and stream.
    kernels : callable
        ``kernels()``: every ``(dispatcher, argtypes)`` that ``launch`` may use.
    temp_bytes : int or None
        Bytes ``launch`` takes from ``temp``; None: it keeps its storage in the workspace.
    chunks : Chunks or None
        For a :attr:`~prefixsum.core.registry.Capability.CHUNKED` algorithm: its launch over a
        range of tiles, for a numpy call whose copies overlap the scan (:mod:`.transfers`).
    """

    launch: Callable
    kernels: Callable
    temp_bytes: object = None
    chunks: object = None


class Chunks(NamedTuple):
    """A scan launched a range of tiles at a time (:attr:`Prepared.chunks`).

    Attributes
    ----------
    tile : int
        Elements per tile.
    begin : callable
        ``begin(stream) -> state``: what every range of one call shares (the look-back's tile states).
    launch : callable
        ``launch(x, out, state, first, count, stream)``: scans tiles ``first .. first + count - 1``,
        finding the carry of the tiles before in ``state``; one stream keeps the ranges in order.
    reverse : bool
        Tile 0 is at the end of the array (a suffix scan): the ranges go from the end.
    """

    tile: int
    begin: Callable
    launch: Callable
    reverse: bool


@dataclass(frozen=True)
class Algorithm(Entry):
    """One scan algorithm, as the rest of the package sees it (the fields of
    :class:`~prefixsum.core.registry.Entry`, and these).

    Attributes
    ----------
    run : callable
        ``run(x, out, op, inclusive, reverse, *, stream=None, **options)``: scans the contiguous
        1-D device array ``x`` into the device array ``out`` of the same length (n >= 1) and
        dtype, on ``stream`` (a :class:`~prefixsum.core.streams.Stream`; None: numba's default).
        With :attr:`~prefixsum.core.registry.Capability.USER_OPERATOR`, ``op`` may be an
        :class:`~prefixsum.primitives.fields.Operator` and ``x``, ``out`` tuples of arrays, one per field.
    kernels : callable
        ``kernels(op, dtype, inclusive, reverse, **options)``: every ``(dispatcher, argtypes)``
        that ``run`` may launch for that configuration, for compiling to PTX.
    prepare : callable or None
        ``prepare(op, dtype, n, inclusive, reverse, **options) -> Prepared``: what does not depend
        on the arrays, worked out once for a plan. None: :meth:`prepared` makes one from ``run``.
    simulator_us_per_element : (float, float or None)
        Microseconds per element of a float32 add scan on the classroom simulator and on numba's
        stock one (None: the stock simulator cannot run it, it lacks warp intrinsics), for
        :func:`prefixsum.scans.api.simulation_seconds`. Measured on two shared cores of a cloud
        VM (classroom: about constant from n = 4096 to 65536, within 30 %; stock: at n = 2048)
        and rounded up, as a warning should not promise too much. The default,
        :data:`SLOWEST_SIMULATION`, is for an algorithm nobody measured.
    """

    run: Callable = None
    kernels: Callable = None
    prepare: Callable = None
    simulator_us_per_element: tuple = SLOWEST_SIMULATION

    @property
    def warp_level(self):
        """Whether it needs warp intrinsics (:attr:`~prefixsum.core.registry.Capability.WARP_INTRINSICS`)."""
        return Capability.WARP_INTRINSICS in self.capabilities

    @property
    def fields(self):
        """Whether it carries a user operator (:attr:`~prefixsum.core.registry.Capability.USER_OPERATOR`)."""
        return Capability.USER_OPERATOR in self.capabilities

    @property
    def combines_every_result(self):
        """:attr:`~prefixsum.core.registry.Capability.COMBINES_EVERY_RESULT`."""
        return Capability.COMBINES_EVERY_RESULT in self.capabilities

    def prepared(self, op, dtype, n, inclusive, reverse, options):
        """:attr:`prepare`'s :class:`Prepared`, or one that calls :attr:`run` with these arguments."""
        if self.prepare is not None:
            return self.prepare(op, dtype, n, inclusive, reverse, **options)
        run, kernels = self.run, self.kernels

        def launch(x, out, stream, temp):
            run(x, out, op, inclusive, reverse, stream=stream, **options)

        return Prepared(launch, lambda: kernels(op, dtype, inclusive, reverse, **options))


def call_times(names, n, dtype):
    """``{name: microseconds}``: the whole calls of :data:`CALL_TABLE` on device arrays of these
    algorithms, at the measured length nearest ``n``, of ``dtype``'s rows (any dtype's where it has none)."""
    calls = [row for row in tables.rows(CALL_TABLE) if row.get("part") == "call on device"]
    dtype_name = getattr(dtype, "name", None)
    of_dtype = [row for row in calls if row["dtype"] == dtype_name] or calls
    wanted = {f"ps.scan({name})": name for name in names}
    rows = [row for row in of_dtype if row["variant"] in wanted]
    length = tables.nearest({int(row["n"]) for row in rows}, n)
    return {wanted[row["variant"]]: float(row["median_us"]) for row in rows if int(row["n"]) == length}


ALGORITHMS = Registry("algorithm", measured=call_times)


def register(algorithm):
    """Add ``algorithm`` to :data:`ALGORITHMS` (its name must be new) and return it."""
    return ALGORITHMS.register(algorithm)


def lookup(name, n=0, dtype=None, needs=Capability.NONE):
    """The :class:`Algorithm` for ``algorithm=name`` (:meth:`~prefixsum.core.registry.Registry.choose`):
    ``"auto"`` is the fastest measured for ``n`` elements of ``dtype`` among those able to do
    ``needs`` here (warp-level ones are passed over where warp intrinsics are missing: numba's
    stock simulator)."""
    return ALGORITHMS.choose(name, n, dtype, needs)


def check_block_size(name, value, low=WARP_SIZE, high=MAX_THREADS_PER_BLOCK):
    """Raise ValueError unless ``value`` is a power of two in [low, high] (a block or tile size)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low or value > high or value & (value - 1):
        raise ValueError(f"option {name}={value!r} must be a power of two from {low} to {high}")
