"""Check a student's scan kernel: many sizes, poisoned memory, every launch traced.

The puzzle collections check a kernel with one ``allclose`` on one input, so a missing barrier,
an off-by-one bound or a race passes. :func:`scan` runs the student's function on random inputs
of many sizes (one element, a warp and its neighbours, one block and several), with every new
device array and all shared memory poisoned, records every memory access with
:mod:`prefixsum.trace`, and names the first thing that went wrong, with a hint.

Diagnoses, in the order they are looked for at each size:

``exception``, ``timeout``, ``out-of-bounds``, ``barrier-divergence``, ``deadlock`` (the run
stopped), ``race`` (within a block, or two blocks writing one element), the races between
blocks that communicate -- ``plain-load-poll`` (a flag polled with plain loads),
``stale-read`` (a flag raised without a fence after the data: the reader may get old data),
``race-between-blocks`` (an element one block writes and another reads with no flag between
them) --, ``uninitialized-read`` (the trace shows it, even when the numbers came out right),
``unwritten-output``, ``wrong-result`` (the numbers), ``over-budget`` (right numbers, but not
by the parallel algorithm the exercise asks for: more barriers, more accesses by one thread
between two barriers, more global traffic or more bank conflicts than its :class:`Budget`), and
``pass``. The simulator runs a few
blocks at once (:mod:`prefixsum.sim`), so that blocks that talk to each other are checked as a
GPU runs them.

A user operator (a ``cuda.jit(device=True)`` function, see :mod:`prefixsum.scans.user_ops`) is
first checked on its own by :func:`operator`: ``not-associative`` or ``wrong-identity`` before
any kernel runs, since no scan can be right with such an operator.
"""
import collections
import contextlib
import dataclasses
import functools
import re
from dataclasses import dataclass

import numpy as np

from . import child as _child, sim, stepping, trace as tracing
from ..core.arithmetic import quiet_arithmetic
from ..core.poison import poison, poison_value
from ..scans.ops import check_dtype, check_op
from ..scans import user_ops
from ..scans.testing import mismatches, random_input

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


@dataclass(frozen=True)
class Budget:
    """What the parallel algorithm of an exercise may spend, as the tracer measures it.

    A check given a budget fails a run whose numbers are right but whose kernels spend more:
    one thread scanning the whole tile serially is correct and makes hundreds of accesses
    between two barriers, where a parallel step makes a handful. Every field left ``None`` is
    not checked.

    Attributes
    ----------
    barriers : int
        Most barriers (``cuda.syncthreads()``) one thread may pass in one launch.
    accesses_per_step : int
        Most memory accesses (global and shared, reads and writes) one thread may make between
        two barriers: the work of one thread in one step.
    traffic_per_element : float
        Most global-memory accesses (reads and writes) per input element, over the launches
        of the budgeted kernels, with 2 more per block (a tile's total, a carry).
    bank_conflict_ways : int
        Most passes one warp's shared-memory access may need (1: conflict-free).
    kernels : tuple of str
        The kernels the budget applies to (default: every launch; :func:`tiled` budgets the
        student's tile kernel only).
    """

    barriers: int = None
    accesses_per_step: int = None
    traffic_per_element: float = None
    bank_conflict_ways: int = None
    kernels: tuple = None

    def overspent(self, run, n):
        """``(index, hint)`` for the first limit ``run`` (a :class:`prefixsum.trace.Trace`) exceeds, else None."""
        launches = {launch.number for launch in run.launches if self.kernels is None or launch.kernel in self.kernels}
        records = [r for r in run.records if r.launch in launches]
        if self.barriers is not None:
            passed = max((phase for (launch, _, _), phase in run.barriers_passed().items() if launch in launches), default=0)
            if passed > self.barriers:
                return None, (f"a thread passed {passed} barriers in one launch; the algorithm needs at most "
                              f"{self.barriers}. Is the loop bound right (log2 of the tile, not the tile)?")
        if self.accesses_per_step is not None:
            per_step = collections.Counter((r.launch, r.block, r.thread, r.phase) for r in records)
            if per_step:
                (launch, block, thread, phase), most = per_step.most_common(1)[0]
                if most > self.accesses_per_step:
                    return None, (f"thread {thread} of block {block} made {most} memory accesses between two barriers "
                                  f"(step {phase}); the parallel algorithm makes at most {self.accesses_per_step}. "
                                  "Share the work: every thread does a few operations per step, a barrier between steps.")
        if self.traffic_per_element is not None:
            traffic = sum(1 for r in records if r.space == "global")
            blocks = len({(r.launch, r.block) for r in records})
            if traffic > self.traffic_per_element * n + 2 * blocks:
                return None, (f"{traffic} global-memory accesses for {n} elements in {blocks} blocks, more than the "
                              f"{self.traffic_per_element:g} per element (and 2 per block) the algorithm needs: "
                              "read each input once, keep the tile in shared memory.")
        if self.bank_conflict_ways is not None:
            worst = [c for c in run.bank_conflicts() if c["launch"] in launches and c["ways"] > self.bank_conflict_ways]
            if worst:
                c = max(worst, key=lambda c: c["ways"])
                return None, (f"a warp's access to {c['array']} (source line {c['line']}) needs {c['ways']} passes of the "
                              f"shared-memory banks; at most {self.bank_conflict_ways} allowed. Pad the index so that "
                              "the threads of a warp hit different banks.")
        return None


@dataclass(frozen=True)
class CheckResult:
    """The verdict of a check; ``str()`` is one deterministic line (safe for nbval)."""

    passed: bool
    diagnosis: str
    name: str
    sizes: tuple
    size: int = None
    index: int = None
    hint: str = ""

    def __str__(self):
        if self.passed:
            if len(self.sizes) == 1:
                return f"PASS {self.name}: n = {self.sizes[0]}"
            return f"PASS {self.name}: {len(self.sizes)} sizes from {min(self.sizes)} to {max(self.sizes)}"
        if self.size is None:  # a verdict on an operator, not on a run
            return f"FAIL {self.name}: {self.diagnosis}. {self.hint}".rstrip()
        where = f"n={self.size}" + ("" if self.index is None else f", index {self.index}")
        return f"FAIL {self.name}: {self.diagnosis} at {where}. {self.hint}".rstrip()

    __repr__ = __str__

    def __bool__(self):
        return self.passed


def _poison_fresh(array):
    """An allocation hook: fill a fresh device array with poison, as a GPU leaves garbage there."""
    if array.size:
        array.copy_to_device(poison(np.empty(array.shape, array.dtype)))


def with_poisoned_allocations(fn, *args):
    """``fn(*args)``, every device array it allocates poisoned.

    The hook is registered here, inside the recorded function, so that it acts in the process
    that simulates the run (a child process on a machine with a GPU). Host code of the student
    (a sequential loop on int32, as a GPU would wrap) overflows without a warning.
    """
    with sim.allocation_hook(_poison_fresh), quiet_arithmetic():
        return fn(*args)


def _hint_for_error(error):
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    if isinstance(error, TimeoutError):
        return "timeout", "Stopped at the time limit: does every loop advance (phase <<= 1, stride *= 2)?"
    if isinstance(error, sim.DeadlockError):
        polls = [re.sub(r" \(\d+ threads?\) poll ", " polls ", line.strip())
                 for line in str(error).splitlines() if " poll " in line]
        where = f" ({polls[0]})" if polls else ""
        return "deadlock", (f"Every resident block waits{where}: a block waits for a block that is not running. "
                            "Blocks start in blockIdx order, a few at a time: wait only for tiles taken earlier "
                            "(take tile ids from an atomic counter) and never for a block that starts later.")
    if isinstance(error, sim.BarrierDivergenceError):
        return "barrier-divergence", ("Not every thread reached the same cuda.syncthreads(): "
                                      "a barrier inside an if, or threads returning early. Move the barrier out of the branch.")
    if isinstance(error, IndexError):
        return "out-of-bounds", f"{text} Guard every access with i < n; x[i - 1] at i = 0 reads index -1."
    return "exception", f"{type(error).__name__}: {text}"


def _diagnose(run, x, op, inclusive, reverse):
    """``(diagnosis, index, hint)`` for one traced run of the student's function."""
    found = _trace_diagnosis(
        run, cell=lambda array, index: f"{array}[{index}]",
        race_advice="A cuda.syncthreads() is missing between a read and a write (or use two buffers).",
        uninitialized_advice="fill every cell (with the identity past n) before the barrier.")
    if found is not None:
        return found
    result = run.result
    if hasattr(result, "copy_to_host"):
        result = result.copy_to_host()
    if result is None or np.shape(result) != x.shape:
        return "exception", None, f"the function must return the scan of x, of shape {x.shape}; it returned {type(result).__name__} {np.shape(result)}"
    result = np.asarray(result)
    unwritten = np.flatnonzero(_is_poison(result))
    if unwritten.size:
        return "unwritten-output", int(unwritten[0]), "This element was never written: check the bound of the store and the last lanes and blocks."
    bad, _ = mismatches(result.astype(x.dtype, copy=False), x, op, inclusive=inclusive, reverse=reverse)
    if bad.size:
        return "wrong-result", int(bad[0]), ""
    return "pass", None, ""


def _is_poison(result):
    """Where ``result`` holds the poison of its dtype (NaN for floats; integers only besides)."""
    if result.dtype.kind == "f":
        return np.isnan(result)
    if result.dtype.kind in "iu":
        return result == poison_value(result.dtype)
    return np.zeros(result.shape, bool)


def _wrong_result_hint(index, n, passed_sizes, exclusive):
    if index == 0 and exclusive:
        return "Element 0 of an exclusive scan is the identity of the operator."
    if passed_sizes and index >= 32 and index & (index - 1) == 0 and index >= max(s for s in passed_sizes if s <= index) // 2:
        return (f"Right below index {index}, wrong from it on: index {index} starts a new block. "
                "Is the carry (the total of the blocks before) missing?")
    if n & (n - 1) and any(s & (s - 1) == 0 for s in passed_sizes):
        return "Powers of two pass but this size does not: pad the last tile with the identity and guard i < n."
    return "Compare one phase of your update with the loop invariant on a small n."


def _element(fields, i):
    return tuple(f[i] for f in fields)


def _small_integers(n, dtypes, rng):
    """Random fields of small integers in each dtype ([-4, 4], [0, 8] unsigned): exact sums and products."""
    return [rng.integers(0 if dt.kind == "u" else -4, 9 if dt.kind == "u" else 5, size=n).astype(dt) for dt in dtypes]


def _combine_on_host(fn, bare, dtypes):
    """``combine(p, q)`` on tuples: the user's op by its Python function, each field cast to its dtype."""
    def combine(p, q):
        r = fn(p[0], q[0]) if bare else fn(p, q)
        return tuple(dt.type(v) for dt, v in zip(dtypes, (r,) if bare else r))
    return combine


def _same(u, v, dtypes):
    """Whether elements ``u`` and ``v`` agree: integers exactly, floats to a relative 1e-6 (1e-3 for float32)."""
    for a, b, dt in zip(u, v, dtypes):
        if dt.kind != "f":
            if a != b:
                return False
        elif not abs(float(a) - float(b)) <= (1e-3 if dt.itemsize == 4 else 1e-6) * max(1.0, abs(float(a)), abs(float(b))):
            return False
    return True


@_child.simulated
def operator(op, identity, dtypes=np.float64, *, samples=200, name=None):
    """Check a user operator on its own: associative, and ``identity`` an identity of it.

    A scan regroups the combines (a tree inside a tile, then the tiles' totals), so it gives the
    sequential answer only when ``(a op b) op c == a op (b op c)`` for all elements, and pads
    with the identity, so ``e op x == x == x op e`` must hold too. Both are tried on ``samples``
    random elements of small integers (exact in every dtype, so that rounding cannot hide or
    fake a failure), by ``op``'s Python function on the host.

    Parameters
    ----------
    op : numba CUDA device function
        ``op(p, q)``: scalars when ``dtypes`` is one dtype, else tuples of one value per dtype.
    identity : scalar or tuple
    dtypes : numpy dtype or tuple of them
        The field dtypes; one dtype means elements are scalars (a scan of one array).
    samples : int
    name : str, optional
        Shown in the verdict (default: ``op``'s name).

    Returns
    -------
    CheckResult
        ``not-associative`` or ``wrong-identity`` with the elements that show it in the hint,
        or ``pass``.
    """
    bare = not isinstance(dtypes, tuple)
    dtypes = tuple(check_dtype(d) for d in ((dtypes,) if bare else dtypes))
    checked = user_ops.operator_for(op, identity, dtypes, bare)
    name = name or getattr(user_ops.python_function(op), "__name__", "op")
    combine = _combine_on_host(user_ops.python_function(op), bare, dtypes)
    def show(element):
        values = tuple(v.item() for v in element)
        return repr(values[0] if bare else values)

    fields = _small_integers(3 * samples, dtypes, np.random.default_rng(_SEED))
    e = checked.identity
    try:
        return _judge_operator(combine, e, fields, samples, dtypes, name, show)
    except Exception as error:  # noqa: BLE001  (a student's operator may raise anything)
        return CheckResult(False, "exception", name, (samples,), hint=f"{type(error).__name__}: {error}")


def _judge_operator(combine, e, fields, samples, dtypes, name, show):
    """The verdict of :func:`operator` on ``samples`` triples of ``fields``."""
    with np.errstate(all="ignore"):
        for k in range(samples):
            a, b, c = (_element(fields, 3 * k + j) for j in range(3))
            for side, value in (("op(e, x)", combine(e, a)), ("op(x, e)", combine(a, e))):
                if not _same(value, a, dtypes):
                    return CheckResult(False, "wrong-identity", name, (samples,), hint=(
                        f"With e = {show(e)} and x = {show(a)}, {side} = {show(value)}, not x. The identity must leave "
                        "every element unchanged on both sides: the scan pads partial tiles and starts the exclusive "
                        "scan with it."))
            left, right = combine(combine(a, b), c), combine(a, combine(b, c))
            if not _same(left, right, dtypes):
                return CheckResult(False, "not-associative", name, (samples,), hint=(
                    f"op(op(a, b), c) = {show(left)} but op(a, op(b, c)) = {show(right)} for a = {show(a)}, "
                    f"b = {show(b)}, c = {show(c)}. A parallel scan regroups the combines, so the operator must be "
                    "associative. Clamping, averaging and subtracting are not; carry more state in the element (a "
                    "tuple) until the combine is, as an affine map x -> a x + b carries (a, b)."))
    return CheckResult(True, "pass", name, (samples,))


def _diagnose_user(run, x, op, identity, inclusive, reverse):
    """``(diagnosis, index, hint)`` for one traced run of a scan with a user operator."""
    found = _trace_diagnosis(
        run, cell=lambda array, index: f"{array}[{index}]",
        race_advice="A cuda.syncthreads() is missing between a read and a write (or use two buffers).",
        uninitialized_advice="fill every cell (with the identity past n) before the barrier.")
    if found is not None:
        return found
    results = run.result if isinstance(run.result, tuple) else (run.result,)
    results = [r.copy_to_host() if hasattr(r, "copy_to_host") else r for r in results]
    fields = x if isinstance(x, tuple) else (x,)
    if len(results) != len(fields) or any(np.shape(r) != f.shape for r, f in zip(results, fields)):
        return "exception", None, f"the function must return the scan of x: {len(fields)} arrays of shape {fields[0].shape}"
    unwritten = np.flatnonzero(np.any([_is_poison(np.asarray(r)) for r in results], axis=0))
    if unwritten.size:
        return "unwritten-output", int(unwritten[0]), "This element was never written: check the bound of the store and the last lanes and blocks."
    expected = user_ops.reference(user_ops.float64_copy(x), op, identity=identity, inclusive=inclusive, reverse=reverse)
    got = tuple(np.asarray(r) for r in results)
    bad = user_ops.wrong_indices(got if isinstance(x, tuple) else got[0], expected, reverse=reverse)
    if bad.size:
        return "wrong-result", int(bad[0]), ""
    return "pass", None, ""


@_child.simulated
def scan(fn, *, op="add", inclusive=True, reverse=False, dtype=np.float32, sizes=None, timeout=20.0, name=None,
         identity=None, budget=None):
    """Check ``fn``, a student's scan, against the reference.

    Parameters
    ----------
    fn : callable
        ``fn(x)`` takes a 1-D numpy array and returns its scan (numpy or device array),
        computed by the student's kernel(s). With a user operator on a tuple of dtypes, it takes
        and returns a tuple of arrays.
    op, inclusive, reverse :
        Which scan ``fn`` computes (see :func:`prefixsum.scan`). ``op`` may be a user operator
        (a ``cuda.jit(device=True)`` function); it is checked by :func:`operator` first, and the
        reference is :func:`prefixsum.scans.user_ops.reference`.
    dtype : numpy dtype, or a tuple of them with a user operator
        Element type of the random inputs (one per field of a tuple).
    identity : scalar or tuple, optional
        The identity of a user operator (required with one).
    sizes : sequence of int, optional
        Input lengths, smallest first (default :data:`DEFAULT_SIZES`).
    timeout : float
        Seconds before a run is stopped as hanging.
    name : str, optional
        Shown in the verdict (default: ``fn``'s name).
    budget : Budget, optional
        What the run may spend (barriers, accesses per step, traffic, bank conflicts); a run
        with the right numbers that spends more fails as ``over-budget``.

    Returns
    -------
    CheckResult
        ``passed``, ``diagnosis`` (one of :data:`DIAGNOSES`), the first failing ``size`` and
        ``index``, and a ``hint``; printed, one deterministic line.
    """
    name = name or getattr(fn, "__name__", "scan")
    if name == "<lambda>":
        name = "scan"
    user = not isinstance(op, str)
    if user:
        verdict = operator(op, identity, dtype, name=name)
        if not verdict:
            return verdict
    else:
        check_op(op)
        dtype = check_dtype(dtype)
    if budget is not None and not isinstance(budget, Budget):
        raise TypeError(f"budget must be a prefixsum.check.Budget or None; got {type(budget).__name__}")
    sizes = tuple(sorted(sizes or DEFAULT_SIZES))
    shown = sizes
    sizes, seed = _sizes_and_seed(sizes)
    if _mode["timeout"] is not None:
        timeout = min(timeout, _mode["timeout"])
    passed_sizes = []
    for n in sizes:
        rng = np.random.default_rng(seed + n)
        if user:
            fields = user_ops.random_fields(n, dtype if isinstance(dtype, tuple) else (dtype,), rng)
            x = fields if isinstance(dtype, tuple) else fields[0]
            copy = tuple(f.copy() for f in fields) if isinstance(dtype, tuple) else x.copy()
            run = tracing.record(with_poisoned_allocations, fn, copy, timeout=timeout)
            diagnosis, index, hint = _diagnose_user(run, x, op, identity, inclusive, reverse)
        else:
            x = random_input(n, op, dtype, rng)
            run = tracing.record(with_poisoned_allocations, fn, x.copy(), timeout=timeout)
            diagnosis, index, hint = _diagnose(run, x, op, inclusive, reverse)
        if diagnosis == "wrong-result":
            hint = _wrong_result_hint(index, n, passed_sizes, not inclusive)
        if diagnosis == "pass" and budget is not None:
            overspent = budget.overspent(run, n)
            if overspent is not None:
                diagnosis, (index, hint) = "over-budget", overspent
        if diagnosis != "pass":
            hint += stepping.failure_hint(diagnosis, run, x, op, inclusive, reverse)  # the stepper's call (issue 31)
            return CheckResult(False, diagnosis, name, shown, n, index, hint)
        passed_sizes.append(n)
    return CheckResult(True, "pass", name, shown)


@_child.simulated
def function(fn, reference, cases, *, name=None, timeout=20.0, budget=None):
    """Check a student's function against ``reference`` on every argument tuple in ``cases``.

    For exercises whose result is not a scan or a solve (the levels of a scheme, a numpy step,
    a kernel behind a small host wrapper): ``fn(*case)`` must equal ``reference(*case)``,
    compared as numpy arrays (exactly for integers, within ``1e-6`` relative for floats). The
    first case that raises, differs or runs past ``timeout`` seconds is the verdict.

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
    if _mode["timeout"] is not None:
        timeout = min(timeout, _mode["timeout"])
    for number, case in enumerate(cases):
        expected = np.asarray(reference(*case))
        fail = functools.partial(_FunctionResult, False, name=name, sizes=len(cases), size=number, index=None)
        if budget is None:
            try:
                with tracing.time_limit(timeout):
                    got = fn(*case)
            except Exception as error:  # noqa: BLE001  (the student's error becomes the verdict)
                return fail(diagnosis="exception", hint=f"{_describe(case)}: {type(error).__name__}: {error}")
        else:
            run = tracing.record(with_poisoned_allocations, fn, *_copies(case), timeout=timeout)
            found = _trace_diagnosis(
                run, cell=lambda array, index: f"{array}[{index}]",
                race_advice="Two threads touch one cell in one step: a barrier between the steps, or different cells.",
                uninitialized_advice="write every cell before a barrier, then read it.")
            if found is not None:
                return fail(diagnosis=found[0], hint=found[2])
            got = run.result
        got = np.asarray(got.copy_to_host() if hasattr(got, "copy_to_host") else got)
        if got.shape != expected.shape:
            return fail(diagnosis="wrong-result", hint=f"{_describe(case)}: expected shape {expected.shape}, got {got.shape}")
        same = (np.allclose(got, expected, rtol=1e-6, atol=0) if expected.dtype.kind in "fc"
                else np.array_equal(got, expected))
        if not same:
            if expected.size <= 8:
                return fail(diagnosis="wrong-result", hint=f"{_describe(case)}: expected {expected.tolist()}, got {got.tolist()}")
            first = np.unravel_index(int(np.flatnonzero(~np.isclose(got, expected, rtol=1e-6, atol=0) if expected.dtype.kind in "fc"
                                                         else got != expected)[0]), expected.shape)
            return fail(diagnosis="wrong-result", hint=f"{_describe(case)}: at {tuple(map(int, first))} expected "
                                                        f"{expected[first]!r}, got {got[first]!r}")
        if budget is not None:
            overspent = budget.overspent(run, int(np.size(case[0])))
            if overspent is not None:
                return fail(diagnosis="over-budget", hint=overspent[1])
    return _FunctionResult(True, "pass", name, len(cases))


def _describe(case):
    """``case`` for a hint: small values as they are, arrays of more than 8 elements by shape and dtype."""
    shown = [f"array of shape {v.shape}, {v.dtype}" if isinstance(v, np.ndarray) and v.size > 8 else repr(v) for v in case]
    return f"({', '.join(shown)}{',' if len(shown) == 1 else ''})"


def _copies(case):
    """The arguments of ``case``, numpy arrays copied (a student's function may write into them)."""
    return tuple(v.copy() if isinstance(v, np.ndarray) else v for v in case)


@dataclass(frozen=True)
class _FunctionResult(CheckResult):
    """A :class:`CheckResult` of :func:`function`: ``sizes`` counts cases, ``size`` is the failing case's number."""

    sizes: int = 0

    def __str__(self):
        if self.passed:
            return f"PASS {self.name}: {self.sizes} cases"
        return f"FAIL {self.name}: {self.diagnosis} at case {self.size}. {self.hint}"

    __repr__ = __str__


@_child.simulated
def tiled(tile_kernel, *, block_size, threads=None, op="add", dtype=np.float32, sizes=None, **kw):
    """Check a student's tile kernel ``(x, out, totals, n)`` run on every tile, with carries.

    The kernel scans tile b (``block_size`` elements) into ``out`` and writes its total to
    ``totals[b]``; the package scans the totals and carries them, as :func:`prefixsum.scans.tiles.scan_tiles`
    does for every algorithm. Inclusive forward scans only. A ``budget`` (:class:`Budget`)
    applies to the student's tile kernel unless it names its ``kernels``.
    """
    from numba import cuda

    from ..scans.registry import lookup
    from ..scans.tiles import scan_tiles

    # The totals are scanned by the ladder, the simplest registered scan, so that the trace of a
    # student's run holds few kernels besides the student's own.
    totals_scan = lookup("ladder")

    def run_tiles(x):
        source = cuda.to_device(x)
        out = cuda.device_array(len(x), x.dtype)

        scan_tiles(source, out, tile_kernel, tile=block_size, threads=threads or block_size, op=op, reverse=False,
                   scan_totals=lambda totals, carries: totals_scan.run(totals, carries, op, True, False, block_size=256))
        return out

    name = getattr(getattr(tile_kernel, "py_func", tile_kernel), "__name__", "tile kernel")
    budget = kw.pop("budget", None)
    if budget is not None and budget.kernels is None:
        budget = dataclasses.replace(budget, kernels=(name,))
    return scan(run_tiles, op=op, dtype=dtype, sizes=sizes, name=name, budget=budget, **kw)


_REFLECTOR_CASES = ("a random x", "a random x with x[-1] > 0", "a random x with x[-1] < 0",
                    "x close to +e (x[-1] > 0, the rest tiny)", "x close to -e (x[-1] < 0, the rest tiny)",
                    "x with x[-1] = 0")


def _reflector_inputs(n, dtype, rng):
    """One input vector of length ``n`` for each of :data:`_REFLECTOR_CASES`, in ``dtype``."""
    tiny = np.sqrt(np.finfo(dtype).eps)
    plain = rng.normal(size=n)
    positive, negative, near_plus, near_minus, flat = (rng.normal(size=n) for _ in range(5))
    positive[-1] = abs(positive[-1]) + 0.1
    negative[-1] = -abs(negative[-1]) - 0.1
    near_plus[:-1] *= tiny
    near_plus[-1] = 1 + rng.random()
    near_minus[:-1] *= tiny
    near_minus[-1] = -1 - rng.random()
    flat[-1] = 0
    return [v.astype(dtype) for v in (plain, positive, negative, near_plus, near_minus, flat)]


def _judge_reflector(x, returned, dtype, magnitude=1.0):
    """``(diagnosis, index, hint)`` for one call of a student's reflector on ``x`` (given to it times ``magnitude``)."""
    n = x.size
    if not (isinstance(returned, (tuple, list)) and len(returned) == 2):
        return "exception", None, f"the function must return (u, H); it returned {type(returned).__name__}"
    try:
        u = np.asarray(returned[0], dtype=np.float64).reshape(-1)
        H = float(np.asarray(returned[1], dtype=np.float64))
    except (TypeError, ValueError) as error:
        return "exception", None, f"the function must return (u, H), u an array and H a number: {error}"
    if u.shape != (n,):
        return "exception", None, f"u must have x's shape ({n},); it has shape {u.shape}"
    if not (np.isfinite(u).all() and np.isfinite(H)) or H == 0:
        if magnitude != 1:
            return "wrong-result", None, (f"u or H is not finite, or H = 0, for entries of about {magnitude:g}: "
                                          "|x| is a float64 there, but h = |x|^2 is not.")
        return "wrong-result", None, ("u or H is not finite, or H = 0: with g = -sign(f) sqrt(h), "
                                      "H = h - f g = h + |f| sqrt(h) is never 0 for x != 0 "
                                      "(np.sign(0) is 0: take g = -sqrt(h) when f >= 0).")
    eps = np.finfo(dtype).eps
    tolerance = 64 * n * eps
    P = np.eye(n) - np.outer(u, u) / H
    x64 = x.astype(np.float64)
    norm, f = np.linalg.norm(x64), float(x64[-1])
    image = P @ x64
    target = np.zeros(n)
    target[-1] = -norm if f >= 0 else norm
    if f != 0 and np.abs(image + target).max() <= 1e-2 * norm:
        # Checked first: with this sign, cancellation in f - g may also spoil P's orthogonality.
        return "wrong-result", n - 1, ("P x = +sign(f) |x| e: g has the wrong sign. Take g = -sign(f) sqrt(h), so that "
                                       "f - g adds two magnitudes instead of cancelling.")
    if np.abs(P.T @ P - np.eye(n)).max() > tolerance:
        if f == 0:
            return "wrong-result", None, ("P = I - u u^T / H is not orthogonal. At f = 0, g must still be "
                                          "-sqrt(h), not 0 (np.sign(0) is 0): take g = -sqrt(h) when f >= 0.")
        return "wrong-result", None, ("P = I - u u^T / H is not orthogonal: H must be |u|^2 / 2, "
                                      "which is h - f g for u = x - g e.")
    if f == 0 and np.abs(image + target).max() <= tolerance * norm:
        return "pass", None, ""  # x[-1] = 0: both signs add magnitudes, either is right
    error = np.abs(image - target)
    if error.max() > tolerance * norm:
        index = int(np.flatnonzero(error > tolerance * norm)[0])
        if index < n - 1:
            return "wrong-result", index, ("P x must be 0 above its last entry: u = x - g e differs from x only in its "
                                           "last entry, f - g.")
        return "wrong-result", index, "the last entry of P x must be g = -sign(f) sqrt(h), h = |x|^2."
    return "pass", None, ""


@_child.simulated
def reflector(fn, *, sizes=(2, 3, 5, 8), dtype=np.float64, name=None, magnitude=1.0):
    """Check ``fn``, a student's Householder reflector, against numpy.

    ``fn(x)`` takes a vector ``x`` of length ``n >= 2`` and returns ``(u, H)`` with
    ``P = I - u u^T / H`` orthogonal and ``P x = g e``, ``e`` the last unit vector and
    ``g = -sign(f) |x|``, ``f = x[-1]`` (seed 003, ``tred2``): ``h = |x|^2``,
    ``g = -sign(f) sqrt(h)``, ``u = x - g e``, ``H = h - f g``. At ``f = 0`` either sign of
    ``g`` is accepted.

    For every size, ``fn`` runs on six vectors (:data:`_REFLECTOR_CASES`): random ones, with
    either sign of ``f``, and nearly parallel to ``e``, where the wrong sign of ``g`` cancels.
    Each answer is checked in float64: ``P^T P = I`` and ``P x = g e``, within ``64 n eps``
    (relative to ``|x|``; ``eps`` of ``dtype``). With a ``magnitude`` the vectors are multiplied
    by it before ``fn`` gets them (``1e200``: ``|x|^2`` overflows; ``1e-200``: it underflows),
    and ``P`` is judged as before: it does not depend on the length of ``u``.

    Parameters
    ----------
    fn : callable
        ``fn(x) -> (u, H)``, ``x`` a 1-D numpy array of ``dtype`` (a copy: it may be changed).
    sizes : sequence of int
        Vector lengths, each at least 2.
    dtype : numpy dtype
        float32 or float64, the dtype of the inputs and of the tolerance.
    name : str, optional
        Shown in the verdict (default: ``fn``'s name).
    magnitude : float
        The size of the input's entries, positive, such that ``dtype`` holds ``x * magnitude``
        (default 1: the random vectors as they are).

    Returns
    -------
    CheckResult
        ``passed``; ``diagnosis`` "pass", "wrong-result" or "exception"; the first failing
        ``size`` and, where one entry of ``P x`` is wrong, its ``index``; a ``hint`` that names
        the input vector. Printed, one deterministic line.

    Examples
    --------
    >>> import numpy as np
    >>> def reflect(x):
    ...     h = float(x @ x); f = float(x[-1])
    ...     g = -np.sqrt(h) if f >= 0 else np.sqrt(h)
    ...     u = x.astype(np.float64); u[-1] = f - g
    ...     return u, h - f * g
    >>> print(reflector(reflect))
    PASS reflect: 4 sizes from 2 to 8
    """
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64; got {dtype}")
    sizes = tuple(sorted(sizes))
    if not sizes or sizes[0] < 2:
        raise ValueError(f"sizes must be at least 2 (a reflector of one entry does nothing); got {sizes}")
    info = np.finfo(dtype)
    if not (isinstance(magnitude, (int, float)) and info.tiny / info.eps <= magnitude <= info.max / 1e3):
        raise ValueError(f"magnitude must be a number from {info.tiny / info.eps:g} to {info.max / 1e3:g} "
                         f"(entries {np.dtype(dtype).name} holds); got {magnitude!r}")
    name = name or getattr(fn, "__name__", "reflector")
    if name == "<lambda>":
        name = "reflector"
    for n in sizes:
        for case, x in zip(_REFLECTOR_CASES, _reflector_inputs(n, dtype, np.random.default_rng(_SEED + n))):
            given = x.copy() if magnitude == 1 else (x.astype(np.float64) * magnitude).astype(dtype)
            try:
                returned = fn(given)
            except Exception as error:  # noqa: BLE001  (the student's error becomes the verdict)
                text = str(error).splitlines()[0] if str(error) else ""
                hint = f"{type(error).__name__}: {text}" if text else type(error).__name__
                return CheckResult(False, "exception", name, sizes, n, None, hint)
            diagnosis, index, hint = _judge_reflector(x, returned, dtype, magnitude)
            if diagnosis != "pass":
                return CheckResult(False, diagnosis, name, sizes, n, index, f"{case}: {hint}")
    return CheckResult(True, "pass", name, sizes)


def _tridiagonal_systems(batch, n, dtype, rng):
    """Random strictly diagonally dominant systems, ``|b| >= |a| + |c| + 0.5``, signs mixed.

    ``a[:, 0]`` and ``c[:, -1]`` (outside the matrix) hold random values too: a solver must ignore them.
    """
    a, c = rng.uniform(-1, 1, (2, batch, n))
    b = (np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))) * rng.choice([-1.0, 1.0], (batch, n))
    d = rng.normal(size=(batch, n))
    return [v.astype(dtype) for v in (a, b, c, d)]


def _tridiagonal_reference(a, b, c, d):
    """The float64 solutions, by LAPACK's dense solver (partial pivoting), ignoring a[:, 0] and c[:, -1]."""
    batch, n = d.shape
    matrices = np.zeros((batch, n, n))
    rows = np.arange(n)
    matrices[:, rows, rows] = b
    matrices[:, rows[1:], rows[:-1]] = a[:, 1:]
    matrices[:, rows[:-1], rows[1:]] = c[:, :-1]
    return np.linalg.solve(matrices, d.astype(np.float64)[..., None])[..., 0]


def _trace_diagnosis(run, *, cell, race_advice, uninitialized_advice):
    """``(diagnosis, index, hint)`` for what the trace of a run shows, or None when it shows nothing wrong.

    ``cell(array, index)`` names an element in the hints; the advice strings say what to fix.
    """
    if run.error is not None:
        diagnosis, hint = _hint_for_error(run.error)
        return diagnosis, None, hint
    races = run.races()
    if races:
        race = min(races, key=_race_rank)
        if race.between_blocks:
            return _BLOCK_RACES[race.kind][0], None, _BLOCK_RACES[race.kind][1].format(
                cell=f"{race.array}[{race.index}]", kernel=race.kernel, first=race.threads[0],
                second=race.threads[1], line=race.line)
        if not _spans_several_steps(run, race):
            race_advice = ("Both touch it in the same step of the loop, one reading what the other writes: a barrier "
                           "between steps cannot help. Check the index read against the invariant (a step should "
                           "read only cells no thread writes in that step), or read into a register, "
                           "cuda.syncthreads(), then write.")
        return "race", None, (f"{cell(race.array, race.index)} in kernel '{race.kernel}': threads {race.threads[0]} "
                              f"and {race.threads[1]} of block {race.block} touch it in one barrier phase. {race_advice}")
    uninitialized = run.uninitialized_reads()
    if uninitialized:
        r = uninitialized[0]
        return "uninitialized-read", None, (f"{cell(r.array, r.index)} is read in block {r.block} before any thread "
                                            f"wrote it: {uninitialized_advice}")
    return None


def _spans_several_steps(run, race):
    """Whether a thread of ``race``'s block ran a racing source line more than once in the race's phase.

    Then loop iterations ran without a barrier between them: the barrier between steps is
    missing. If every thread ran those lines once, the race lies inside one step, and adding a
    barrier between steps changes nothing: the index read is wrong (the ladder's partner
    without its ``- 1`` reads a cell its own phase writes), or the step must read, wait, write.
    """
    where = (race.launch, race.block, race.array, race.phase)
    lines = {r.line for r in run.records if (r.launch, r.block, r.array, r.phase) == where and r.index == race.index}
    runs = collections.Counter((r.thread, r.line, r.write) for r in run.records
                               if (r.launch, r.block, r.array, r.phase) == where and r.line in lines)
    # One execution of ``a[t] += a[p]`` reads twice and writes once.
    return any(count > (1 if write else 2) for (_, _, write), count in runs.items())


# Races between blocks, by kind (prefixsum.trace.Race.kind): the diagnosis and the hint.
_BLOCK_RACES = {
    "both-write": ("race", "{cell} in kernel '{kernel}': blocks {first} and {second} both write it. No barrier "
                           "orders blocks: give each block its own cells."),
    "plain-poll": ("plain-load-poll", "{cell} in kernel '{kernel}': block {second} polls it with plain loads (line "
                                      "{line}) while block {first} writes it. Compiled, a plain load in a loop may be "
                                      "read once and the loop never ends: poll with an atomic, e.g. "
                                      "cuda.atomic.add(flags, j, 0)."),
    "unfenced": ("stale-read", "{cell} in kernel '{kernel}': block {second} waits for block {first}'s flag, then "
                               "reads it (line {line}), but nothing kept the store ahead of the flag: it may read "
                               "stale data. Call cuda.threadfence() between storing the data and raising the flag."),
    "read-write": ("race-between-blocks", "{cell} in kernel '{kernel}': block {first} and block {second} both touch "
                                          "it in one launch, one writing, and nothing orders them (read at line "
                                          "{line}). Blocks run in any order: publish the value behind a "
                                          "cuda.threadfence() and an atomic flag, and wait for the flag with an "
                                          "atomic, or carry it in a second launch."),
}


def _race_rank(race):
    """Races within a block first, then between blocks by how telling their kind is."""
    if not race.between_blocks:
        return 0
    return 1 + ("plain-poll", "unfenced", "read-write", "both-write").index(race.kind)


def _tridiagonal_hint(n, bad_rows, passed_sizes):
    if n == 1:
        return "With n = 1 no step runs: x_0 = d_0 / b_0 (a_0 and c_0 lie outside the matrix)."
    if n == 2:
        return "With n = 2 one step at s = 1 removes each row's neighbour: do the steps run while s < n?"
    if set(bad_rows) <= {0, n - 1}:
        return ("Only the first or last row is wrong: a_0 and c_(n-1) lie outside the matrix, and rows outside the "
                "system are identity rows (0, 1, 0, 0).")
    if n & (n - 1) and any(s >= 4 and s & (s - 1) == 0 for s in passed_sizes):
        return ("Powers of two pass but this n does not: run the steps while s < n (ceil(log2 n) of them) and use "
                "identity rows wherever i - s < 0 or i + s >= n.")
    return ("Work one step through by hand on n = 3: k1 = a_i / b_(i-s), k2 = c_i / b_(i+s), and each step reads "
            "the rows the previous step wrote, at stride s = 1, 2, 4, ...")


@_child.simulated
def tridiagonal(fn, *, n_values=(1, 2, 3, 7, 11, 32, 33), batch=3, dtype=np.float64, timeout=20.0, name=None,
                budget=None):
    """Check ``fn``, a student's batched tridiagonal solver, against a float64 reference.

    ``fn(a, b, c, d)`` takes four numpy arrays of shape ``(batch, n)`` and ``dtype``, the rows
    ``a_i x_{i-1} + b_i x_i + c_i x_{i+1} = d_i`` of ``batch`` systems, and returns ``x`` (numpy
    or device array) of the same shape. ``a[:, 0]`` and ``c[:, -1]`` lie outside the matrices:
    they hold random values, which ``fn`` must ignore.

    For each ``n`` the systems are random and strictly diagonally dominant
    (``|b_i| >= |a_i| + |c_i| + 0.5``, so every method without pivoting is stable on them), every
    device array ``fn`` allocates and all shared memory start poisoned (NaN), and the run is
    traced (:mod:`prefixsum.trace`). As :func:`scan`, the first problem found is the verdict:
    ``exception``, ``timeout``, ``out-of-bounds``, ``barrier-divergence``, ``race``,
    ``uninitialized-read``, ``unwritten-output`` (a NaN left in x), ``wrong-result`` (an
    element off the float64 solution by more than ``64 * eps(dtype) * steps * max|x|`` of its
    system, ``steps = ceil(log2(n + 1))``), ``over-budget`` (right, but spending more than
    ``budget``), else ``pass``.

    Parameters
    ----------
    fn : callable
        ``fn(a, b, c, d) -> x``; it gets copies, so it may change them.
    n_values : sequence of int
        System sizes, each at least 1 (default: one row, the smallest steps, seed 003's 7 and
        11, and around a warp).
    batch : int
        Systems per call.
    dtype : numpy dtype
        float32 or float64.
    timeout : float
        Seconds before a run is stopped as hanging.
    name : str, optional
        Shown in the verdict (default: ``fn``'s name).
    budget : Budget, optional
        What the solver's kernels may spend (:class:`Budget`): one thread solving a whole
        system gets the right x and fails ``accesses_per_step``.

    Returns
    -------
    CheckResult
        ``passed``, ``diagnosis``, the first failing ``size`` (n) and ``index`` (the row), and a
        ``hint`` that names the system; printed, one deterministic line.

    Examples
    --------
    >>> from prefixsum import tridiag
    >>> print(tridiagonal(lambda a, b, c, d: tridiag.solve(a, b, c, d, method="thomas"), name="thomas"))
    PASS thomas: 7 sizes from 1 to 33
    """
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64; got {dtype}")
    sizes = tuple(sorted(n_values))
    if not sizes or sizes[0] < 1 or batch < 1:
        raise ValueError(f"n_values and batch must be at least 1; got n_values={n_values}, batch={batch}")
    if budget is not None and not isinstance(budget, Budget):
        raise TypeError(f"budget must be a prefixsum.check.Budget or None; got {type(budget).__name__}")
    name = name or getattr(fn, "__name__", "tridiagonal")
    if name == "<lambda>":
        name = "tridiagonal"
    passed_sizes = []
    for n in sizes:
        a, b, c, d = _tridiagonal_systems(batch, n, dtype, np.random.default_rng(_SEED + n))
        expected = _tridiagonal_reference(a, b, c, d)
        run = tracing.record(with_poisoned_allocations, fn, a.copy(), b.copy(), c.copy(), d.copy(),
                             timeout=timeout)
        found = _trace_diagnosis(
            run, cell=lambda array, index: f"element {index} of {array} (flat index)",
            race_advice="A step must read one buffer and write the other, with a cuda.syncthreads() between steps.",
            uninitialized_advice="rows outside the system are identity rows (0, 1, 0, 0), not reads past row n - 1.")
        if found is not None:
            return CheckResult(False, found[0], name, sizes, n, found[1], found[2])
        result = run.result
        if hasattr(result, "copy_to_host"):
            result = result.copy_to_host()
        if result is None or np.shape(result) != (batch, n):
            return CheckResult(False, "exception", name, sizes, n, None,
                               f"the function must return x of shape {(batch, n)}; it returned "
                               f"{type(result).__name__} {np.shape(result)}")
        x = np.asarray(result, dtype=np.float64)
        unwritten = np.argwhere(np.isnan(x))
        if unwritten.size:
            system, row = map(int, unwritten[0])
            return CheckResult(False, "unwritten-output", name, sizes, n, row,
                               f"x[{system}, {row}] was never written (or is NaN): every row of every system "
                               "needs its x_i = d_i / b_i at the end.")
        steps = max(1, int(np.ceil(np.log2(n + 1))))
        bound = 64 * np.finfo(dtype).eps * steps * np.abs(expected).max(axis=1, keepdims=True)
        bad = np.argwhere(~(np.abs(x - expected) <= bound))
        if bad.size:
            system, row = map(int, bad[0])
            hint = _tridiagonal_hint(n, sorted({int(r) for _, r in bad}), passed_sizes)
            return CheckResult(False, "wrong-result", name, sizes, n, row, f"System {system}. {hint}")
        overspent = None if budget is None else budget.overspent(run, n)
        if overspent is not None:
            return CheckResult(False, "over-budget", name, sizes, n, overspent[0], overspent[1])
        passed_sizes.append(n)
    return CheckResult(True, "pass", name, sizes)


def _name(fn, name, default):
    """The name a verdict shows: ``name``, else ``fn``'s own unless it is a lambda, else ``default``."""
    own = getattr(fn, "__name__", default)
    return name or (default if own == "<lambda>" else own)


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
        run = tracing.record(with_poisoned_allocations, fn, *[a.copy() for a in args], timeout=timeout)
        found = _trace_diagnosis(
            run, cell=lambda array, index: f"{array}[{index}]",
            race_advice="Two threads write one place: is every element's place different?",
            uninitialized_advice="write every cell before the barrier.")
        if found is not None:
            return CheckResult(False, found[0], name, tuple(sizes), n, found[1], found[2])
        result = run.result.copy_to_host() if hasattr(run.result, "copy_to_host") else np.asarray(run.result)
        if result.shape != expected.shape:
            return CheckResult(False, "wrong-result", name, tuple(sizes), n, None,
                               f"the result has {result.shape[0] if result.ndim else 0} elements, not {expected.shape[0]}.")
        unwritten = np.flatnonzero(_is_poison(result))
        if unwritten.size:
            return CheckResult(False, "unwritten-output", name, tuple(sizes), n, int(unwritten[0]),
                               "This element was never written: does every element reach its place?")
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

    return _check_cases(fn, cases(), _name(fn, name, "compaction"), timeout,
                        "The kept elements must keep their order: element i goes to the number of kept elements before it.",
                        budget)


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

    return _check_cases(fn, cases(), _name(fn, name, "radix pass"), timeout,
                        "Zeros go to their exclusive-scan place; a one goes to (all zeros) + i - (zeros before i).", budget)
