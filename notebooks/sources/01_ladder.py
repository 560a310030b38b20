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
# course: the **ladder** of seed 002 (a Python notebook of partial-sum experiments), first inside
# one thread block, then for arrays of any length.

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import inspect

import numpy as np

print(ps.device_info())

# %% [markdown]
# ## 1. The sequential loop
#
# Seed 002 starts from the obvious loop, and seed 004 (a lab sheet on the Blelloch scan) gives
# its exclusive twin, where $s_i$ sums only the elements *before* $i$. The package keeps both as
# the truth every kernel is tested against:

# %%
print(inspect.getsource(ps.reference.partial_sums))
print(inspect.getsource(ps.reference.exclusive_partial_sums))

# %% [markdown]
# Seed 004's worked example, inclusive and exclusive:

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
# Seed 002 describes it in a comment: *"in the i-th phase the blocks are of size $2^i$ ...
# blocks are $2^i$ aligned ... the predecessor value to a block is ... the array location one
# before the lowest array location in the block."*
#
# At phase $p = 1, 2, 4, \dots$ cut the array into aligned runs of $p$ elements. Every element
# in an odd-numbered run (its index $t$ has bit $p$ set) adds the **last element of the run just
# before it**, at index $(t \mathbin{\&} \lnot(p-1)) - 1$: clear the bits below $p$, step back
# one. The runs then pair up into runs of $2p$.
#
# **Loop invariant.** Before phase $p$, every aligned run of $p$ elements holds the inclusive
# scan of its own inputs. The phase adds to each element of an odd run the total of the even
# run before it, so afterwards every aligned run of $2p$ elements holds its own scan. After
# $\lceil \log_2 n \rceil$ phases the run is the whole array.
#
# A small worked example with $n = 8$: who reads whom at each phase.

# %%
for phase in (1, 2, 4):
    pairs = [(t, (t & ~(phase - 1)) - 1) for t in range(8) if t & phase]
    print(f"phase {phase}: " + "  ".join(f"{t}<-{r}" for t, r in pairs))

# %% [markdown]
# Half the threads work in every phase, and the element they read (the end of the even run) is
# never written in that phase: one phase never reads what it writes, so a barrier between
# phases is all the synchronisation the kernel needs.
#
# Seed 002 printed these pairs for $n = 30$. A picture says more: below, the real ladder kernel
# of the package runs on the simulator under the **tracer**, which records every access to
# shared memory, and `ps.viz.dataflow` draws one row per phase with an arrow from each cell read
# to the cell written (colours are warps).

# %%
seed_trace = ps.trace.record(ps.scan, np.full(30, 2, dtype=np.int32), algorithm="ladder", block_size=32)
_ = ps.viz.dataflow(seed_trace, array="rungs", title="ladder, n = 30 (seed 002's example)")

# %% [markdown]
# ## 3. The kernel
#
# One thread per element; the tile lives in shared memory (`rungs`). Lanes past the end of the
# array hold the operator's identity, so they never change a result. The kernel is built by a
# factory for one operator, element type and direction, so one source serves all 96
# combinations; `where` mirrors the index for suffix scans and `result` shifts by one lane for
# exclusive ones.

# %%
print(inspect.getsource(ps.scans.ladder.ladder_tile_kernel))

# %% [markdown]
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
# launch, and prints one line: PASS, or the first thing that went wrong.

# %%
for op in ps.OPS:
    for inclusive, reverse in ((True, False), (False, False), (True, True)):
        print(ps.check.scan(lambda x: ps.scan(x, op, inclusive=inclusive, reverse=reverse, algorithm="ladder"),
                            op=op, inclusive=inclusive, reverse=reverse, dtype=np.int32))

# %% [markdown]
# ## 6. Exercise: the phase update
#
# Below is the ladder's tile kernel for sums of float32, with the update of one phase missing.
# Write it: a thread whose index has bit `phase` set adds the last element of the preceding
# aligned run. `ps.check.tiled` runs your tile kernel on every tile and carries the totals
# between tiles, exactly as the package does.

# %% tags=["exercise"] todo="in the phase loop, make each thread whose index t has bit `phase` set add rungs[(t & ~(phase - 1)) - 1] to rungs[t]" exercise_id="01.ladder-step"
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
print(ps.check.tiled(my_ladder_tile, block_size=BLOCK))

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
