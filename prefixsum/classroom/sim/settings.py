"""The simulator's switches: whether it runs launches, whether it refuses negative indices, and
its device model (how many blocks are resident at once, and the seed of their order).

All live on one object, :data:`settings`, that the launch and the arrays read. The public
functions set a switch at once and return a context manager that restores the previous value on
exit, so that both uses work::

    prefixsum.sim.allow_negative_indices()          # from now on
    with prefixsum.sim.enabled(False):              # numba's stock simulator, inside only
        kernel[blocks, threads](x)
    with prefixsum.sim.resident_blocks(1):          # blocks one after another, as numba's
        kernel[blocks, threads](x)
    with prefixsum.sim.block_order_seed(7):         # another interleaving of the resident blocks
        kernel[blocks, threads](x)
"""

import numbers

DEFAULT_RESIDENT_BLOCKS = 4
"""Blocks of a launch resident at once in the simulator's device model (:mod:`.scheduler`)."""

DEFAULT_SEED = 0
"""The seed of the order in which resident blocks take turns, unless set."""


class Settings:
    """The switches' current values."""

    __slots__ = ("enabled", "allow_negative", "resident", "seed")

    def __init__(self):
        self.enabled = True
        """Whether launches run in this simulator (else in numba's stock one)."""
        self.allow_negative = False
        """Whether a negative index into a device array wraps as in Python (else it raises)."""
        self.resident = DEFAULT_RESIDENT_BLOCKS
        """How many blocks of a launch are resident (run interleaved) at once."""
        self.seed = DEFAULT_SEED
        """The seed of the resident blocks' order; None draws a fresh one for every launch."""


settings = Settings()


class _Change:
    """Set a switch of :data:`settings` now; as a context manager, restore it on exit."""

    def __init__(self, name, value):
        self._name = name
        self._previous = getattr(settings, name)
        setattr(settings, name, value)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        setattr(settings, self._name, self._previous)


def enabled(flag=True):
    """Run launches in this simulator (True, the default) or in numba's stock simulator (False).

    Takes effect at once; used in a ``with`` statement, the previous setting is restored on exit.
    """
    return _Change("enabled", bool(flag))


def allow_negative_indices(allow=True):
    """Permit (True) or refuse (False, the initial setting) negative indices into device arrays.

    Takes effect at once; used in a ``with`` statement, the previous setting is restored on exit.
    """
    return _Change("allow_negative", bool(allow))


def resident_blocks(count=DEFAULT_RESIDENT_BLOCKS):
    """Let ``count`` blocks of a launch be resident at once (the default is 4; 1 runs the blocks
    one after another, as numba's stock simulator does).

    Takes effect at once; used in a ``with`` statement, the previous setting is restored on exit.

    Raises
    ------
    TypeError, ValueError
        ``count`` is not an integer, or is below 1.
    """
    if isinstance(count, bool) or not isinstance(count, numbers.Integral):
        raise TypeError(f"resident_blocks takes an integer count of blocks, not {count!r}")
    if count < 1:
        raise ValueError(f"resident_blocks needs at least 1 resident block, not {count}")
    return _Change("resident", int(count))


def block_order_seed(seed=DEFAULT_SEED):
    """Seed the order in which resident blocks take turns (the default seed is 0); ``None`` draws
    a fresh seed for every launch, which an error of the launch then prints.

    Takes effect at once; used in a ``with`` statement, the previous setting is restored on exit.

    Raises
    ------
    TypeError, ValueError
        ``seed`` is neither None nor an integer, or is negative.
    """
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"block_order_seed takes an integer seed or None, not {seed!r}")
        if seed < 0:
            raise ValueError(f"block_order_seed takes a seed of at least 0, not {seed}")
        seed = int(seed)
    return _Change("seed", seed)
