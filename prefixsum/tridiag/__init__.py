"""Tridiagonal systems on the GPU: parallel cyclic reduction, cyclic reduction, Thomas.

:func:`solve` solves one system or a batch. Each method lives in its own module:
:mod:`.pcr`, :mod:`.cr`, :mod:`.thomas`, :mod:`.hybrid` (PCR steps, then Thomas; systems of up to
512 rows go to :mod:`.warp`, a partition step per thread in registers and PCR across a warp by
shuffles, up to a block's worth to :mod:`.block`, the same across a block, longer ones to
:mod:`.partition`), :mod:`.pivoting` (LU with partial pivoting, for any nonsingular system: one thread per
short system, chunks factored by :mod:`.spike` and their separators reduced for longer ones;
the elimination step in :mod:`.lu`); the host side (checks, transfers, errors) in :mod:`.api`.
Only :mod:`.pivoting` pivots: the others are for diagonally dominant or symmetric positive
definite systems.
"""
from . import block, cr, hybrid, partition, pcr, pivoting, thomas, warp
from . import householder as _householder  # the module: the name householder is the function
from .api import DTYPES, METHODS, solve
from .householder import householder, solve_symmetric

__all__ = ["DTYPES", "METHODS", "householder", "ptx_kernels", "solve", "solve_symmetric"]


def ptx_kernels():
    """Yield ``(dispatcher, argtypes)`` for every kernel of every method, float32 and float64.

    For compiling each kernel to PTX without a GPU:
    ``numba.cuda.compile_ptx(dispatcher.py_func, argtypes, cc=(9, 0))``.
    """
    for dtype in DTYPES:
        for module in (pcr, cr, thomas, hybrid, warp, block, partition, pivoting, _householder):
            yield from module.kernels(dtype)
