# ---
# jupyter:
#   jupytext:
#     formats: ipynb,sources//py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · The folding scan, and why it sums suffixes
#
# The Python notebook of partial-sum experiments that gave chapter 01 its ladder
# ([the notebook](../docs/references.md#partial-sum-experiments-a-python-notebook)) has a second
# parallel method: **folding**. It halves a stride instead of doubling a run, and as
# written it does not compute prefix sums at all: it computes **suffix sums**,
# $s_i = x_i + x_{i+1} + \dots + x_{n-1}$. This chapter finds out why with a loop invariant,
# mirrors the indexing to get prefix sums, draws the data flow of the real kernel, and carries
# it to arrays of any length.

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import inspect

import numpy as np
from numba import cuda

print(ps.device_info())

# %% [markdown]
# ## 1. The notebook's folding method
#
# The notebook describes it in a comment: *"the folding method has blocks of size $2^h$, supposing
# there are $2^j$ such blocks, stack them one above the other such that the 0 cell is the
# uppermost, leftmost cell. [...] Update is to divide each block in half, fold the right half
# under the left half, and add to a cell the value of the corresponding cell just above the
# cell. This update is done in parallel, such that all threads read the current cell values and
# updates simultaneously to the new cell values."*
#
# Its code pads the length $m$ to the next power of two $N$ and runs, for
# `phase` $= N/2, N/4, \dots, 1$:
#
# ```
# for i in range(m):
#     if i + phase < m:
#         a[i] += a[i + phase]
# ```
#
# The function below is that loop, with one change that makes the "all at once" explicit: each
# phase builds the new array from the old one only (a list comprehension reads the old list), as
# threads that all read before anyone writes would.


# %%
def fold(cells, show=None):
    """The notebook's partial_sum_folded: for phase = N/2, ..., 1, cell i adds cell i + phase, all at once."""
    cells = list(cells)
    m = len(cells)
    phase = 1
    while 2 * phase < m:  # N/2, for N the smallest power of two >= m
        phase *= 2
    while phase >= 1:
        cells = [cells[i] + cells[i + phase] if i + phase < m else cells[i] for i in range(m)]
        if show:
            show(phase, cells)
        phase //= 2
    return cells


# %% [markdown]
# The notebook ran it on 33 ones and printed every phase:

# %%
seed_result = fold([1] * 33, show=lambda phase, cells: print(f"phase {phase:>2}:", " ".join(f"{c:2}" for c in cells)))

# %% [markdown]
# The last line is $33, 32, \dots, 1$: cell $i$ counts the ones from $i$ to the end. The notebook's
# comment speaks of adding the cell "just above" (before) it, which would be a prefix sum, but
# the code adds `a[i + phase]`, a cell *after* $i$. The package's reference loop and the package's
# folding kernel agree with the printout, as a **reverse** (suffix) scan:

# %%
ones = np.ones(33, dtype=np.int32)
print("seed's fold         ", seed_result)
print("reference, reverse  ", ps.reference.scan(ones, reverse=True).tolist())
print("kernel, reverse     ", ps.scan(ones, reverse=True, algorithm="folding").tolist())
print("kernel, forward     ", ps.scan(ones, algorithm="folding").tolist())

# %% [markdown]
# ## 2. Why: the loop invariant
#
# Write the array in rows of `phase` cells, cell 0 top left, and look at **columns**.
#
# **Loop invariant.** After the phase with stride $p$, cell $i$ holds
# $x_i + x_{i+p} + x_{i+2p} + \dots$: its whole column, from its own row down to the bottom.
#
# - Before the first phase ($p = N$, one long row) every column is a single cell: true.
# - A phase with stride $p$ halves the row width from $2p$ to $p$: the right half of every row
#   folds under the left half. Cell $i$'s new column is its old column (stride $2p$:
#   $x_i, x_{i+2p}, \dots$) together with the old column of cell $i + p$
#   ($x_{i+p}, x_{i+3p}, \dots$), which is exactly what `a[i] += a[i + phase]` adds.
# - After $p = 1$ the rows are single cells, so cell $i$'s column is $x_i, x_{i+1}, \dots, x_{m-1}$:
#   the suffix sum.
#
# The same function shows the columns if each cell holds a list of indices (`+` of two lists
# joins them), here for $m = 8$:

# %%
_ = fold([[i] for i in range(8)],
         show=lambda phase, cells: print(f"after phase {phase}: " + "  ".join("+".join(f"x{j}" for j in c) for c in cells)))

# %% [markdown]
# Two things show in this printout. First, cell $i$ only ever reads cells *after* it, so its
# result can only depend on $x_i, \dots, x_{m-1}$. Second, the columns **interleave**: cell 0
# combines $x_0$ with $x_4$ before $x_2 + x_6$ and $x_1 + \dots$ join. The order of the terms is
# $x_0, x_4, x_2, x_6, x_1, x_5, x_3, x_7$, not $x_0, x_1, \dots$. That is fine for $+$, `max` and
# `min`, but an operator that is associative and **not commutative** gets the wrong answer.
# String concatenation is one:

# %%
print("fold of a, b, c, d:", fold(["a", "b", "c", "d"]), " suffixes:", ["abcd", "bcd", "cd", "d"])

# %% [markdown]
# So folding needs a commutative operator; the four operators of the package (`add`, `mul`,
# `max`, `min`) all are. The ladder of chapter 01 never reorders, so it needs associativity
# only. (Floating-point `+` is commutative but not exactly associative, so any parallel scan
# may round differently from the sequential loop; the checker allows for that.)
#
# ## 3. Prefix sums: mirror the indexing
#
# Reading the array backwards turns suffixes into prefixes. Under the mirror
# $i \mapsto N - 1 - i$ the update "cell $i$ adds cell $i + p$" becomes "cell $t$ adds cell
# $t - p$": every cell reads a cell *before* it, and ends with $x_0 + \dots + x_t$. Who reads whom
# for $N = 8$, in both directions:

# %%
for phase in (4, 2, 1):
    suffix = "  ".join(f"{i}<-{i + phase}" for i in range(8 - phase))
    prefix = "  ".join(f"{t}<-{t - phase}" for t in range(phase, 8))
    print(f"phase {phase}:  notebook (suffix) {suffix:<36} mirrored (prefix) {prefix}")

# %% [markdown]
# The invariant mirrors too: after the phase with stride $p$, cell $t$ holds
# $x_t + x_{t-p} + x_{t-2p} + \dots$ down to the top row.
#
# ### Exercise 02.prefix-fold (warm-up, 1 point)
#
# **Spec.** `prefix_fold(cells)` takes a list of $m$ numbers and returns the list of their
# prefix sums, computed as `fold` above computes suffix sums but mirrored: for the strides
# $p = N/2, \dots, 2, 1$ ($N$ the smallest power of two $\ge m$), every cell $t$ adds cell
# $t - p$ where that exists, **all cells at once** (each phase builds its new list from the old
# one only). The check runs it on random int32 inputs of every length from 1 to 39 and longer ones up to 2049 against
# `np.cumsum`; `fold` is the model to mirror.
#
# `ps.hint("02.prefix-fold")` for hints, one per call.

# %% tags=["exercise"] exercise_id="02.prefix-fold" points=1 todo="fold the list with strides N/2, ..., 1, every cell t adding cell t - stride where it exists, all cells of a phase at once"
def prefix_fold(cells):
    cells = list(cells)
    m = len(cells)
    ### BEGIN SOLUTION
    phase = 1
    while 2 * phase < m:
        phase *= 2
    while phase >= 1:
        cells = [cells[t] + cells[t - phase] if t >= phase else cells[t] for t in range(m)]
        phase //= 2
    ### END SOLUTION
    return cells


# %% tags=["check"] exercise_id="02.prefix-fold"
print(ps.check.scan(lambda x: np.array(prefix_fold(x), dtype=x.dtype), dtype=np.int32, name="prefix_fold",
                    sizes=tuple(range(1, 40)) + (100, 255, 256, 257, 1000, 2049)))

# %% [markdown]
# ## 4. The kernel
#
# One thread per element; the tile lives in the shared array `cells`. The package always scans
# a tile forwards in *logical* order, so the kernel runs the mirrored (prefix) fold: lane `t`
# adds lane `t - phase`. For `reverse=True`, `where` puts logical element $i$ at array index
# $n - 1 - i$, and the kernel is then the notebook's fold verbatim on the array. Lanes past the end
# hold the operator's identity, which plays the part of the notebook's guard `i + phase < m`.
# Section 8 writes the kernel's phase; the package's source follows its check there.

# %% [markdown]
# Note the **two barriers** per phase. In one phase, thread $t$ reads cell $t - p$ while thread
# $t - p$ writes it. The ladder never has this conflict (the cell it reads, the end of the
# previous run, is not written in that phase), so one barrier per phase suffices there. The fold
# reads into a register (`folded`), waits until every thread has read, writes, and waits again
# before the next phase reads. (Chapter 03's Hillis–Steele scan removes the second barrier with
# two buffers.)
#
# ## 5. The picture
#
# The tracer records every access of the real kernel on the simulator. The fold reads in one
# barrier phase and writes in the next, the value waiting in the register `folded` in between;
# `ps.viz.dataflow` draws an arrow from every cell a thread read since its previous write to the
# cell it writes, so it follows the value through the register and across the barrier. A
# forward scan of 32 elements in one tile of 32 threads, one row per stride (colours are warps;
# every lane rewrites its cell in every phase, so each has a vertical arrow from its own old
# value, and lanes $t \ge p$ also one from lane $t - p$):

# %%
fold_trace = ps.trace.record(ps.scan, np.arange(1, 33, dtype=np.int32), algorithm="folding", block_size=32)
ax = ps.viz.dataflow(fold_trace, array="cells", title="folding, n = 32, one tile")
_ = ax.set_yticklabels(["load"] + [f"stride {p}" for p in (16, 8, 4, 2, 1)])

# %% [markdown]
# Compare with the ladder's picture in chapter 01: the ladder's arrows fan out from one cell
# (the end of the run before) to many, the fold's arrows are parallel, all of one length per
# phase, the longest first.
#
# ## 6. More than one block
#
# Arrays longer than a block are cut into tiles, exactly as for the ladder: each block folds its
# tile and writes the tile's total, the totals are scanned (by the folding scan again), and a
# carry kernel combines into every tile the total of all tiles before it (chapter 01 showed
# `ps.scans.tiles.scan_tiles`). For a reverse scan the tiles are counted from the *end* of the array:
# logical tile 0 is the last 32 elements. The global-memory picture of a 100-element suffix
# scan with tiles of 32 shows it: block 0 writes the right end, and the carry kernel's blocks
# write every tile but that one.

# %%
suffix_trace = ps.trace.record(ps.scan, np.arange(1, 101, dtype=np.int32), reverse=True, algorithm="folding", block_size=32)
_ = ps.viz.launches(suffix_trace)
print("matches the reference:", np.array_equal(suffix_trace.result, ps.reference.scan(np.arange(1, 101, dtype=np.int32), reverse=True)))

# %% [markdown]
# ## 7. Check, both directions
#
# `ps.check.scan` (chapter 00) runs each scan on random inputs from 1 to 2049 elements, with
# poisoned memory, every launch traced.

# %%
for op, dtype in (("add", np.float32), ("max", np.int32)):
    for inclusive, reverse in ((True, False), (False, True)):
        label = f"folding {op} {np.dtype(dtype).name} {'inclusive' if inclusive else 'exclusive'} {'suffix' if reverse else 'prefix'}"
        print(ps.check.scan(lambda x: ps.scan(x, op, inclusive=inclusive, reverse=reverse, algorithm="folding"),
                            op=op, inclusive=inclusive, reverse=reverse, dtype=dtype, name=label))

# %% [markdown]
# ## 8. Exercises: the kernel's phase, and the notebook's direction
#
# ### Exercise 02.folding-phase (core, 2 points)
#
# **Spec.** `my_folding_tile` runs one block of `BLOCK` = 64 threads per tile of 64 elements
# (`ps.check.tiled` carries the tile totals, as in chapter 01) and leaves in `out[i]` the
# inclusive prefix sum of the tile up to `i`. Write the body of the phase loop, one phase of
# the mirrored fold, in the one shared array `cells`.
#
# **Invariant** (section 3): after the phase with stride $p$, cell $t$ holds
# $x_t + x_{t-p} + x_{t-2p} + \dots$, its column down to the top row. The strides run
# $32, 16, \dots, 1$. On 8 cells, for the input $3, 1, 4, 1, 5, 9, 2, 6$ (the reads are
# section 3's mirrored pairs, $t \leftarrow r$: cell $t$ adds cell $r$):
#
# | stride $p$ | reads ($t \leftarrow r$) | `cells` after the phase |
# |---|---|---|
# | (load) | | 3 1 4 1 5 9 2 6 |
# | 4 | 4←0, 5←1, 6←2, 7←3 | 3 1 4 1 8 10 6 7 |
# | 2 | 2←0, 3←1, 4←2, 5←3, 6←4, 7←5 | 3 1 7 2 12 11 14 17 |
# | 1 | 1←0, 2←1, ..., 7←6 | 3 4 8 9 14 23 25 31 |
#
# **The accesses.** In the phase of stride 2, cell 4 is read by thread 6 and rewritten by
# thread 4, and both must use its value *after stride 4* (8), not its new one (12). No cell may
# be read by one thread and written by another between the same two barriers: the tracer
# checks every access. **Budget:** at most 13 barriers per thread (the load's and two per
# phase), at most 4 memory accesses per thread between two barriers. Try it with one barrier
# first (add in place): the numbers may even come out right on the simulator, but the checker
# finds the race.
#
# `ps.hint("02.folding-phase")` for hints.

# %% tags=["exercise"] exercise_id="02.folding-phase" points=2 todo="write one phase of the mirrored fold: afterwards cell t holds the sum of x[t], x[t - phase], x[t - 2 phase], ... of the tile, with no thread reading a cell another thread writes in the same barrier phase"
from numba import cuda, float32

BLOCK = 64


@cuda.jit
def my_folding_tile(x, out, totals, n):
    cells = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * BLOCK + t
    cells[t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    phase = BLOCK >> 1
    while phase > 0:
        ### BEGIN SOLUTION
        folded = cells[t]
        if t >= phase:
            folded += cells[t - phase]
        cuda.syncthreads()
        cells[t] = folded
        cuda.syncthreads()
        ### END SOLUTION
        phase >>= 1
    if i < n:
        out[i] = cells[t]
    if t == BLOCK - 1:
        totals[cuda.blockIdx.x] = cells[t]


# %% tags=["check"] exercise_id="02.folding-phase"
print(ps.check.tiled(my_folding_tile, block_size=64,  # the check's tile, whatever BLOCK says
                     budget=ps.check.Budget(barriers=13, accesses_per_step=4, traffic_per_element=2)))

# %% [markdown]
# The package's kernel, for comparison (`position` is the mirror for suffix scans):

# %% tags=["instructor"]
print(inspect.getsource(ps.scans.folding.folding_tile_kernel))
print(inspect.getsource(ps.scans.tiles.position))

# %% [markdown]
# ### Exercise 02.suffix-fold (stretch, 2 points)
#
# **Spec.** The notebook's own direction on the GPU: `my_suffix_fold` is launched as **one block**
# of `BLOCK` = 64 threads on an array of $n \le 64$ elements and leaves in `out[i]` the suffix
# sum $x_i + x_{i+1} + \dots + x_{n-1}$ (`np.cumsum(x[::-1])[::-1]`), without mirroring any
# index: cell `t` adds cells *after* it. The load and the store are given (lanes past `n`
# hold 0); write the phases.
#
# **Invariant** (section 2, the notebook's): after the phase with stride $p$, cell $t$ holds
# $x_t + x_{t+p} + x_{t+2p} + \dots$, its whole column from its own row to the bottom. On 8
# cells for $n = 6$, the input $3, 1, 4, 1, 5, 9$ ($t \leftarrow r$: cell $t$ adds cell $r$;
# no cell reads past the end of the tile):
#
# | stride $p$ | reads ($t \leftarrow r$) | `cells` after the phase |
# |---|---|---|
# | (load) | | 3 1 4 1 5 9 0 0 |
# | 4 | 0←4, 1←5, 2←6, 3←7 | 8 10 4 1 5 9 0 0 |
# | 2 | 0←2, 1←3, ..., 5←7 | 12 11 9 10 5 9 0 0 |
# | 1 | 0←1, 1←2, ..., 6←7 | 23 20 19 15 14 9 0 0 |
#
# As in exercise 02.folding-phase, a cell read by one thread and rewritten by another in the
# same phase must be read before it is written, with no barrier phase holding both.
# **Budget:** 13 barriers, 4 memory accesses per thread between two barriers. The check runs
# sizes 1 to 64 as a reverse scan.
#
# `ps.hint("02.suffix-fold")` for hints.

# %% tags=["exercise"] exercise_id="02.suffix-fold" points=2 todo="run the notebook's fold on the tile with strides 32, 16, ..., 1 so that cell t ends with the sum of x[t..n-1]; no thread reads a cell another thread writes in the same barrier phase"
from numba import cuda, float32

BLOCK = 64


@cuda.jit
def my_suffix_fold(x, out, n):
    cells = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    cells[t] = x[t] if t < n else float32(0)
    cuda.syncthreads()
    ### BEGIN SOLUTION
    phase = BLOCK >> 1
    while phase > 0:
        folded = cells[t]
        if t + phase < BLOCK:
            folded += cells[t + phase]
        cuda.syncthreads()
        cells[t] = folded
        cuda.syncthreads()
        phase >>= 1
    ### END SOLUTION
    if t < n:
        out[t] = cells[t]


def suffix_sums(x):
    out = cuda.device_array(len(x), x.dtype)
    my_suffix_fold[1, BLOCK](cuda.to_device(x), out, len(x))
    return out


# %% tags=["check"] exercise_id="02.suffix-fold"
def suffix_sums_by_the_check(x):  # the check launches the kernel itself: its arrays, one block of 64 threads
    out = cuda.device_array(len(x), x.dtype)
    my_suffix_fold[1, 64](cuda.to_device(x), out, len(x))
    return out


print(ps.check.scan(suffix_sums_by_the_check, reverse=True, sizes=(1, 2, 3, 31, 32, 33, 50, 63, 64), name="my_suffix_fold",
                    budget=ps.check.Budget(barriers=13, accesses_per_step=4, traffic_per_element=2)))

# %% [markdown]
# ## 9. Summary
#
# | | the notebook's fold (sequential simulation) | folding, one tile of $b$ | folding, $n$ elements |
# | --- | --- | --- | --- |
# | result | suffix sums | prefix (mirrored) or suffix | either direction, via `where` |
# | work (combines) | $m\log_2 N - (N - 1)$ | $b\log_2 b - (b - 1)$ | $\approx n \log_2 b$ + carries ($\approx n$) |
# | depth | $\log_2 N$ phases | $\log_2 b$ phases, 2 barriers each | $\log_2 b$ phases per level, $\lceil\log_b n\rceil$ levels |
# | global memory | | $b$ reads, $b$ writes | $2n$ reads, $2n$ writes (tile pass + carry pass) |
#
# The tracer counts one tile of 256 (the ladder of chapter 01 needs $\frac{b}{2}\log_2 b = 1024$
# combines and 9 barriers for the same tile):

# %%
counts = ps.trace.record(ps.scan, np.arange(1, 257, dtype=np.int32), algorithm="folding", block_size=256).counts()
print(f"n = 256, one tile: {counts['combines']} combines (256 * 8 - 255 = {256 * 8 - 255}), "
      f"{counts['barriers']} barriers per thread, {counts['global_reads']} global reads, {counts['global_writes']} global writes")

# %% [markdown]
# The fold does almost twice the ladder's combines and twice its barriers. Does it take twice
# as long? `benchmarks/scan_throughput.csv` holds both, timed on one GPU on float32 sums (the
# kernels alone, queued between CUDA events; chapter 04 describes the method):

# %%
from prefixsum.cli import results  # noqa: E402

scan_rows = results.read("scan_throughput.csv", kind="ours", dtype="float32")
print(f"{scan_rows[0]['device']}, {scan_rows[0]['date']}: median time (us)")
for log2 in (20, 22, 24, 25, 26):
    us = {variant: results.value("scan_throughput.csv", "median_us", variant=variant, kind="ours", dtype="float32", n=2**log2)
          for variant in ("ladder", "folding")}
    print(f"n = 2^{log2}: ladder {us['ladder']:7.1f}, folding {us['folding']:7.1f}, folding / ladder {us['folding'] / us['ladder']:.2f}")

# %% [markdown]
# No: at every large size the two take nearly the same time. A scan does so little arithmetic
# per byte that memory traffic and launches, not combines, set its speed; chapter 04 looks at
# those measurements.
#
# In the names of the prefix-network literature (chapter 03 draws the taxonomy), the mirrored
# fold uses the pairs of **Kogge–Stone**'s network, with the strides in the reverse order: its
# depth is $\log_2 b$ steps, its fan-out 2, its work that of Kogge–Stone.
#
# **Questions.**
# 1. The notebook's comment says the sequential simulation should work "from highest indexed blocks
#    to lowest", but its loop runs `i` upwards. Which order makes the one-array loop
#    `a[i] += a[i + phase]` equal to the simultaneous update, and why? What about the mirrored
#    loop `a[t] += a[t - phase]`?
# 2. Run the notebook's `partial_sum_folded` in your head for a list of one element. What happens,
#    and why does the kernel not have this problem?
# 3. After the phase with stride $p$, which inputs does cell 5 of a 16-cell tile hold in the
#    prefix fold? Check your answer with `fold` on lists of indices (mirror the result).
# 4. The ladder and the fold both take $\log_2 b$ phases. Which does less work, and why does the
#    fold need two barriers per phase where the ladder needs one?
# 5. Give an associative operator that is not commutative (besides concatenation) for which a
#    scan is useful. Which of the chapter's scans would compute it correctly?
