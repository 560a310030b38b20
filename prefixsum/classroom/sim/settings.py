"""The simulator's two switches: whether it runs launches, and whether it refuses negative indices.

Both live on one object, :data:`settings`, that the launch and the arrays read. The public
functions set a switch at once and return a context manager that restores the previous value on
exit, so that both uses work::

    prefixsum.sim.allow_negative_indices()          # from now on
    with prefixsum.sim.enabled(False):              # numba's stock simulator, inside only
        kernel[blocks, threads](x)
"""


class Settings:
    """The switches' current values."""

    __slots__ = ("enabled", "allow_negative")

    def __init__(self):
        self.enabled = True
        """Whether launches run in this simulator (else in numba's stock one)."""
        self.allow_negative = False
        """Whether a negative index into a device array wraps as in Python (else it raises)."""


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
