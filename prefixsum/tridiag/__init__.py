"""Tridiagonal systems on the GPU: right by default, pivoting in parallel, PCR, CR, Thomas and a hybrid.

:func:`solve` solves one system or a batch and raises ``LinAlgError`` naming the first system
that failed; :func:`solve_ex` returns every system's outcome instead (``info``, as LAPACK's and
``torch.linalg.solve_ex``'s) with the good systems' x, and on request an estimate of each
system's reciprocal condition number (:mod:`.condition`, as LAPACK's ``?gtcon``).

The default, ``method="auto"``, is backward stable on every nonsingular system: it runs the
fastest measured for the call's batch, n and dtype (:mod:`.registry`) of the two methods that are,
the pivoting solver and ``"routed"`` (:mod:`.auto`: the hybrid's first kernel tests each system
for diagonal dominance as it reads it, and the systems that fail the test go to the pivoting
solver, on the GPU, in the same call). Every call takes ``stream=`` and ``out=``; a call is a plan
kept in the package's one plan cache, and :func:`plan_solve` hands the plan to a caller who
solves in a loop (:class:`SolvePlan`, with ``temp=`` for the methods that take the caller's
scratch). The methods are entries of :data:`METHODS`, a registry of the shape every family has
(:mod:`prefixsum.core.registry`), each registered by its own module.

Each method lives in its own module: :mod:`.pivoting` (Gaussian elimination with partial
pivoting for any nonsingular system: one thread per short system, :mod:`.chunked`'s chunks and
levels for longer ones, on :mod:`.elimination`'s steps, which pivot across the chunks' edges;
LAPACK's one-thread step in :mod:`.lu`), and the methods that do not pivot, safe on diagonally
dominant or symmetric positive definite systems only: :mod:`.hybrid` (PCR steps, then Thomas;
systems of up to 512 rows go to :mod:`.warp`, a partition step per thread in registers and PCR
across a warp by shuffles, up to a block's worth to :mod:`.block`, the same across a block, longer
ones to :mod:`.partition`), :mod:`.pcr`, :mod:`.cr`, :mod:`.thomas`; the host side (transfers,
outcomes) in :mod:`.api`, the checks of its arguments in :mod:`.checks`. :func:`householder` and
:func:`solve_symmetric` reduce a symmetric matrix to tridiagonal form and solve with it.
"""

# The methods' modules first, in the order they register in METHODS (:mod:`.registry`).
from . import pcr, cr, thomas, hybrid, pivoting, auto  # noqa: I001, F401  (registered by their import)
from . import block, chunked, partition, warp  # noqa: F401  (likewise)
from . import householder as _householder  # the module: the name householder is the function
from ._common import NOT_FINITE, SINGULAR, ZERO_PIVOT
from .api import REASONS, SOLVED, Solution, SolvePlan, choose, plan_solve, solve, solve_ex
from .checks import check_systems
from .householder import householder, solve_symmetric
from .registry import DTYPES, METHODS, Method

__all__ = [
    "DTYPES",
    "METHODS",
    "Method",
    "NOT_FINITE",
    "REASONS",
    "SINGULAR",
    "SOLVED",
    "Solution",
    "SolvePlan",
    "ZERO_PIVOT",
    "check_systems",
    "choose",
    "householder",
    "plan_solve",
    "ptx_kernels",
    "solve",
    "solve_ex",
    "solve_symmetric",
]


def ptx_kernels():
    """Yield ``(dispatcher, argtypes)`` for every kernel of every method, float32 and float64.

    For compiling each kernel to PTX without a GPU:
    ``numba.cuda.compile_ptx(dispatcher.py_func, argtypes, cc=(9, 0))``.
    """
    for dtype in DTYPES:
        for module in (pcr, cr, thomas, hybrid, warp, block, partition, pivoting, _householder):
            yield from module.kernels(dtype)
