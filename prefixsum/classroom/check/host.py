"""Host checks: a function case by case (:func:`function`), stream compaction, a radix pass, a stable sort."""

import functools

import numpy as np

from .. import child as _child, trace as tracing
from . import observed
from .diagnosis import _trace_diagnosis
from .mode import _SEED, DEFAULT_SIZES, limits
from .results import Budget, CheckResult, _FunctionResult, _is_poison, _name, with_poisoned_allocations


@_child.simulated
def function(fn, reference, cases, *, name=None, timeout=20.0, budget=None):
    """Check a student's function against ``reference`` on every argument tuple in ``cases``.

    For exercises whose result is not a scan or a solve (the levels of a scheme, a numpy step,
    a kernel behind a small host wrapper): ``fn(*case)`` must equal ``reference(*case)``,
    compared as numpy arrays (exactly for integers, within ``1e-6`` relative for floats). The
    first case that raises, differs or runs past its time limit is the verdict (``timeout``:
    see :func:`prefixsum.check.mode.limits`; host code without kernels has only the CPU-time
    runaway bound). ``fn`` gets
    copies of the case's arrays; one that changes them fails as ``modified-input``.

    With a ``budget`` every case runs traced on the simulator (:mod:`prefixsum.trace`), with
    every device array ``fn`` allocates poisoned: a race, a read of an unwritten cell or an
    index out of bounds is the verdict, and a run with the right numbers that spends more than
    the budget (``n`` for its traffic: the size of the case's first argument) fails as
    ``over-budget``.

    Returns
    -------
    CheckResult
        ``sizes`` is the number of cases; a failure names the case in its hint.

    Examples
    --------
    >>> print(function(lambda n: n * n, lambda n: n ** 2, [(1,), (2,), (3,)], name="square"))
    PASS square: 3 cases
    """
    cases = [tuple(case) for case in cases]
    if not cases:
        raise ValueError("cases must hold at least one argument tuple")
    if budget is not None and not isinstance(budget, Budget):
        raise TypeError(f"budget must be a prefixsum.check.Budget or None; got {type(budget).__name__}")
    name = name or getattr(fn, "__name__", "function")
    for number, case in enumerate(cases):
        expected = np.asarray(reference(*case))
        fail = functools.partial(_FunctionResult, False, name=name, sizes=len(cases), size=number, index=None)
        given = _copies(case)
        if budget is None:
            try:
                with tracing.time_limit(limits(timeout)["timeout"]):
                    got = fn(*given)
            except Exception as error:  # noqa: BLE001  (the student's error becomes the verdict)
                return fail(diagnosis="exception", hint=f"{_describe(case)}: {type(error).__name__}: {error}")
        else:
            run = observed.record(with_poisoned_allocations, fn, *given, **limits(timeout))
            found = _trace_diagnosis(
                run,
                cell=lambda array, index: f"{array}[{index}]",
                uninitialized_advice="write every cell before a barrier, then read it.",
            )
            if found is not None:
                return fail(diagnosis=found[0], hint=found[2])
            got = run.result
            undone = budget.undone(run, [v for v in case if isinstance(v, np.ndarray)], got)
            if undone is not None:
                return fail(diagnosis=undone[0], hint=f"{_describe(case)}: {undone[2]}")
        changed = _changed_argument(given, case)
        if changed is not None:
            return fail(diagnosis="modified-input", hint=f"{_describe(case)}: {changed}")
        got = np.asarray(got.copy_to_host() if hasattr(got, "copy_to_host") else got)
        if got.shape != expected.shape:
            return fail(
                diagnosis="wrong-result", hint=f"{_describe(case)}: expected shape {expected.shape}, got {got.shape}"
            )
        same = (
            np.allclose(got, expected, rtol=1e-6, atol=0)
            if expected.dtype.kind in "fc"
            else np.array_equal(got, expected)
        )
        if not same:
            if expected.size <= 8:
                return fail(
                    diagnosis="wrong-result",
                    hint=f"{_describe(case)}: expected {expected.tolist()}, got {got.tolist()}",
                )
            first = np.unravel_index(
                int(
                    np.flatnonzero(
                        ~np.isclose(got, expected, rtol=1e-6, atol=0)
                        if expected.dtype.kind in "fc"
                        else got != expected
                    )[0]
                ),
                expected.shape,
            )
            return fail(
                diagnosis="wrong-result",
                hint=f"{_describe(case)}: at {tuple(map(int, first))} expected {expected[first]!r}, got {got[first]!r}",
            )
        if budget is not None:
            overspent = budget.overspent(run, int(np.size(case[0])))
            if overspent is not None:
                return fail(diagnosis="over-budget", hint=overspent[1])
    return _FunctionResult(True, "pass", name, len(cases))


def _describe(case):
    """``case`` for a hint: small values as they are, arrays of more than 8 elements by shape and dtype."""
    shown = [
        f"array of shape {v.shape}, {v.dtype}" if isinstance(v, np.ndarray) and v.size > 8 else repr(v) for v in case
    ]
    return f"({', '.join(shown)}{',' if len(shown) == 1 else ''})"


def _changed_argument(given, case):
    """What the checked function changed in its numpy arguments ``given`` (copies of ``case``'s), else None."""
    for k, (got, original) in enumerate(zip(given, case)):
        if (
            isinstance(original, np.ndarray)
            and got.shape == original.shape
            and not np.array_equal(got, original, equal_nan=original.dtype.kind in "fc")
        ):
            first = tuple(int(i) for i in np.argwhere(got != original)[0])
            return (
                f"the function changed its argument {k}: at {first[0] if len(first) == 1 else first} it was "
                f"{original[first].item()}, is now {got[first].item()}. Leave the arguments as they are (the "
                "caller still "
                "needs them) and build the result in a new array."
            )
    return None


def _copies(case):
    """The arguments of ``case``, numpy arrays copied (a student's function may write into them)."""
    return tuple(v.copy() if isinstance(v, np.ndarray) else v for v in case)


def _check_cases(fn, cases, name, timeout, wrong_hint, budget=None):
    """Run ``fn(*args)`` traced, with poisoned allocations, for each ``(n, args, expected)`` of ``cases``.

    The verdict of :func:`compaction` and :func:`radix_pass`: what the trace shows first, then
    a result of the wrong length, unwritten elements, the first wrong one, and a ``budget``
    (:class:`Budget`) overspent.
    """
    if budget is not None and not isinstance(budget, Budget):
        raise TypeError(f"budget must be a prefixsum.check.Budget or None; got {type(budget).__name__}")
    sizes = []
    for n, args, expected in cases:
        sizes.append(n)
        run = observed.record(with_poisoned_allocations, fn, *[a.copy() for a in args], **limits(timeout))
        found = _trace_diagnosis(
            run,
            cell=lambda array, index: f"{array}[{index}]",
            uninitialized_advice="write every cell before the barrier.",
        )
        if found is not None:
            return CheckResult(False, found[0], name, tuple(sizes), n, found[1], found[2])
        result = run.result.copy_to_host() if hasattr(run.result, "copy_to_host") else np.asarray(run.result)
        undone = None if budget is None else budget.undone(run, [a for a in args if isinstance(a, np.ndarray)], result)
        if undone is not None:
            return CheckResult(False, undone[0], name, tuple(sizes), n, undone[1], undone[2])
        if result.shape != expected.shape:
            return CheckResult(
                False,
                "wrong-result",
                name,
                tuple(sizes),
                n,
                None,
                f"the result has {result.shape[0] if result.ndim else 0} elements, not {expected.shape[0]}.",
            )
        unwritten = np.flatnonzero(_is_poison(result))
        if unwritten.size:
            return CheckResult(
                False,
                "unwritten-output",
                name,
                tuple(sizes),
                n,
                int(unwritten[0]),
                "This element was never written: does every element reach its place?",
            )
        bad = np.flatnonzero(result != expected)
        if bad.size:
            return CheckResult(False, "wrong-result", name, tuple(sizes), n, int(bad[0]), wrong_hint)
        overspent = None if budget is None else budget.overspent(run, n)
        if overspent is not None:
            return CheckResult(False, "over-budget", name, tuple(sizes), n, overspent[0], overspent[1])
    return CheckResult(True, "pass", name, tuple(sizes))


@_child.simulated
def compaction(fn, *, sizes=DEFAULT_SIZES, timeout=20.0, name=None, budget=None):
    """Check ``fn(x, mask) -> x[mask]``, a student's stream compaction, on random float32 inputs.

    ``mask`` is a bool array with about a third of its elements set (all set and none set are
    among the cases, at the smallest sizes). A ``budget`` (:class:`Budget`, usually naming the
    student's kernel in ``kernels``) fails a right result that spends more.
    """

    def cases():
        for n in sorted(sizes):
            rng = np.random.default_rng(_SEED + n)
            x = rng.normal(size=n).astype(np.float32)
            mask = rng.random(n) < (1.0 if n == 1 else 0.0 if n == 2 else 0.35)
            yield n, (x, mask), x[mask]

    return _check_cases(
        fn,
        cases(),
        _name(fn, name, "compaction"),
        timeout,
        "The kept elements must keep their order: element i goes to the number of kept elements before it.",
        budget,
    )


@_child.simulated
def radix_pass(fn, *, bit=3, sizes=DEFAULT_SIZES, timeout=20.0, name=None, budget=None):
    """Check ``fn(keys, bit)``, one pass of a radix sort: a stable split of uint32 ``keys`` by ``bit``, zeros first.

    A ``budget`` (:class:`Budget`, usually naming the student's kernel in ``kernels``) fails a
    right result that spends more.
    """

    def cases():
        for n in sorted(sizes):
            keys = np.random.default_rng(_SEED + n).integers(0, 64, n).astype(np.uint32)
            zero = (keys >> bit) & 1 == 0
            yield n, (keys, np.uint32(bit)), np.concatenate([keys[zero], keys[~zero]])

    return _check_cases(
        fn,
        cases(),
        _name(fn, name, "radix pass"),
        timeout,
        "Zeros go to their exclusive-scan place; a one goes to (all zeros) + i - (zeros before i).",
        budget,
    )


STABLE_SORT_SIZES = (1, 31, 33, 100)
"""Sizes of :func:`stable_sort`'s cases: a sort with small tiles costs the simulator per tile and digit."""


@_child.simulated
def stable_sort(fn, *, sizes=STABLE_SORT_SIZES, timeout=20.0, name=None, budget=None):
    """Check ``fn(keys) -> order``: where each key goes in a stable sort, as ``np.argsort(keys, kind="stable")``.

    ``keys`` are uint16 below 1024, many equal (so that stability shows), so that a sort by bytes
    makes two passes and the second must keep the first's order. A ``budget`` (:class:`Budget`)
    fails a right result that spends more.
    """

    def cases():
        for n in sorted(sizes):
            rng = np.random.default_rng(_SEED + n)
            keys = rng.integers(0, 1024, n).astype(np.uint16)
            keys[n // 2 :] = keys[rng.integers(0, max(n // 2, 1), n - n // 2)]
            yield n, (keys,), np.argsort(keys, kind="stable")

    return _check_cases(
        fn,
        cases(),
        _name(fn, name, "stable sort"),
        timeout,
        "Equal keys must keep their order: a key's rank counts the keys with its digit before it, "
        "in earlier steps and on lower lanes.",
        budget,
    )
