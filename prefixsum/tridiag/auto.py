"""``"routed"``: the hybrid where it is safe, the pivoting solver where it is not, chosen per system on the GPU.

``method="auto"`` takes this method or :mod:`.pivoting`, whichever was measured faster for the
call's batch, n and dtype (:func:`.registry.choose`); both are right on every nonsingular system.

The hybrid (:mod:`.hybrid`: the warp solver, the block solver, the partition method) does not
pivot. On a strictly diagonally dominant system (``|b_i| > |a_i| + |c_i|`` on every row, ``a_0``
and ``c_{n-1}`` taken as 0) elimination without pivoting is backward stable, with a growth factor of at most 2
(Wilkinson 1961; Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., ch. 9), and
so are PCR steps and the partition method, which keep the dominance; and the hybrid is the
fastest method measured. On any other system it may divide by a tiny pivot and be wrong without a word
(``tridiag(1, 1e-10, 1)``: relative errors of 51 to 8.7e6 in float32).

:func:`run` therefore launches the hybrid with its dominance test on (``call`` not 0): the first
kernel that reads a system's rows (the warp or the block solver, or the first level of the
partition method) tests each row it loads and writes ``route[system] = call`` where one is not
dominant; no extra pass over the data, no copy to the host. Then it launches the pivoting solver
(:mod:`.pivoting`) masked to the systems whose ``route`` entry is ``call``: it overwrites their
x and their ``info`` (whatever the hybrid wrote there for them), and every block without such a
system returns at once. ``call`` counts the calls, so ``route`` never needs clearing: an entry
left from an earlier call holds another number.

The price on a batch of dominant systems is the test (three absolute values and a comparison a
row, in registers) and the pivoting solver's launches, which find nothing to do: one for a system
that a block holds, two a level more for longer ones.

Guarantee: a backward-stable x for every nonsingular system, float32 or float64, any n and batch:
the hybrid's on dominant systems, :mod:`.pivoting`'s (Gaussian elimination with partial pivoting)
on the others; ``SINGULAR`` for a singular one, with x NaN.
"""

import numpy as np
from numba import cuda

from ..core.registry import Capability
from . import hybrid, pivoting
from ._common import reused
from .registry import Method, register

LAST_CALL = 2**31 - 1
"""``call`` is an int32 in ``route``: past this, the entries are cleared and counting starts again."""


def run(a, b, c, d, x, info, stream=None):
    """Solve the (batch, n) device systems into ``x``, the hybrid or the pivoting solver per
    system (module docstring); failures go to ``info`` (see :mod:`.api`)."""
    route, call = next_call(x.shape[0], stream)
    hybrid.run(a, b, c, d, x, info, route=route, call=call, stream=stream)
    pivoting.run(a, b, c, d, x, info, route=route, call=call, stream=stream)


def next_call(batch, stream=None):
    """``(route, call)``: the kept route flags of a batch of ``batch`` systems (a device array
    of int32, kept per thread, stream and batch, :func:`._common.reused`) and this call's number."""
    kept = reused(("auto route", batch), lambda: [cuda.to_device(np.zeros(batch, np.int32)), 0], stream)
    kept[1] += 1
    if kept[1] > LAST_CALL:
        kept[0].copy_to_device(np.zeros(batch, np.int32))
        kept[1] = 1
    return kept[0], kept[1]


def routed(batch, stream=None):
    """Which systems of the last call on a batch of ``batch`` systems went to the pivoting solver
    (a numpy array of bools; it waits for the GPU): for tests and the curious."""
    route, call = reused(("auto route", batch), lambda: [cuda.to_device(np.zeros(batch, np.int32)), 0], stream)
    return route.copy_to_host() == call


def method_kernels(dtype):
    """Every kernel :func:`run` may launch for ``dtype``: the hybrid's and the pivoting solver's."""
    yield from hybrid.METHOD.kernels(dtype)
    yield from pivoting.kernels(dtype)


METHOD = register(
    Method(
        name="routed",
        run=run,
        kernels=method_kernels,
        auto_rank=2,
        measured_as="auto",
        capabilities=Capability.PIVOTS | Capability.BATCHED,
        summary="the hybrid with a dominance test on every row read, then the pivoting solver on the systems "
        "that failed it",
        source="Wilkinson (1961), Higham ch. 9: elimination without pivoting is backward stable on dominant systems",
    )
)
