"""The systems the tridiagonal benchmarks solve and the checks of a solve, for benchmarks/tridiag.py,
tridiag_warp.py and transfers.py (no script of its own).

Two families (:data:`FAMILIES`): ``dominant`` (``|b| = |a| + |c| + u``, u uniform in [0.5, 1.5]:
every method is right) and ``indefinite`` (a, b and c uniform in [-1, 1]: only the pivoting solvers
are). A result is right if its relative residual (dominant) or normwise backward error (indefinite)
is at most :data:`RESIDUAL_EPS` x eps.
"""

import numpy as np

FAMILIES = ("dominant", "indefinite")
RESIDUAL_EPS = 64
"""The most a right result's relative residual (dominant) or backward error (indefinite) may be, in eps:
the residuals seen are about one eps; a wrong solve is off by far more."""


def family_system(family, batch, n, dtype, rng):
    """``(a, b, c, d)`` of ``family`` (module docstring), ``a[:, 0]`` and ``c[:, -1]`` zero."""
    a, c = rng.uniform(-1, 1, (2, batch, n))
    b = (
        np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))
        if family == "dominant"
        else rng.uniform(-1, 1, (batch, n))
    )
    d = rng.normal(size=(batch, n))
    a[:, 0] = 0
    c[:, -1] = 0
    return tuple(v.astype(dtype) for v in (a, b, c, d))


def system(batch, n, dtype, rng):
    """Dominant systems (benchmarks/tridiag_warp.py's)."""
    return family_system("dominant", batch, n, dtype, rng)


def residual(a, b, c, d, x):
    """``||T x - d|| / ||d||`` (2-norms) in float64."""
    x = x.astype(np.float64)
    r = b * x - d
    r[:, 1:] += a[:, 1:] * x[:, :-1]
    r[:, :-1] += c[:, :-1] * x[:, 1:]
    return float(np.linalg.norm(r) / np.linalg.norm(d))


def backward_error(a, b, c, d, x):
    """``max |T x - d| / (max |T| max |x| + max |d|)`` in float64 (row sums for ``|T|``): small for a
    backward-stable solve whatever T's condition; NaN for a NaN in x."""
    a, b, c, d, x = (v.astype(np.float64) for v in (a, b, c, d, x))
    r = b * x - d
    r[:, 1:] += a[:, 1:] * x[:, :-1]
    r[:, :-1] += c[:, :-1] * x[:, 1:]
    scale = np.max(np.abs(a) + np.abs(b) + np.abs(c)) * np.max(np.abs(x)) + np.max(np.abs(d))
    return float(np.max(np.abs(r)) / scale)
