"""Inputs, poison and comparisons shared by the tests, the demo and the checker.

Random inputs are chosen per operator so that a wrong kernel cannot pass by luck: no zeros-
or-ones-only data, integer sums that wrap around, products that stay finite, maxima that move.
"""

import time
from typing import NamedTuple

import numpy as np

from ..core.arithmetic import quiet_arithmetic
from ..core.poison import poison
from .ops import check_dtype, check_op, native
from .reference import scan, scan_float64, tolerance


def random_input(n, op, dtype, rng):
    """A random 1-D array of length ``n`` for testing ``op`` in ``dtype``.

    Integers: add uses the full range (so sums wrap), mul small odd and even factors (so products
    wrap, but rarely become 0), max/min the full range. Floats: add normal(0, 1); mul values
    +-exp(uniform(-a, a)) so a product of millions of factors stays finite and normal; max/min normal(0, 100).
    """
    check_op(op)
    dt = check_dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if op == "mul":
            values = rng.integers(-9 if dt.kind == "i" else 1, 10, size=n)
            values[values == 0] = 3
            return values.astype(dt)
        return rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    if op == "mul":
        # exp(+-spread) keeps log|product| a random walk around 0 with a standard deviation of at
        # most 17 (e^50 fits float32), so no prefix product overflows or sinks into denormals.
        spread = min(0.1, 30.0 / max(n, 1) ** 0.5)
        return (np.exp(rng.uniform(-spread, spread, size=n)) * rng.choice([-1.0, 1.0], size=n)).astype(dt)
    scale = 1.0 if op == "add" else 100.0
    return rng.normal(0.0, scale, size=n).astype(dt)


def poisoned(n, dtype):
    """A host array of length ``n`` filled with poison (:mod:`prefixsum.core.poison`).

    Poison is a value no correct scan of :func:`random_input` data is likely to produce: NaN for
    floats (it also never compares equal), a repeating 0x5A byte pattern for integers.
    """
    return poison(np.empty(n, check_dtype(dtype)))


def expected_scan(x, op="add", *, inclusive=True, reverse=False):
    """The reference scan of ``x`` and each element's tolerance, computed once for many results.

    Returns
    -------
    expected : numpy.ndarray
        :func:`prefixsum.scans.reference.scan` of ``x`` in ``x``'s dtype for integers,
        :func:`prefixsum.scans.reference.scan_float64` for floats.
    allowed : numpy.ndarray or None
        :func:`prefixsum.scans.reference.tolerance` for floats; None for integers (exact).
    """
    x = native(np.asarray(x))
    if x.dtype.kind == "f":
        return (
            scan_float64(x, op, inclusive=inclusive, reverse=reverse),
            tolerance(x, op, inclusive=inclusive, reverse=reverse),
        )
    return scan(x, op, inclusive=inclusive, reverse=reverse), None


def wrong_indices(result, expected, allowed):
    """Indices where ``result`` differs from ``expected`` by more than ``allowed``, in increasing order.

    ``expected`` and ``allowed`` come from :func:`expected_scan`. Integers must match exactly.
    Floats must be within ``allowed`` where ``expected`` is finite, and equal to it where it is
    inf or NaN: NaN matches NaN only there (the random inputs hold no NaN, so a NaN elsewhere,
    such as an unwritten poisoned output, is always wrong).
    """
    result = np.asarray(result)
    if result.shape != expected.shape:
        raise ValueError(f"result has shape {result.shape}, expected {expected.shape}")
    if allowed is None:
        return np.flatnonzero(result != expected)
    got = result.astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf where a result is wrong
        close = np.abs(got - expected) <= allowed
    same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    return np.flatnonzero(~np.where(np.isfinite(expected), close, same))


def mismatches(result, x, op="add", *, inclusive=True, reverse=False):
    """Indices where ``result`` is not the scan of ``x``, and the expected values.

    :func:`wrong_indices` against :func:`expected_scan`: integers must match exactly (numpy's
    wrap-around included); floats must be within :func:`prefixsum.scans.reference.tolerance` of
    the float64 reference where it is finite, and equal to it where it is inf or NaN.

    Returns
    -------
    bad : numpy.ndarray of int
        The wrong indices in increasing order (empty when the result is right).
    expected : numpy.ndarray
        The reference scan (float64 for floats).
    """
    expected, allowed = expected_scan(x, op, inclusive=inclusive, reverse=reverse)
    return wrong_indices(result, expected, allowed), expected


class PoisonedRun(NamedTuple):
    """What :func:`run_poisoned` saw: the output, its wrong indices, the reference, the input after."""

    result: np.ndarray
    bad: np.ndarray
    expected: np.ndarray
    input_after: np.ndarray
    seconds: float


def run_poisoned(run, x, op="add", *, inclusive=True, reverse=False, **options):
    """Call ``run(source, out, op, inclusive, reverse, **options)`` with a poisoned ``out``, and check it.

    ``run`` is an algorithm's ``run`` (see :class:`prefixsum.scans.registry.Algorithm`); ``x`` a host
    array. Every element of the output is compared with the reference (:func:`mismatches`), and
    the device input is read back so that callers can check it was not modified.
    """
    from numba import cuda

    source = cuda.to_device(x)
    out = cuda.to_device(poisoned(len(x), x.dtype))
    start = time.perf_counter()
    with quiet_arithmetic():
        run(source, out, op, inclusive, reverse, **options)
    cuda.synchronize()
    seconds = time.perf_counter() - start
    result = out.copy_to_host()
    bad, expected = mismatches(result, x, op, inclusive=inclusive, reverse=reverse)
    return PoisonedRun(result, bad, expected, source.copy_to_host(), seconds)
