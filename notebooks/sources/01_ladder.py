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
# # 01 · Partial sums and the ladder scan
#
# A **prefix sum** (or *scan*) turns a sequence $x_0, x_1, \dots, x_{n-1}$ into its running
# totals $s_i = x_0 + x_1 + \dots + x_i$. It is one of the basic building blocks of parallel
# programming: sorting, stream compaction, sparse matrices and histograms are all built on it.
# This chapter starts from the sequential loop, then builds the first parallel scan of the
# course: the **ladder** of a Python notebook of partial-sum experiments ([the notebook](../docs/references.md#partial-sum-experiments-a-python-notebook)),
# first inside one thread block, then for arrays of any length. Every work cited is on the
# [references page](../docs/references.md).

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import inspect

import numpy as np

print(ps.device_info())

# %% [markdown]
# ## 1. The sequential loop
#
# The notebook starts from the obvious loop, and a lab sheet on the Blelloch scan
# ([the lab sheet](../docs/references.md#a-lab-sheet-on-prefix-sums)) gives its exclusive twin, where $s_i$ sums only the elements *before* $i$. The package keeps both as
# the truth every kernel is tested against (`ps.reference.partial_sums` and
# `ps.reference.exclusive_partial_sums`); write the first one yourself.
#
# ### Exercise 01.serial-scan (warm-up, 1 point)
#
# **Spec.** `my_partial_sums(x)` takes a 1-D numpy array and returns a new array `s` of the
# same length and dtype with `s[i] = x[0] + ... + x[i]`: the same as `np.cumsum(x)`, computed
# by one loop of $n - 1$ additions, each reusing the sum before it. It runs on the host (no
# kernel); the check runs it on random int32 inputs from 1 to 2049 elements, whose elements count
# the additions made on them: at most two per element, and a few per line of the loop.
#
# Stuck? `ps.hint("01.serial-scan")` opens the first hint; each call opens the next.

# %% tags=["exercise"] exercise_id="01.serial-scan" points=1 todo="fill s with the running totals of x (s[i] is the sum of x[0..i]), one addition per element"
def my_partial_sums(x):
    s = np.zeros_like(x)
    ### BEGIN SOLUTION
    s[0] = x[0]
    for i in range(1, len(x)):
        s[i] = s[i - 1] + x[i]
    ### END SOLUTION
    return s


# %% tags=["check"] exercise_id="01.serial-scan"
print(ps.check.scan(my_partial_sums, dtype=np.int32,
                    budget=ps.check.Budget(host_lines_per_element=1, additions_per_element=2)))

# %% [markdown]
# The package's two loops, for comparison:

# %% tags=["instructor"]
print(inspect.getsource(ps.reference.partial_sums))
print(inspect.getsource(ps.reference.exclusive_partial_sums))

# %% [markdown]
# The lab sheet's worked example, inclusive and exclusive:

# %%
example = [3, 2, 1, 2, 1, 4, 3, 2, 4, 3]
print("x         ", example)
print("inclusive ", ps.reference.partial_sums(example))
print("exclusive ", ps.reference.exclusive_partial_sums(example))

# %% [markdown]
# The loop does $n - 1$ additions, the least possible. But every step needs the result of the
# step before: its **depth** (the longest chain of dependent operations) is also $n - 1$. A GPU
# runs thousands of threads at once; to use them, a scan must trade a little extra work for a
# much shorter chain.
#
# Addition is not special: any **associative** operator with an identity works. The package
# scans with `add`, `mul`, `max` and `min`, and its exclusive scans start from the identity
# (0, 1, the lowest value, the highest value):

# %%
for op in ps.OPS:
    print(f"{op:>4}: identity in int32 = {ps.identity(op, np.int32)}")

# %% [markdown]
# ## 2. The ladder: the idea
#
# The notebook describes it in a comment: *"in the i-th phase the blocks are of size $2^i$ ...
# blocks are $2^i$ aligned ... the predecessor value to a block is ... the array location one
# before the lowest array location in the block."*
#
# At phase $p = 1, 2, 4, \dots$ cut the array into aligned runs of $p$ elements and pair them
# up: run 0 with run 1, run 2 with run 3, and so on. Every element of the second run of a pair
# adds the **last element of the first run**, which holds that run's total. The pairs then are
# the runs of $2p$ of the next phase.
#
# **Loop invariant.** Before phase $p$, every aligned run of $p$ elements holds the inclusive
# scan of its own inputs. The phase adds to each element of an odd run the total of the even
# run before it, so afterwards every aligned run of $2p$ elements holds its own scan. After
# $\lceil \log_2 n \rceil$ phases the run is the whole array.
#
# In the literature of adders and prefix networks this is **Sklansky's** network (1960): the
# fewest steps, $\log_2 n$, with few combines, $\frac{n}{2}\log_2 n$, at the price of a large
# **fan-out** (in the last phase one cell is read by half the threads). Chapter 03 places it
# among the other classic networks (Kogge–Stone, Brent–Kung, Ladner–Fischer, Han–Carlson) in
# one figure drawn from the tracer's counts.
#
# A small worked example with $n = 8$: the input $3, 1, 4, 1, 5, 9, 2, 6$, the reads of each
# phase ($t \leftarrow r$: element $t$ adds element $r$) and the array after it. The bars mark
# the aligned runs that hold their own scan.
#
# | phase $p$ | reads ($t \leftarrow r$) | after the phase |
# |---|---|---|
# | (input) | | 3 \| 1 \| 4 \| 1 \| 5 \| 9 \| 2 \| 6 |
# | 1 | 1←0, 3←2, 5←4, 7←6 | 3 4 \| 4 5 \| 5 14 \| 2 8 |
# | 2 | 2←1, 3←1, 6←5, 7←5 | 3 4 8 9 \| 5 14 16 22 |
# | 4 | 4←3, 5←3, 6←3, 7←3 | 3 4 8 9 14 23 25 31 |
#
# Half the threads work in every phase, and the element they read (the end of the even run) is
# never written in that phase: one phase never reads what it writes, so a barrier between
# phases is all the synchronisation the kernel needs.
#
# The notebook printed these pairs for $n = 30$. A picture says more: below, the real ladder kernel
# of the package runs on the simulator under the **tracer**, which records every access to
# shared memory, and `ps.viz.dataflow` draws one row per phase with an arrow from each cell read
# to the cell written (colours are warps).

# %%
seed_trace = ps.trace.record(ps.scan, np.full(30, 2, dtype=np.int32), algorithm="ladder", block_size=32)
# the stepper (slider, previous/next) with a live kernel; the picture where there is none
ps.viz.step(seed_trace, fallback=ps.viz.dataflow(seed_trace, array="rungs", title="ladder, n = 30 (the notebook's example)"))

# %% [markdown]
# ## 3. The kernel
#
# One thread per element; the tile lives in shared memory (`rungs`). Lanes past the end of the
# array hold the operator's identity, so they never change a result. After the load, a barrier;
# then one phase per bit of the tile's length, each ended by a barrier; then every thread stores
# its element, and the last thread of the block the tile's total. The package builds the kernel
# with a factory for one operator, element type and direction, so one source serves all 96
# combinations (section 6 writes it, and shows the package's source after the check).
#
# ## 4. More than one block
#
# A block has at most 1024 threads, so long arrays are cut into **tiles**, one block each. Each
# block ladder-scans its tile and writes the tile's total; the totals are scanned (by the ladder
# again: it is a scan of a shorter array); then every tile after the first combines the total of
# all tiles before it into its elements. The package shares this driver between algorithms:

# %%
print(inspect.getsource(ps.scans.tiles.scan_tiles))

# %% [markdown]
# The global-memory picture of a 100-element scan with tiles of 32: the tile pass, the scan of
# the four totals, and the carry pass into the last three tiles.

# %%
tiles_trace = ps.trace.record(ps.scan, np.arange(1, 101, dtype=np.int32), algorithm="ladder", block_size=32)
_ = ps.viz.launches(tiles_trace)

# %% [markdown]
# ## 5. Check
#
# `ps.check.scan` runs a scan function on random inputs of many sizes (one element, a warp and
# its neighbours, one block and several), with poisoned outputs and shared memory, traces every
# launch, and prints one line: PASS, or the first thing that went wrong. The package's ladder,
# for every operator, and for the exclusive and the suffix scan:

# %%
# every operator, and the two other directions with add
for op, inclusive, reverse in [(op, True, False) for op in ps.OPS] + [("add", False, False), ("add", True, True)]:
    label = f"ladder {op} {'inclusive' if inclusive else 'exclusive'} {'suffix' if reverse else 'prefix'}"
    print(ps.check.scan(lambda x: ps.scan(x, op, inclusive=inclusive, reverse=reverse, algorithm="ladder"),
                        op=op, inclusive=inclusive, reverse=reverse, dtype=np.int32, name=label))

# %% [markdown]
# ## 6. Exercises: the ladder's phase, and the ladder for `max`
#
# `ps.check.tiled` runs a tile kernel `(x, out, totals, n)` on every tile of 64 elements and
# carries the totals between tiles, exactly as the package does, on random inputs from 1 to 2049
# elements with poisoned memory, every access traced. A **budget** (`ps.check.Budget`) says
# what the parallel algorithm may spend, as the tracer counts it: right numbers from one thread
# looping over the whole tile, or from more phases than $\log_2 64$, fail as `over-budget`.
#
# ### Exercise 01.ladder-step (core, 2 points)
#
# **Spec.** `my_ladder_tile` is launched with one block of `BLOCK` = 64 threads per tile of 64
# elements. It leaves in `out[i]` the inclusive sum of the tile up to element `i` (for
# `i < n`) and in `totals[b]` the tile's total; the load, the barriers and the stores are given.
# Write the update of one phase so that the loop invariant of section 2 holds: before phase
# `phase`, every aligned run of `phase` elements of `rungs` holds the inclusive scan of its own
# inputs; after it, every aligned run of `2 * phase` does. Section 2's table is what a phase
# must do on 8 elements: which elements add, and which element each one reads; your update
# must do the same for any `t` and `phase` of a 64-element tile. **Budget:** at most 7 barriers per
# thread (the load's and one per phase) and at most 4 memory accesses per thread between two
# barriers, so each thread does one combine per phase.
#
# Stuck? `ps.hint("01.ladder-step")`, once per hint.

# %% tags=["exercise"] exercise_id="01.ladder-step" points=2 todo="write one phase of the ladder: afterwards every aligned run of 2 * phase elements of rungs holds the inclusive scan of its inputs"
from numba import cuda, float32

BLOCK = 64


@cuda.jit
def my_ladder_tile(x, out, totals, n):
    rungs = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * BLOCK + t
    rungs[t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    phase = 1
    while phase < BLOCK:
        ### BEGIN SOLUTION
        if t & phase:
            rungs[t] += rungs[(t & ~(phase - 1)) - 1]
        ### END SOLUTION
        cuda.syncthreads()
        phase <<= 1
    if i < n:
        out[i] = rungs[t]
    if t == BLOCK - 1:
        totals[cuda.blockIdx.x] = rungs[t]


# %% tags=["check"] exercise_id="01.ladder-step"
print(ps.check.tiled(my_ladder_tile, block_size=64,  # the check's tile, whatever BLOCK says
                     budget=ps.check.Budget(barriers=7, accesses_per_step=4, traffic_per_element=2)))

# %% [markdown]
# The package's kernel, for comparison:

# %% tags=["instructor"]
print(inspect.getsource(ps.scans.ladder.ladder_tile_kernel))

# %% tags=["instructor"]
# A wrong answer seen in class, for the stepper: each element adds the first cell of its own run,
# not the last cell of the run before. The check's hint names the call that opens the stepper.
# It is `ps.mutants.wrong_partner_tile`, a tile kernel whose ladder is this one:
print(inspect.getsource(ps.mutants.wrong_partner_ladder))
wrong_ladder_tile = ps.mutants.wrong_partner_tile
print(ps.check.tiled(wrong_ladder_tile, block_size=BLOCK))
ps.viz.step_failure(block_size=BLOCK)

# %% [markdown]
# ### Exercise 01.ladder-max (stretch, 2 points)
#
# **Spec.** The same ladder for the running **maximum** of int32 values: `out[i]` is the
# largest of the tile's elements up to `i`, `totals[b]` the tile's maximum, as
# `np.maximum.accumulate` gives within a tile. Write the load and the phase loop with its
# barriers; the package carries the tile maxima between tiles.
#
# **Invariant.** Before phase $p$, every aligned run of $p$ lanes of `rungs` holds the running
# maximum of its own inputs; after it, every aligned run of $2p$ does. The lanes past `n` take
# part in every phase, so what they hold must never win a `max` against a real element, of any
# value an int32 can take.
#
# **Worked example.** Section 2's ladder on 8 lanes with `max`, for a last tile of $n = 6$
# all-negative elements; `e` is what the load puts in lanes 6 and 7 (yours to choose), and the
# reads ($t \leftarrow r$) are the ladder's:
#
# | phase $p$ | reads ($t \leftarrow r$) | `rungs` after the phase |
# |---|---|---|
# | (load) | | -3 \| -1 \| -4 \| -1 \| -5 \| -9 \| e \| e |
# | 1 | 1←0, 3←2, 5←4, 7←6 | -3 -1 \| -4 -1 \| -5 -5 \| e e |
# | 2 | 2←1, 3←1, 6←5, 7←5 | -3 -1 -1 -1 \| -5 -5 -5 -5 |
# | 4 | 4←3, 5←3, 6←3, 7←3 | -3 -1 -1 -1 -1 -1 -1 -1 |
#
# Lane 7's value is the tile's maximum, -1, only if `e` lost every comparison: with `e` = 0 the
# tile's total would be 0, an element the tile does not have. **Budget:** as for the sum (7
# barriers, 4 accesses per thread between two barriers).
#
# `ps.hint("01.ladder-max")` for hints.

# %% tags=["exercise"] exercise_id="01.ladder-max" points=2 todo="load the tile into rungs so that the lanes past n never win a max, and run the ladder's phases so that every aligned run of 2 * phase lanes holds the running maximum of its inputs"
from numba import cuda, int32

BLOCK = 64
INT32_MIN = np.iinfo(np.int32).min


@cuda.jit
def my_max_tile(x, out, totals, n):
    rungs = cuda.shared.array(BLOCK, int32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * BLOCK + t
    ### BEGIN SOLUTION
    rungs[t] = x[i] if i < n else int32(INT32_MIN)
    cuda.syncthreads()
    phase = 1
    while phase < BLOCK:
        if t & phase:
            rungs[t] = max(rungs[t], rungs[(t & ~(phase - 1)) - 1])
        cuda.syncthreads()
        phase <<= 1
    ### END SOLUTION
    if i < n:
        out[i] = rungs[t]
    if t == BLOCK - 1:
        totals[cuda.blockIdx.x] = rungs[t]


# %% tags=["check"] exercise_id="01.ladder-max"
print(ps.check.tiled(my_max_tile, block_size=64, op="max", dtype=np.int32,
                     budget=ps.check.Budget(barriers=7, accesses_per_step=4, traffic_per_element=2)))

# %% [markdown]
# ## 7. Summary
#
# | | sequential loop | ladder (one tile of $b$) | ladder, $n$ elements |
# | --- | --- | --- | --- |
# | work (combines) | $n - 1$ | $\frac{b}{2}\log_2 b$ | $\frac{n}{2}\log_2 b$ + carries ($\approx n$) |
# | depth (phases) | $n - 1$ | $\log_2 b$ | $\log_2 b$ per level, $\lceil\log_b n\rceil$ levels |
# | global memory | $n$ reads, $n$ writes | | $2n$ reads, $2n$ writes (tile pass + carry pass) |
#
# The tracer counts them for a real run:

# %%
counts = ps.trace.record(ps.scan, np.arange(1, 257, dtype=np.int32), algorithm="ladder", block_size=256).counts()
print(f"n = 256, one tile: {counts['barriers']} barriers per thread, {counts['shared_writes']} shared writes, "
      f"{counts['global_reads']} global reads, {counts['global_writes']} global writes")

# %% [markdown]
# **Questions.**
# 1. The ladder does $\frac{n}{2}\log_2 n$ additions where the loop does $n - 1$. For which
#    $n$ is that more than 10 times as much work? Why can it still be faster on a GPU?
# 2. In every phase half the threads sleep. Which ones, and could the tile be scanned by $n/2$
#    threads instead (what would each thread compute)?
# 3. Why may a phase read `rungs[(t & ~(phase - 1)) - 1]` while other threads write
#    `rungs[t]` without a race? Which barrier could you remove without changing any result on
#    the simulator, and why would that still be a bug on a GPU?
# 4. The carry pass reads and writes every element a second time. How could the tile totals be
#    carried in the same pass (hint: chapter 06 and the single-pass look-back scan)?
