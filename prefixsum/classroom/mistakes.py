"""Named student mistakes of the notebooks' exercises, each with the verdict its check must give.

The mechanical mutants of :mod:`prefixsum.classroom.mutation` change one token; a student's
mistake is often the lesson's own (padding with 0 instead of the identity, a chained scan where
a look-back was asked, ``np.cumsum`` where the loop was asked). Each :class:`Mistake` is the
student's code as written, made from the exercise cell's source by replacing text, and the
words its check's output must contain. ``tests/test_exercises.py`` runs every one: the check
must fail it, with those words. The table in ``notebooks/exercise_kill_rates.md`` lists them,
with their verdicts as :func:`main` prints them::

    python -m prefixsum.classroom.mistakes notebooks/[01][0-9]_*.ipynb
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Mistake:
    """One named mistake of an exercise.

    Attributes
    ----------
    exercise : str
        The exercise's id (``"01.ladder-max"``).
    name : str
        What the student did, in a few words.
    edits : tuple of (str, str)
        Replacements applied, in order, to the exercise cell's source (each ``old`` must occur);
        every occurrence is replaced.
    verdict : str
        Words the check's output must contain: the diagnosis, or the part of the hint that names
        the mistake.
    avoid : tuple of str
        Words the output must not contain: advice that points away from the fix.
    """

    exercise: str
    name: str
    edits: tuple
    verdict: str
    avoid: tuple = ()

    def source(self, solution):
        """The exercise cell ``solution`` with this mistake made in it.

        Raises ValueError when an ``old`` text is not in the source (the solution changed).
        """
        return edited(solution, self.edits, f"{self.exercise} / {self.name}")


def edited(source, edits, what):
    """``source`` with every ``(old, new)`` of ``edits`` replaced, in order, at every occurrence.

    Raises ValueError, naming ``what`` and the text, when an ``old`` is not in the source.
    """
    for old, new in edits:
        if old not in source:
            raise ValueError(f"{what}: {old!r} is not in the source")
        source = source.replace(old, new)
    return source


def _m(exercise, name, verdict, *edits, avoid=()):
    return Mistake(exercise, name, tuple(edits), verdict, tuple(avoid))


def _each_instead_of(exercise, old, *rows):
    """Mistakes of one exercise that each write something else in place of the same text ``old``:
    one per row ``(name, verdict, new)`` or ``(name, verdict, new, avoid)``."""
    return tuple(
        _m(exercise, name, verdict, (old, new), avoid=avoid[0] if avoid else ()) for name, verdict, new, *avoid in rows
    )


# A student's code as typed, one mistake a row (with its verdict): the formatter would spread each row over a dozen lines.
# fmt: off
_SERIAL = ("    s[0] = x[0]\n    for i in range(1, len(x)):\n        s[i] = s[i - 1] + x[i]\n")
_LADDER_IF = "        if t & phase:\n            rungs[t] += rungs[(t & ~(phase - 1)) - 1]\n"
_HS_TWO = ("        value = cells[t]\n        if t >= stride:\n            value += cells[t - stride]\n"
           "        cuda.syncthreads()\n        cells[t] = value\n        cuda.syncthreads()\n")
_PREFIX_PARTNER = "        if t >= phase:\n            folded += cells[t - phase]\n"
_SUFFIX_PARTNER = "        if t + phase < BLOCK:\n            folded += cells[t + phase]\n"
_DOWN = ("            parent = tree[t]\n            tree[t] += tree[t - (1 << d)]\n            tree[t - (1 << d)] = "
         "parent\n")
_LOOK_BACK_BODY_START = "    lane = cuda.laneid\n    published = np.uint32(2 * epoch)\n"

MISTAKES = (
    # 01: the serial loop, the ladder, the ladder with max
    _m("01.serial-scan", "np.cumsum instead of the loop", "library-call", (_SERIAL, "    s[:] = np.cumsum(x)\n")),
    _m("01.serial-scan", "the exclusive scan", "This is the exclusive scan",
       ("s[0] = x[0]", "s[0] = 0"), ("s[i - 1] + x[i]", "s[i - 1] + x[i - 1]"), avoid=("phase",)),
    _m("01.serial-scan", "s[0] never set", "wrong-result at n=1", ("    s[0] = x[0]\n", "")),
    _m("01.ladder-step", "partner without its - 1", "same step", ("rungs[(t & ~(phase - 1)) - 1]", "rungs[t & ~(phase "
                                                                                                   "- 1)]")),
    _m("01.ladder-step", "Hillis-Steele's partner t - phase", "wrong-result", ("rungs[(t & ~(phase - 1)) - 1]", "rungs[t - phase]"),
       avoid=("Powers of two",)),
    _m("01.ladder-step", "every lane adds", "out-of-bounds", (_LADDER_IF, "        rungs[t] += rungs[(t & ~(phase - "
                                                                          "1)) - 1]\n")),
    *_each_instead_of("01.ladder-max", "int32(INT32_MIN)", ("padding with 0", "wrong-identity", "int32(0)"),
                      ("padding with INT32_MAX", "wrong-identity", "int32(2147483647)")),
    _m("01.ladder-max", "a sum instead of max", "wrong-result",
       ("rungs[t] = max(rungs[t], rungs[(t & ~(phase - 1)) - 1])", "rungs[t] += rungs[(t & ~(phase - 1)) - 1]")),
    _m("01.ladder-max", "no barrier after the load", "race",
       ("int32(INT32_MIN)\n    cuda.syncthreads()\n", "int32(INT32_MIN)\n")),
    # 02: the fold
    _m("02.prefix-fold", "in place, one cell after the other", "wrong-result",
       ("        cells = [cells[t] + cells[t - phase] if t >= phase else cells[t] for t in range(m)]\n",
        "        for t in range(phase, m):\n            cells[t] += cells[t - phase]\n")),
    _m("02.prefix-fold", "stops before stride 1", "wrong-result", ("    while phase >= 1:\n", "    while phase > 1:\n")),
    _m("02.prefix-fold", "first stride m // 2, not a power of two", "wrong-result",
       ("    phase = 1\n    while 2 * phase < m:\n        phase *= 2\n", "    phase = max(1, m // 2)\n")),
    _m("02.folding-phase", "in place, one barrier", "race",
       ("        folded = cells[t]\n        if t >= phase:\n            folded += cells[t - phase]\n        "
        "cuda.syncthreads()\n"
        "        cells[t] = folded\n", "        if t >= phase:\n            cells[t] += cells[t - phase]\n")),
    _m("02.folding-phase", "no barrier between read and store", "race",
       ("            folded += cells[t - phase]\n        cuda.syncthreads()\n", "            folded += cells[t - "
                                                                                "phase]\n")),
    _m("02.folding-phase", "the suffix's partner t + phase", "wrong-result", (_PREFIX_PARTNER, _SUFFIX_PARTNER)),
    _m("02.suffix-fold", "the prefix's partner t - phase", "wrong-result", (_SUFFIX_PARTNER, _PREFIX_PARTNER)),
    _m("02.suffix-fold", "no barrier after the store", "after the store",
       ("        cells[t] = folded\n        cuda.syncthreads()\n", "        cells[t] = folded\n")),
    _m("02.suffix-fold", "no bound on the partner", "out-of-bounds", ("        if t + phase < BLOCK:\n            "
                                                                      "folded", "        folded")),
    # 03: Hillis-Steele and Blelloch
    _m("03.hs-numpy", "changes its input", "modified-input",
       ("    new = cells.copy()\n    new[stride:] = cells[stride:] + cells[:-stride]\n    return new\n",
        "    cells[stride:] = cells[stride:] + cells[:-stride]\n    return cells\n")),
    _m("03.hs-numpy", "a loop reading lanes it already updated", "wrong-result",
       ("    new[stride:] = cells[stride:] + cells[:-stride]\n",
        "    for t in range(stride, len(new)):\n        new[t] += new[t - stride]\n")),
    _m("03.hs-numpy", "shifted the wrong way", "wrong-result",
       ("new[stride:] = cells[stride:] + cells[:-stride]", "new[:-stride] = cells[:-stride] + cells[stride:]")),
    _m("03.hs-step", "one buffer, in place", "race",
       ("cells[(1 - src) * BLOCK + t] = cells[src * BLOCK + t] + cells[src * BLOCK + t - stride]",
        "cells[src * BLOCK + t] = cells[src * BLOCK + t] + cells[src * BLOCK + t - stride]")),
    _m("03.hs-step", "lanes below the stride copy nothing", "uninitialized-read",
       ("        else:\n            cells[(1 - src) * BLOCK + t] = cells[src * BLOCK + t]\n", "")),
    _m("03.hs-step", "the partner read from the other buffer", "FAIL",
       ("cells[src * BLOCK + t - stride]", "cells[(1 - src) * BLOCK + t - stride]")),
    _m("03.hs-two-barriers", "no barrier after the store", "missing after the store",
       (_HS_TWO, _HS_TWO[:-len("        cuda.syncthreads()\n")]), avoid=("cannot help",)),
    _m("03.hs-two-barriers", "no barrier between read and store", "read into a register",
       ("            value += cells[t - stride]\n        cuda.syncthreads()\n", "            value += cells[t - "
                                                                                "stride]\n")),
    _m("03.hs-two-barriers", "in place with one barrier", "race",
       (_HS_TWO, "        if t >= stride:\n            cells[t] += cells[t - stride]\n        cuda.syncthreads()\n")),
    _m("03.blelloch-down-sweep", "no swap: the left child keeps its value", "wrong-result",
       (_DOWN, "            tree[t] += tree[t - (1 << d)]\n")),
    _m("03.blelloch-down-sweep", "left child overwritten before it is read", "wrong-result",
       (_DOWN, "            tree[t - (1 << d)] = tree[t]\n            tree[t] += tree[t - (1 << d)]\n")),
    _m("03.blelloch-down-sweep", "off-by-one partner", "check the partner's formula",
       (_DOWN, _DOWN.replace("tree[t - (1 << d)]", "tree[t - (1 << d) - 1]"))),
    # 04: Blelloch for large inputs
    _m("04.packed-upsweep", "offset not doubled", "index computed below 0", ("        offset *= 2\n", "        offset "
                                                                                                      "+= 1\n")),
    _m("04.packed-upsweep", "the barrier inside the if", "barrier-divergence",
       ("        cuda.syncthreads()\n        if t < active:\n            tree[offset * (2 * t + 2) - 1]",
        "        if t < active:\n            cuda.syncthreads()\n            tree[offset * (2 * t + 2) - 1]")),
    _m("04.packed-upsweep", "thread 0 sums the tile serially", "over-budget",
       ("    active = THREADS\n    while active > 0:\n        cuda.syncthreads()\n        if t < active:\n"
        "            tree[offset * (2 * t + 2) - 1] += tree[offset * (2 * t + 1) - 1]\n        offset *= 2\n        "
        "active //= 2\n",
        "    cuda.syncthreads()\n    if t == 0:\n        for k in range(1, TILE):\n            tree[TILE - 1] += "
        "tree[k - 1]\n"
        "    offset = TILE\n")),
    _m("04.blelloch-carry", "carries into its own tile", "wrong-result",
       ("start = (cuda.blockIdx.x + 1) * TILE", "start = cuda.blockIdx.x * TILE")),
    _m("04.blelloch-carry", "no bound on n", "out-of-bounds", ("        if start + k < n:\n            out", "        if True:\n            out")),
    _m("04.blelloch-carry", "the next tile's carry", "FAIL", ("carries[cuda.blockIdx.x]", "carries[cuda.blockIdx.x + 1]")),
    *_each_instead_of("04.conflict-free", "    return i + (i >> 5)\n", ("no padding", "over-budget", "    return i\n"),
                      ("padding every 16 cells", "out-of-bounds", "    return i + (i >> 4)\n"),
                      ("one cell of padding in all", "over-budget", "    return i + 1\n")),
    # 05: the k-step scheme
    _m("05.levels", "rounded down", "wrong-result", ("(n + L - 1) // L", "n // L"), ("(sizes[-1] + L - 1) // L", "sizes[-1] // L")),
    _m("05.levels", "one level too many when a level has exactly L", "wrong-result",
       ("    while sizes[-1] > L:\n", "    while sizes[-1] >= L:\n")),
    _m("05.levels", "no K_1 when n <= L", "wrong-result",
       ("    sizes = [n, (n + L - 1) // L]\n", "    sizes = [n]\n")),
    _m("05.reduce", "runs not cut at size", "FAIL", ("min(L * i + L, size)", "L * i + L")),
    _m("05.reduce", "writes over the level it reads", "FAIL", ("buf[target + i] = acc", "buf[source + i] = acc")),
    _m("05.reduce", "run i starts at i", "wrong-result", ("acc = buf[source + L * i]", "acc = buf[source + i]"),
       avoid=("pad the last tile",)),
    _m("05.kstep-correct", "run 0 adds the cell before the level", "wrong-result",
       ("buf[upper + j - 1] if j > 0 else float32(0)", "buf[upper + j - 1]")),
    _m("05.kstep-correct", "the run's last cell left as it was", "wrong-result",
       ("        if start + L <= size:  # a full run ends on u^{s-1}[j], already final\n"
        "            buf[lower + start + L - 1] = buf[upper + j]\n", "")),
    _m("05.kstep-correct", "starts from the run's own total", "wrong-result", ("buf[upper + j - 1] if j > 0", "buf[upper + j] if j > 0"),
       avoid=("pad the last tile",)),
    # 06: warps
    _m("06.warp-shuffle-scan", "the shuffle inside the if", "FAIL",
       ("        other = cuda.shfl_up_sync(FULL_MASK, value, d)\n        if lane >= d:\n            value += other\n",
        "        if lane >= d:\n            value += cuda.shfl_up_sync(FULL_MASK, value, d)\n")),
    _m("06.warp-shuffle-scan", "shfl_down instead of shfl_up", "suffix scan", ("shfl_up_sync", "shfl_down_sync"),
       ("        if lane >= d:\n            value += other\n", "        if lane + d < 32:\n            value += other\n")),
    _m("06.warp-shuffle-scan", "every lane adds", "wrong-result", ("        if lane >= d:\n            value += other\n", "        value += other\n")),
    _m("06.exclusive-warp-scan", "the inclusive scan", "This is the inclusive scan",
       ("    value = cuda.shfl_up_sync(FULL_MASK, value, 1)\n    if lane == 0:\n        value = float32(0)\n", "")),
    _m("06.exclusive-warp-scan", "lane 0 not set to 0", "identity", ("    if lane == 0:\n        value = float32(0)\n", "")),
    _m("06.exclusive-warp-scan", "shifted by two", "wrong-result", ("value = cuda.shfl_up_sync(FULL_MASK, value, 1)", "value = cuda.shfl_up_sync(FULL_MASK, value, 2)")),
    _m("06.block-combine", "adds its own warp's total", "wrong-result", ("value += warp_totals[warp - 1]", "value += warp_totals[warp]")),
    _m("06.block-combine", "warp 0 adds too", "out-of-bounds", ("    if warp > 0:\n        value", "    if True:\n     "
                                                                                                   "   value")),
    _m("06.block-combine", "adds only the previous warp's own total", "wrong-result",
       ("    if warp > 0:\n        value += warp_totals[warp - 1]\n",
        "    if warp > 0:\n        value += warp_totals[warp - 1] - (warp_totals[warp - 2] if warp > 1 else "
        "float32(0))\n")),
    # 07: tridiagonal systems
    _m("07.residual", "c's term in the last row", "out-of-bounds", ("        if i < n - 1:\n            row", "        if True:\n            row")),
    _m("07.residual", "a and c swapped", "wrong-result", ("a[system, i] * x[system, i - 1]", "c[system, i] * x[system, "
                                                                                             "i - 1]"),
       ("c[system, i] * x[system, i + 1]", "a[system, i] * x[system, i + 1]")),
    _m("07.residual", "no bound on the batch", "out-of-bounds", ("if system < batch and i < n:", "if i < n:")),
    _m("07.pcr-step", "neighbours one row away at every step", "wrong-result",
       ("rows[src, 0, i - s], rows[src, 1, i - s], rows[src, 2, i - s], rows[src, 3, i - s]",
        "rows[src, 0, i - 1], rows[src, 1, i - 1], rows[src, 2, i - 1], rows[src, 3, i - 1]"),
       ("rows[src, 0, i + s], rows[src, 1, i + s], rows[src, 2, i + s], rows[src, 3, i + s]",
        "rows[src, 0, i + 1], rows[src, 1, i + 1], rows[src, 2, i + 1], rows[src, 3, i + 1]")),
    _m("07.pcr-step", "the row's own diagonal as the multiplier", "neighbour's diagonal", ("k1 = ai / bl", "k1 = ai / bi"),
       ("k2 = ci / br", "k2 = ci / bi"), avoid=("s < n",)),
    _m("07.pcr-step", "writes into the rows it reads", "race", ("rows[1 - src, ", "rows[src, ")),
    _m("07.pcr-step", "a zero row outside the system", "FAIL", ("0.0, 1.0, 0.0, 0.0", "0.0, 0.0, 0.0, 0.0")),
    _m("07.thomas-sweep", "rows one apart", "Both write it", ("j = first + t * step", "j = first + t"), avoid=("read one buffer",)),
    _m("07.thomas-sweep", "d not divided by the pivot", "wrong-result",
       ("dp = (rows[3, j] - rows[0, j] * dp) / pivot", "dp = rows[3, j] - rows[0, j] * dp")),
    _m("07.thomas-sweep", "the back substitution never runs", "wrong-result",
       ("    for t in range(count - 2, -1, -1):\n", "    for t in range(0):\n")),
    # 08: the warp solver and the partition method
    _m("08.lane-exchange", "no identity past the group's last lane", "got lane 4's a as a_down, from outside its group",
       ("    if lane + s >= lanes:\n        a_down, c_down, d_down = 0.0, 0.0, 0.0\n", "")),
    _m("08.lane-exchange", "up and down swapped", "up and down are swapped", ("cuda.shfl_up_sync", "SWAP"), ("cuda.shfl_down_sync", "cuda.shfl_up_sync"),
       ("SWAP", "cuda.shfl_down_sync")),
    _m("08.lane-exchange", "the shuffle only where the neighbour is inside", "shfl_up_sync at line 9",
       ("    a_up = cuda.shfl_up_sync(FULL_MASK, a, s)\n    c_up = cuda.shfl_up_sync(FULL_MASK, c, s)\n"
        "    d_up = cuda.shfl_up_sync(FULL_MASK, d, s)\n",
        "    a_up, c_up, d_up = 0.0, 0.0, 0.0\n    if lane >= s:\n        a_up = cuda.shfl_up_sync(FULL_MASK, a, s)\n"
        "        c_up = cuda.shfl_up_sync(FULL_MASK, c, s)\n        d_up = cuda.shfl_up_sync(FULL_MASK, d, s)\n")),
    _m("08.lane-exchange", "d kept from outside the group", "as d_up, from outside its group",
       ("a_up, c_up, d_up = 0.0, 0.0, 0.0", "a_up, c_up = 0.0, 0.0"), ("a_down, c_down, d_down = 0.0, 0.0, 0.0", "a_down, c_down = 0.0, 0.0")),
    _m("08.interface-system", "first and last rows swapped in the reduced system", "The reduced system is wrong",
       ("rd[system, 2 * t] = la[0], 1.0, lc[0], ld[0]", "rd[system, 2 * t] = la[ROWS - 1], 1.0, lc[ROWS - 1], ld[ROWS "
                                                        "- 1]"),
       ("= la[ROWS - 1], 1.0\n", "= la[0], 1.0\n"), ("= lc[ROWS - 1], ld[ROWS - 1]\n", "= lc[0], ld[0]\n")),
    _m("08.interface-system", "b of the reduced rows never written", "a cell of the reduced system that was never "
                                                                     "written",
       ("rb[system, 2 * t], rc[system, 2 * t], rd[system, 2 * t] = la[0], 1.0, lc[0]", "rc[system, 2 * t], rd[system, "
                                                                                       "2 * t] = la[0], lc[0]"),
       ("ra[system, 2 * t + 1], rb[system, 2 * t + 1] = la[ROWS - 1], 1.0", "ra[system, 2 * t + 1] = la[ROWS - 1]")),
    _m("08.interface-system", "x_first and x_last swapped in the interior", "the first and the last, in that order",
       ("ld[k] - la[k] * first - lc[k] * last", "ld[k] - la[k] * last - lc[k] * first")),
    _m("08.interface-system", "the chunk's ends never written to x", "x[0, 0] is NaN: it was never written",
       ("                if k == 0:\n                    x[system, t * ROWS] = first\n"
        "                elif k == ROWS - 1:\n                    x[system, t * ROWS + k] = last\n"
        "                else:\n                    x[system, t * ROWS + k] = ld[k] - la[k] * first - lc[k] * last\n",
        "                if 0 < k < ROWS - 1:\n                    x[system, t * ROWS + k] = ld[k] - la[k] * first - "
        "lc[k] * last\n")),
    _m("08.interface-system", "no bound on the rows past n", "out-of-bounds", ("            if t * ROWS + k < n:\n", "            if True:\n")),
    _m("08.chunk-partition", "the sweep down only divides", "interior row 2 of chunk 0 still couples x_1 (the row "
                                                            "above)",
       ("pivot = lb[k] - la[k] * lc[k - 1]", "pivot = lb[k]"), ("(ld[k] - la[k] * ld[k - 1]) / pivot", "ld[k] / pivot"),
       ("la[k] = -la[k] * la[k - 1] / pivot", "la[k] = la[k] / pivot")),
    _m("08.chunk-partition", "no sweep back up", "interior row 1 of chunk 0 still couples x_2 (the row below)",
       ("    for k in range(ROWS - 3, 0, -1):\n", "    for k in range(0):\n")),
    _m("08.chunk-partition", "the first row left coupling x_1", "the first row of chunk 0 still couples x_1",
       ("    pivot = 1.0 - lc[0] * la[1]\n    ld[0] = (ld[0] - lc[0] * ld[1]) / pivot\n    la[0] = la[0] / pivot\n"
        "    lc[0] = -lc[0] * lc[1] / pivot\n", "")),
    _m("08.chunk-partition", "b left as it was", "not 1", ("lb[k] = 1.0\n", "lb[k] = lb[k]\n"),
       ("ld[k] / lb[k], 1.0", "ld[k] / lb[k], lb[k]")),
    _m("08.chunk-partition", "the pivot without the row above", "interior row 2 of chunk 0 does not hold for the "
                                                                "solution",
       ("pivot = lb[k] - la[k] * lc[k - 1]", "pivot = lb[k]")),
    # 09: Householder
    _m("09.householder-reflector", "no scaling", "is not", ("    y = y / np.abs(y).sum()  # u and H of y / s give the "
                                                            "P of y, and |y / s|^2 is near 1\n", "")),
    *_each_instead_of("09.householder-reflector", "g = -math.sqrt(h) if f >= 0 else math.sqrt(h)",
                      ("the wrong sign of g", "wrong sign", "g = math.sqrt(h) if f >= 0 else -math.sqrt(h)"),
                      ("np.sign(0) is 0", "np.sign(0)", "g = -np.sign(f) * math.sqrt(h)")),
    _m("09.rank-two-update", "only q u^T", "wrong-result", ("q[m, k] * uj + u[m, k] * qj", "q[m, k] * uj")),
    _m("09.rank-two-update", "no bound on j", "out-of-bounds", ("    if j < n:\n        uj", "    if True:\n        uj")),
    _m("09.rank-two-update", "plus instead of minus", "wrong-result", ("A[m, k, j] -= ", "A[m, k, j] += ")),
    _m("09.parallel-norm", "no barrier between the steps", "race",
       ("    while half > 0:\n        cuda.syncthreads()\n", "    while half > 0:\n")),
    _m("09.parallel-norm", "every thread adds", "out-of-bounds", ("        if t < half:\n            partials", "        if True:\n            partials")),
    _m("09.parallel-norm", "thread 0 adds them all", "over-budget",
       ("    half = NORM_THREADS // 2\n    while half > 0:\n        cuda.syncthreads()\n        if t < half:\n"
        "            partials[t] += partials[t + half]\n        half //= 2\n",
        "    cuda.syncthreads()\n    if t == 0:\n        for k in range(1, NORM_THREADS):\n            partials[0] += "
        "partials[k]\n")),
    # 10: blocks that talk
    _m("10.chained-handoff", "the flag polled with a plain load", "polls it with plain loads (line 6)",
       ("while cuda.atomic.add(flags, b - 1, 0) == 0:", "while flags[b - 1] == 0:")),
    _m("10.chained-handoff", "no fence", "stale-read", ("    cuda.threadfence()\n", "")),
    _m("10.chained-handoff", "no wait", "FAIL",
       ("        while cuda.atomic.add(flags, b - 1, 0) == 0:\n            pass\n", "")),
    _m("10.chained-handoff", "the flag raised with a plain store", "FAIL", ("    cuda.atomic.add(flags, b, 1)\n", "    flags[b] = 1\n")),
    _m("10.chained-handoff", "blockIdx as the tile id", "FAIL",
       ("flags, b - 1, 0", "flags, cuda.blockIdx.x - 1, 0"), ("before = prefixes[b - 1]", "before = prefixes[cuda.blockIdx.x - 1]"), avoid=("Powers of two",)),
    _m("10.lookback-loop", "a chained scan, no AGGREGATE", "before it published",
       (_LOOK_BACK_BODY_START, _LOOK_BACK_BODY_START + "    if True:\n        exclusive = np.float32(0)\n"
        "        if lane == 0:\n            if tile > 0:\n                flag, value = peek(status, values, tile - "
        "1)\n"
        "                while flag != published + PREFIX:\n                    flag, value = peek(status, values, "
        "tile - 1)\n"
        "                exclusive = value\n            publish(status, values, tile, published + PREFIX, exclusive + "
        "aggregate)\n"
        "        return cuda.shfl_sync(FULL_MASK, exclusive, 0)\n")),
    _m("10.lookback-loop", "one lane walks back tile by tile", "serial walk",
       (_LOOK_BACK_BODY_START, _LOOK_BACK_BODY_START + "    if True:\n        exclusive = np.float32(0)\n"
        "        if lane == 0:\n            publish(status, values, tile, published + (PREFIX if tile == 0 else "
        "AGGREGATE), aggregate)\n"
        "            p = tile - 1\n            while p >= 0:\n                flag, value = peek(status, values, p)\n"
        "                while flag < published:\n                    flag, value = peek(status, values, p)\n"
        "                exclusive += value\n                if flag == published + PREFIX:\n                    "
        "break\n"
        "                p -= 1\n            if tile > 0:\n"
        "                publish(status, values, tile, published + PREFIX, exclusive + aggregate)\n"
        "        return cuda.shfl_sync(FULL_MASK, exclusive, 0)\n")),
    _m("10.lookback-loop", "every lane waits for a PREFIX, not any state of this call", "an AGGREGATE as well as a "
                                                                                        "PREFIX",
       ("            while flag < published:\n", "            while flag != published + PREFIX:\n")),
    _m("10.lookback-loop", "the inclusive prefix never published", "published its state only once",
       ("    if lane == 0 and tile > 0:\n        publish(", "    if lane == 0 and tile < 0:\n        publish(")),
    _m("10.lookback-loop", "the window never moves back: its sum counted again", "wrong-result", ("        end -= 32\n", ""),
       avoid=("Powers of two",)),
    _m("10.publish", "a plain store", "an atomic read is not a write",
       ("    cuda.atomic.exch(status, tile, (np.uint64(flag) << np.uint64(32)) | np.uint64(to_bits(value)))\n",
        "    status[tile] = (np.uint64(flag) << np.uint64(32)) | np.uint64(to_bits(value))\n"), avoid=("give each block its own cells",)),
    _m("10.publish", "the flag in the low half", "FAIL",
       ("(np.uint64(flag) << np.uint64(32)) | np.uint64(to_bits(value))", "(np.uint64(to_bits(value)) << "
                                                                          "np.uint64(32)) | np.uint64(flag)")),
    _m("10.publish", "an atomic or onto the old state", "FAIL",
       ("cuda.atomic.exch(status, tile, ", "cuda.atomic.or_(status, tile, ")),
    # 11: applications
    *_each_instead_of("11.argmax-operator", "q if q[0] > p[0] or (q[0] == p[0] and q[1] < p[1]) else p",
                      ("the later index on a tie", "wrong-result", "q if q[0] > p[0] or (q[0] == p[0] and q[1] > p[1]) "
                                                                   "else p"),
                      ("the larger value with the earlier index", "FAIL", "(max(p[0], q[0]), p[1])"),
                      ("the smaller value", "wrong-identity", "q if q[0] < p[0] or (q[0] == p[0] and q[1] < p[1]) else "
                                                              "p")),
    _m("11.argmax-operator", "NaN never selected", "wrong-result",
       ("    if p[0] != p[0] or q[0] != q[0]:  # a NaN: the first NaN wins, as in np.argmax\n"
        "        if q[0] == q[0] or (p[0] != p[0] and p[1] < q[1]):\n            return p\n        return q\n", "")),
    *_each_instead_of("11.compact", "if i < x.shape[0] and flags[i]:", ("no bound on i", "out-of-bounds", "if flags[i]:"),
                      ("every element stored", "FAIL", "if i < x.shape[0]:")),
    _m("11.compact", "kept elements stay at i", "FAIL", ("out[places[i]] = x[i]", "out[i] = x[i]")),
    *_each_instead_of("11.warp-rank", "cuda.popc(ballot & cuda.lanemask_lt())",
                      ("the lanes up to and including the caller", "FAIL", "cuda.popc(ballot & ((cuda.lanemask_lt() << "
                                                                           "1) | 1))"),
                      ("the kept lanes above the caller", "FAIL", "cuda.popc(ballot & ~cuda.lanemask_lt())")),
    _m("11.warp-rank", "every lane counted, not the kept ones", "FAIL",
       ("cuda.popc(ballot & cuda.lanemask_lt()), cuda.popc(ballot)", "cuda.popc(cuda.lanemask_lt()), 32")),
    *_each_instead_of("11.digit-rank", "cuda.popc(peers & cuda.lanemask_lt())",
                      ("every lane below counted, whatever its digit", "FAIL", "cuda.popc(cuda.lanemask_lt())"),
                      ("peers above the caller counted", "FAIL", "cuda.popc(peers) - 1 - cuda.popc(peers & "
                                                                 "cuda.lanemask_lt())")),
    _m("11.digit-rank", "the keys of earlier steps forgotten", "FAIL",
       ("    return before + cuda.popc(peers & cuda.lanemask_lt())", "    return cuda.popc(peers & cuda.lanemask_lt())")),
    _m("11.digit-rank", "the count never updated", "FAIL",
       ("        counts[digit] = before + cuda.popc(peers)\n", "")),
    _m("11.radix-pass", "ones placed by their rank among the ones", "Both write it",
       ("zeros + i - zeros_before[i]", "i - zeros_before[i]"), avoid=("reading what",)),
    _m("11.radix-pass", "an inclusive scan", "FAIL", ("zeros_before = ps.exclusive_scan(flags)", "zeros_before = "
                                                                                                 "ps.scan(flags)")),
    _m("11.radix-pass", "ones first", "wrong-result", ("((keys >> bit) & 1) == 0", "((keys >> bit) & 1) == 1")),
)


# Right answers other than the solution, made the same way: each must pass its check.
ALTERNATIVES = (
    _m("01.serial-scan", "a running total in a variable", "PASS",
       (_SERIAL, "    total = x[0] - x[0]\n    for i in range(len(x)):\n        total += x[i]\n        s[i] = total\n")),
    _m("04.packed-upsweep", "no barrier after the last level (thread 0 reads what it wrote)", "PASS",
       ("        active //= 2\n    cuda.syncthreads()\n", "        active //= 2\n")),
    _m("10.publish", "the value first, the flag or-ed in after it", "PASS",
       ("    cuda.atomic.exch(status, tile, (np.uint64(flag) << np.uint64(32)) | np.uint64(to_bits(value)))\n",
        "    cuda.atomic.exch(status, tile, np.uint64(to_bits(value)))\n"
        "    cuda.atomic.or_(status, tile, np.uint64(flag) << np.uint64(32))\n")),
)
# fmt: on


def for_exercise(exercise_id):
    """The named mistakes of one exercise, in order."""
    return [m for m in MISTAKES if m.exercise == exercise_id]


# A verdict in the table is its first line, cut to this many characters.
_SHOWN = 230


def table_row(mistake, output):
    """The row of ``mistake`` in the named-mistake table: exercise, name, and the first failing
    line of its check's ``output`` without ``FAIL name:``, cut to :data:`_SHOWN` characters."""
    line = next((line for line in output.splitlines() if line.startswith("FAIL")), output.strip() or "(no output)")
    verdict = line.split(": ", 1)[1] if line.startswith("FAIL") and ": " in line else line
    if len(verdict) > _SHOWN:
        verdict = verdict[: _SHOWN - 3] + "..."
    return f"| {mistake.exercise} | {mistake.name} | {verdict} |"


def main(paths):
    """Print the named-mistake table's rows for the exercises of the notebooks at ``paths``, each
    mistake graded as the grader's check runs it (:func:`prefixsum.classroom.mutation.isolated_verdict`)."""
    from . import mutation

    exercises = {e.id: e for e in mutation.exercises(paths)}
    for mistake in MISTAKES:
        exercise = exercises.get(mistake.exercise)
        if exercise is not None:
            _, output = mutation.isolated_verdict(exercise, mistake.source(exercise.source), timeout=20, wall=240)
            print(table_row(mistake, output), flush=True)


__all__ = ["ALTERNATIVES", "MISTAKES", "Mistake", "edited", "for_exercise", "main", "table_row"]

if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
