"""The checker's mode: default sizes, the seed, ``thorough()`` and ``time_limit()``."""
import contextlib

from .. import child as _child

DEFAULT_SIZES = (1, 2, 31, 32, 33, 100, 255, 256, 257, 1000, 2049)
DIAGNOSES = ("pass", "not-associative", "wrong-identity", "wrong-result", "unwritten-output", "race", "out-of-bounds",
             "uninitialized-read", "barrier-divergence", "exception", "timeout", "race-between-blocks", "stale-read",
             "plain-load-poll", "deadlock", "over-budget")
_SEED = 20261121
# Sizes that :func:`thorough` adds to a check's own (those up to its largest size).
_THOROUGH_SIZES = (3, 5, 7, 16, 17, 63, 64, 65, 127, 128, 129, 511, 512, 513, 1023, 1024, 1025)
_mode = {"thorough": False, "timeout": None}
_child.carry("check", lambda: dict(_mode), _mode.update)  # thorough() and time_limit() reach the worker's checks


@contextlib.contextmanager
def _setting(key, value):
    old = _mode[key]
    _mode[key] = value
    try:
        yield
    finally:
        _mode[key] = old


def thorough():
    """A context in which every scan check also runs more sizes, on other random inputs.

    A check stops at the first problem, on a dozen sizes; the mutation test
    (:mod:`prefixsum.classroom.mutation`) asks whether a mutant the check passes is really
    equivalent to the solution, and runs the same check, thorough, as the oracle.
    """
    return _setting("thorough", True)


def time_limit(seconds):
    """A context in which no scan check waits longer than ``seconds`` for one run (mutants may hang)."""
    return _setting("timeout", seconds)


def _sizes_and_seed(sizes):
    """The sizes and the seed of a check, widened inside :func:`thorough`."""
    if not _mode["thorough"]:
        return sizes, _SEED
    every = sorted(set(sizes) | {s for s in _THOROUGH_SIZES if s <= max(sizes)}
                   | (set(range(1, max(sizes) + 1)) if max(sizes) <= 64 else set()))
    return tuple(every), _SEED + 7919
