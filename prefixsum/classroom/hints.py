"""Hint ladders for the notebooks' exercises, opened one at a time.

Every exercise (a cell tagged ``exercise`` with an ``exercise_id``, see
:mod:`prefixsum.classroom.mutation`) has a short ladder here, from a nudge to nearly the
answer, never the code itself. ``ps.hint("01.ladder-step")`` prints the next hint a student has
not opened yet in this session; ``ps.hint("01.ladder-step", 2)`` opens hint 2 again.
"""
import collections

HINTS = {
    "01.serial-scan": (
        "The first sum has nothing before it: s[0] is x[0].",
        "Every later sum is the one before it plus one more element.",
        "One loop over i from 1 to n - 1; the sum at i reuses the sum at i - 1 (no inner loop).",
    ),
    "01.ladder-step": (
        "Write the loop invariant for phase = 1 and phase = 2 on 8 elements by hand: who must add whom?",
        "Only threads in an odd-numbered run of `phase` elements work: the bit `phase` of t tells which.",
        "The element to add is the last one of the run just before t's run: the index where t's run starts, "
        "minus one. Clearing the bits of t below `phase` gives the start.",
    ),
    "01.ladder-max": (
        "The identity of max is the value that never wins: the smallest int32.",
        "Copy the shape of 01.ladder-step: load, barrier, one phase per bit, a barrier after every phase.",
        "Replace `a += b` by `a = max(a, b)`; max is a numba built-in on the GPU too.",
    ),
    "02.prefix-fold": (
        "Mirror the seed's fold: where it reads cell i + phase, the prefix fold reads cell t - phase.",
        "Build each phase's new list from the old one only (a list comprehension), as threads that all read "
        "before anyone writes.",
        "The strides go N/2, N/4, ..., 1 for N the smallest power of two >= m; cells with t < phase keep their value.",
    ),
    "02.folding-phase": (
        "In one phase thread t reads cell t - phase, which thread t - phase writes in the same phase.",
        "Read first into a register, let every thread finish reading, then write.",
        "Two barriers per phase: one between the reads and the writes, one before the next phase reads.",
    ),
    "02.suffix-fold": (
        "This is the seed's direction: cell t adds a cell after it.",
        "Cells whose partner t + phase lies past the tile keep their value (or add the identity).",
        "Same two-barrier pattern as 02.folding-phase: read into a register, barrier, write, barrier.",
    ),
    "03.hs-numpy": (
        "Slices move whole arrays at once: cells[a:b] is lanes a..b-1.",
        "The lanes that add are stride..n-1; the lanes they read are 0..n-1-stride.",
        "Copy first, so that cells stays unchanged, then write the sum into the copy's lanes from stride on.",
    ),
    "03.hs-step": (
        "A step reads one half of `cells` and writes the other: nothing is read and written in one step.",
        "Lane t at or above the stride adds lane t - stride of the half it reads; lanes below copy their value.",
        "The half read starts at src * BLOCK, the half written at (1 - src) * BLOCK; one barrier after the step.",
    ),
    "03.blelloch-down-sweep": (
        "The down-sweep visits the same threads as the up-sweep at level d: t + 1 a multiple of 2^(d+1).",
        "Each node gives its left child its own value, and its right child its value plus the left child's old value.",
        "Keep the parent's value in a register before overwriting it: the left child (t - 2^d) receives it.",
    ),
    "03.hs-two-barriers": (
        "With one buffer, the cell a lane reads may be overwritten in the same step: read before anyone writes.",
        "Each step: compute the new value into a register, barrier, store it, barrier.",
        "Stride 1, 2, 4, ... while stride < BLOCK; lanes below the stride keep their value.",
    ),
    "04.packed-upsweep": (
        "Draw the tree of a tile of 8 with 4 threads: at each level, which two indices does thread 0 join?",
        "offset starts at 1 and the number of active threads at the number of threads; after each level "
        "offset doubles and the active threads halve, until none is left.",
        "Only threads t < active work; put a barrier at the start of every level and one after the loop.",
    ),
    "04.blelloch-carry": (
        "Block b works on tile b + 1: its first element is at (b + 1) * TILE.",
        "Each thread handles two elements, THREADS apart, so that neighbouring threads touch neighbouring elements.",
        "Read carries[b] once, guard every element with its index < n, and add in place.",
    ),
    "04.conflict-free": (
        "A bank is a word index modulo 32. Which tree indices does a warp touch at one level, and which banks?",
        "Shift every run of 32 indices by one more cell: index i moves by the number of whole runs of 32 below it.",
        "CELLS = TILE + TILE // 32 leaves exactly one spare cell per run of 32.",
    ),
    "05.levels": (
        "The first two levels are always there: n, and n over L rounded up.",
        "Rounding up in integers: (a + L - 1) // L.",
        "Keep appending the next level while the last one is longer than L.",
    ),
    "05.reduce": (
        "Thread i's run starts at L * i within the level, that is at source + L * i in buf.",
        "The last run may be short: stop at the level's size, not at L * i + L.",
        "Start from the run's first element and add the others; threads with L * i >= size do nothing.",
    ),
    "05.kstep-correct": (
        "Everything before run j is u^{s-1}[j - 1], at buf[upper + j - 1]; for j = 0 it is the identity, 0.",
        "Walk the run from its first element, adding each element to a running sum and storing it in place.",
        "The run ends at min(L * j + L, size); the last element of a full run equals u^{s-1}[j] already.",
    ),
    "06.warp-shuffle-scan": (
        "This is Hillis-Steele (chapter 03) with strides 1, 2, 4, 8, 16, and a register for the shared cell.",
        "cuda.shfl_up_sync(mask, value, d) gives each lane the value of lane - d (its own where lane < d).",
        "Shuffle in every lane first, then add only in lanes >= d.",
    ),
    "06.exclusive-warp-scan": (
        "An exclusive scan is the inclusive one shifted by one lane.",
        "One more shuffle moves each lane's inclusive result to the lane after it.",
        "Lane 0 then holds its own value back: replace it with the identity.",
    ),
    "06.block-combine": (
        "After step 3, warp_totals[w] holds the sum of warps 0..w.",
        "A thread of warp w needs what all the warps before it summed: warps 0..w-1.",
        "Warp 0 has nothing before it; the others add one scanned total.",
    ),
}
_opened = collections.Counter()


class Hint(str):
    """A hint's text; shown without quotes in a notebook."""

    def __repr__(self):
        return str(self)


def hint(exercise_id, level=None):
    """The next unopened hint of ``exercise_id`` (or hint number ``level``, from 1).

    Raises
    ------
    ValueError
        For an unknown exercise id (naming the known ones) or a level outside the ladder.
    """
    if exercise_id not in HINTS:
        raise ValueError(f"no hints for exercise {exercise_id!r}; exercises with hints: {', '.join(sorted(HINTS))}")
    ladder = HINTS[exercise_id]
    if level is None:
        level = min(_opened[exercise_id] + 1, len(ladder))
    if not 1 <= level <= len(ladder):
        raise ValueError(f"exercise {exercise_id!r} has hints 1 to {len(ladder)}; got level {level!r}")
    _opened[exercise_id] = max(_opened[exercise_id], level)
    last = " (the last one: compare your code with the spec's invariant line by line)" if level == len(ladder) else ""
    return Hint(f"Hint {level} of {len(ladder)} for {exercise_id}{last}: {ladder[level - 1]}")


__all__ = ["HINTS", "Hint", "hint"]
