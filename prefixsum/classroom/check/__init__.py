"""Check a student's scan kernel: many sizes, poisoned memory, every launch traced.

The puzzle collections check a kernel with one ``allclose`` on one input, so a missing barrier,
an off-by-one bound or a race passes. :func:`scan` runs the student's function on random inputs
of many sizes (one element, a warp and its neighbours, one block and several), with every new
device array and all shared memory poisoned, records every memory access with
:mod:`prefixsum.trace`, and names the first thing that went wrong, with a hint.

Diagnoses, in the order they are looked for at each size:

``exception``, ``timeout``, ``poll-limit`` (a thread waited longer than one wait may, polling
one cell: the verdict names the tile and the state it polls), ``out-of-bounds``,
``barrier-divergence``, ``deadlock`` (the run stopped), ``race`` (within a block, or two
blocks writing one element), the races between blocks that communicate --
``plain-load-poll`` (a flag polled with plain loads), ``stale-read`` (a flag raised without a
fence after the data: the reader may get old data),
``race-between-blocks`` (an element one block writes and another reads with no flag between
them) --, ``uninitialized-read`` (the trace shows it, even when the numbers came out right),
``unwritten-output``, ``modified-input`` (the function changed its input), ``wrong-result``
(the numbers; at n <= 16 both arrays, and the classic mistakes named), ``library-call`` (a
library did the loop the exercise asks for), ``over-budget`` (right numbers, but not by the
parallel algorithm the exercise asks for: more barriers, more accesses by one thread between
two barriers, more global traffic or more bank conflicts than its :class:`Budget`, or a
look-back out of order), ``wrong-identity`` (:func:`tiled`: a tile's total shows lanes past n
padded with something else than the identity), and ``pass``. A time limit counts simulated
steps, and a wait counts polls apart from them (:func:`mode.limits`), so a verdict does not
depend on the machine's load. The
simulator runs a few
blocks at once (:mod:`prefixsum.sim`), so that blocks that talk to each other are checked as a
GPU runs them.

A user operator (a ``cuda.jit(device=True)`` function, see :mod:`prefixsum.scans.user_ops`) is
first checked on its own by :func:`operator`: ``not-associative`` or ``wrong-identity`` before
any kernel runs, since no scan can be right with such an operator.

The checker is a package of one concern per module: :mod:`.mode` (sizes, seeds, ``thorough``
and ``time_limit``), :mod:`.results` (verdicts and budgets), :mod:`.diagnosis` (what a trace
shows), :mod:`.scan_checks` (scans and tile kernels), :mod:`.operators` (user operators),
:mod:`.linalg` (reflectors and tridiagonal solvers, and the random systems they are checked on),
:mod:`.chunks` (the warp solver's exchange of rows and the partition method's step) and
:mod:`.host` (functions checked case by case, compaction, radix pass, stable sort).
"""

from .chunks import neighbours, partition
from .host import compaction, function, radix_pass, stable_sort
from .linalg import dominant_systems, reflector, tridiagonal
from .mode import DEFAULT_SIZES, DIAGNOSES, thorough, time_limit
from .operators import operator
from .results import Budget, CheckResult, with_poisoned_allocations
from .scan_checks import scan, tiled

__all__ = [
    "Budget",
    "CheckResult",
    "DEFAULT_SIZES",
    "DIAGNOSES",
    "compaction",
    "dominant_systems",
    "function",
    "neighbours",
    "operator",
    "partition",
    "radix_pass",
    "reflector",
    "scan",
    "stable_sort",
    "thorough",
    "tiled",
    "time_limit",
    "tridiagonal",
    "with_poisoned_allocations",
]
