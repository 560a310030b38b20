"""The failing run a check keeps for the stepper, and the run it is stepped beside.

A failing check hands its run to :func:`failure_hint`, which keeps it (and offers the stepper
in the hint when the run is small); :func:`last_failure` returns it beside its reference: the
registered scan whose steps access the same cells as the student's (:func:`likeness`,
:func:`closest`), each tried with the student's block size and its switches on and off; and,
when the check failed on more elements than the stepper draws, the smallest input on which the
checked function fails too (:func:`small_failure`).
"""

import itertools
import math

import numpy as np

from ..scans.api import scan
from ..scans.registry import ALGORITHMS
from ..scans.testing import mismatches, random_input
from . import stepping, trace as tracing

FAILING_SIZES = 64
"""A failing check on at most this many elements offers the stepper in its hint."""
STEPPABLE = ("wrong-result", "unwritten-output", "race", "uninitialized-read", "stale-read", "race-between-blocks")
"""The checker's diagnoses that stepping through the run shows."""


def failure_hint(diagnosis, run, x, op, inclusive, reverse, fn=None, reference=None):
    """The stepper's line in a failing check's hint: for a diagnosis of the data flow
    (:data:`STEPPABLE`) on at most :data:`FAILING_SIZES` elements, with one of the package's operators.

    Keeps the failing run, its input and the checked function ``fn`` (in the process that
    checked: the simulating worker on a GPU machine), for :func:`last_failure`, at any size: a
    failure on more elements is stepped through on a smaller input that fails too. ``reference``:
    the registered scan the check named as its exercise's (None: the most alike).
    """
    n = len(x[0]) if isinstance(x, tuple) else len(x)
    if diagnosis not in STEPPABLE or not isinstance(op, str) or not run.records:
        return ""
    _last.clear()
    _last.update(run=run, x=x, op=op, inclusive=inclusive, reverse=reverse, fn=fn, reference=reference)
    return " Step through it beside the package's scan: ps.viz.step_failure()" if n <= FAILING_SIZES else ""


_last = {}


def forget_failure():
    """Forget the failing run that :func:`failure_hint` kept (the grader's judge, between exercises)."""
    _last.clear()


def last_failure(algorithm=None, **options):
    """``(student trace, reference trace)`` of the last failing check that kept its run.

    The reference is ``prefixsum.scan`` on the same input: with ``algorithm`` (and ``options``) if given, else the
    exercise's own algorithm (with the ``options`` it takes): the scan the check named (its ``reference=``), in the
    tile most alike the student's run, or else found as the registered scan whose run agrees most alike
    the student's, step by step (:func:`likeness`: the cells each step reads and writes; then the latest first
    difference), each run with the student's block size where it takes one: a Hillis-Steele tile beside
    Hillis-Steele, a look-back beside the look-back. A check that failed on more than :data:`FAILING_SIZES`
    elements is stepped through on the smallest input up to that size on which the checked function fails too. Both
    traces come without their results and errors, so that they can travel from the simulating worker.

    Raises
    ------
    LookupError
        No failing check kept a run, or it failed only on more than :data:`FAILING_SIZES`
        elements (the message says so, and what to do instead).
    """
    if not _last:
        raise LookupError("no failing check has kept a run to step through in this session: run the check first")
    student, x = small_failure(_last)
    if algorithm is not None:
        reference = reference_run(x, _last, algorithm, options)
    else:
        named = _last.get("reference")
        reference = closest(student, x, _last, options, names=None if named is None else (named,))
    return tuple(tracing.Trace(run.records, run.launches, fences=run.fences) for run in (student, reference))


def likeness(student, reference):
    """How alike the two runs' accesses are, step by step (:func:`prefixsum.classroom.stepping.aligned`), from 0 to 1:
    the mean over the steps of the longer run of the overlap (intersection over union) of the cells each pair of steps
    wrote, and of the cells they read (a step beside nothing adds 0). Two runs of one algorithm access alike even where
    a mistake changed values."""
    mine, others = stepping.comparable(student), stepping.comparable(reference)

    def overlap(a, b):
        return len(a & b) / len(a | b) if a | b else 1.0

    total = 0.0
    for k, j in enumerate(stepping.aligned(student, reference)):
        if j is None:
            continue
        for field in ("written", "read"):
            a = {(mine[s], i) for s, cells in getattr(student[k], field).items() for i in cells}
            b = {(others[s], i) for s, cells in getattr(reference[j], field).items() for i in cells}
            total += overlap(a, b)
    return total / (2 * max(len(student), len(reference), 1))


def reference_run(x, failure, algorithm, options):
    """The traced ``prefixsum.scan`` of ``x`` with ``algorithm`` and ``options``, as ``failure`` (the kept
    failing check: its op and direction) scanned."""
    return tracing.record(
        scan,
        x.copy(),
        failure["op"],
        inclusive=failure["inclusive"],
        reverse=failure["reverse"],
        algorithm=algorithm,
        **options,
    )


def closest(student, x, failure, given, names=None):
    """The run of the registered scan most alike ``student`` (:func:`likeness`; ties: the first registered),
    each with the ``given`` options it takes; among ``names`` only when given (the scan a check named)."""
    threads = math.prod(student.launches[0].block) if student.launches else None
    mine = stepping.model(student)
    best, best_agreement = None, None
    for name, algorithm in ALGORITHMS.items():
        if names is not None and name not in names:
            continue
        for options in _options_like(algorithm, threads, given):
            run = reference_run(x, failure, name, options)
            if run.error is not None or not run.records:
                continue
            try:
                theirs = stepping.model(run)
            except stepping.BrokenTrace:
                continue
            differing = stepping.differences(mine, theirs)
            first = next((k for k, cells in enumerate(differing) if cells), len(differing))
            # the same accesses step by step, then the same values
            agreement = (round(likeness(mine, theirs), 6), first)
            if best_agreement is None or agreement > best_agreement:
                best, best_agreement = run, agreement
    if best is None:
        raise LookupError("no registered scan runs on this input to step beside: pass algorithm=... to step_failure()")
    return best


def _options_like(algorithm, threads, given):
    """The options of ``algorithm`` to try beside a student's run of blocks of ``threads``: the ``given``
    ones it takes, else tiles of ``threads`` or ``2 * threads`` elements, one item per thread, each
    switch of the algorithm on and off (a tile without padding, as a chapter writes it first), those
    the algorithm accepts."""
    choices = []
    for option, default in algorithm.options.items():
        if option in given:
            choices.append([(option, given[option])])
        elif option == "block_size" and threads:
            choices.append([(option, b) for b in dict.fromkeys((threads, threads // 2)) if b])
        elif option == "items_per_thread":
            choices.append([(option, 1)])
        elif isinstance(default, bool):
            choices.append([(option, False), (option, True)])
    found = []
    for chosen in itertools.product(*choices):
        options = dict(chosen)
        try:
            algorithm.check_options(**{**algorithm.options, **options})
        except (ValueError, TypeError):
            continue
        found.append(options)
    return found or [{}]


def small_failure(failure):
    """``(run, x)``: the kept ``failure``'s run if it is small enough to step through, else a small one that fails."""
    run, x = failure["run"], failure["x"]
    n = len(x)
    if n <= FAILING_SIZES:
        return run, x
    fn = failure.get("fn")
    if fn is not None:
        for m in range(1, FAILING_SIZES + 1):
            small = random_input(m, failure["op"], x.dtype, np.random.default_rng(m))
            attempt = tracing.record(fn, small.copy())
            result = attempt.result.copy_to_host() if hasattr(attempt.result, "copy_to_host") else attempt.result
            wrong = (
                attempt.error is not None
                or result is None
                or np.shape(result) != small.shape
                or mismatches(
                    np.asarray(result).astype(x.dtype),
                    small,
                    failure["op"],
                    inclusive=failure["inclusive"],
                    reverse=failure["reverse"],
                )[0].size
                > 0
            )
            if wrong and attempt.records:
                return attempt, small
    most = FAILING_SIZES
    raise LookupError(
        f"the last check failed at n = {n}, and no input of {most} elements or fewer fails the same way: the stepper "
        f"draws at most {most} cells a row, so there is nothing small to step through. Trace the failing size "
        f"yourself (run = ps.trace.record(your_function, x) with len(x) = {n}) and look at the tiles where it goes "
        "wrong: ps.viz.lookbacks(run) for a look-back, ps.viz.dataflow(run, array) for a tile."
    )


__all__ = [
    "FAILING_SIZES",
    "STEPPABLE",
    "closest",
    "failure_hint",
    "forget_failure",
    "last_failure",
    "likeness",
    "reference_run",
    "small_failure",
]
