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
# # 05 · The L-ary (k-step) partial-sum scheme
#
# The lecture notes *"Calculation of partial sums in parallel"*, a chapter of an online book on
# GPU programming ([the notes](../docs/references.md#partial-sums-in-parallel-lecture-notes)), describe
# a scan built from one integer parameter: add the inputs up in runs of that length, then the
# run totals in runs of it, and so on until one thread can finish the job; then walk back down,
# correcting every level with the totals of the level above. This chapter rebuilds that scheme,
# draws the notes' lost figure from a trace of the real kernels, measures how the parameter
# trades the number of steps against the serial work of each thread, and compares a kernel
# launch per step with a barrier per step, on the simulator and on a GPU. Every work cited is on
# the [references page](../docs/references.md).

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import collections
import inspect

import numpy as np
from numba import cuda, float32

from prefixsum.cli import results
from prefixsum.scans import kstep

print(ps.device_info())

# %% [markdown]
# ## 1. What survives of the notes, and what is reconstructed
#
# The copy of the notes this workbook was built from lost every formula and every symbol; only
# the prose around them survives, with holes where the symbols stood. As it reads:
#
# > *"The presented procedure has -proportional processing time under assumption of infinite
# > parallel processing capability. We proceed as follows. Choose an integer : ."*
#
# > *"For step 0 we calculate (on a single thread): Thus, Note that the final contains the
# > final partial sum. Hence, there is no need to increment this position anymore. This fact is
# > reflected in slightly different indexing for the following steps."*
#
# > *"For step 1 we calculate (on threads, is the thread index): We adopt the convention The index
# > varies from 0 to except for the boundary where cannot exceed or be equal to (because indexes
# > of are in the same range as indexes of ): Hence, the stated range for follows."*
#
# The figure is gone; its caption reads *"Summation in parallel for and ."* No name of a
# variable survives. What the words do fix is the skeleton: an array of numbers ("integers or
# doubles"), one chosen integer, reduction steps 0, 1, ..., a "last step", then a first
# correction step "on a single thread", further correction steps "on threads", "intermediate
# data" of two kinds placed in memory, and a summary of three operations performed one after
# the other. **Everything else below is the workbook's reconstruction**: the names (inputs
# $x_0, \dots, x_{K_0-1}$, the integer $1 < L \ll K_0$, level sizes $K_s$, reduction data $z^s$,
# correction data $u^s$, correction step $s$ on at most $L^s$ threads), every formula, and the
# figure's example, $L = 3$ and $K_0 = 35$, chosen to fill the caption's two blanks. The
# reconstruction is consistent with every surviving sentence and checked against a sequential
# scan; the package implements it in `prefixsum.scans.kstep`.
#
# ## 2. The levels
#
# Each level is $L$ times shorter than the one below, rounded up: $K_{s+1} = \lceil K_s / L
# \rceil$. The scheme reduces until a level fits one thread, at the step
# $s^* = \min\{s \ge 0 : K_{s+1} \le L\}$. All levels live in **one buffer**: $x$ at offset 0,
# then $z^0, z^1, \dots, z^{s^*}$ one after the other ($z^s$ starts at
# $P_{s+1} = K_0 + \dots + K_s$). The sizes come from one short loop (it runs on the host and,
# compiled, inside the one-block kernel); `kstep.levels` adds the offsets.
#
# ### Exercise 05.levels (warm-up, 1 point)
#
# **Spec.** `my_level_sizes(n, L)` returns the list $[K_0, K_1, \dots, K_{s^*+1}]$ for
# $n \ge 1$ inputs and arity $L \ge 2$: $K_0 = n$, $K_{s+1} = \lceil K_s / L \rceil$, and
# the list stops at the first $K_{s+1} \le L$ (it always holds $K_1$, even when $n \le L$).
# For the figure's example, `my_level_sizes(35, 3)` is `[35, 12, 4, 2]`. The check compares it
# with `kstep.levels(n, L).sizes` for every $n$ up to 100 and $L$ from 2 to 6, and a few large $n$.
#
# `ps.hint("05.levels")` for hints.

# %% tags=["exercise"] exercise_id="05.levels" points=1 todo="return [K_0, ..., K_{s*+1}]: K_0 = n, each next level L times shorter rounded up, stopping at the first level of at most L elements (never before K_1)"
from prefixsum.scans import kstep


def my_level_sizes(n, L):
    ### BEGIN SOLUTION
    sizes = [n, (n + L - 1) // L]
    while sizes[-1] > L:
        sizes.append((sizes[-1] + L - 1) // L)
    return sizes
    ### END SOLUTION


# %% tags=["check"] exercise_id="05.levels"
cases = [(n, L) for L in range(2, 7) for n in range(1, 101)] + [(10 ** 6, 2), (10 ** 6 + 1, 7), (2 ** 26, 64)]
print(ps.check.function(my_level_sizes, lambda n, L: list(kstep.levels(n, L).sizes), cases, name="my_level_sizes"))

# %% [markdown]
# The package's loop, for comparison (it writes into an array so that it also compiles for the
# one-block kernel):

# %% tags=["instructor"]
print(inspect.getsource(kstep._level_sizes))

# %%
seed = kstep.levels(35, 3)
print(f"L = 3, K0 = 35: sizes K = {seed.sizes}, offsets P = {seed.offsets}, s* = {seed.top}, buffer length {seed.length}")
for part, (start, size) in enumerate(zip(seed.offsets, seed.sizes)):
    print(f"  {'x' if part == 0 else f'z^{part - 1}':>4} at {start:2d}-{start + size - 1:2d}")

# %% [markdown]
# ## 3. Reduction: steps $s = 0, \dots, s^*$
#
# With $z^{-1} = x$, thread $i < K_{s+1}$ of step $s$ adds up run $i$ of level $s$:
#
# $$z^s_i = \sum_{t=0}^{m-1} z^{s-1}_{Li+t}, \qquad m = \min(L,\ K_s - Li),$$
#
# so $z^s_i$ is the sum of $L^{s+1}$ consecutive inputs (the last run may be short), and
# $z^s_0$ is already a partial sum. In the package, one thread's share of a step is a device
# function; the kernel only finds the thread's run.
#
# ### Exercise 05.reduce (core, 2 points)
#
# **Spec.** `my_reduce(buf, source, target, size)` is the kernel of reduction step $s$ for sums
# of float32 with $L = 3$: the level below has `size` elements at offset `source` of `buf`, cut
# into runs of $L$ consecutive elements (the last run may be shorter), and the next level, one
# element per run, starts at offset `target`. Thread `i = cuda.grid(1)` owns run $i$ and writes
# its total $z^s_i$ (section 3) to element $i$ of the next level; threads without a run do
# nothing. `reduce_scan` runs the whole scheme with the package's kernels and yours in every
# reduction step, and the check compares it with `np.cumsum` on 1 to 2049 elements.
#
# **Worked example.** A level of `size` = 8 elements, $3, 1, 4, 1, 5, 9, 2, 6$, at offset
# `source` = 0, with `target` = 8; the launch has 64 threads:
#
# | thread $i$ | reads `buf` at | writes `buf` at | value written |
# |---|---|---|---|
# | 0 | 0, 1, 2 | 8 | 3 + 1 + 4 = 8 |
# | 1 | 3, 4, 5 | 9 | 1 + 5 + 9 = 15 |
# | 2 | 6, 7 (a short run) | 10 | 2 + 6 = 8 |
# | 3 to 63 | nothing | nothing | |
#
# No thread reads past the level (cell 8 is already the next level) or writes into it.
# **Budget:** at most $L + 1 = 4$ memory accesses per thread in `my_reduce` (the run's reads
# and one write).
#
# `ps.hint("05.reduce")` for hints.

# %% tags=["exercise"] exercise_id="05.reduce" points=2 todo="in my_reduce, the thread of each run of L elements of the level at offset source (the last run cut short at size) writes the run's total to its element of the level at offset target; threads without a run do nothing"
from numba import cuda, float32

from prefixsum.scans import kstep

L = 3


@cuda.jit
def my_reduce(buf, source, target, size):
    i = cuda.grid(1)
    ### BEGIN SOLUTION
    if L * i < size:
        acc = buf[source + L * i]
        for k in range(L * i + 1, min(L * i + L, size)):
            acc += buf[source + k]
        buf[target + i] = acc
    ### END SOLUTION


def launch(kernel, threads, *args):
    kernel[(threads + 63) // 64, 64](*args)


def reduce_scan(x):
    n, dtype = len(x), np.dtype(np.float32)
    sizes, offsets = lv = kstep.levels(n, L)
    buf, out = cuda.device_array(lv.length, dtype), cuda.device_array(n, dtype)
    launch(kstep.load_kernel(False), n, cuda.to_device(x), buf, n)
    for s in range(lv.top + 1):
        launch(my_reduce, sizes[s + 1], buf, offsets[s], offsets[s + 1], sizes[s])
    kstep.top_kernel("add", dtype)[1, 1](buf, offsets[-1], sizes[-1])
    for level in range(lv.top, -1, -1):
        launch(kstep.correct_kernel("add", dtype, L), sizes[level + 1], buf, offsets[level + 1], offsets[level], sizes[level])
    launch(kstep.store_kernel("add", dtype, True, False), n, buf, out, n)
    return out


# %% tags=["check"] exercise_id="05.reduce"
def reduce_scan_by_the_check(x):  # the check's own scan with L = 3, its arrays and 64 threads a block; your my_reduce
    n, dtype = len(x), np.dtype(np.float32)
    sizes, offsets = lv = kstep.levels(n, 3)
    buf, out = cuda.device_array(lv.length, dtype), cuda.device_array(n, dtype)
    kstep.load_kernel(False)[(n + 63) // 64, 64](cuda.to_device(x), buf, n)
    for s in range(lv.top + 1):
        my_reduce[(sizes[s + 1] + 63) // 64, 64](buf, offsets[s], offsets[s + 1], sizes[s])
    kstep.top_kernel("add", dtype)[1, 1](buf, offsets[-1], sizes[-1])
    for level in range(lv.top, -1, -1):
        kstep.correct_kernel("add", dtype, 3)[(sizes[level + 1] + 63) // 64, 64](buf, offsets[level + 1], offsets[level], sizes[level])
    kstep.store_kernel("add", dtype, True, False)[(n + 63) // 64, 64](buf, out, n)
    return out


print(ps.check.scan(reduce_scan_by_the_check, name="my_reduce", budget=ps.check.Budget(accesses_per_step=4, kernels=("my_reduce",))))

# %% [markdown]
# The package's version, a device function and the kernel that calls it:

# %% tags=["instructor"]
print(inspect.getsource(kstep._reduce_run))
print(inspect.getsource(kstep.reduce_kernel))

# %% [markdown]
# ## 4. Correction: step 0 on one thread, steps $1, \dots, s^*+1$ on many
#
# **Step 0** scans the at most $L$ values of the top level $z^{s^*}$ on a single thread:
# $u^0_j = z^{s^*}_0 + \dots + z^{s^*}_j$. These are final partial sums; the last is the total.

# %%
print(inspect.getsource(kstep._scan_top))

# %% [markdown]
# **Step $s \ge 1$** corrects level $z^{s^*-s}$ with the finished values $u^{s-1}$ of the level
# above. Thread $j$ owns run $j$ (at most $L^s$ threads), starts from the total of everything
# before its run, $u^{s-1}_{j-1}$ (with $u^{s-1}_{-1} = 0$), and adds its run element by element:
#
# $$u^s_{Lj+t} = u^{s-1}_{j-1} + \sum_{i=0}^{t} z^{s^*-s}_{Lj+i}, \qquad 0 \le t \le \min(L-1,\ K_{s^*-s+1} - 1 - Lj).$$
#
# The last element of a full run ($t = L-1$) is $u^{s-1}_j$, which is already final: the notes'
# *"there is no need to increment this position anymore"*, so it is copied instead. Each $u^s$
# overwrites $z^{s^*-s}$ in place, and the last step, $s = s^*+1$, corrects $x$ itself into the
# inclusive scan. (You will write this step in the exercise of section 7.)
#
# No step reads a cell that another thread of the same step writes: reductions read level $s$
# and write level $s+1$; corrections write run $j$ and read only the level above. So all the
# synchronisation the scheme needs is a barrier between steps: a kernel launch (the launch
# boundary is a grid-wide barrier), or `cuda.syncthreads()` when the whole buffer fits one
# block's shared memory. The host code of the launch-per-step path:

# %%
print(inspect.getsource(kstep.scan_launches))

# %% [markdown]
# ## 5. The notes' figure, redrawn from a trace
#
# The notes' lost figure showed the summation for two values its caption no longer holds; the
# reconstruction's example is $L = 3$ and $K_0 = 35$. Here the real kernels run
# on the simulator, a launch per step (`one_block=False`), under the tracer, and `ps.viz.steps`
# draws the buffer after every step: one row per launch, an arrow from each cell a thread read
# to the cell it then wrote (colour: the thread), a bar along the cells one thread wrote in turn
# (a running sum kept in a register), and the four levels shaded.

# %%
x35 = np.arange(1, 36, dtype=np.int32)
seed_run = ps.trace.record(ps.scan, x35, algorithm="kstep", L=3, one_block=False)
steps = (["load x"] + [f"reduction step {s}" for s in range(seed.top + 1)] + ["correction step 0 (1 thread)"]
         + [f"correction step {s}" for s in range(1, seed.top + 2)])
_ = ps.viz.steps(seed_run, "buf", offsets=seed.offsets, labels=["$x$", "$z^0$", "$z^1$", "$z^2$"], row_labels=steps,
                 title="Summation in parallel for L = 3 and K0 = 35 (a launch per step)")

# %% [markdown]
# Read it top to bottom: three reductions fold 35 inputs into 12, 4 and 2 run totals; one thread
# adds the last two; then each correction hands the totals down one level, every thread starting
# from the total of the run before its own (the arrow from the level above into the first cell
# of a run) and ending on a copy (the arrow into the last cell of a full run). The launches are
# listed below. The one-block path runs the same steps in shared memory, with
# `cuda.syncthreads()` where the launch path ends a launch; its trace touches exactly the same
# buffer cells, step by step:

# %%
for launch in seed_run.launches:
    print(f"launch {launch.number}: {launch.kernel:<14} {launch.grid[0]} block(s) of {launch.block[0]:3d} threads, "
          f"{launch.combines:2d} combines")
print("result:", seed_run.result)


def buffer_steps(trace):
    """For each step (launch and barrier phase) that touches ``buf``: (cells read, cells written)."""
    found = collections.defaultdict(lambda: (set(), set()))
    for r in trace.records:
        if r.array == "buf":
            found[(r.launch, r.phase)][r.write].add(r.index)
    return [found[key] for key in sorted(found)]


block_run = ps.trace.record(ps.scan, x35, algorithm="kstep", L=3, one_block=True)
same = buffer_steps(seed_run) == buffer_steps(block_run)
print(f"launch per step: {len(seed_run.launches)} launches; one block: {len(block_run.launches)} launch, "
      f"{block_run.counts()['barriers']} barriers; same cells step by step: {same}")

# %% [markdown]
# ## 6. Check
#
# `ps.check.scan` runs the package's k-step scan on random inputs of many sizes, traced, for
# several $L$, both paths (`one_block="auto"` takes the one-block path when the buffer fits,
# here up to a few thousand elements), all operators and directions.

# %%
for L in (2, 3, 8, 64):
    for one_block in ("auto", False):
        print(f"L={L:<3} one_block={one_block!s:<5}",
              ps.check.scan(lambda x: ps.scan(x, algorithm="kstep", L=L, one_block=one_block), name="kstep"))
for op in ps.OPS:
    print(f"{op:>4}, exclusive, reverse:",
          ps.check.scan(lambda x: ps.scan(x, op, inclusive=False, reverse=True, algorithm="kstep", L=5), op=op,
                        inclusive=False, reverse=True, dtype=np.int32, name="kstep"))

# %% [markdown]
# ## 7. Exercise: a correction step
#
# ### Exercise 05.kstep-correct (stretch, 2 points)
#
# **Spec.** Write the kernel of correction step $s \ge 1$ for sums of float32, with the signature of the
# package's `correct_kernel`: `my_correct(buf, upper, lower, size)`, where `upper` is the offset
# of $u^{s-1}$ in the buffer, `lower` that of the level being corrected (`size` elements, which
# your kernel overwrites), and thread `j = cuda.grid(1)` owns run $j$ of the level (its $j$-th
# group of $L$ consecutive elements, the last one maybe shorter). `my_kstep_scan` below runs the
# whole scheme with the package's load, reduction, top and store kernels and *your* correction
# kernel in every correction step, so `ps.check.scan` can check it. (The simulator runs your
# kernel as Python; on a GPU it must also compile, so use only what numba.cuda allows.)
#
# **Invariant.** Before the step, element $j$ of the level above, $u^{s-1}_j$, holds the sum of
# everything up to the end of run $j$ (it is final), and element $k$ of the level being
# corrected holds $z_k$, the total of its own stretch of the input (section 3). After the step,
# element $k$ holds the sum of everything up to the end of its stretch: its run's inclusive
# sums, started from what comes before the run.
#
# **Worked example.** $L = 3$, a level of `size` = 8 elements $3, 1, 4, 1, 5, 9, 2, 6$ (three
# runs), and above it $u^{s-1} = 8, 23, 31$ (the inclusive sums of the run totals 8, 15, 8):
#
# | thread $j$ | reads above | cells of its run | run before | run after |
# |---|---|---|---|---|
# | 0 | nothing before run 0; $u_0$ = 8 | 0, 1, 2 | 3 1 4 | 3 4 8 |
# | 1 | $u_0$ = 8, $u_1$ = 23 | 3, 4, 5 | 1 5 9 | 9 14 23 |
# | 2 | $u_1$ = 23 (a short run ends on no $u$) | 6, 7 | 2 6 | 25 31 |
#
# The last cell of a full run becomes a value the level above already holds (the notes' "no
# need to increment this position anymore"). **Budget:** at most $2L + 1 = 7$ memory accesses
# per thread in `my_correct` (one read of the carry, a read and a write per element, a read and
# a write for the copied last element). Hints: `ps.hint("05.kstep-correct")`.

# %% tags=["exercise"] exercise_id="05.kstep-correct" points=2 todo="in my_correct, make every element of run j of the level at offset lower hold the sum of everything up to and including it: the run's inclusive sums started from what comes before the run, in place"
from numba import cuda, float32

from prefixsum.scans import kstep

L = 3


@cuda.jit
def my_correct(buf, upper, lower, size):
    j = cuda.grid(1)
    if L * j < size:
        ### BEGIN SOLUTION
        start = L * j
        running = buf[upper + j - 1] if j > 0 else float32(0)
        for k in range(start, min(start + L - 1, size)):
            running += buf[lower + k]
            buf[lower + k] = running
        if start + L <= size:  # a full run ends on u^{s-1}[j], already final
            buf[lower + start + L - 1] = buf[upper + j]
        ### END SOLUTION


def launch(kernel, threads, *args):
    kernel[(threads + 63) // 64, 64](*args)


def my_kstep_scan(x):
    n, dtype = len(x), np.dtype(np.float32)
    sizes, offsets = lv = kstep.levels(n, L)
    buf, out = cuda.device_array(lv.length, dtype), cuda.device_array(n, dtype)
    launch(kstep.load_kernel(False), n, cuda.to_device(x), buf, n)
    for s in range(lv.top + 1):
        launch(kstep.reduce_kernel("add", dtype, L), sizes[s + 1], buf, offsets[s], offsets[s + 1], sizes[s])
    kstep.top_kernel("add", dtype)[1, 1](buf, offsets[-1], sizes[-1])
    for level in range(lv.top, -1, -1):  # correction step s = s* + 1 - level
        launch(my_correct, sizes[level + 1], buf, offsets[level + 1], offsets[level], sizes[level])
    launch(kstep.store_kernel("add", dtype, True, False), n, buf, out, n)
    return out


# %% tags=["check"] exercise_id="05.kstep-correct"
def kstep_scan_by_the_check(x):  # the check's own scan with L = 3, its arrays and 64 threads a block; your my_correct
    n, dtype = len(x), np.dtype(np.float32)
    sizes, offsets = lv = kstep.levels(n, 3)
    buf, out = cuda.device_array(lv.length, dtype), cuda.device_array(n, dtype)
    kstep.load_kernel(False)[(n + 63) // 64, 64](cuda.to_device(x), buf, n)
    for s in range(lv.top + 1):
        kstep.reduce_kernel("add", dtype, 3)[(sizes[s + 1] + 63) // 64, 64](buf, offsets[s], offsets[s + 1], sizes[s])
    kstep.top_kernel("add", dtype)[1, 1](buf, offsets[-1], sizes[-1])
    for level in range(lv.top, -1, -1):
        my_correct[(sizes[level + 1] + 63) // 64, 64](buf, offsets[level + 1], offsets[level], sizes[level])
    kstep.store_kernel("add", dtype, True, False)[(n + 63) // 64, 64](buf, out, n)
    return out


print(ps.check.scan(kstep_scan_by_the_check, name="my_correct", budget=ps.check.Budget(accesses_per_step=7, kernels=("my_correct",))))

# %% [markdown]
# Compare with the package's version, a device function shared by both paths:

# %% tags=["instructor"]
print(inspect.getsource(kstep._correct_run))

# %% [markdown]
# ## 8. How $L$ trades steps against serial work
#
# A small $L$ means many levels: $s^* = \max(0, \lceil \log_L n \rceil - 2)$ (the top level
# $K_{s^*+1} \approx n / L^{s^*+1}$ must hold at most $L$ values), so $2s^*+3$ steps, each a launch
# or a barrier. A large $L$ means few steps, but each thread adds up to $L$ elements one after
# another, and fewer threads work: $K_1 = n/L$ in the widest step, one thread in the top step.
# The depth, steps times serial work, is about $2L\log_L n$; the work is about $2n$ whatever $L$
# (each element is read once in the reduction and once in the correction). By Brent's theorem
# (chapter 03, $T_p \le W/p + D$) the choice of $L$ matters through the depth only while the
# threads cover the work, and through the launches and barriers that each of the $2s^*+3$ steps
# costs on a real GPU. The cell checks the formula for $s^*$ against `kstep.levels`, then the
# tracer counts it all for a launch-per-step run of $n = 1000$ (the serial work of a thread is
# shown as the cells it reads in one step: $L$ for a reduction, $L+1$ for a correction):

# %%
def ceil_log(n, L):
    """The smallest k with L**k >= n: ceil(log_L n) in integers."""
    k = 0
    while L ** k < n:
        k += 1
    return k


print("s* = max(0, ceil(log_L n) - 2) for every n up to 5000 and L = 2, 3, 4, 8, 16, 32, 64:",
      all(kstep.levels(n, L_row).top == max(0, ceil_log(n, L_row) - 2) for L_row in (2, 3, 4, 8, 16, 32, 64)
          for n in range(1, 5001)))
n_table = 1000
print(f"n = {n_table}, a launch per step")
print(f"{'L':>3} {'s*':>3} {'launches':>8} {'combines':>8} {'reads/thread':>12} {'serial reads':>12} "
      f"{'buffer':>6} {'extra':>5} {'global reads':>12} {'writes':>6}")
traced = {}  # L: the tracer's counts, used again in section 9
for L_row in (2, 3, 4, 8, 16, 32):
    run = ps.trace.record(ps.scan, np.ones(n_table, np.float32), algorithm="kstep", L=L_row, one_block=False)
    counts = traced[L_row] = run.counts()
    reads = collections.Counter((r.launch, r.block, r.thread) for r in run.records if r.array == "buf" and not r.write)
    most = collections.defaultdict(int)  # per launch: the most cells one thread read
    for (number, _, _), k in reads.items():
        most[number] = max(most[number], k)
    lv = kstep.levels(n_table, L_row)
    print(f"{L_row:>3} {lv.top:>3} {counts['launches']:>8} {counts['combines']:>8} {max(most.values()):>12} "
          f"{sum(most.values()):>12} {lv.length:>6} {lv.length - n_table:>5} "
          f"{counts['global_reads'] / n_table:>11.2f}n {counts['global_writes'] / n_table:>5.2f}n")

# %% [markdown]
# - **Work** stays at about $2n$ combines for every $L$: $n$ to reduce, $n$ to correct
#   (a sequential loop needs $n-1$).
# - **Steps** fall fast with $L$: 21 launches at $L = 2$, 5 at $L = 32$ (where $K_1 = 32 \le L$
#   and one reduction suffices).
# - **Serial work per thread** grows with $L$; the sum over steps of the longest thread
#   ("serial reads", the depth in memory reads) is smallest for $L$ near 3 or 4 and grows
#   again beyond. (The top step reads two cells per addition: `_scan_top` reloads the value
#   it just wrote.)
# - **Extra memory** is $K_1 + K_2 + \dots \approx n/(L-1)$; global traffic falls towards
#   $4n$ reads and $3n$ writes as $L$ grows.
#
# Which $L$ is best depends on what a step costs. In one block a barrier costs about as much as
# a few additions, so the depth decides; between launches the GPU pays a few microseconds for
# every launch, and the host, in Python, several times as much (section 9).
#
# ## 9. A launch per step or a barrier per step
#
# For $n = 1000$ and the package's default $L$, both paths side by side. The work is the same;
# the one-block path keeps the buffer in shared memory and touches global memory only to load
# $x$ and store the result. But one block holds at most `kstep.ONE_BLOCK_BUFFER` = 4096
# elements, so beyond a few thousand inputs every step is a launch:

# %%
L_default = ps.ALGORITHMS["kstep"].options["L"]
print(f"default L = {L_default}, s* = {kstep.levels(n_table, L_default).top}")
x1000 = np.ones(n_table, np.float32)
for one_block in (False, True):
    counts = ps.trace.record(ps.scan, x1000, algorithm="kstep", L=L_default, one_block=one_block).counts()
    print(f"one_block={one_block!s:<5}: launches {counts['launches']}, barriers {counts['barriers']}, "
          f"steps {counts['steps']}, combines {counts['combines']}, "
          f"global reads {counts['global_reads']}, writes {counts['global_writes']}; "
          f"shared reads {counts['shared_reads']}, writes {counts['shared_writes']}")
for L_row in (2, 8, L_default):
    fits = max(n for n in range(1, kstep.ONE_BLOCK_BUFFER + 1) if kstep.fits_one_block(n, L_row))
    print(f"L = {L_row:>2}: one block up to n = {fits}")

# %% [markdown]
# **On the GPU.** `benchmarks/kstep_L.csv` (`bash benchmarks/run_gpu.sh kstep`) times the
# k-step scan for $L = 2, 4, 8, \dots, 128$ at every $n$ from $2^{10}$ to $2^{26}$ (float32),
# beside `torch.cumsum` (a single-pass scan: one pass over memory) and a copy kernel. These are
# **kernel times**: each sample queues a short busy kernel, an event, the scan's launches and a
# second event, so the events time the GPU's work alone, without the Python that numba spends
# on the host for every launch (median of 25; `benchmarks/README.md` describes the method).
# A star marks the fastest $L$ of each $n$. The rows under the table price a launch at $2^{14}$,
# and at $2^{26}$ count the words each $L$ moves (`words_moved` adds up the reads and writes of
# the launch path's kernels of sections 3 and 4, checked against the tracer's counts of section
# 8) and the time per word against the copy kernel's: near 1, the scan streams its traffic as
# fast as a copy streams its own.

# %%
sweep_rows = results.read("kstep_L.csv")
print(f"kstep_L.csv: {len(sweep_rows)} rows from {', '.join(sorted({row['device'] for row in sweep_rows}))}, "
      f"{', '.join(sorted({row['date'] for row in sweep_rows}))}; every result correct: {all(row['correct'] for row in sweep_rows)}")
for row in sweep_rows:
    if row["kind"] != "whole call" and row["timing"] != "events, queued":
        print(f"not queued, so left out below: {row['variant']} at n = 2^{row['n'].bit_length() - 1} "
              f"({row['timing']}: {row['median_us']:.1f})")
kernel = {(int(row["variant"].split("=")[1]), row["n"]): row["median_us"]
          for row in sweep_rows if row["variant"].startswith("kstep:L=") and row["timing"] == "events, queued"}
call = {row["n"]: row["median_us"] for row in sweep_rows if row["variant"] == "ps.scan(kstep:L=2) call"}
sweep_L, sweep_n = sorted({L for L, _ in kernel}), sorted({n for _, n in kernel})


def sweep_us(variant, n):
    """Median time of ``variant`` at ``n`` in kstep_L.csv (µs)."""
    return results.value("kstep_L.csv", "median_us", variant=variant, n=n)


def kstep_launches(n, L):
    """Launches of ps.scan(x, algorithm="kstep", L=L) for n elements (one_block="auto")."""
    return 1 if kstep.fits_one_block(n, L) else 2 * kstep.levels(n, L).top + 5


def words_moved(n, L):
    """Global reads + writes of the launch path: load, reductions, top, corrections, store."""
    sizes = kstep.levels(n, L).sizes
    levels_below = len(sizes) - 1  # s* + 1: the reductions, and the corrections after the top
    reads = (n + sum(sizes[:-1]) + 2 * (sizes[-1] - 1)
             + sum(sizes[:-1]) + sum(sizes[1:]) - levels_below + n)
    writes = n + sum(sizes[1:]) + (sizes[-1] - 1) + sum(sizes[:-1]) + n
    return reads + writes


print("words_moved equals the tracer's count at n = 1000 for L = " + ", ".join(map(str, traced)) + ":",
      all(words_moved(n_table, L_row) == c["global_reads"] + c["global_writes"] for L_row, c in traced.items()))
print(f"\nkernel time (µs, launches queued)\n{'n':>22}" + "".join(f" {f'L = {L_row}':>9}" for L_row in sweep_L)
      + f" {'torch.cumsum':>13} {'copy':>6}")
best_L = {}
for n in sweep_n:
    best_L[n] = min((L_row for L_row in sweep_L if (L_row, n) in kernel), key=lambda L_row: kernel[(L_row, n)])
    cells = "".join(f" {kernel[(L_row, n)]:>8.1f}{'*' if L_row == best_L[n] else ' '}" if (L_row, n) in kernel else f" {'-':>8} "
                    for L_row in sweep_L)
    print(f"{'2^%d' % (n.bit_length() - 1):>22}{cells} {sweep_us('torch.cumsum', n):>13.1f} {sweep_us('copy', n):>6.1f}")
copy_26 = sweep_us("copy", 2**26)
footer = {"launches, 2^14": lambda L_row: f"{kstep_launches(2**14, L_row)}",
          "µs per launch, 2^14": lambda L_row: f"{kernel[(L_row, 2**14)] / kstep_launches(2**14, L_row):.1f}",
          "launches, 2^26": lambda L_row: f"{kstep_launches(2**26, L_row)}",
          "words moved, 2^26": lambda L_row: f"{words_moved(2**26, L_row) / 2**26:.2f}n",
          "per word vs copy, 2^26": lambda L_row: f"{kernel[(L_row, 2**26)] / copy_26 / (words_moved(2**26, L_row) / 2**27):.2f}"}
for label, cell in footer.items():
    print(f"{label:>22}" + "".join(f" {cell(L_row):>8} " for L_row in sweep_L))
worst = {L_row: max(kernel[(L_row, n)] / kernel[(best_L[n], n)] for n in sweep_n if (L_row, n) in kernel) for L_row in sweep_L}
shown_n = (2**20, 2**24, 2**26)
print()
print("L = 8 or 16 fastest at every n <= 2^21:", all(best_L[n] in (8, 16) for n in sweep_n if n <= 2**21),
      "| L = 4 fastest at every n >= 2^22:", all(best_L[n] == 4 for n in sweep_n if n >= 2**22))
print("slowest, relative to the fastest L of the same n:", ", ".join(f"L = {L_row}: {worst[L_row]:.2f}x" for L_row in sweep_L))
print(f"the default L = {L_default}: " + ", ".join(
    f"{kernel[(L_default, n)] / kernel[(best_L[n], n)]:.2f}x the fastest (L = {best_L[n]}) at 2^{n.bit_length() - 1}"
    for n in shown_n))
print("torch.cumsum, faster than the fastest L by: " + ", ".join(
    f"{kernel[(best_L[n], n)] / sweep_us('torch.cumsum', n):.1f}x at 2^{n.bit_length() - 1}" for n in shown_n))

# %%
plot_rows = []
for n in shown_n:
    for L_row in sweep_L:
        if (L_row, n) in kernel:
            plot_rows.append({"L": L_row, "median_us": kernel[(L_row, n)], "series": f"k-step, n = 2^{n.bit_length() - 1}"})
        plot_rows.append({"L": L_row, "median_us": sweep_us("torch.cumsum", n), "series": f"torch.cumsum, n = 2^{n.bit_length() - 1}"})
ax = ps.viz.throughput(plot_rows, x="L", y="median_us", group="series",
                       title=f"k-step scan on an {sweep_rows[0]['device']}: kernel time against L (launches queued)")
for line in ax.get_lines():  # one colour per n; torch.cumsum dashed
    line.set_color(f"C{[f'2^{n.bit_length() - 1}' for n in shown_n].index(line.get_label().split('= ')[1])}")
    line.set_linestyle("--" if line.get_label().startswith("torch") else "-")
ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
ax.set_xticks(sweep_L, [str(L_row) for L_row in sweep_L])
ax.set_xlabel("L (log scale)")
_ = ax.set_ylabel("median kernel time per scan (µs, log scale)")

# %% [markdown]
# What sets the best $L$ (the table and the picture):
#
# - **At small $n$, steps and threads.** Up to $2^{11}$ the one-block path runs the whole scan
#   in one launch; from $2^{12}$ on every step is a launch, and the time jumps. A queued launch
#   of a small step costs the GPU a few microseconds (the row "µs per launch"), so $L = 2$, with
#   the most launches, pays for its many steps. A large $L$ makes few launches, but each is
#   slower: the first reduction has $n/L$ threads, each adding $L$ numbers one after another,
#   and at $2^{14}$ with $L = 128$ that is 128 threads (four warps) on a GPU built to run tens
#   of thousands. $L = 8$ or 16 balances the two.
# - **At large $n$, memory, and how it is read.** A small $L$ moves more words (more levels,
#   though each is $L$ times shorter: they add about $n/(L-1)$ cells), but streams them almost
#   as fast as the copy kernel streams its own; $L = 4$ moves a quarter fewer words than
#   $L = 2$ and is fastest. Beyond, the traffic hardly shrinks any more, but each word costs
#   more the larger $L$ (the row "per word vs copy, 2^26"). Thread $i$ of a reduction reads cells
#   $Li, \dots, Li+L-1$, so the 32 threads of a warp read addresses $4L$ bytes apart: from
#   $L = 32$ on, one load touches 32 cache lines instead of one or a few, and each line must
#   stay in the cache until the thread's loop comes back for its next element; the larger $L$,
#   the more lines in flight and the more of them are fetched twice (uncoalesced access). That
#   is the likely reason; the CSV does not split the time between the kernels.
# - **The library is far ahead**: `torch.cumsum`, one pass over memory, is several times
#   faster than the fastest $L$ at every size (the last line under the table).
#
# **A whole call** pays, besides the GPU's work, the host's part: what that is, and why it
# grows with the launches, is measured once for the workbook in
# chapter 08 (`08_tridiagonal_hybrid`), section 3. Here it only needs a price. The sweep
# has whole calls for $L = 2$ only; from $2^{12}$ to $2^{16}$ they are nearly all host time, and
# a straight line through those five calls (time = fixed + per launch $\times$ launches) prices it:

# %%
fit_n = [n for n in sweep_n if 2**12 <= n <= 2**16]
per_launch, fixed = np.polyfit([kstep_launches(n, 2) for n in fit_n], [call[n] for n in fit_n], 1)
print(f"host time of a whole call: about {fixed:.0f} + {per_launch:.1f} x launches (µs; a fit to L = 2, n = 2^12..2^16)")
print(f"the GPU's share of those calls: at most {max(kernel[(2, n)] / call[n] for n in fit_n):.0%}")
print(f"{'n':>5} {'launches':>8} {'kernel µs':>9} {'call µs':>8} {'call / kernel':>13}")
for n in sweep_n:
    print(f"{'2^%d' % (n.bit_length() - 1):>5} {kstep_launches(n, 2):>8} "
          + (f"{kernel[(2, n)]:>9.1f}" if (2, n) in kernel else f"{'-':>9}")
          + f" {call[n]:>8.1f} " + (f"{call[n] / kernel[(2, n)]:>13.1f}" if (2, n) in kernel else f"{'-':>13}"))

# %% [markdown]
# The fit's slope is the Python of one launch, its intercept the fixed price of the call.
#
# For the other $L$ there are kernel times but no whole calls, so estimate them: the host spends
# the fixed price plus the price per launch; the GPU runs the early steps while the host is
# still launching the later ones, so a call takes at least the larger of host time and kernel
# time, and at most their sum. The best $L$ by each estimate, on the launch path ($n \ge 2^{12}$):

# %%
def call_estimates(n, L):
    """(at least, at most) the whole call's time in µs: max and sum of host and kernel time."""
    host = fixed + per_launch * kstep_launches(n, L)
    return max(host, kernel[(L, n)]), host + kernel[(L, n)]


launch_n = [n for n in sweep_n if n >= 2**12]
print(f"{'n':>5}" + "".join(f" {f'L = {L_row}':>11}" for L_row in sweep_L) + "   best L (at least, at most)")
call_worst = {L_row: [1.0, 1.0] for L_row in sweep_L}
for n in launch_n:
    there = [L_row for L_row in sweep_L if (L_row, n) in kernel]
    estimates = {L_row: call_estimates(n, L_row) for L_row in there}
    fastest = [min(estimates[L_row][k] for L_row in there) for k in (0, 1)]
    for L_row in there:
        for k in (0, 1):
            call_worst[L_row][k] = max(call_worst[L_row][k], estimates[L_row][k] / fastest[k])
    cells = "".join(f" {estimates[L_row][0]:>5.0f}-{estimates[L_row][1]:<5.0f}" if L_row in estimates else f" {'-':>11}"
                    for L_row in sweep_L)
    best = ["/".join(str(L_row) for L_row in there if estimates[L_row][k] < fastest[k] + 0.5) for k in (0, 1)]
    print(f"{'2^%d' % (n.bit_length() - 1):>5}{cells}   {best[0]}, {best[1]}")
print("L = 2, measured call / the estimate 'at most': " + ", ".join(
    f"2^{n.bit_length() - 1}: {call[n] / call_estimates(n, 2)[1]:.2f}" for n in launch_n if (2, n) in kernel))
print("slowest estimate, relative to the best L of the same n:",
      ", ".join(f"L = {L_row}: {low:.2f}x / {high:.2f}x" for L_row, (low, high) in call_worst.items()))

# %% [markdown]
# The estimates are rough: the measured $L = 2$ calls lie up to a tenth below or above the
# upper estimate, apart from the sizes that jump. But the ranking of $L$ rests on differences
# of several launches, tens of microseconds each, and both estimates agree on it almost
# everywhere. For a whole call the order turns round. Up to about $2^{23}$ the host's launches outweigh
# the GPU's work, and the fewest launches win ($L = 32$ to 128, by both estimates); only at the
# largest sizes does the GPU's work take over, and the best $L$ falls to 16 at $2^{24}$ and to
# 4 at $2^{26}$. The best $L$ for a whole call depends on $n$, and it is not the best $L$ for
# the GPU.
#
# **What this means for the default.** The package's default, $L = 32$, was chosen from an
# earlier sweep whose times counted the host's launch gaps as kernel time, much like a whole
# call, where few launches win; there, $L = 32$ was the $L$ whose worst case was mildest. The
# queued kernel times above now favour $L = 8$ to 16 up to $2^{21}$ and $L = 4$ from $2^{22}$
# on, and put $L = 32$ at well over one and a half times $L = 4$'s time at $2^{24}$ and
# $2^{26}$; $L = 8$ has the mildest worst case, within 1.18 times the fastest $L$ at every size.
# For whole calls, by the estimates, $L = 16$ has the mildest worst case, and $L = 32$ is close
# behind by the upper estimate but not by the lower one. The default stays $L = 32$ for now;
# no single $L$ is best for both kernel time and whole calls at every size, so pass `L=` to
# `ps.scan` for the size and the cost you care about.
#
# ## 10. The ladder, Blelloch and the k-step scheme
#
# With $L = 2$ the reduction is **Blelloch's up-sweep**: $z^s_i = z^{s-1}_{2i} + z^{s-1}_{2i+1}$,
# a binary tree of partial sums. The correction is its **down-sweep**: run $j$ starts from
# $u^{s-1}_{j-1}$, the total of everything before its subtree (what the down-sweep hands a left
# child), and the copy of $u^{s-1}_j$ into its last cell is what the down-sweep hands the right
# child combined with the left sum. The differences: Blelloch builds the tree **in place**
# (level $d$ in every $2^{d+1}$-th cell) and produces an exclusive scan, with $2\log_2 n$ levels;
# the k-step scheme writes each level **into its own part of the buffer** (about $n/(L-1)$ extra
# cells, contiguous, so a level is a plain array) and produces an inclusive scan, with any $L$.
#
# The **ladder** of chapter 01 needs no extra memory and only $\log_2 n$ phases, but does
# $\frac{n}{2}\log_2 n$ additions; the k-step scheme does about $2n$, and so does Blelloch's tree
# (whose inclusive scan then costs $n$ more combines, one per element). Counted by the tracer for
# one block of 256 elements:

# %%
x256 = np.ones(256, np.float32)
for label, options in (("ladder", dict(algorithm="ladder", block_size=256)),
                       ("blelloch", dict(algorithm="blelloch", block_size=128)),
                       ("kstep L=2", dict(algorithm="kstep", L=2, one_block=True)),
                       ("kstep L=4", dict(algorithm="kstep", L=4, one_block=True)),
                       ("kstep L=16", dict(algorithm="kstep", L=16, one_block=True))):
    counts = ps.trace.record(ps.scan, x256, **options).counts()
    print(f"{label:<10}: {counts['combines']:4d} combines, {counts['barriers']:2d} barriers, "
          f"{counts['shared_reads'] + counts['shared_writes']:5d} shared accesses")

# %% [markdown]
# ## 11. Summary
#
# | | k-step, a launch per step | k-step, one block |
# | --- | --- | --- |
# | work (combines) | about $2n$: $n$ to reduce, $n$ to correct | the same |
# | depth | $2s^*+3$ steps of at most $L$ serial combines: $O(L \log_L n)$ | the same, barriers instead of launches |
# | extra memory | $n/(L-1)$ for $z^0, \dots, z^{s^*}$ (plus the copy of $x$) | all in shared memory, at most 4096 cells |
# | global memory | about $4n$ reads and $3n$ writes | $n$ reads, $n$ writes |
# | cost of a step on a GPU | a launch: a few microseconds of GPU time while steps are small, and several times that in Python on the host (section 9) | a barrier, nanoseconds |
#
# with $s^* = \min\{s : K_{s+1} \le L\}$, $K_{s+1} = \lceil K_s / L \rceil$. The formulas are a
# reconstruction of the notes' lost ones.
#
# **Questions.**
# 1. For $L = 3$ and $K_0 = 35$, which cells of the buffer does correction step 2 read, and
#    which does it write? Check your answer against the figure of section 5.
# 2. Why may thread $j$ of a correction step read $u^{s-1}_{j-1}$ while thread $j-1$ of the same
#    step is writing? What would go wrong if $u^s$ were written into the level above instead?
# 3. Show that $K_1 + K_2 + \dots + K_{s^*+1} < n/(L-1) + 2(s^*+1)$. How much shared memory
#    does the one-block path need for $n = 3000$ and $L = 2$, 8 and 64?
# 4. The depth is about $2L\log_L n$. Which integer $L$ minimises it? On the GPU, kernel time
#    favours $L = 8$ or 16 up to $2^{21}$ and $L = 4$ beyond, while a whole call favours
#    $L = 32$ to 128 up to about $2^{23}$ (section 9). Explain both from what a step costs the
#    GPU and the host.
# 5. The reductions read with stride $L$ between neighbouring threads. Rewrite the reduction
#    step so that a warp reads consecutive addresses (hint: let $L$ threads share a run, or
#    stage the runs through shared memory), and say what it costs.
# 6. A whole call of the launch path spends most of its time launching, up to about $2^{23}$.
#    How would you do several steps per launch (hint: the one-block path does all of them in
#    one)? What limits how many?
