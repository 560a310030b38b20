"""The Thomas algorithm: Gaussian elimination without pivoting, one thread per system.

Forward sweep: ``c_i' = c_i / p_i`` and ``d_i' = (d_i - a_i d_{i-1}') / p_i`` with the pivot
``p_i = b_i - a_i c_{i-1}'``; back substitution: ``x_{n-1} = d_{n-1}'``,
``x_i = d_i' - c_i' x_{i+1}``. About 8n flops and 2n sequential steps per system: the least
work of all methods, and the sequential baseline, with parallelism only across the batch.

Each thread walks its own row of the (batch, n) arrays, so neighbouring threads read addresses
n elements apart: uncoalesced. An interleaved (n, batch) layout would coalesce the reads;
it is left out so that every method takes the same arrays.

No pivoting: for diagonally dominant or symmetric positive definite systems.
"""

import numpy as np
from numba import cuda, types

from ..core.registry import Capability
from ._common import ZERO_PIVOT, fail, launchers, reused, store
from .registry import Method, register

THREADS = 128


@cuda.jit
def thomas(a, b, c, d, x, info, scratch):
    """Solve system ``cuda.grid(1)``; ``scratch`` holds its ``c'`` and ``x`` its ``d'``."""
    system = cuda.grid(1)
    batch, n = x.shape
    if system >= batch:
        return
    zero = b.dtype.type(0)
    cp, dp = zero, zero
    for i in range(n):
        ai = a[system, i] if i > 0 else zero
        pivot = b[system, i] - ai * cp
        if pivot == 0:
            fail(info, system, ZERO_PIVOT)
            return
        cp = (c[system, i] if i + 1 < n else zero) / pivot
        dp = (d[system, i] - ai * dp) / pivot
        scratch[system, i] = cp
        x[system, i] = dp
    for i in range(n - 1, -1, -1):
        if i + 1 < n:
            dp = x[system, i] - scratch[system, i] * dp
        store(x, info, system, i, dp)


def run(a, b, c, d, x, info, stream=None, temp=None):
    """Solve the (batch, n) device systems into ``x``; failures go to ``info`` (see :mod:`.api`).
    ``temp``: the arrays of :func:`temp_parts` in the caller's memory, or None for the workspace's."""
    batch, n = x.shape
    if temp:
        scratch = temp[0].reshape(batch, n)
    else:
        scratch = reused(("thomas", batch, n, x.dtype), lambda: cuda.device_array_like(x), stream)
    launchers(kernels, x.dtype)[thomas](-(-batch // THREADS), THREADS, a, b, c, d, x, info, scratch, stream=stream)


def temp_parts(batch, n, dtype):
    """The scratch :func:`run` takes from a caller's memory: ``c'`` of every row."""
    return [(batch * n, dtype)]


def kernels(dtype):
    """Every kernel :func:`run` launches for ``dtype``, with numba argument types (for PTX checks)."""
    t = types.float32 if np.dtype(dtype) == np.float32 else types.float64
    matrix = t[:, ::1]
    yield thomas, (matrix, matrix, matrix, matrix, matrix, types.int32[::1], matrix)


METHOD = register(
    Method(
        name="thomas",
        run=run,
        kernels=kernels,
        temp_parts=temp_parts,
        capabilities=Capability.NEEDS_DOMINANCE | Capability.BATCHED | Capability.CALLER_TEMP,
        summary="Gaussian elimination without pivoting, one thread per system: about 8n flops, 2n sequential steps",
        source="L. H. Thomas (1949); the sequential baseline",
    )
)
