"""The registry of scan algorithms.

Every algorithm is one module that builds an :class:`Algorithm` and calls :func:`register`.
The public :func:`prefixsum.scan`, the tests, the demo (``python -m prefixsum``), the PTX test
and the benchmarks all walk :data:`ALGORITHMS`, so a new module needs no edits elsewhere.
"""
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

from ..core import device
from ..core.hardware import MAX_THREADS_PER_BLOCK, WARP_SIZE

SLOWEST_SIMULATION = (140, 4900)
"""The slowest simulator costs measured (microseconds per element, classroom and stock): the
default ``Algorithm.simulator_us_per_element``, and the estimate for a name not registered."""


@dataclass(frozen=True)
class Algorithm:
    """One scan algorithm, as the rest of the package sees it.

    Attributes
    ----------
    name : str
        The key in :data:`ALGORITHMS` and the value of ``scan(..., algorithm=name)``.
    run : callable
        ``run(x, out, op, inclusive, reverse, **options)``: scans the contiguous 1-D device
        array ``x`` into the device array ``out`` of the same length (n >= 1) and dtype.
    kernels : callable
        ``kernels(op, dtype, inclusive, reverse, **options)``: every ``(dispatcher, argtypes)``
        that ``run`` may launch for that configuration, for compiling to PTX.
    options : dict
        Option names and their defaults.
    check_options : callable
        ``check_options(**options)`` raises ValueError naming a bad value and the allowed ones.
    summary : str
        One line for tables: the idea, its work and depth.
    source : str
        The document or reference the algorithm comes from.
    auto_rank : int
        ``algorithm="auto"`` picks, among the registered algorithms it may use for n elements,
        the one with the highest rank.
    auto_min_n : int
        ``"auto"`` uses the algorithm only for n >= auto_min_n (from measurements: below, a
        lower-ranked one is faster).
    warp_level : bool
        Uses warp intrinsics (shuffles, votes), which numba's stock simulator lacks: "auto"
        passes over it when the stock simulator runs the kernels.
    fields : bool
        ``run`` and ``kernels`` take a user operator themselves, from the one source of the
        algorithm (:mod:`prefixsum.primitives.fields`): ``op`` an
        :class:`~prefixsum.primitives.fields.Operator`, ``dtype`` its tuple of dtypes, ``x``
        and ``out`` tuples of device arrays, one per field.
    combines_every_result : bool
        With a user operator, every element ``run`` writes is a value returned by the operator
        (never a raw input, nor the raw identity of an exclusive scan's first lane): the
        segmented scans' operators (:mod:`prefixsum.apps.segmented`) mark a result in its first
        combine and need that.
    prepare : callable or None
        ``prepare(op, dtype, inclusive, reverse, **options) -> scan_into(x, out)``: ``run`` for
        1-D device arrays of ``dtype`` and these settings, with what does not depend on ``x``
        worked out once (a repeated call of :func:`prefixsum.scan` on device arrays keeps it).
        None: such a call runs ``run`` with the same arguments.
    simulator_us_per_element : (float, float or None)
        Microseconds per element of a float32 add scan on the classroom simulator and on numba's
        stock one (None: the stock simulator cannot run it, it lacks warp intrinsics), for
        :func:`prefixsum.scans.api.simulation_seconds`. Measured on two shared cores of a cloud
        VM (classroom: about constant from n = 4096 to 65536, within 30 %; stock: at n = 2048)
        and rounded up, as a warning should not promise too much. The default,
        :data:`SLOWEST_SIMULATION`, is for an algorithm nobody measured.
    """

    name: str
    run: Callable
    kernels: Callable
    options: dict = field(default_factory=dict)
    check_options: Callable = lambda **options: None
    summary: str = ""
    source: str = ""
    auto_rank: int = 0
    auto_min_n: int = 0
    warp_level: bool = False
    fields: bool = False
    combines_every_result: bool = False
    prepare: Callable = None
    simulator_us_per_element: tuple = SLOWEST_SIMULATION

    def resolve_options(self, options):
        """Return the full option dict (defaults filled in), or raise ValueError for a bad one."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            allowed = ", ".join(sorted(self.options)) or "none"
            raise ValueError(f"unknown option {unknown[0]!r} for algorithm {self.name!r}; allowed options: {allowed}")
        resolved = {**self.options, **options}
        self.check_options(**resolved)
        return resolved


class _Registry(Mapping):
    """A read-only mapping name -> :class:`Algorithm`, iterated in registration order."""

    def __init__(self):
        self._items = {}
        self.version = 0  # registrations so far: what "auto" picks may change with each

    def __getitem__(self, name):
        return self._items[name]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __repr__(self):
        return f"ALGORITHMS{tuple(self._items)}"


ALGORITHMS = _Registry()


def register(algorithm):
    """Add ``algorithm`` to :data:`ALGORITHMS` (its name must be new) and return it."""
    if algorithm.name in ALGORITHMS._items or algorithm.name == "auto":
        raise ValueError(f"algorithm name {algorithm.name!r} is already taken")
    ALGORITHMS._items[algorithm.name] = algorithm
    ALGORITHMS.version += 1
    return algorithm


_AUTO_ORDER = {}


def lookup(name, n=0):
    """The :class:`Algorithm` called ``name``; ``"auto"``: the highest-ranked one for ``n`` elements.

    ``"auto"`` passes over warp-level algorithms where warp intrinsics are missing (numba's stock
    simulator) and over an algorithm whose ``auto_min_n`` is above ``n``.
    """
    if name == "auto":
        key = (device.warp_intrinsics(), len(ALGORITHMS))
        if key not in _AUTO_ORDER:
            _AUTO_ORDER[key] = sorted((a for a in ALGORITHMS.values() if key[0] or not a.warp_level),
                                      key=lambda a: -a.auto_rank)
        return next(a for a in _AUTO_ORDER[key] if n >= a.auto_min_n)
    try:
        return ALGORITHMS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown algorithm {name!r}; allowed: auto, {', '.join(ALGORITHMS)}") from None


def check_block_size(name, value, low=WARP_SIZE, high=MAX_THREADS_PER_BLOCK):
    """Raise ValueError unless ``value`` is a power of two in [low, high] (a block or tile size)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low or value > high or value & (value - 1):
        raise ValueError(f"option {name}={value!r} must be a power of two from {low} to {high}")
