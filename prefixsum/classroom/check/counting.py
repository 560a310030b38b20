"""What a checked host function does itself: the lines of its own code that run, and its additions.

An exercise that asks for a host loop (01.serial-scan) is checked by what the student's code
does, not by its result alone: ``np.cumsum(x)`` runs one line where the loop runs one per
element (:attr:`.results.Budget.host_lines_per_element`), and ``s[i] = x[:i + 1].sum()`` runs a
line per element but adds O(n^2) times, as ``np.dot`` with a triangular matrix adds a whole
array in one line (:attr:`.results.Budget.additions_per_element`). The additions are counted on
the elements themselves: the function gets its input as an object array of :class:`Counted`
numbers, which count every arithmetic operation made on them, by the student's loop or by a
library the student calls, and compute as the input's dtype does (an int32 sum wraps).

A :func:`counting` run fills a *tally*, a list of :data:`TALLY` integers that travels with the
grader's observation of the run (:mod:`prefixsum.grading.observations`).
"""

import operator
import sys

import numpy as np

from ...core.arithmetic import quiet_arithmetic

PER_LINE = 4
"""The most additions one execution of one line of the checked function may make: the loop's
body adds once (``s[i] = s[i - 1] + x[i]``); a library call adds a whole array in one line."""
TALLY = 4
"""A tally's integers: lines of the function's own code that ran, additions, the most additions
made in one execution of one line, and that line's number."""
LINES, ADDITIONS, MOST, LINE = range(TALLY)


def new_tally():
    """A tally of nothing yet."""
    return [0] * TALLY


def _compared(operation, counted, other):
    return operation(counted.value, other.value if isinstance(other, Counted) else other)


class Counted:
    """A number of a dtype whose every arithmetic operation is counted in a tally's :data:`ADDITIONS`.

    Comparisons and conversions (``int()``, storing into a numeric array) are not counted; an
    operation with another number gives a :class:`Counted` of the same dtype.
    """

    __slots__ = ("value", "tally")
    __array_ufunc__ = None  # numpy scalars defer to the reflected operations below

    def __init__(self, value, tally):
        self.value = value
        self.tally = tally

    def _apply(self, other, operation, reflected=False):
        other = other.value if isinstance(other, Counted) else other
        self.tally[ADDITIONS] += 1
        with quiet_arithmetic():
            found = operation(other, self.value) if reflected else operation(self.value, other)
        try:
            found = self.value.dtype.type(found)
        except (OverflowError, TypeError, ValueError):
            return found  # not a number of the dtype (a comparison's bool, an object): as it came
        return Counted(found, self.tally)

    def __add__(self, other):
        return self._apply(other, operator.add)

    def __radd__(self, other):
        return self._apply(other, operator.add, True)

    def __sub__(self, other):
        return self._apply(other, operator.sub)

    def __rsub__(self, other):
        return self._apply(other, operator.sub, True)

    def __mul__(self, other):
        return self._apply(other, operator.mul)

    def __rmul__(self, other):
        return self._apply(other, operator.mul, True)

    def __neg__(self):
        return self._apply(0, operator.sub, True)

    def __pos__(self):
        return self

    def __abs__(self):
        return Counted(abs(self.value), self.tally)

    __eq__ = lambda self, other: _compared(operator.eq, self, other)  # noqa: E731  (comparisons: not counted)
    __ne__ = lambda self, other: _compared(operator.ne, self, other)  # noqa: E731
    __lt__ = lambda self, other: _compared(operator.lt, self, other)  # noqa: E731
    __le__ = lambda self, other: _compared(operator.le, self, other)  # noqa: E731
    __gt__ = lambda self, other: _compared(operator.gt, self, other)  # noqa: E731
    __ge__ = lambda self, other: _compared(operator.ge, self, other)  # noqa: E731

    def __hash__(self):
        return hash(self.value)

    def __bool__(self):
        return bool(self.value)

    def __int__(self):
        return int(self.value)

    def __index__(self):
        return operator.index(self.value)

    def __float__(self):
        return float(self.value)

    def __repr__(self):
        return repr(self.value)


def plain(values, dtype):
    """``values`` (an array or sequence of :class:`Counted` and numbers) as a numpy array of ``dtype``."""
    if hasattr(values, "copy_to_host") or (isinstance(values, np.ndarray) and values.dtype != object):
        return values
    with quiet_arithmetic():
        return np.array([v.value if isinstance(v, Counted) else v for v in values]).astype(dtype)


def counting(fn, tally, *, additions=False):
    """``fn``, counting into ``tally`` the lines of ``fn``'s own code that run (not those of what it
    calls) and, with ``additions``, the arithmetic on its input's elements.

    With ``additions`` the function gets its first argument as an object array of
    :class:`Counted` (its result is turned back into the input's dtype, and what it stored into
    its input is copied back, so that a changed input still shows); between two lines of ``fn``'s
    own, the additions made are one execution's, whose most (and its line) the tally keeps.
    """
    code = getattr(fn, "__code__", None)
    mark = [0, 0]  # additions when the last line began, and that line's number

    def close(frame):
        made = tally[ADDITIONS] - mark[0]
        if made > tally[MOST]:
            tally[MOST], tally[LINE] = made, mark[1]
        mark[0], mark[1] = tally[ADDITIONS], frame.f_lineno

    def local(frame, event, arg):
        if event == "line":
            tally[LINES] += 1
            close(frame)
        elif event == "return":
            close(frame)
        return local

    def calls(frame, event, arg):
        return local if frame.f_code is code else None

    def counted(x, *rest):
        given = x
        if additions:
            x = np.empty(len(given), dtype=object)
            x[:] = [Counted(v, tally) for v in given]
        previous = sys.gettrace()
        sys.settrace(calls)
        try:
            result = fn(x, *rest)
        finally:
            sys.settrace(previous)
        if not additions:
            return result
        try:
            changed = plain(x, given.dtype)
            if not np.array_equal(changed, given, equal_nan=given.dtype.kind in "fc"):
                given[:] = changed
            return plain(result, given.dtype)
        except (TypeError, ValueError, OverflowError):  # elements made into something else: the check says so
            return result

    return counted


__all__ = ["ADDITIONS", "Counted", "LINE", "LINES", "MOST", "PER_LINE", "TALLY", "counting", "new_tally", "plain"]
