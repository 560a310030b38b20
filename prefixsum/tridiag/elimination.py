"""Gaussian elimination with partial pivoting on a chunk of rows in *pair form*, as device functions.

:mod:`.chunked`'s kernels are built from these. A system is read two rows at a time: pair ``j``
holds rows ``2j`` and ``2j + 1``, and both rows live in the *window* of four columns
``2j - 1, 2j, 2j + 1, 2j + 2``. A row in pair form is the 5-tuple ``(w0, w1, w2, w3, r)``: its
coefficients on the window's columns and its right-hand side. A tridiagonal system is in pair
form as it is (row ``2j`` is ``(a, b, c, 0, d)``, row ``2j + 1`` is ``(0, a, b, c, d)``), and so
is every reduced system that a chunk leaves behind (below): one form, one elimination, at every
level.

**A chunk** is ``R`` consecutive pairs: its unknowns are its local columns ``0 .. 2R - 1``, and
only its first pair touches a column outside it on the left (``-1``, the previous chunk's last
unknown), only its last pair one on the right (``2R``, the next chunk's first). Its *interior*
columns ``1 .. 2R - 2`` are touched by its own rows and no others. :func:`pair_step` eliminates
them in order, two columns per pair, each by **partial pivoting over every row of the chunk that
holds the column**: at column ``2j - 1`` the two rows carried from before (:func:`opening` makes
them from pair 0) and the two rows of pair ``j``, at column ``2j`` the three left. Two rows
remain, coupling only the chunk's first and last unknowns and its neighbours' adjacent ones,
columns ``-1, 0, 2R - 1, 2R``: a pair of the **reduced system** in the window of chunk ``k``'s
unknowns ``(first_k, last_k)``, so that the reduced systems are in pair form again.

Why this is backward stable: every step takes as its pivot the largest entry of its column
among *all* rows that hold the column (no other row does: the chunk's interior columns are its
own). Over all chunks and levels that is exactly Gaussian elimination with partial pivoting on
``A P``, ``A`` with its columns taken in another order (the chunks' interiors first, then the
chunks' ends, level by level), so Wilkinson's analysis applies: x solves ``(A + E) x = d`` with
``||E|| <= c n eps rho ||A||``, ``rho`` the growth of the entries. For a tridiagonal matrix in its
own order partial pivoting keeps ``rho <= 2``; here a chunk's steps are banded (three or four
candidates a column) and the chunk's end columns, kept to the end, are updated at every step,
so the bound is not 2, but, as for partial pivoting on any matrix, the growth that random and
structured matrices show is small: the backward errors measured on an H100
(``benchmarks/tridiag.csv``, up to 2^20 rows, random indefinite systems) were at most 0.43 eps,
cuSPARSE's LU, QR and ``gtsv2`` 0.12 to 0.40. No chunk can be singular unless ``A`` is: a column
all of whose candidates are zero means the remaining matrix, hence ``A``, is singular (``ok``
False), and the reduced system is nonsingular whenever ``A`` is. This is the pivoting across
partition boundaries that SPIKE with diagonal pivoting (Chang, Stratton, Kim and Hwu 2012; Erway
and Marcia's 1x1 and 2x2 pivots) and g-Spike (Venetis et al. 2015: Givens rotations in each
partition) do not do: they factor each partition alone, which fails or loses accuracy where a
partition is singular or nearly so although ``A`` is not (``tridiag(1, 1e-10, 1)`` cut into
partitions of odd length, for one).

A row in the elimination is a 7-tuple ``(e0, e1, e2, e3, sm, s0, r)``: its entries on the current
column and the three after it, its *spikes* on columns ``-1`` and ``0`` (which the elimination
never removes, and which only pair 0 starts with), and its right-hand side.
"""

from numba import cuda


@cuda.jit(device=True)
def larger_first(p, q):
    """``(p, q)`` ordered so the first has the larger ``|first entry|`` (``p`` on a tie; a NaN never wins)."""
    if abs(q[0]) > abs(p[0]):
        return q, p
    return p, q


@cuda.jit(device=True)
def opening(upper, lower, zero):
    """The two rows a chunk starts with, from its pair 0 (two 5-tuples): entries on columns 1
    and 2, spikes on columns -1 and 0."""
    return (
        (upper[2], upper[3], zero, zero, upper[0], upper[1], upper[4]),
        (lower[2], lower[3], zero, zero, lower[0], lower[1], lower[4]),
    )


@cuda.jit(device=True)
def folded(row, x_before, x_first, zero):
    """``row`` with its spikes moved to the right-hand side, columns -1 and 0 being known."""
    return row[0], row[1], row[2], row[3], zero, zero, row[6] - row[4] * x_before - row[5] * x_first


@cuda.jit(device=True)
def arriving(row, zero):
    """A pair-form row (5-tuple) as it joins the elimination at its window's first column."""
    return row[0], row[1], row[2], row[3], zero, zero, row[4]


@cuda.jit(device=True)
def _minus7(q, p, inverse):
    """``q - (q_0 / p_0) p`` without its (zero) first entry: a 6-tuple."""
    f = q[0] * inverse
    return q[1] - f * p[1], q[2] - f * p[2], q[3] - f * p[3], q[4] - f * p[4], q[5] - f * p[5], q[6] - f * p[6]


@cuda.jit(device=True)
def _minus6(q, p, inverse):
    f = q[0] * inverse
    return q[1] - f * p[1], q[2] - f * p[2], q[3] - f * p[3], q[4] - f * p[4], q[5] - f * p[5]


@cuda.jit(device=True)
def pair_step(k, l, upper, lower, zero, one):
    """Columns ``2j - 1`` and ``2j``: the carried rows ``k``, ``l`` (7-tuples, entries on
    ``2j - 1, 2j``) and pair ``j``'s rows ``upper``, ``lower`` (5-tuples).

    Returns ``(k, l, first, second, ok)``: the two rows carried on (entries on ``2j + 1,
    2j + 2``), the pivot rows of the two columns divided by their pivots (``first``: entries on
    ``2j, 2j + 1, 2j + 2``, spikes, right-hand side; ``second``: on ``2j + 1, 2j + 2``, spikes,
    right-hand side) and False where a column had no nonzero candidate (A is singular); then the
    step divides by 1 instead, so that no thread divides by zero.
    """
    n, m = arriving(upper, zero), arriving(lower, zero)
    p, k = larger_first(k, l)
    p, n = larger_first(p, n)
    p, m = larger_first(p, m)
    ok = p[0] != zero
    inverse = one / (p[0] if ok else one)
    k, n, m = _minus7(k, p, inverse), _minus7(n, p, inverse), _minus7(m, p, inverse)
    first = p[1] * inverse, p[2] * inverse, p[3] * inverse, p[4] * inverse, p[5] * inverse, p[6] * inverse
    q, k = larger_first(k, n)
    q, m = larger_first(q, m)
    good = q[0] != zero
    inverse = one / (q[0] if good else one)
    k, m = _minus6(k, q, inverse), _minus6(m, q, inverse)
    second = q[1] * inverse, q[2] * inverse, q[3] * inverse, q[4] * inverse, q[5] * inverse
    return (
        (k[0], k[1], zero, zero, k[2], k[3], k[4]),
        (m[0], m[1], zero, zero, m[2], m[3], m[4]),
        first,
        second,
        ok and good,
    )


@cuda.jit(device=True)
def reduced_pair(k, l):
    """The chunk's pair of the reduced system from its two last rows: 5-tuples on the window
    ``(-1, 0, 2R - 1, 2R)`` (the previous chunk's last, this chunk's first and last, the next's first)."""
    return (k[4], k[5], k[0], k[1], k[6]), (l[4], l[5], l[0], l[1], l[6])


@cuda.jit(device=True)
def ends(k, l, zero, one):
    """The system's first and last unknowns from the two rows left when every column of a whole
    system but those two is eliminated (spikes on column 0, entries on the last column; the
    columns beyond the system are empty): a 2 x 2 solve with partial pivoting.
    Returns ``(x_first, x_last, ok)``."""
    p, q = (k[5], k[0], k[6]), (l[5], l[0], l[6])
    if abs(q[0]) > abs(p[0]):
        p, q = q, p
    ok = p[0] != zero
    f = q[0] / (p[0] if ok else one)
    pivot = q[1] - f * p[1]
    good = pivot != zero
    x_last = (q[2] - f * p[2]) / (pivot if good else one)
    x_first = (p[2] - p[1] * x_last) / (p[0] if ok else one)
    return x_first, x_last, ok and good
