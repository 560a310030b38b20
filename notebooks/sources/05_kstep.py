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
# # 05 · The L-ary (k-step) partial-sum scheme of seed 000
#
# Seed 000, the chapter *"Calculation of partial sums in parallel"* of a set of CUDA lecture
# notes, describes a scan built from one integer parameter $L$: add the inputs up in runs of
# $L$, then the run totals in runs of $L$, and so on until one thread can finish the job; then
# walk back down, correcting every level with the totals of the level above. This chapter
# rebuilds that scheme, draws the seed's lost figure from a trace of the real kernels, measures
# how $L$ trades the number of steps against the serial work of each thread, and compares a
# kernel launch per step with a barrier per step, on the simulator and on a GPU.

# %%
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import collections
import csv
import inspect

import numpy as np
from numba import cuda, float32

from prefixsum.scans import kstep

print(ps.device_info())

# %% [markdown]
# ## 1. What survives of seed 000, and what is reconstructed
#
# Every formula of seed 000 was lost; only the prose around them survives, with holes where the
# symbols stood. Some of it:
#
# > *"The presented procedure has -proportional processing time under assumption of infinite
# > parallel processing capability. We proceed as follows. Choose an integer : ."*
#
# > *"For step 0 we calculate (on a single thread): Thus, Note that the final contains the
# > final partial sum. Hence, there is no need to increment this position anymore. This fact is
# > reflected in slightly different indexing for the following steps."*
#
# The surviving names fix the skeleton: inputs $x_0, \dots, x_{K_0-1}$, an integer $1 < L \ll
# K_0$, level sizes $K_s$, reduction data $z^s$, correction data $u^s$, a first correction step
# on a single thread, correction step $s$ on $L^s$ threads, and one figure, *"Summation in
# parallel for $L = 3$ and $K_0 = 35$"*. **The formulas below are a reconstruction**
# (`specs/kstep.md`) consistent with every surviving sentence and checked against a sequential
# scan; they are not the seed's own text. The package implements them in `prefixsum.scans.kstep`.
#
# ## 2. The levels
#
# Each level is $L$ times shorter than the one below, rounded up: $K_{s+1} = \lceil K_s / L
# \rceil$. The scheme reduces until a level fits one thread, at the step
# $s^* = \min\{s \ge 0 : K_{s+1} \le L\}$. All levels live in **one buffer**: $x$ at offset 0,
# then $z^0, z^1, \dots, z^{s^*}$ one after the other ($z^s$ starts at
# $P_{s+1} = K_0 + \dots + K_s$). The sizes come from one short loop (it runs on the host and,
# compiled, inside the one-block kernel); `kstep.levels` adds the offsets.

# %%
print(inspect.getsource(kstep._level_sizes))
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

# %%
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
# The last element of a full run ($t = L-1$) is $u^{s-1}_j$, which is already final: the seed's
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
# ## 5. The seed's figure, redrawn from a trace
#
# The seed's figure showed the summation for $L = 3$ and $K_0 = 35$. Here the real kernels run
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
# of a run) and ending on a copy (the arrow into the last cell of a full run). The launches:

# %%
for launch in seed_run.launches:
    print(f"launch {launch.number}: {launch.kernel:<14} {launch.grid[0]} block(s) of {launch.block[0]:3d} threads, "
          f"{launch.combines:2d} combines")
print("result:", seed_run.result)

# %% [markdown]
# The one-block path runs the same steps in shared memory, with `cuda.syncthreads()` where the
# launch path ends a launch. Its trace touches exactly the same buffer cells, step by step:

# %%


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
# Write the kernel of correction step $s \ge 1$ for sums of float32, with the signature of the
# package's `correct_kernel`: `my_correct(buf, upper, lower, size)`, where `upper` is the offset
# of $u^{s-1}$ in the buffer, `lower` that of the level being corrected (`size` elements, which
# your kernel overwrites), and thread `j = cuda.grid(1)` owns run $j$ (elements $Lj, \dots,
# \min(Lj+L, \text{size})-1$ of the level). `my_kstep_scan` below runs the whole scheme with the
# package's load, reduction, top and store kernels and *your* correction kernel in every
# correction step, so `ps.check.scan` can check it. (The simulator runs your kernel as Python;
# on a GPU it must also compile, so use only what numba.cuda allows.)

# %% tags=["exercise"] todo="in my_correct, rewrite run j of the level at offset lower: start from buf[upper + j - 1] (0 for j = 0), add the run's elements one by one, storing each running sum in place; the last element of a full run may instead be copied from buf[upper + j]"
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


# %% tags=["check"]
print(ps.check.scan(my_kstep_scan))

# %% [markdown]
# Compare with the package's version, a device function shared by both paths:

# %%
print(inspect.getsource(kstep._correct_run))

# %% [markdown]
# ## 8. How $L$ trades steps against serial work
#
# A small $L$ means many levels: $s^* \approx \log_L n - 1$, so $2s^*+3$ steps, each a launch
# or a barrier. A large $L$ means few steps, but each thread adds up to $L$ elements one after
# another, and fewer threads work: $K_1 = n/L$ in the widest step, one thread in the top step.
# The depth, steps times serial work, is about $2L\log_L n$. The tracer counts it all for a
# launch-per-step run of $n = 1000$ (the serial work of a thread is shown as the cells it reads
# in one step: $L$ for a reduction, $L+1$ for a correction):

# %%
n_table = 1000
print(f"n = {n_table}, a launch per step")
print(f"{'L':>3} {'s*':>3} {'launches':>8} {'combines':>8} {'reads/thread':>12} {'serial reads':>12} "
      f"{'buffer':>6} {'extra':>5} {'global reads':>12} {'writes':>6}")
for L_row in (2, 3, 4, 8, 16, 32):
    run = ps.trace.record(ps.scan, np.ones(n_table, np.float32), algorithm="kstep", L=L_row, one_block=False)
    counts = run.counts()
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
# a few additions, so the depth decides; between launches the host pays for every launch.
#
# ## 9. A launch per step or a barrier per step
#
# For $n = 1000$ and the package's default $L$, both paths side by side:

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

# %% [markdown]
# The work is the same; the one-block path keeps the buffer in shared memory and touches global
# memory only to load $x$ and store the result. But one block holds at most
# `kstep.ONE_BLOCK_BUFFER` = 4096 elements, so beyond 3,968 inputs ($L = 32$; 3,584 for
# $L = 8$, 2,048 for $L = 2$) every step is a launch.
#
# **On the GPU.** The benchmarks (`benchmarks/kstep_L.csv`, `benchmarks/scan_throughput.csv`,
# one NVIDIA H200, float32, median of 20 runs timed with CUDA events around the launches) show
# both. The default options ($L = 32$, chosen from the sweep below), around the size where the
# one-block path stops fitting:

# %%
# NBVAL_IGNORE_OUTPUT
with open("../benchmarks/scan_throughput.csv", newline="") as handle:
    throughput_rows = [row for row in csv.DictReader(handle) if row["dtype"] == "float32"]
print(f"{'n':>6} {'path':>15} {'launches':>8} {'kstep':>9} {'copy':>8} {'torch.cumsum':>12}")
for n in (2**10, 2**11, 2**12, 2**13, 2**14):
    at_n = {row["variant"]: float(row["median_us"]) for row in throughput_rows if int(row["n"]) == n}
    one = kstep.fits_one_block(n, L_default)
    launches = 1 if one else 2 * kstep.levels(n, L_default).top + 5
    print(f"{n:>6} {'one block' if one else 'launch per step':>15} {launches:>8} {at_n['kstep']:>6.0f} us "
          f"{at_n['copy']:>5.0f} us {at_n['torch.cumsum']:>9.0f} us")

# %% [markdown]
# Up to $n = 2048$ the whole scan is one launch of 46 to 48 us, about twice a copy kernel's
# single launch (24 to 25 us); at 4096 the buffer no longer fits and the time jumps to 197 us
# for 7 launches. At 8192 and 16384 the same 7 launches took 366 and 360 us: in this run the
# machine was slower at those sizes, the copy kernel's time doubled too (chapter 04). The sweep
# over $L$ (`kstep_L.csv` has $n = 2^{10}$ to $2^{26}$; plotted: $2^{20}$, $2^{24}$ and
# $2^{26}$, all on the launch path), against `torch.cumsum` (CUB, one pass):

# %%
# NBVAL_IGNORE_OUTPUT
with open("../benchmarks/kstep_L.csv", newline="") as handle:
    sweep_rows = list(csv.DictReader(handle))
sweep = {(int(row["variant"].split("=")[1]), int(row["n"])): float(row["median_us"])
         for row in sweep_rows if row["variant"].startswith("kstep:L=")}
torch_us = {int(row["n"]): float(row["median_us"]) for row in sweep_rows if row["variant"] == "torch.cumsum"}
sweep_L, sweep_n = sorted({L for L, _ in sweep}), sorted({n for _, n in sweep})
plot_rows = []
shown_n = (2**20, 2**24, 2**26)
for n in shown_n:
    for L_row in sweep_L:
        plot_rows.append({"L": L_row, "median_us": sweep[(L_row, n)], "series": f"k-step, n = 2^{n.bit_length() - 1}"})
        plot_rows.append({"L": L_row, "median_us": torch_us[n], "series": f"torch.cumsum, n = 2^{n.bit_length() - 1}"})
ax = ps.viz.throughput(plot_rows, x="L", y="median_us", group="series",
                       title="k-step scan on an H200: time against L (a launch per step)")
for line in ax.get_lines():  # one colour per n; torch.cumsum dashed
    line.set_color(f"C{[f'2^{n.bit_length() - 1}' for n in shown_n].index(line.get_label().split('= ')[1])}")
    line.set_linestyle("--" if line.get_label().startswith("torch") else "-")
ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
_ = ax.set_ylabel("median time per scan (us)")

# %% [markdown]
# At $2^{20}$ and $2^{24}$ time falls as $L$ grows, steeply from $L = 2$ to 4 and more slowly
# beyond (at $2^{24}$, $L = 32$ and 64 tie). The reason is the number of launches: time divided
# by launches stays within 38 to 53 us at $2^{20}$. At $2^{26}$ the curve turns round: $L = 4$ is
# fastest, and $L = 128$ is the slowest of all.

# %%
# NBVAL_IGNORE_OUTPUT
best = {n: min(sweep[(L_row, n)] for L_row in sweep_L) for n in sweep_n}
best_L = {n: min(sweep_L, key=lambda L_row: sweep[(L_row, n)]) for n in sweep_n}
span = f"2^{sweep_n[0].bit_length() - 1}..2^{sweep_n[-1].bit_length() - 1}"
print(f"{'L':>4}" + "".join(f" {'n = 2^%d' % (n.bit_length() - 1):>24}" for n in shown_n) + f"   worst vs best L, {span}")
for L_row in sweep_L:
    cells = ""
    for n in shown_n:
        launches = 1 if kstep.fits_one_block(n, L_row) else 2 * kstep.levels(n, L_row).top + 5
        cells += f" {sweep[(L_row, n)]:>7.0f} us {launches:>2} x {sweep[(L_row, n)] / launches:>4.0f} us"
    worst = max(sweep[(L_row, n)] / best[n] for n in sweep_n)
    print(f"{L_row:>4}{cells}   {worst:.2f}x" + ("   (the default)" if L_row == L_default else ""))
print("best L: " + ", ".join(f"2^{n.bit_length() - 1}: {best_L[n]}" for n in sweep_n))
print("torch.cumsum: " + ", ".join(f"{torch_us[n]:.1f} us at 2^{n.bit_length() - 1}" for n in shown_n))

# %% [markdown]
# What this shows:
#
# - **Every launch costs host time.** At $n = 2^{20}$ each launch costs 38 to 53 us, whatever
#   $L$: the GPU work of a step is a few microseconds, but a numba launch takes tens of
#   microseconds of Python on the host, and the GPU waits for it. $L = 2$ needs 41 launches and
#   takes 1810 us; $L = 128$ needs 7 and takes 374 us. At $2^{24}$ the same: 1288 us for
#   $L = 2$ (49 launches), 556 to 670 us for $L \ge 8$ (9 to 17).
# - **With $n$, memory starts to count, and more so for large $L$.** At $2^{24}$ a launch costs
#   26 us at $L = 2$ but 55 to 67 us for $L \ge 32$; at $2^{26}$, 37 us at $L = 2$ and 294 us at
#   $L = 128$, which takes 2650 us against 1293 us for $L = 4$. The launch path moves about $4n$
#   reads and $3n$ writes, and thread $i$ of a reduction reads cells $Li, \dots, Li+L-1$: the
#   32 threads of a warp read addresses $4L$ bytes apart, so one load touches 32 cache lines
#   instead of one (uncoalesced access), and more so as $L$ grows.
# - **The library is far ahead**: `torch.cumsum` takes 37 us at $2^{20}$, 67 us at $2^{24}$ and
#   223 us at $2^{26}$, one pass over memory, 10, 8 and 6 times faster than the best $L$ of each
#   size.
# - **The default, $L = 32$, is chosen from this sweep.** No $L$ is best at every size: $L = 128$
#   wins at $2^{20}$ (374 us) and $2^{24}$ (556 us), $L = 4$ at $2^{26}$ (1293 us), and the
#   printout lists the winner of every size. $L = 32$ is the one whose worst case is mildest: at
#   every size from $2^{10}$ to $2^{26}$ it stays within 1.47 times the best $L$ of that size
#   ($L = 64$: 1.66, $L = 16$: 1.68, $L = 128$: 2.05, $L = 8$: 2.12). At $2^{20}$, $2^{24}$ and
#   $2^{26}$, $L = 8$ (the earlier default) takes 733, 670 and 1393 us, $L = 32$ 468,
#   602 and 1806 us, $L = 128$ 374, 556 and 2650 us. $L = 8$ loses where launches dominate
#   (1.96 times the best at $2^{20}$, 2.12 at $2^{19}$), $L = 128$ where memory does (2.05 times
#   at $2^{26}$); $L = 32$ gives up 25%, 8% and 40% at those three sizes.
# - **The noise is large.** The CUDA events wrap Python launches, so every time includes the
#   host's share, and that varies: repeated runs differ by tens of percent. The default options
#   were measured twice, here ($L = 32$) and in `scan_throughput.csv` (`kstep`): 224 us against
#   366 us at $2^{13}$, 570 us against 307 us at $2^{21}$, but within 4% of each other from
#   $2^{24}$ to $2^{26}$, where the GPU's work dominates. So differences of a few tens of percent
#   between neighbouring $L$ at one size are within the noise; what the choice rests on is the
#   trend across sizes (fewer launches win while launches dominate, smaller $L$ once memory
#   does), not any single measurement.
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
# | cost of a step on a GPU | a launch, 26 to 67 us up to $n = 2^{24}$, up to 294 us at $2^{26}$ (H200) | a barrier, nanoseconds |
#
# with $s^* = \min\{s : K_{s+1} \le L\}$, $K_{s+1} = \lceil K_s / L \rceil$. The formulas are a
# reconstruction of seed 000's lost ones.
#
# **Questions.**
# 1. For $L = 3$ and $K_0 = 35$, which cells of the buffer does correction step 2 read, and
#    which does it write? Check your answer against the figure of section 5.
# 2. Why may thread $j$ of a correction step read $u^{s-1}_{j-1}$ while thread $j-1$ of the same
#    step is writing? What would go wrong if $u^s$ were written into the level above instead?
# 3. Show that $K_1 + K_2 + \dots + K_{s^*+1} < n/(L-1) + 2(s^*+1)$. How much shared memory
#    does the one-block path need for $n = 3000$ and $L = 2$, 8 and 64?
# 4. The depth is about $2L\log_L n$. Which integer $L$ minimises it? Why is the best $L$ on the
#    GPU so much larger up to $2^{24}$, and why does it drop to 4 at $2^{26}$?
# 5. The reductions read with stride $L$ between neighbouring threads. Rewrite the reduction
#    step so that a warp reads consecutive addresses (hint: let $L$ threads share a run, or
#    stage the runs through shared memory), and say what it costs.
# 6. The launch path spends most of its time launching. How would you do several steps per
#    launch (hint: the one-block path does all of them in one)? What limits how many?
