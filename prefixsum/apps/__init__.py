"""What scans build: each application a few lines on top of :mod:`prefixsum.scans` (and :mod:`prefixsum.tridiag`).

* :func:`compact`, :func:`compact_indices`: stream compaction (``x[mask]``, ``flatnonzero``) in
  one pass, the kept counts carried by the look-back of the single-pass scan (:mod:`.selection`);
  :func:`compact_by_scan`, the readable version: an exclusive scan of the keep-flags gives each
  kept element its place (:mod:`.compaction`).
* :func:`radix_sort`: a stable LSD radix sort of integers and floats by onesweep, a histogram
  pass and one pass per byte whose digit counts go through the look-back (:mod:`.onesweep`);
  :func:`radix_sort_one_bit`, the readable version (``radix_sort`` before onesweep): one split
  by a scan of flags per bit (:mod:`.radix`).
* :func:`linear_recurrence`, :func:`lfilter`: ``x[i] = a[i] x[i-1] + b[i]`` and IIR filters of
  order 1 and 2, scans of affine maps (:mod:`.recurrences`).
* :func:`segmented_scan`: a scan restarted at every flag, inclusive or exclusive, forward or
  reverse, in one pass: a scan of (flag, value) pairs on the look-back scan (:mod:`.segmented`).
* :func:`stone_solve`: Stone's tridiagonal solve, the pivots of ``A = L U`` by a scan of 2x2
  matrices (Moebius maps), then the two bidiagonal systems by two scans of affine maps
  (:mod:`.stone`); :func:`tridiagonal_scan`, the *shooting* solve by a scan of 3x3 matrices, and
  the accuracy it loses (:mod:`.recurrences`).
* :func:`cubic_spline` and :class:`PiecewisePolynomial`: natural and clamped splines by a
  tridiagonal solve, evaluation, derivative and an antiderivative by a scan (:mod:`.splines`).

Every call takes ``stream=`` (a numba, PyTorch or CuPy stream, or anything with
``__cuda_stream__``), and those whose result has a known shape ``out=``. A call is a plan kept in
the package's one plan cache (:mod:`prefixsum.core.plans`); :func:`plan_compact`,
:func:`plan_compact_indices`, :func:`plan_radix_sort` and :func:`plan_segmented_scan` hand the
plan to a caller who calls in a loop (with ``temp=``, temporary storage of the caller's own).
"""

from .compaction import compact_by_scan
from .onesweep import SortPlan, plan_radix_sort, radix_sort
from .radix import radix_sort_one_bit, split_by_bit
from .recurrences import lfilter, linear_recurrence, tridiagonal_scan
from .segmented import SegmentedPlan, plan_segmented_scan, segmented_scan
from .selection import SelectPlan, compact, compact_indices, plan_compact, plan_compact_indices
from .splines import PiecewisePolynomial, cubic_spline
from .stone import stone_solve

__all__ = [
    "PiecewisePolynomial",
    "SegmentedPlan",
    "SelectPlan",
    "SortPlan",
    "compact",
    "compact_by_scan",
    "compact_indices",
    "cubic_spline",
    "lfilter",
    "linear_recurrence",
    "plan_compact",
    "plan_compact_indices",
    "plan_radix_sort",
    "plan_segmented_scan",
    "radix_sort",
    "radix_sort_one_bit",
    "segmented_scan",
    "split_by_bit",
    "stone_solve",
    "tridiagonal_scan",
]
