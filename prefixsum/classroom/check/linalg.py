"""Linear-algebra checks: a Householder reflector (:func:`reflector`), a batched tridiagonal solver
(:func:`tridiagonal`)."""

import numpy as np

from .. import child as _child
from . import observed
from .diagnosis import _trace_diagnosis, band_hint, written_nan
from .mode import _SEED, limits
from .results import Budget, CheckResult, with_poisoned_allocations

_REFLECTOR_CASES = (
    "a random x",
    "a random x with x[-1] > 0",
    "a random x with x[-1] < 0",
    "x close to +e (x[-1] > 0, the rest tiny)",
    "x close to -e (x[-1] < 0, the rest tiny)",
    "x with x[-1] = 0",
)


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
            return (
                "wrong-result",
                None,
                (
                    f"u or H is not finite, or H = 0, for entries of about {magnitude:g}: "
                    "|x| is a float64 there, but h = |x|^2 is not."
                ),
            )
        return (
            "wrong-result",
            None,
            (
                "u or H is not finite, or H = 0: with g = -sign(f) sqrt(h), "
                "H = h - f g = h + |f| sqrt(h) is never 0 for x != 0 "
                "(np.sign(0) is 0: take g = -sqrt(h) when f >= 0)."
            ),
        )
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
        return (
            "wrong-result",
            n - 1,
            (
                "P x = +sign(f) |x| e: g has the wrong sign. Take g = -sign(f) sqrt(h), so that "
                "f - g adds two magnitudes instead of cancelling."
            ),
        )
    if np.abs(P.T @ P - np.eye(n)).max() > tolerance:
        if f == 0:
            return (
                "wrong-result",
                None,
                (
                    "P = I - u u^T / H is not orthogonal. At f = 0, g must still be "
                    "-sqrt(h), not 0 (np.sign(0) is 0): take g = -sqrt(h) when f >= 0."
                ),
            )
        return (
            "wrong-result",
            None,
            ("P = I - u u^T / H is not orthogonal: H must be |u|^2 / 2, which is h - f g for u = x - g e."),
        )
    if f == 0 and np.abs(image + target).max() <= tolerance * norm:
        return "pass", None, ""  # x[-1] = 0: both signs add magnitudes, either is right
    error = np.abs(image - target)
    if error.max() > tolerance * norm:
        index = int(np.flatnonzero(error > tolerance * norm)[0])
        if index < n - 1:
            return (
                "wrong-result",
                index,
                ("P x must be 0 above its last entry: u = x - g e differs from x only in its last entry, f - g."),
            )
        return "wrong-result", index, "the last entry of P x must be g = -sign(f) sqrt(h), h = |x|^2."
    return "pass", None, ""


@_child.simulated
def reflector(fn, *, sizes=(2, 3, 5, 8), dtype=np.float64, name=None, magnitude=1.0):
    """Check ``fn``, a student's Householder reflector, against numpy.

    ``fn(x)`` takes a vector ``x`` of length ``n >= 2`` and returns ``(u, H)`` with ``P = I - u u^T / H`` orthogonal and
    ``P x = g e``, ``e`` the last unit vector and ``g = -sign(f) |x|``, ``f = x[-1]`` (``tred2``, as the handwritten
    notes on tridiagonal solvers write it): ``h = |x|^2``, ``g = -sign(f) sqrt(h)``, ``u = x - g e``, ``H = h - f g``.
    At ``f = 0`` either sign of ``g`` is accepted.

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
        raise ValueError(
            f"magnitude must be a number from {info.tiny / info.eps:g} to {info.max / 1e3:g} "
            f"(entries {np.dtype(dtype).name} holds); got {magnitude!r}"
        )
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


def dominant_systems(batch, n, seed, *, zero_outside=True):
    """Random strictly diagonally dominant float64 systems, ``|b| >= |a| + |c| + 0.5``, signs mixed.

    Parameters
    ----------
    batch, n : int
        ``batch`` systems of ``n`` rows.
    seed : int or numpy.random.Generator
        The random numbers' seed, or a generator to draw from.
    zero_outside : bool
        Set ``a[:, 0]`` and ``c[:, -1]`` (outside the matrix) to 0; else they keep random values,
        which a solver must ignore.

    Returns
    -------
    (a, b, c, d)
        Four float64 arrays of shape ``(batch, n)``. The chapters and the checks draw their
        systems here.
    """
    rng = np.random.default_rng(seed)
    a, c = rng.uniform(-1, 1, (2, batch, n))
    b = (np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))) * rng.choice([-1.0, 1.0], (batch, n))
    if zero_outside:
        a[:, 0], c[:, -1] = 0, 0
    return a, b, c, rng.normal(size=(batch, n))


def _tridiagonal_systems(batch, n, dtype, rng):
    """:func:`dominant_systems` in ``dtype``, with random values outside the matrices."""
    return [v.astype(dtype) for v in dominant_systems(batch, n, rng, zero_outside=False)]


def _tridiagonal_reference(a, b, c, d):
    """The float64 solutions, by LAPACK's dense solver (partial pivoting), ignoring a[:, 0] and c[:, -1]."""
    batch, n = d.shape
    matrices = np.zeros((batch, n, n))
    rows = np.arange(n)
    matrices[:, rows, rows] = b
    matrices[:, rows[1:], rows[:-1]] = a[:, 1:]
    matrices[:, rows[:-1], rows[1:]] = c[:, :-1]
    return np.linalg.solve(matrices, d.astype(np.float64)[..., None])[..., 0]


def _chunk_hint(n, bad_rows, chunk):
    """The hint of a wrong x from a partition-method solver with chunks of ``chunk`` rows."""
    ends = [r for r in bad_rows if r % chunk in (0, chunk - 1)]
    if not ends:
        return (
            "Every chunk's end is right and its interior is not: after the partition each interior row couples "
            "its own x and the two solved ends of its chunk only, the first and the last, in that order."
        )
    if len(ends) == len(bad_rows) and n > chunk:
        return (
            "Only chunk ends are wrong: the reduced system holds chunk t's first row as row 2t and its last as "
            "row 2t + 1, each with b = 1, and its solution gives the ends back in the same order."
        )
    return (
        "The reduced system is wrong: chunk t's first row (coupling the previous chunk's last x and its own last "
        "x) "
        "is row 2t, its last row (coupling its own first x and the next chunk's first) row 2t + 1, both with b = 1."
    )


def _tridiagonal_hint(n, bad_rows, passed_sizes, chunk=None):
    if chunk is not None:
        return _chunk_hint(n, bad_rows, chunk)
    if n == 1:
        return "With n = 1 no step runs: x_0 = d_0 / b_0 (a_0 and c_0 lie outside the matrix)."
    if n == 2:
        return (
            "With n = 2 one step at s = 1 removes each row's neighbour: row 1 subtracts k1 = a_1 / b_0 times "
            "row 0, row 0 subtracts k2 = c_0 / b_1 times row 1 (each multiplier divides by the neighbour's "
            "diagonal), and then x_i = d_i / b_i."
        )
    if set(bad_rows) <= {0, n - 1}:
        return (
            "Only the first or last row is wrong: check which rows row i combines at stride s (i - s and i + s "
            "of the previous step), and that a neighbour outside the system acts as an identity row "
            "(0, 1, 0, 0)."
        )
    if n & (n - 1) and any(s >= 4 and s & (s - 1) == 0 for s in passed_sizes):
        return (
            "Powers of two pass but this n does not: run the steps while s < n (ceil(log2 n) of them) and use "
            "identity rows wherever i - s < 0 or i + s >= n."
        )
    return (
        "Work one step through by hand on n = 3: k1 = a_i / b_(i-s), k2 = c_i / b_(i+s), and each step reads "
        "the rows the previous step wrote, at stride s = 1, 2, 4, ..."
    )


@_child.simulated
def tridiagonal(
    fn,
    *,
    n_values=(1, 2, 3, 7, 11, 32, 33),
    batch=3,
    dtype=np.float64,
    timeout=20.0,
    name=None,
    budget=None,
    chunk=None,
):
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
        System sizes, each at least 1 (default: one row, the smallest steps, the 7 and 11 of the
        handwritten notes' tables, and around a warp).
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
    chunk : int, optional
        The solver is the partition method with chunks of ``chunk`` rows: a wrong x gets the
        hints of chunk ends and interiors, not those of PCR's strides.

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
    if chunk is not None and not (isinstance(chunk, int) and chunk >= 2):
        raise ValueError(f"chunk must be None or an int of at least 2 (rows of a chunk); got {chunk!r}")
    name = name or getattr(fn, "__name__", "tridiagonal")
    if name == "<lambda>":
        name = "tridiagonal"
    passed_sizes = []
    for n in sizes:
        a, b, c, d = _tridiagonal_systems(batch, n, dtype, np.random.default_rng(_SEED + n))
        expected = _tridiagonal_reference(a, b, c, d)
        run = observed.record(with_poisoned_allocations, fn, a.copy(), b.copy(), c.copy(), d.copy(), **limits(timeout))
        found = _trace_diagnosis(
            run,
            cell=lambda array, index: f"element {index} of {array} (flat index)",
            uninitialized_advice="rows outside the system are identity rows (0, 1, 0, 0), not reads past row n - 1.",
        )
        if found is not None:
            return CheckResult(False, found[0], name, sizes, n, found[1], found[2])
        result = run.result
        if hasattr(result, "copy_to_host"):
            result = result.copy_to_host()
        if result is None or np.shape(result) != (batch, n):
            return CheckResult(
                False,
                "exception",
                name,
                sizes,
                n,
                None,
                f"the function must return x of shape {(batch, n)}; it returned "
                f"{type(result).__name__} {np.shape(result)}",
            )
        x = np.asarray(result, dtype=np.float64)
        unwritten = np.argwhere(np.isnan(x))
        if unwritten.size:
            system, row = map(int, unwritten[0])
            if chunk is not None:
                hint = (
                    f"x[{system}, {row}] is NaN: it was never written, or it came from a cell of the reduced "
                    "system that was never written (each of its rows needs all four of a, b, c and d)."
                )
            elif written_nan(run, "x", system * n + row):
                hint = (
                    f"x[{system}, {row}] {written_nan(run, 'x', system * n + row)} A row outside the system "
                    "is the identity row (0, 1, 0, 0), never zeros: the multipliers divide by its b."
                )
            else:
                hint = (
                    f"x[{system}, {row}] was never written (or is NaN): every row of every system "
                    "needs its x_i = d_i / b_i at the end."
                )
            return CheckResult(False, "unwritten-output", name, sizes, n, row, hint)
        steps = max(1, int(np.ceil(np.log2(n + 1))))
        bound = 64 * np.finfo(dtype).eps * steps * np.abs(expected).max(axis=1, keepdims=True)
        bad = np.argwhere(~(np.abs(x - expected) <= bound))
        if bad.size:
            system, row = map(int, bad[0])
            hint = band_hint(run) or _tridiagonal_hint(n, sorted({int(r) for _, r in bad}), passed_sizes, chunk)
            return CheckResult(False, "wrong-result", name, sizes, n, row, f"System {system}. {hint}")
        overspent = None if budget is None else budget.overspent(run, n)
        if overspent is not None:
            return CheckResult(False, "over-budget", name, sizes, n, overspent[0], overspent[1])
        passed_sizes.append(n)
    return CheckResult(True, "pass", name, sizes)
