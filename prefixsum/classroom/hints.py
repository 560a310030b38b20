"""Hint ladders for the notebooks' exercises, opened one at a time.

Every exercise (a cell tagged ``exercise`` with an ``exercise_id``, see
:mod:`prefixsum.classroom.mutation`) has a short ladder here, from a nudge to nearly the
answer, never the code itself. ``ps.hint("01.ladder-step")`` prints the next hint a student has
not opened yet in this session; ``ps.hint("01.ladder-step", 2)`` opens hint 2 again.
"""

import collections

from . import renumbering

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
        "Mirror the original notebook's fold: where it reads cell i + phase, the prefix fold reads cell t - phase.",
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
        "This is the original notebook's direction: cell t adds a cell after it.",
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
        "Only threads t < active work; put a barrier at the start of every level.",
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
    "07.residual": (
        "One thread, one row: cuda.grid(2) gives (i, system); threads outside the batch or past row n - 1 do nothing.",
        "Row i touches x_(i-1), x_i and x_(i+1) of its own system only.",
        "The first row has no x_(i-1) and the last no x_(i+1): leave those terms out instead of reading a[system, 0] "
        "or c[system, n - 1], which hold garbage.",
    ),
    "07.pcr-step": (
        "One PCR step combines each row i with the rows s above and s below it, all read from the old buffer.",
        "Choose the two multipliers so that row i's couplings to rows i - s and i + s cancel; what is left "
        "couples row i to rows i - 2s and i + 2s.",
        "A neighbour outside 0..n-1 must change nothing: treat it as the row of the identity (0, 1, 0, 0).",
    ),
    "07.thomas-sweep": (
        "Thomas is Gaussian elimination without pivoting on a tridiagonal matrix: one sweep down, one back up.",
        "Going down, each row's pivot is its diagonal minus its sub-diagonal times the c' of the row above; "
        "c' and d' of a row divide by that pivot.",
        "Going up, the last row's d' is already its x; each row above subtracts c' times the x below it. "
        "Visit the rows first, first + step, ...: the subsystem's rows are `step` apart.",
    ),
    "08.lane-exchange": (
        "A shuffle reads a register of another lane of the same warp: shfl_up_sync brings lane - s's value, "
        "shfl_down_sync lane + s's, one call per value.",
        "Every lane of the warp must take part in each shuffle: call them all unconditionally, then decide what "
        "to keep.",
        "A lane of another group, or a lane past the warp's end (a shuffle then returns the caller's own value), "
        "is not a neighbour: replace what came from there by the identity row, all three of its values.",
    ),
    "08.interface-system": (
        "After the partition a chunk's first and last rows couple only unknowns at chunk ends; listed chunk by "
        "chunk, first then last, they form a tridiagonal system of their own.",
        "Write them as the reduced system's rows 2t and 2t + 1, with the diagonal they now have.",
        "The reduced solution gives x at the two ends of chunk t; every interior row of the chunk then holds one "
        "unknown more, its own. Write only rows below n.",
    ),
    "08.chunk-partition": (
        "Divide rows 0 and 1 by their diagonals first: row 1 then couples x_first (its left neighbour) already.",
        "Going down from row 2, subtract a multiple of the row above (already rewritten) so that the row's left "
        "coupling becomes one to x_first; divide by what is left on the diagonal.",
        "Going back up from row R - 3, subtract a multiple of the row below so that the right coupling becomes one "
        "to x_last; last, row 0, with row 1.",
    ),
    "09.householder-reflector": (
        "Section 2's householder_step gets u and H right for entries of ordinary size: start from it.",
        "P = I - u u^T / H does not change when u is multiplied by a number s and H by s^2: "
        "the u and H of x / s serve x as well.",
        "Choose s of the size of x's entries (the largest magnitude, or the sum of the magnitudes), "
        "so that |x / s|^2 is near 1: it can neither overflow nor underflow.",
    ),
    "09.rank-two-update": (
        "Entry (k, j) of q u^T is q_k u_j; of u q^T, u_k q_j.",
        "Thread j walks down its column, k = 0 .. n - 1; u_j and q_j are the same for the whole column: "
        "read them once.",
        "Threads j >= n have no column: guard them, or they write past the matrix.",
    ),
    "09.parallel-norm": (
        "Halve the number of working threads at every step: thread t < half adds partials[t + half] to partials[t].",
        "Before a step reads partials written by other threads, every thread must have finished writing: "
        "a barrier before each step, also before the first one.",
        "After log2(64) = 6 steps partials[0] holds the total; only one thread writes it to h[b].",
    ),
    "10.chained-handoff": (
        "Tile b may not use prefixes[b - 1] before tile b - 1 has raised flags[b - 1]; tile 0 has nothing to wait for.",
        "Wait by reading the flag with an atomic (an atomic add of 0): a plain load may be read once and kept in a "
        "register, and the loop never ends.",
        "Publish in two steps, the prefix first and the flag after it, with cuda.threadfence() between them: "
        "otherwise another SM may see the flag before the prefix. Raise the flag with an atomic add of 1, not a "
        "plain store, which may stay in the writer's cache.",
    ),
    "10.lookback-loop": (
        "Publish your own aggregate first: a later tile may be waiting for it while you look back.",
        "Each of the 32 lanes watches one predecessor; a lane re-reads its state until the flag belongs to "
        "this call (the epoch) before using it.",
        "A ballot of 'this lane saw a PREFIX' tells the closest one: the highest set bit. Sum that lane's "
        "value and the aggregates after it; if no lane saw a PREFIX, move the window 32 tiles back.",
    ),
    "10.publish": (
        "A reader must see the flag and the value together or not at all: one 64-bit word, one store.",
        "Put the flag in the high 32 bits and the value's bits in the low 32 bits, all as uint64.",
        "A plain store can linger in the writer's cache; an atomic exchange goes to the L2 every SM shares.",
    ),
    "11.argmax-operator": (
        "An element is a pair (value, index); the operator returns one of its two arguments.",
        "Associativity holds if the operator picks the first of one order on the elements, whichever side each is on: "
        "the larger value, then the smaller index.",
        "A NaN is the only value with x != x; np.argmax returns the first NaN, so a NaN beats every number, "
        "and of two NaNs the smaller index wins.",
    ),
    "11.compact": (
        "An exclusive scan of the flags tells each kept element how many kept elements precede it.",
        "That count is its place in the output; elements whose flag is 0 write nothing.",
        "Guard the thread index against the array's length, as every element-wise kernel does.",
    ),
    "11.warp-rank": (
        "One warp-level vote gives every lane the flags of all 32 lanes at once, one bit per lane.",
        "The caller's rank counts only the bits of lanes below its own: a mask of those lanes selects them.",
        "cuda.ballot_sync, cuda.lanemask_lt and cuda.popc (the number of set bits) are all you need.",
    ),
    "11.digit-rank": (
        "The keys before the caller with its digit are those ranked in earlier steps (counts[digit]) and its peers on "
        "lower lanes.",
        "One warp-level match gives every lane the mask of the lanes holding the same digit: a bit count below its "
        "lane is its place among them.",
        "Let one lane of the peers read counts[digit] and add their number; the others learn the old count by a "
        "shuffle from that lane, and a syncwarp makes the new count visible to the next step.",
    ),
    "11.radix-pass": (
        "A stable split puts every key whose bit is 0 first, in their old order, then the keys whose bit is 1.",
        "The exclusive scan of the zero-flags is each zero's place; the number of zeros is where the ones start.",
        "A one at i has i - zeros_before[i] ones before it: its place is that plus the number of zeros.",
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
    exercise_id = renumbering.exercise_id(exercise_id)  # a notebook of an earlier numbering asks by its old id
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
