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
# # 03 · Hillis–Steele and Blelloch: few steps, or little work
#
# The two classic block scans of GPU Gems 3, chapter 39 (Harris, Sengupta and Owens, "Parallel
# Prefix Sum (Scan) with CUDA", [2007](../docs/references.md#harris-sengupta-and-owens-2007)). The paper of Lungu, Petroşanu and Pîrjan (chapter 06) sums them
# up, citing that chapter: *"two versions of the parallel prefix sum function, one with a low
# efficiency regarding the volume of necessary computations and a second improved one, with a
# reduced number of computations."* The first is the **Hillis–Steele** scan: as few steps as possible, but
# $n\log_2 n$ work. The second is **Blelloch's** up-sweep/down-sweep scan, which a German lab
# sheet ([the lab sheet](../docs/references.md#a-lab-sheet-on-prefix-sums)) asks students to write for
# 256 elements: $2n$ work, but twice the steps. This chapter builds both, shows why the obvious
# Hillis–Steele kernel has a race, and measures work and depth with the tracer. Every work cited
# is on the [references page](../docs/references.md).

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import inspect
import math

import numpy as np
from numba import cuda

print(ps.device_info())

# %% [markdown]
# Several cells below run one tile kernel (the package's signature `(x, out, totals, n)`) on
# one block, without the multi-block driver. This helper launches it:


# %%
def one_tile(kernel, x, threads):
    """Run tile kernel ``kernel`` on all of ``x`` (one tile) with one block of ``threads``; return out."""
    out = cuda.device_array(len(x), x.dtype)
    totals = cuda.device_array(1, x.dtype)
    kernel[1, threads](cuda.to_device(x), out, totals, len(x))
    return out.copy_to_host()


# %% [markdown]
# ## 1. Hillis–Steele: the idea
#
# GPU Gems calls it the naive scan (after Hillis and Steele, 1986). At step
# `stride` $= 1, 2, 4, \dots$ every lane $t \ge$ `stride` adds lane $t -$ `stride`.
#
# **Loop invariant.** After the step with stride $s$, lane $t$ holds the sum of the $2s$
# elements ending at $t$ (all of $x_0..x_t$ if $t < 2s$). A step joins two such windows of $s$
# elements that touch: the one ending at $t - s$ and the one ending at $t$. After
# $\log_2 n$ steps the window covers everything before $t$.
#
# A worked example with $n = 8$: the input $3, 1, 4, 1, 5, 9, 2, 6$, who reads whom at each
# step ($t \leftarrow r$: lane $t$ adds lane $r$) and the lanes after it.
#
# | stride $s$ | reads ($t \leftarrow r$) | after the step |
# |---|---|---|
# | (input) | | 3 1 4 1 5 9 2 6 |
# | 1 | 1←0, 2←1, 3←2, 4←3, 5←4, 6←5, 7←6 | 3 4 5 5 6 14 11 8 |
# | 2 | 2←0, 3←1, 4←2, 5←3, 6←4, 7←5 | 3 4 8 9 11 19 17 22 |
# | 4 | 4←0, 5←1, 6←2, 7←3 | 3 4 8 9 14 23 25 31 |
#
# These are the same pairs as the mirrored fold of chapter 02, in the opposite order of strides:
# the fold starts with the longest stride, Hillis–Steele with the shortest. That order matters:
# Hillis–Steele only ever joins *adjacent* windows, so it never reorders the terms and needs an
# associative operator only (the fold also needs a commutative one). Work: step $s$ does
# $n - s$ combines, $n\log_2 n - (n - 1)$ in all, against $n - 1$ for the loop. Depth:
# $\log_2 n$ steps.
#
# ### Exercise 03.hs-numpy (warm-up, 1 point)
#
# **Spec.** `hs_step(cells, stride)` takes a numpy array and returns a **new** array: the lanes
# after one Hillis–Steele step of stride `stride`, all lanes at once, as in the table above;
# `cells` itself is not changed (`hs_scan`, given, passes the caller's `x` to the first step).
# `hs_scan` runs the steps; the check runs its own copy of that loop (so that only `hs_step` is
# yours) on random int32 inputs of every length from 1 to 39 and longer ones up to 2049, against
# `np.cumsum`, checks that `x` is unchanged, and checks single steps too.
#
# **Invariant.** If lane $t$ of `cells` holds the sum of the `stride` elements ending at $t$,
# lane $t$ of the result holds the sum of the $2 \cdot$ `stride` elements ending at $t$ (all of
# $x_0..x_t$ where there are fewer). The step of stride 4 of the table, as a call:
#
# | lane $t$ | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
# |---|---|---|---|---|---|---|---|---|
# | `cells` (stride 2 done) | 3 | 4 | 8 | 9 | 11 | 19 | 17 | 22 |
# | lanes of `cells` that lane $t$ uses | 0 | 1 | 2 | 3 | 4, 0 | 5, 1 | 6, 2 | 7, 3 |
# | `hs_step(cells, 4)` | 3 | 4 | 8 | 9 | 14 | 23 | 25 | 31 |
# | `cells` afterwards | 3 | 4 | 8 | 9 | 11 | 19 | 17 | 22 |
#
# Numpy slices do all lanes at once, without a Python loop over $t$.
#
# `ps.hint("03.hs-numpy")` for hints.

# %% tags=["exercise"] exercise_id="03.hs-numpy" points=1 todo="return a new array holding the lanes after one Hillis-Steele step of stride `stride` (lane t then sums the 2 * stride elements ending at t), all lanes at once; leave cells unchanged"
def hs_step(cells, stride):
    ### BEGIN SOLUTION
    new = cells.copy()
    new[stride:] = cells[stride:] + cells[:-stride]
    return new
    ### END SOLUTION


def hs_scan(x):
    cells, stride = x, 1  # x itself: a step that changed its cells would change the caller's x
    while stride < len(x):
        cells = hs_step(cells, stride)
        stride *= 2
    return cells


# %% tags=["check"] exercise_id="03.hs-numpy"
def hs_scan_by_the_check(x):  # the check's own loop over the strides, each step yours
    cells, stride = x, 1  # x itself: a step that changed its cells would change the caller's x
    while stride < len(x):
        cells = hs_step(cells, stride)
        stride *= 2
    return cells


step_cases = [(np.random.default_rng(n).integers(-1000, 1000, n).astype(np.int32), stride)
              for n in (2, 8, 33, 100) for stride in (1, 2, 4, 32) if stride < n]
print(ps.check.function(hs_step, lambda cells, stride: np.concatenate([cells[:stride], cells[stride:] + cells[:-stride]]),
                        step_cases, name="hs_step, one step"))
print(ps.check.scan(hs_scan_by_the_check, dtype=np.int32, sizes=tuple(range(1, 40)) + (100, 255, 256, 257, 1000, 2049),
                    name="hs_step, every step"))

# %% [markdown]
# ## 2. The kernel: two buffers
#
# In one step lane $t$ reads lane $t - s$, which thread $t - s$ overwrites in the same step.
# The package's kernel avoids the conflict with two shared buffers (**ping-pong**): a step
# reads one buffer and writes the other, so nothing is read and written in one step, and one
# barrier per step suffices.
#
# ### Exercise 03.hs-step (core, 2 points)
#
# **Spec.** `my_hs_tile` runs one block of `BLOCK` = 64 threads per tile of 64 elements
# (`ps.check.tiled` carries the totals) and leaves in `out[i]` the inclusive scan of the tile.
# The shared array `cells` holds the two buffers, `cells[0:64]` and `cells[64:128]`; before a
# step, buffer `src` holds the tile after the steps so far. Write the step: it leaves in the
# *other* buffer the tile after one more step of stride `stride` (the invariant of section 1:
# lane $t$ then sums the $2 \cdot$ `stride` elements ending at $t$), without writing buffer
# `src`. On 8 lanes, the step of stride 2 from buffer 1 (the step of stride 1 of section 1's
# example is done) reads and writes:
#
# | lane $t$ | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
# |---|---|---|---|---|---|---|---|---|
# | buffer 1 before the step | 3 | 4 | 5 | 5 | 6 | 14 | 11 | 8 |
# | lanes of buffer 1 that lane $t$ reads | 0 | 1 | 2, 0 | 3, 1 | 4, 2 | 5, 3 | 6, 4 | 7, 5 |
# | buffer 0 after the step | 3 | 4 | 8 | 9 | 11 | 19 | 17 | 22 |
#
# Buffer 1 is the same after the step, and every lane of buffer 0 is written, the first two too:
# the next step reads all of buffer 0. **Budget:** 7 barriers per thread (the load's and one per step), at most 4 memory
# accesses per thread between two barriers.
#
# `ps.hint("03.hs-step")` for hints.

# %% tags=["exercise"] exercise_id="03.hs-step" points=2 todo="write one Hillis-Steele step of stride `stride` from buffer src into the other buffer: afterwards every lane t of the other buffer holds the sum of the 2 * stride elements ending at t (all of them if t < 2 * stride); buffer src is only read"
from numba import cuda, float32

BLOCK = 64
CELLS = 2 * BLOCK  # two buffers; a shared array's shape must be a constant the GPU compiler sees


@cuda.jit
def my_hs_tile(x, out, totals, n):
    cells = cuda.shared.array(CELLS, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * BLOCK + t
    cells[t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    src = 0
    stride = 1
    while stride < BLOCK:
        ### BEGIN SOLUTION
        if t >= stride:
            cells[(1 - src) * BLOCK + t] = cells[src * BLOCK + t] + cells[src * BLOCK + t - stride]
        else:
            cells[(1 - src) * BLOCK + t] = cells[src * BLOCK + t]
        ### END SOLUTION
        cuda.syncthreads()
        src = 1 - src
        stride <<= 1
    if i < n:
        out[i] = cells[src * BLOCK + t]
    if t == BLOCK - 1:
        totals[cuda.blockIdx.x] = cells[src * BLOCK + t]


# %% tags=["check"] exercise_id="03.hs-step"
print(ps.check.tiled(my_hs_tile, block_size=64,  # the check's tile, whatever BLOCK says
                     budget=ps.check.Budget(barriers=7, accesses_per_step=4, traffic_per_element=2),
                     reference="hillis_steele"))  # a failure is stepped beside the package's hillis_steele tile

# %% [markdown]
# The package's kernel, for comparison (a $2 \times$ `lanes` array `buffers`, a factory for
# every operator and direction):

# %% tags=["instructor"]
print(inspect.getsource(ps.scans.hillis_steele.hillis_steele_tile_kernel))

# %% [markdown]
# The traced data flow of a 16-lane tile. The tracer sees the $2 \times 16$ array `buffers` as
# 32 cells: 0–15 are buffer 0, 16–31 buffer 1, and the steps zig-zag between them. Every lane
# writes in every step (an arrow from its own old value, and for $t \ge s$ one from lane
# $t - s$).

# %%
hs_kernel_16 = ps.scans.hillis_steele.hillis_steele_tile_kernel("add", np.int32, True, False, 16)
hs_trace = ps.trace.record(one_tile, hs_kernel_16, np.arange(1, 17, dtype=np.int32), 16)
ax = ps.viz.dataflow(hs_trace, array="buffers", title="Hillis-Steele, 16 lanes: buffers[0] = cells 0-15, buffers[1] = cells 16-31")
_ = ax.set_yticklabels(["load"] + [f"stride {s}" for s in (1, 2, 4, 8)])
print("result:", hs_trace.result)

# %% [markdown]
# ## 3. The race in one buffer
#
# GPU Gems writes the naive scan first as pseudo-code on one array, as if every element had a
# processor of its own, then notes that this fails once the threads of a block run as warps one
# after another, and double-buffers. The package keeps the one-array version,
# `hillis_steele_in_place_tile_kernel`, as a real kernel for this lesson (it never uses it):

# %%
print(inspect.getsource(ps.lessons.hillis_steele_in_place_tile_kernel))

# %% [markdown]
# Thread $t$ reads `cells[t - stride]` in the same barrier phase in which thread $t - stride$
# writes it. The tracer finds every such pair on a tile of 32 ones:

# %%
racy_kernel = ps.lessons.hillis_steele_in_place_tile_kernel("add", np.int32, True, False, 32)
race_trace = ps.trace.record(one_tile, racy_kernel, np.ones(32, dtype=np.int32), 32)
races = race_trace.races()
print(f"{len(races)} races; the first: {races[0]}")
per_step = {phase: sum(race.phase == phase for race in races) for phase in range(1, 6)}
print("cells raced on, per step:", ", ".join(f"stride {1 << (phase - 1)}: {k}" for phase, k in per_step.items()))
print("in-place result on the simulator:", race_trace.result.tolist())
print("correct result:                  ", ps.reference.scan(np.ones(32, dtype=np.int32)).tolist())
# the stepper opens at the first phase with a race (red cells); previous/next step through the others
ps.viz.step(race_trace)

# %% [markdown]
# At stride 16 there is no race: the readers ($t \ge 16$) read cells 0–15, whose threads do not
# write at that step.
#
# The classroom simulator runs the threads of a block one after another between barriers, so
# here thread $t$ always sees thread $t - s$'s *new* value, and the result is wrong every time.
# On a GPU the outcome depends on timing: the 32 threads of a warp usually execute the load
# before any of them stores, so a tile of one warp may well come out right, while across warps
# it depends on which warp runs first. Nothing guarantees either. A bug that gives right
# answers most of the time is the worst kind; the tracer finds it without luck, and
# `ps.check` reports it as a race.
#
# ### Exercise 03.hs-two-barriers (stretch, 2 points)
#
# **Spec.** Keep **one** buffer and make it correct: `my_hs_one_buffer_tile` (one block of 64
# threads per tile, totals carried by the check) leaves in `out[i]` the inclusive scan of the
# tile, with `cells` of 64 elements only. Write the whole stride loop, strides 1, 2, 4, ... 32,
# such that no thread reads a cell that another thread writes in the same barrier phase (the
# tracer checks every access).
#
# **Invariant** (section 1): after the step of stride $s$, lane $t$ holds the sum of the $2s$
# elements ending at $t$; the values after each step are section 1's table, now all in one
# buffer.
#
# **The accesses.** In the step of stride 2 on 8 lanes, every cell below 6 is needed twice: by
# its own thread, and by the thread 2 lanes up, which must read its value after stride 1, not
# after stride 2.
#
# | cell | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
# |---|---|---|---|---|---|---|---|---|
# | after stride 1 | 3 | 4 | 5 | 5 | 6 | 14 | 11 | 8 |
# | read by threads | 0, 2 | 1, 3 | 2, 4 | 3, 5 | 4, 6 | 5, 7 | 6 | 7 |
# | rewritten by thread | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
# | after stride 2 | 3 | 4 | 8 | 9 | 11 | 19 | 17 | 22 |
#
# Every cell's reads by other threads must fall in a barrier phase before its write, and the
# next step's reads in a barrier phase after it. **Budget:** 13 barriers per thread (the load's
# and two per step), at most 4 memory accesses per thread between two barriers.
#
# `ps.hint("03.hs-two-barriers")` for hints.

# %% tags=["exercise"] exercise_id="03.hs-two-barriers" points=2 todo="write the Hillis-Steele stride loop on the single buffer cells so that after stride s lane t sums the 2s elements ending at t, with no read and write of one cell by two threads between two barriers"
from numba import cuda, float32

BLOCK = 64


@cuda.jit
def my_hs_one_buffer_tile(x, out, totals, n):
    cells = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * BLOCK + t
    cells[t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    ### BEGIN SOLUTION
    stride = 1
    while stride < BLOCK:
        value = cells[t]
        if t >= stride:
            value += cells[t - stride]
        cuda.syncthreads()
        cells[t] = value
        cuda.syncthreads()
        stride <<= 1
    ### END SOLUTION
    if i < n:
        out[i] = cells[t]
    if t == BLOCK - 1:
        totals[cuda.blockIdx.x] = cells[t]


# %% tags=["check"] exercise_id="03.hs-two-barriers"
print(ps.check.tiled(my_hs_one_buffer_tile, block_size=64,
                     budget=ps.check.Budget(barriers=13, accesses_per_step=4, traffic_per_element=2),
                     reference="hillis_steele"))  # a failure is stepped beside the package's hillis_steele tile

# %% [markdown]
# ## 4. Blelloch: up-sweep and down-sweep
#
# The lab sheet defines the exclusive prefix sums (*"Summe aller vorherigen Elemente der Folge"*, the
# sum of all previous elements) and then, following GPU Gems 39.2.2, computes them for
# $n = 2^k$ in two phases on one array.
#
# **Up-sweep** (*"von unten nach oben"*, bottom to top): build a binary tree of partial sums in
# place. For $d = 0, \dots, k-1$, in parallel for $i = 2^{d+1} - 1, 2 \cdot 2^{d+1} - 1, \dots$:
# $x[i] \mathrel{+}= x[i - 2^d]$. Afterwards $x[i]$ at level $d$ is the sum of the $2^{d+1}$
# elements ending at $i$, and $x[n - 1]$ is the total.
#
# **Down-sweep** (*"von oben nach unten"*): set the root $x[n-1] = 0$, then for
# $d = k-1, \dots, 0$ visit the same nodes $i$ as the up-sweep did at level $d$; each hands
# values down to its two children, the left one at $i - 2^d$ and the right one at $i$ itself.
# (The sheet's pseudo-code for the down-sweep survives only as a mangled LaTeX array.)
#
# **Invariant of the down-sweep.** When a node at level $d$ receives its value, that value is the
# sum of all elements *before its subtree*. The root's subtree is everything: 0 before it. A left
# child's subtree starts where its parent's does, so it gets the parent's value; the right
# child's subtree starts after the left child's, so it gets the parent's value plus the left
# subtree's total, which the up-sweep left in the left child. At the leaves, "everything before
# the subtree" is everything before the element: the exclusive scan.
#
# The lab sheet's example (its first eight numbers), level by level: the cells each level writes
# and the array after it.
#
# | level | cells written | after the level |
# |---|---|---|
# | (input) | | 3 2 1 2 1 4 3 2 |
# | up-sweep $d = 0$ | 1, 3, 5, 7 | 3 5 1 3 1 5 3 5 |
# | up-sweep $d = 1$ | 3, 7 | 3 5 1 8 1 5 3 10 |
# | up-sweep $d = 2$ | 7 | 3 5 1 8 1 5 3 18 |
# | clear the root | 7 | 3 5 1 8 1 5 3 0 |
# | down-sweep $d = 2$ | 3, 7 | 3 5 1 0 1 5 3 8 |
# | down-sweep $d = 1$ | 1, 3, 5, 7 | 3 0 1 5 1 8 3 13 |
# | down-sweep $d = 0$ | 0, 1, ..., 7 | 0 3 5 6 8 9 13 16 |
#
# The last row is the lab sheet's exclusive sums of the same numbers:

# %%
print("lab sheet:", ps.reference.exclusive_partial_sums([3, 2, 1, 2, 1, 4, 3, 2]))

# %% [markdown]
# ## 5. The lab sheet's exercise: 256 elements, one block of 256 threads
#
# The lab sheet asks for exactly this: copy the input to local (in CUDA: shared) memory, run the
# two sweeps with one thread per index $i$ (a thread works at level $d$ when the sheet's loop
# would visit its $i$), synchronise after the copy and after every level of both sweeps, copy
# the result out. The package's version is `blelloch_256_kernel` (section 7 writes its
# down-sweep; its source follows the check there). It clears the root without a barrier:
# thread 255 clears it, and the first down-sweep level is done by thread 255 alone. The sheet's
# worked example (padded with zeros to 256) and a check on random inputs:

# %%
seed_example = np.zeros(256, dtype=np.int32)
seed_example[:10] = [3, 2, 1, 2, 1, 4, 3, 2, 4, 3]
print("blelloch_256:", ps.scans.blelloch.blelloch_256(seed_example)[:10].tolist())
print("lab sheet:   ", ps.reference.exclusive_partial_sums(seed_example[:10].tolist()))
for dtype in (np.int32, np.float32):
    print(ps.check.scan(ps.scans.blelloch.blelloch_256, inclusive=False, dtype=dtype, sizes=(256,), name=f"blelloch_256 {np.dtype(dtype).name}"))

# %% [markdown]
# The data flow of that kernel on 256 elements: eight up-sweep levels build the tree (each
# level half as many arrows, twice as long), the root is cleared, and eight down-sweep levels
# take it apart again. The tracer sees which cells a thread reads and writes, not which value
# goes where, so `dataflow` draws an arrow from every cell a thread read since its previous
# write to every cell it writes: all the cells that may have influenced the new value. In a
# down-sweep step the thread reads the right child `i` and the left child `i - 2^d` and writes
# both, so each of the two gets an arrow from both. That is one arrow more than the values
# take: the right child does get its own old value plus the left child's, but the left child
# gets only the parent's old value; its arrow from its own old
# value marks a read that did not feed it.

# %%
blelloch_trace = ps.trace.record(ps.scans.blelloch.blelloch_256, np.ones(256, dtype=np.int32))
ax = ps.viz.dataflow(blelloch_trace, array="tree", max_cells=256, title="blelloch_256 (the lab sheet's): up-sweep, clear the root, down-sweep")
ax.set_yticklabels(["load"] + [f"up d={d}" for d in range(8)] + ["clear, down d=7"] + [f"down d={d}" for d in range(6, -1, -1)])
# the two sweeps step by step (scroll sideways along the 256 cells); the picture above where there is no kernel
ps.viz.step(blelloch_trace, arrays=["tree"], max_cells=256, fallback=ax)

# %% [markdown]
# The picture also shows the price of one thread per element: at the top of the tree only a
# handful of the 256 threads work, and each level still costs a barrier for all of them.
# Chapter 04 gives each thread two elements (128 threads for 256 elements) and packs the
# working threads together.
#
# ## 6. Work and depth, counted
#
# The tracer counts every call of the package's operator (`combines`) and the barriers each
# thread passes. The table runs the Hillis–Steele tile kernel and the package's Blelloch tile
# kernel (exclusive, two elements per thread, chapter 04's layout, no padding) on one tile of
# $n$ elements. (`blelloch_256` adds with `+=` directly, not through the package's operator, so
# the tracer does not count its additions.)

# %%
print(f"{'n':>4} | {'HS combines':>11} {'n log n - (n-1)':>15} | {'Blelloch combines':>17} {'2(n-1)':>7} | "
      f"{'HS barriers':>11} {'Blelloch barriers':>17}")
for n in (32, 64, 128, 256):
    x = np.ones(n, dtype=np.int32)
    hs = ps.trace.record(one_tile, ps.scans.hillis_steele.hillis_steele_tile_kernel("add", np.int32, True, False, n), x, n)
    bl = ps.trace.record(one_tile, ps.scans.blelloch.blelloch_tile_kernel("add", np.int32, False, False, n // 2, False), x, n // 2)
    assert hs.result[-1] == n and bl.result[-1] == n - 1  # inclusive and exclusive scans of ones
    h, b = hs.counts(), bl.counts()
    k = int(math.log2(n))
    print(f"{n:>4} | {h['combines']:>11} {n * k - (n - 1):>15} | {b['combines']:>17} {2 * (n - 1):>7} | "
          f"{h['barriers']:>11} {b['barriers']:>17}")

# %% [markdown]
# Hillis–Steele's work grows like $n\log_2 n$ (3.5 times Blelloch's at $n = 256$), Blelloch's
# like $2n$: the up-sweep and the down-sweep each combine $n - 1$ times. The depth goes the
# other way: Hillis–Steele waits at $1 + \log_2 n$ barriers (after the load, after every step),
# Blelloch at $2 + 2\log_2 n$ (after the load, after every level of both sweeps, after clearing
# the root). Blelloch's exclusive result
# becomes inclusive with $n$ more combines (one per element, no barrier).
#
# Within one block the extra work of Hillis–Steele can cost little (its threads would otherwise
# sit idle at the barriers), and fewer barriers help. Over a whole array, work
# is what scales: which is why libraries such as CUB scan inside a warp the Hillis–Steele way and
# combine warps and blocks work-efficiently.
#
# **Brent's theorem** makes this precise. A computation of work $W$ and depth $D$ runs on $p$
# processors in time
#
# $$T_p \le \frac{W}{p} + D$$
#
# (Brent 1974): run its $D$ levels one after another, each level of $w_i$ operations in
# $\lceil w_i / p \rceil \le w_i / p + 1$ steps, and add up. Two regimes follow:
#
# - **$p \ge W / D$, the threads cover the work** (one tile in one block, a warp): the depth term
#   dominates and the network with fewer levels wins, whatever its extra work. Hillis–Steele's
#   $n \log_2 n$ combines cost little when $n$ threads would otherwise wait.
# - **$p \ll n$** (an array of $2^{26}$ elements on a GPU that runs some $10^5$ threads at once):
#   $W / p$ dominates and every extra combine costs time, so the work-efficient scan wins.
#
# On a GPU a third term hides inside $W / p$: each element must be read and written in global
# memory, at a fixed number of bytes per second. When that traffic, the same for every scan that
# reads and writes each element once, takes longer than the combines, neither the work nor the
# depth sets the time, and work efficiency hardly matters (chapter 04 measures this). Chapters 04,
# 05 and 07 use the theorem to choose: a tile size, the $L$ of the $k$-step scan, PCR or CR.
#
# ## 7. Exercise: the down-sweep
#
# ### Exercise 03.blelloch-down-sweep (core, 2 points)
#
# **Spec.** `my_blelloch_tile` is Blelloch's scan of a tile of 64 elements, one thread per
# element as in the lab sheet, as a tile kernel (one block of 64 threads per tile; the check carries
# the totals): the up-sweep is given, the tile's total goes to `totals` and the root is cleared.
# Write one level `d` of the down-sweep so that its invariant holds: when a node at level `d`
# receives its value, that value is the sum of all elements before its subtree (section 4).
# The kernel then adds each thread's own element, so `out` holds the inclusive scan. Section 4's
# table shows the levels on 8 elements: at level `d` only the cells of the nodes visited and of
# their left children change, and every value written is one the invariant asks for.
# **Budget:** 14 barriers per thread (the load's, one per level of each sweep, the root's), at
# most 5 memory accesses per thread between two barriers.
#
# `ps.hint("03.blelloch-down-sweep")` for hints.

# %% tags=["exercise"] exercise_id="03.blelloch-down-sweep" points=2 todo="write level d of the down-sweep: afterwards both children of every node the up-sweep combined at level d hold the sum of all elements before their subtrees"
from numba import cuda, float32

BLOCK = 64
LEVELS = 6  # log2(BLOCK)


@cuda.jit
def my_blelloch_tile(x, out, totals, n):
    tree = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * BLOCK + t
    element = x[i] if i < n else float32(0)
    tree[t] = element
    cuda.syncthreads()
    for d in range(LEVELS):  # up-sweep
        if (t + 1) % (2 << d) == 0:
            tree[t] += tree[t - (1 << d)]
        cuda.syncthreads()
    if t == BLOCK - 1:
        totals[cuda.blockIdx.x] = tree[t]
        tree[t] = float32(0)
    cuda.syncthreads()
    for d in range(LEVELS - 1, -1, -1):  # down-sweep
        ### BEGIN SOLUTION
        if (t + 1) % (2 << d) == 0:
            parent = tree[t]
            tree[t] += tree[t - (1 << d)]
            tree[t - (1 << d)] = parent
        ### END SOLUTION
        cuda.syncthreads()
    if i < n:
        out[i] = tree[t] + element  # exclusive + own element = inclusive


# %% tags=["check"] exercise_id="03.blelloch-down-sweep"
print(ps.check.tiled(my_blelloch_tile, block_size=64,
                     budget=ps.check.Budget(barriers=14, accesses_per_step=5, traffic_per_element=2),
                     reference="blelloch"))  # a failure is stepped beside the package's blelloch tile

# %% [markdown]
# The package's `blelloch_256_kernel` of section 5, for comparison:

# %% tags=["instructor"]
print(inspect.getsource(ps.scans.blelloch.blelloch_256_kernel))

# %% [markdown]
# ## 8. Names from the literature: a taxonomy of prefix networks
#
# Hardware designers met the same problem in adders (the carries of a binary sum are a scan)
# and named the networks. A scan of $n$ elements as a **prefix network** is judged by its
# **depth** (the longest chain of combines), its **work** (how many combines) and its
# **fan-out** (how many combines one value feeds at once; on a GPU, how many threads read one
# cell in one step). No network is best at all three; the classic ones, for $n = 2^k$:
#
# - **Sklansky** (1960): depth $\log_2 n$, work $\frac{n}{2}\log_2 n$, fan-out $n/2$ in the
#   last step. That is chapter 01's **ladder**: the end of each even run feeds the whole odd run.
# - **Kogge–Stone** (1973): depth $\log_2 n$, work $n\log_2 n - n + 1$, fan-out 2. That is
#   **Hillis–Steele** (section 1), and the warp scan with shuffles of chapter 06. Chapter 02's
#   **fold** has the same pairs with the strides in reverse order (and so needs a commutative
#   operator).
# - **Brent–Kung** (1982): depth $2\log_2 n - 1$, work $2n - \log_2 n - 2$, fan-out 2: a
#   reduction tree and its mirror. **Blelloch**'s up-sweep and down-sweep (section 4) are its
#   exclusive, in-place form (one level more, and the root cleared).
# - **Ladner–Fischer** (1980): a family between Sklansky and Brent–Kung: one Brent–Kung level
#   first (pairs), Sklansky on the $n/2$ pair sums, one level to finish: depth $\log_2 n + 1$,
#   work $\frac{n}{4}\log_2\frac{n}{2} + n - 1$, fan-out $n/4$.
# - **Han–Carlson** (1987): the same frame with Kogge–Stone inside: depth $\log_2 n + 1$, work
#   $\frac{n}{2}\log_2 n$, fan-out 2.
#
# The figure places the package's tile kernels on one tile of 64 as the tracer counts them
# (work: calls of the operator; depth: barriers per thread, the load's included; fan-out: most
# threads reading one shared cell in one step), and the two networks the package does not
# implement by their formulas (one barrier added for the load). The tracer sees the Blelloch
# kernel's fan-out as 1: each cell is read by one thread per step, the thread that owns the node.

# %%
taxonomy_n = 64
ones_n = np.ones(taxonomy_n, dtype=np.int32)
traced = {
    "ladder = Sklansky": (ps.scans.ladder.ladder_tile_kernel("add", np.int32, True, False, taxonomy_n), taxonomy_n),
    "Hillis-Steele = Kogge-Stone": (ps.scans.hillis_steele.hillis_steele_tile_kernel("add", np.int32, True, False, taxonomy_n), taxonomy_n),
    "folding (Kogge-Stone pairs, reversed)": (ps.scans.folding.folding_tile_kernel("add", np.int32, True, False, taxonomy_n), taxonomy_n),
    "Blelloch = Brent-Kung (exclusive)": (ps.scans.blelloch.blelloch_tile_kernel("add", np.int32, False, False, taxonomy_n // 2, False), taxonomy_n // 2),
}
networks = {}
for label, (kernel, threads) in traced.items():
    run = ps.trace.record(one_tile, kernel, ones_n, threads)
    counts = run.counts()
    networks[label] = {"depth": counts["barriers"], "work": counts["combines"], "fan_out": run.fan_out(), "measured": True}
k = int(math.log2(taxonomy_n))
networks["Ladner-Fischer (formula)"] = {"depth": k + 2, "work": taxonomy_n // 4 * (k - 1) + taxonomy_n - 1,
                                        "fan_out": taxonomy_n // 4, "measured": False}
networks["Han-Carlson (formula)"] = {"depth": k + 2, "work": taxonomy_n // 2 * k, "fan_out": 2, "measured": False}
for label, point in networks.items():
    print(f"{label:<40} depth {point['depth']:>3}  work {point['work']:>4}  fan-out {point['fan_out']:>3}")
_ = ps.viz.taxonomy(networks, title=f"prefix networks on one tile of {taxonomy_n}")

# %% [markdown]
# ## 9. Summary
#
# | one tile of $n$ | sequential loop | Hillis–Steele | Blelloch |
# | --- | --- | --- | --- |
# | work (combines) | $n - 1$ | $n\log_2 n - (n - 1)$ | $2(n - 1)$ (+ $n$ for inclusive) |
# | depth (barriers) | $n - 1$ steps | $\log_2 n$ steps, $1 + \log_2 n$ barriers | $2\log_2 n$ levels, $2 + 2\log_2 n$ barriers |
# | threads | 1 | $n$ | $n/2$ (two elements each; the lab sheet's version: $n$) |
# | shared memory | | $2n$ cells (two buffers) | $n$ cells (in place) |
# | global memory | $n$ reads, $n$ writes | $n$ reads, $n$ writes | $n$ reads, $n$ writes |
# | operator | associative | associative | associative |
#
# **Questions.**
# 1. In the in-place Hillis–Steele kernel, why is there no race at the last step (stride 16 in
#    a tile of 32)? Could you keep one buffer and add a second barrier instead (read into a
#    register, wait, write, wait), as the fold of chapter 02 does? What does each choice cost?
# 2. At $n = 2^{20}$, how many combines do Hillis–Steele and Blelloch do on one tile of that
#    size, and how many barriers?
# 3. The lab sheet's down-sweep swaps through `tmp`. What goes wrong if a thread writes
#    `x[i - 2^d] = x[i]` before computing `x[i] += x[i - 2^d]`?
# 4. Why may the root be cleared without a barrier before the first down-sweep level in
#    `blelloch_256_kernel`? Which thread would have to clear it for this to break?
# 5. In `blelloch_256_kernel`, how many of the 256 threads work at up-sweep level $d$, and in
#    how many different warps are they? What would you change so that the working threads sit
#    in as few warps as possible?
