"""One step of LU with partial pivoting on a tridiagonal matrix, as device functions.

The kernels of :mod:`.pivoting` and :mod:`.spike` walk rows with these. Before step ``i`` the
current row reads ``p x_i + q x_{i+1} = r`` (its entry at ``i + 2`` is 0: only a row moved down
by an interchange gains one); the next row is ``below x_i + diag x_{i+1} + right x_{i+2} = rhs``.
The step takes the larger of ``|p|`` and ``|below|`` as the pivot (LAPACK's ``?gttrf``: no
interchange when ``|p| >= |below|``), writes row ``i`` of U, ``(head, upper, fill)``, and leaves
the next current row. U's rows are returned divided by their pivot, so that back substitution is
``x_i = y_i - upper_i x_{i+1} - fill_i x_{i+2}``: one division a row, in the forward sweep.
"""

from numba import cuda


@cuda.jit(device=True)
def pivot(p, q, below, diag, right, zero, one):
    """One elimination step: ``(inverse, upper, fill, factor, swap, p', q', ok)``.

    ``inverse`` is 1 / the pivot; ``upper`` and ``fill`` are U's entries right of the pivot,
    already divided by it; ``factor`` and ``swap`` are what :func:`carry` needs for each
    right-hand side; ``(p', q')`` the next current row. ``ok`` is False when both candidates are
    0 (column ``i`` has no nonzero on or below the diagonal: the matrix is singular); then the
    step divides by 1 instead, so that no thread divides by zero.
    """
    swap = abs(below) > abs(p)
    if swap:
        head, upper, fill = below, diag, right
        factor = p / below
        p, q = q - factor * diag, -factor * right
    else:
        head, upper, fill = p, q, zero
        factor = below / (p if p != zero else one)
        p, q = diag - factor * q, right
    ok = head != zero
    inverse = one / (head if ok else one)
    return inverse, upper * inverse, fill * inverse, factor, swap, p, q, ok


@cuda.jit(device=True)
def carry(swap, factor, r, incoming):
    """A right-hand side through one step: ``(U's entry before division by the pivot, the next
    current row's)``, given the current row's ``r`` and the next row's ``incoming``."""
    if swap:
        return incoming, r - factor * incoming
    return r, incoming - factor * r
