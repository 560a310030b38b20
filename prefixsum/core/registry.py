"""One registry shape for every family of methods: the scans' algorithms, the tridiagonal solvers, the
applications' methods.

A family keeps its methods in a :class:`Registry`: a read-only mapping name -> entry in the
order of registration, to which each method's own module adds itself (so that a new method is
one new file, and no other module names it). An entry is a :class:`Entry` (the family subclasses
it with what its plans call): a name, its :class:`Capability` flags, its options and their
check, and a rank. :meth:`Registry.choose` answers ``"auto"``: among the entries able to do what
the call needs (``needs``: flags every candidate must have) on this device (an entry that needs
warp intrinsics is passed over where they are missing), the fastest measured at the length
nearest the call's (``measured``: the family's reading of its committed CSVs), else the highest
``auto_rank``.
"""

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

from . import device


class Capability(enum.Flag):
    """What a method can do, or needs, as flags (``Capability.USER_OPERATOR | Capability.CHUNKED``)."""

    NONE = 0
    WARP_INTRINSICS = enum.auto()
    """Needs warp intrinsics (shuffles, votes), which numba's stock simulator lacks."""
    USER_OPERATOR = enum.auto()
    """Carries a user operator on tuples of fields (the scans; :mod:`prefixsum.primitives.fields`)."""
    COMBINES_EVERY_RESULT = enum.auto()
    """Every element it writes is a value the operator returned (the segmented scans need it)."""
    CHUNKED = enum.auto()
    """Launches a range of tiles at a time, so that a numpy call's copies overlap its launches."""
    CALLER_TEMP = enum.auto()
    """Takes its temporary storage from the caller (``temp=`` of a plan)."""
    PIVOTS = enum.auto()
    """Right on every nonsingular system (a tridiagonal method with partial pivoting, or one that
    routes the systems it cannot solve safely to one)."""
    NEEDS_DOMINANCE = enum.auto()
    """Safe only on diagonally dominant or symmetric positive definite systems (a tridiagonal
    method without pivoting): elsewhere it may lose every digit without an error."""
    BATCHED = enum.auto()
    """Solves a batch of independent systems in one call (every tridiagonal method does)."""


WORDS = {
    Capability.WARP_INTRINSICS: "use warp intrinsics",
    Capability.USER_OPERATOR: "carry a user operator",
    Capability.COMBINES_EVERY_RESULT: "combine every element before writing it",
    Capability.CHUNKED: "launch a range of tiles",
    Capability.CALLER_TEMP: "take the caller's temporary storage",
    Capability.PIVOTS: "solve every nonsingular system",
    Capability.NEEDS_DOMINANCE: "be safe only on diagonally dominant systems",
    Capability.BATCHED: "solve a batch",
}
"""What each flag lets a method do, for messages ("... cannot carry a user operator")."""


@dataclass(frozen=True)
class Entry:
    """A method of a family, as its registry and plans see it.

    Attributes
    ----------
    name : str
        The key in the registry, and the value of ``algorithm=`` that names it.
    capabilities : Capability
        What it can do (and :attr:`Capability.WARP_INTRINSICS`: what it needs).
    options : dict
        Option names and their defaults.
    check_options : callable
        ``check_options(**options)`` raises ValueError naming a bad value and the allowed ones.
    summary : str
        One line for tables: the idea, its work and depth.
    source : str
        Where the method comes from (a paper, a lecture's notes).
    auto_rank : int
        ``"auto"`` takes, where nothing was measured, the able entry of the highest rank.
    auto_min_n : int
        ``"auto"`` takes it only for n >= auto_min_n.
    """

    name: str
    capabilities: Capability = Capability.NONE
    options: dict = field(default_factory=dict)
    check_options: Callable = lambda **options: None
    summary: str = ""
    source: str = ""
    auto_rank: int = 0
    auto_min_n: int = 0

    def can(self, needs):
        """Whether it has every flag of ``needs``."""
        return needs in self.capabilities

    def resolve_options(self, options):
        """Return the full option dict (defaults filled in), or raise ValueError for a bad one."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            allowed = ", ".join(sorted(self.options)) or "none"
            raise ValueError(f"unknown option {unknown[0]!r} for algorithm {self.name!r}; allowed options: {allowed}")
        resolved = {**self.options, **options}
        self.check_options(**resolved)
        return resolved


class Registry(Mapping):
    """A read-only mapping name -> :class:`Entry`, iterated in registration order.

    Parameters
    ----------
    kind : str
        What an entry is called in messages ("algorithm").
    measured : callable, optional
        ``measured(names, n, dtype) -> {name: microseconds}``: the family's measured times of
        those entries at the size nearest ``n`` (its committed CSVs); ``{}`` where it has none.
        ``n`` is what the family's calls pass to :meth:`choose`: a length, or another size key
        (a tridiagonal batch's ``(batch, n)``), with ``auto_min_n`` then unused.
    """

    def __init__(self, kind, measured=None):
        self.kind = kind
        self.measured = measured or (lambda names, n, dtype: {})
        self._items = {}
        self.version = 0  # registrations so far: what "auto" picks may change with each

    def __getitem__(self, name):
        return self._items[name]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __repr__(self):
        return f"{type(self).__name__}{tuple(self._items)}"

    def register(self, entry):
        """Add ``entry`` (its name must be new, and not "auto") and return it."""
        if entry.name in self._items or entry.name == "auto":
            raise ValueError(f"{self.kind} name {entry.name!r} is already taken")
        self._items[entry.name] = entry
        self.version += 1
        return entry

    def able(self, needs=Capability.NONE):
        """The entries with every flag of ``needs`` that run on this device, in registration order."""
        warp = device.warp_intrinsics()
        return [
            e
            for e in self._items.values()
            if e.can(needs) and (warp or Capability.WARP_INTRINSICS not in e.capabilities)
        ]

    def lookup(self, name, needs=Capability.NONE):
        """The entry called ``name``, or ValueError naming the allowed ones (and what ``needs`` asks)."""
        try:
            entry = self._items[name]
        except (KeyError, TypeError):
            raise ValueError(f"unknown {self.kind} {name!r}; allowed: auto, {', '.join(self._items)}") from None
        if not entry.can(needs):
            missing = [words for flag, words in WORDS.items() if flag in needs and flag not in entry.capabilities]
            able = [e.name for e in self._items.values() if e.can(needs)]
            raise ValueError(
                f"{self.kind} {name!r} cannot {' or '.join(missing)}; those that can: auto, {', '.join(able)}"
            )
        return entry

    def choose(self, name, n=0, dtype=None, needs=Capability.NONE):
        """The entry for ``algorithm=name``: ``"auto"`` is the fastest measured able entry at the
        length nearest ``n`` (see the class), else the highest-ranked able one; any other name
        is :meth:`lookup`'s."""
        if name != "auto":
            return self.lookup(name, needs)
        able = [e for e in self.able(needs) if not isinstance(n, int) or n >= e.auto_min_n]
        if not able:
            raise ValueError(
                f"no {self.kind} here can {' and '.join(words for f, words in WORDS.items() if f in needs)}"
            )
        times = self.measured(tuple(e.name for e in able), n, dtype)
        if times:
            return min((e for e in able if e.name in times), key=lambda e: (times[e.name], -e.auto_rank))
        return max(able, key=lambda e: e.auto_rank)
