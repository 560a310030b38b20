"""The checker's mode: default sizes, the seed, ``thorough()`` and ``time_limit()``."""

import contextlib

from .. import child as _child

DEFAULT_SIZES = (1, 2, 31, 32, 33, 100, 255, 256, 257, 1000, 2049)
DIAGNOSES = (
    "pass",
    "not-associative",
    "wrong-identity",
    "wrong-result",
    "unwritten-output",
    "race",
    "out-of-bounds",
    "uninitialized-read",
    "barrier-divergence",
    "exception",
    "timeout",
    "race-between-blocks",
    "stale-read",
    "plain-load-poll",
    "deadlock",
    "poll-limit",
    "over-budget",
    "modified-input",
    "library-call",
    "not-attempted",
)
_SEED = 20261121
# Sizes that :func:`thorough` adds to a check's own (those up to its largest size).
_THOROUGH_SIZES = (3, 5, 7, 16, 17, 63, 64, 65, 127, 128, 129, 511, 512, 513, 1023, 1024, 1025)
_mode = {"thorough": False, "timeout": None, "runaway": None}
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


@contextlib.contextmanager
def time_limit(seconds, runaway=None):
    """A context in which no check's run takes longer than ``seconds`` (mutants may hang).

    ``seconds`` counts simulated steps (:func:`limits`); ``runaway`` is the CPU-time bound, in
    seconds, of a run that makes no memory accesses (default ``RUNAWAY * seconds``).
    """
    with _setting("timeout", seconds), _setting("runaway", runaway):
        yield


def _sizes_and_seed(sizes):
    """The sizes and the seed of a check, widened inside :func:`thorough`."""
    if not _mode["thorough"]:
        return sizes, _SEED
    every = sorted(
        set(sizes)
        | {s for s in _THOROUGH_SIZES if s <= max(sizes)}
        | (set(range(1, max(sizes) + 1)) if max(sizes) <= 64 else set())
    )
    return tuple(every), _SEED + 7919


# A check's time limit counts simulated steps (memory accesses, polls apart), so that one
# submission gets one verdict on any machine under any load: ``timeout`` seconds allow
# ``timeout * STEPS_PER_SECOND`` accesses, about what the simulator makes in that time on an idle
# core (the honest runs of the exercises make at most about 50,000). CPU time only stops a
# runaway that makes no accesses (a loop of barriers or of register arithmetic), at RUNAWAY times
# the limit, which no honest run reaches; CPU time, not the wall clock, so that load cannot.
STEPS_PER_SECOND = 20_000
RUNAWAY = 10
# Polls (a thread finding a global cell as it found it before) have their own limit, per thread
# and cell: a wait that long ends as ``poll-limit``, naming the block, the cell and its state.
# The chained scan's last tile waits longest among the exercises' right answers and its named
# mistakes: 87 polls at 2049 elements (33 tiles, 48 resident blocks), 1,615 when it polls with
# plain loads, whose own verdict names that; a look-back's lane polls at most 3 times.
POLLS = 5_000


def limits(timeout, polls=None):
    """The keyword arguments of :func:`prefixsum.trace.record` for a check's ``timeout`` (seconds).

    Inside :func:`time_limit` the smaller limit holds. ``polls`` bounds one wait (default :data:`POLLS`).
    """
    if _mode["timeout"] is not None:
        timeout = min(timeout, _mode["timeout"])
    return {
        "steps": int(timeout * STEPS_PER_SECOND),
        "timeout": _mode["runaway"] or timeout * RUNAWAY,
        "polls": POLLS if polls is None else polls,
    }
