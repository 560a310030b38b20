"""Where a check runs the student's code: one door, which the grader can watch or replay.

A check runs the student's code in two ways: a traced run (:func:`record`, a kernel launch and
the host code around it) and plain host calls of the student's function (made through the
object the check was given). In a notebook both simply run. The grader splits them
(:mod:`prefixsum.grading.observations`):

* in its sandbox an *observer* runs each traced run and host call and keeps what came out (the
  outputs, the trace, the arguments afterwards, the error), and nothing else of the check
  leaves the sandbox;
* in its own process, which never runs student code, a *replayer* runs the same check with the
  same inputs and hands each traced run and host call the observation of the same rank, so
  that the verdict is drawn there.

:func:`observer` installs either, for the current thread. A check calls :func:`record` where it
would call :func:`prefixsum.classroom.trace.record` on the student's code.
"""

import contextlib
import threading

from .. import trace as tracing

_local = threading.local()


def current():
    """The observer of this thread, or None (the check runs as in a notebook)."""
    return getattr(_local, "observer", None)


@contextlib.contextmanager
def observer(watcher):
    """A context in which this thread's :func:`record` calls go to ``watcher.record``.

    ``watcher.record(fn, args, kwargs, counter)`` returns a :class:`prefixsum.classroom.trace.Trace`.
    """
    previous = current()
    _local.observer = watcher
    try:
        yield watcher
    finally:
        _local.observer = previous


def record(fn, *args, counter=None, **kwargs):
    """:func:`prefixsum.classroom.trace.record` of a run of the student's code, through the observer if any.

    ``counter`` is a list of integers that ``fn`` counts into while it runs (a tally of the
    student's own host code, :mod:`prefixsum.classroom.check.counting`): its values travel with
    the observation.
    """
    watcher = current()
    if watcher is None:
        return tracing.record(fn, *args, **kwargs)
    return watcher.record(fn, args, kwargs, counter)


__all__ = ["current", "observer", "record"]
