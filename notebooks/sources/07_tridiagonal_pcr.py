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
# # 07 · Tridiagonal systems by parallel cyclic reduction
#
# A **tridiagonal system** couples each unknown to its two neighbours only:
#
# $$a_i x_{i-1} + b_i x_i + c_i x_{i+1} = d_i, \qquad i = 0, \dots, n-1,$$
#
# where $a_0$ and $c_{n-1}$ lie outside the matrix. Such systems come from implicit time steps of
# the heat equation, cubic splines and the line sweeps of ADI methods, often thousands at a time.
# The sequential **Thomas algorithm** (Gaussian elimination without pivoting) solves one in about
# $8n$ operations, but every step needs the one before: depth $2n$.
#
# Seed 003 is a set of handwritten notes, mostly in Chinese, on two GPU kernels: ① *"Parallel
# cyclic reduction (PCR) diagonally dominant matrices or symmetric and positive definite
# matrices"* and ② *"Householder reduction → tridiagonal decomposition of any symmetric matrix"*
# (chapter 08). For PCR the notes give the elimination formulas,
# a layout with several systems per thread block (`tidx = threadIdx.x % n`), an odd/even
# reordering of the rows, the doubling of the stride, identity rows at the boundary, and two
# tables of which rows each step combines, for $n = 7$ and $n = 11$. This chapter rebuilds all
# of it from the package's kernels (`prefixsum.tridiag`), draws the notes' tables from a trace,
# counts the work and depth of Thomas, cyclic reduction (CR) and PCR, shows where PCR fails,
# relates it to the scans of the earlier chapters, and compares it with cuSPARSE on a GPU.
# Section 12 then builds what beats cuSPARSE from the same pieces: a few PCR steps and Thomas
# (the hybrid), a warp that keeps a system in registers, and Wang's partition method across the
# grid for systems longer than a warp can hold.

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import collections
import inspect

import numpy as np
import scipy.linalg
from numba import cuda, float64

from prefixsum import tridiag
from prefixsum.cli import results
from prefixsum.tridiag import _common, cr, hybrid, partition, pcr, thomas, warp

print(ps.device_info())

# %% [markdown]
# ## 1. The solver
#
# `tridiag.solve(a, b, c, d, method=...)` takes the three bands and the right-hand side, for one
# system (shape `(n,)`) or a batch (shape `(batch, n)`), and solves by `"pcr"`, `"cr"`,
# `"thomas"`, `"hybrid"` (section 12) or `"pivoting"` (section 7); the default, `"auto"`, takes the method whose whole calls were
# fastest (section 12). Its docstring's example, the matrix $\begin{pmatrix}4&1&0\\1&4&1\\0&1&4\end{pmatrix}$:

# %%
for method in tridiag.METHODS:
    x = tridiag.solve(np.array([0.0, 1, 1]), np.array([4.0, 4, 4]), np.array([1.0, 1, 0]), np.array([5.0, 6, 5]),
                      method=method)
    print(f"{method:>6}: x = {np.round(x, 12)}")

# %% [markdown]
# None of the methods but `"pivoting"` **pivots** (exchanges rows to avoid dividing by a small
# number). That is safe when the matrix is diagonally dominant ($|b_i| > |a_i| + |c_i|$) or
# symmetric positive definite, which is what the seed's title says; section 7 shows what happens
# otherwise, and what `"pivoting"` does about it.
#
# ## 2. From a 3 × 3 elimination to a PCR step
#
# Take three consecutive rows:
#
# $$\begin{aligned}
# a_{i-1} x_{i-2} + b_{i-1} x_{i-1} + c_{i-1} x_i &= d_{i-1} \\
# a_i x_{i-1} + b_i x_i + c_i x_{i+1} &= d_i \\
# a_{i+1} x_i + b_{i+1} x_{i+1} + c_{i+1} x_{i+2} &= d_{i+1}
# \end{aligned}$$
#
# Subtract $k_1 = a_i / b_{i-1}$ times the first row and $k_2 = c_i / b_{i+1}$ times the third from
# the middle one. The coefficients of $x_{i-1}$ and $x_{i+1}$ become $a_i - k_1 b_{i-1} = 0$ and
# $c_i - k_2 b_{i+1} = 0$, and what is left couples $x_i$ to $x_{i-2}$ and $x_{i+2}$:
#
# $$a_i' = -a_{i-1} k_1, \quad b_i' = b_i - c_{i-1} k_1 - a_{i+1} k_2, \quad
#   c_i' = -c_{i+1} k_2, \quad d_i' = d_i - d_{i-1} k_1 - d_{i+1} k_2 .$$
#
# These are seed 003's formulas, with its remark *"对应的行是不变的，但是对应的列有变化 — stride"*:
# the row stays where it is; what changes is the columns it couples, by the **stride**. Do this
# for every row at once and the system splits in two: even rows couple only with even rows, odd
# with odd. Repeat with stride $s = 2, 4, 8, \dots$ (neighbours $i \pm s$ instead of $i \pm 1$):
# after step $k$ row $i$ couples $x_{i - 2^k}$, $x_i$, $x_{i + 2^k}$. Once $2^k \ge n$ both
# neighbours are outside the system, and $x_i = d_i / b_i$. That is **parallel cyclic reduction**:
# $\lceil \log_2 n \rceil$ steps of $n$ independent row updates.
#
# **Rows outside the matrix.** Row $i - s$ does not exist when $i < s$ (nor $i + s$ when
# $i + s \ge n$). Seed 003 zeroes the multipliers there (*"if idx_row − stride < 0 … $k_{01} = 0$,
# $c_{01} = 0$, $d_{01} = 0$"*); the package instead pretends such a row is the **identity row**
# $(a, b, c, d) = (0, 1, 0, 0)$, the equation $x = 0$ for an unknown that does not exist. Then the
# same formulas serve every row without a branch: a row's coefficient of an unknown outside the
# system is always 0 ($a_0$ and $c_{n-1}$ are zeroed when the rows are loaded, and every step
# keeps it so), hence $k_1 = 0 / 1$ or $k_2 = 0 / 1$ and the identity row adds nothing. The
# padding slots of a block hold identity rows too. The row algebra is exercise 07.pcr-step;
# the instructor's version prints the package's code here:

# %% tags=["instructor"]
print(inspect.getsource(_common.reduce_row))

# %% [markdown]
# One step by hand on a 7 × 7 system, with that very function (`.py_func` is its Python source,
# which runs on the host): the pattern of nonzeros before and after the step at stride 1, and the
# solution of the new system.

# %%
def pattern(a, b, c, s):
    """The nonzeros of the matrix with rows (a_i, b_i, c_i) coupling x_{i-s}, x_i, x_{i+s}."""
    n = len(b)
    return "\n".join(" ".join("x" if j == i or (j == i - s and a[i]) or (j == i + s and c[i]) else "."
                              for j in range(n)) for i in range(n))


def dense(a, b, c, s):
    n = len(b)
    matrix = np.diag(b).astype(float)
    for i in range(n):
        if i >= s:
            matrix[i, i - s] = a[i]
        if i + s < n:
            matrix[i, i + s] = c[i]
    return matrix


def dominant_systems(batch, n, seed):
    """Random strictly diagonally dominant systems (|b| >= |a| + |c| + 0.5), a[:, 0] = c[:, -1] = 0."""
    rng = np.random.default_rng(seed)
    a, c = rng.uniform(-1, 1, (2, batch, n))
    b = (np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))) * rng.choice([-1.0, 1.0], (batch, n))
    a[:, 0], c[:, -1] = 0, 0
    return a, b, c, rng.normal(size=(batch, n))


a7, b7, c7, d7 = (v[0] for v in dominant_systems(1, 7, seed=7))
identity = (0.0, 1.0, 0.0, 0.0)
rows = list(zip(a7, b7, c7, d7))
step1 = [_common.reduce_row.py_func(rows[i - 1] if i >= 1 else identity, rows[i], rows[i + 1] if i + 1 < 7 else identity)[0]
         for i in range(7)]
a1, b1, c1, d1 = (np.array(v) for v in zip(*step1))
print("before (stride 1)          after one step (stride 2)")
for before, after in zip(pattern(a7, b7, c7, 1).splitlines(), pattern(a1, b1, c1, 2).splitlines()):
    print(f"{before}      {after}")
x_before = np.linalg.solve(dense(a7, b7, c7, 1), d7)
x_after = np.linalg.solve(dense(a1, b1, c1, 2), d1)
print("same solution:", np.allclose(x_before, x_after, rtol=1e-13, atol=0))

# %% [markdown]
# After the step, rows 0, 2, 4, 6 form one tridiagonal system (at stride 2) and rows 1, 3, 5
# another; neither refers to the other.
#
# ## 3. Who combines with whom: seed 003's tables, from a trace
#
# For $n = 7$ and $n = 11$ seed 003 lists, for each step, the triple $(i - s, i, i + s)$ of rows
# that builds the new row $i$, counting rows from 1 and calling the identity rows above and below
# the system $P_0$ and $P_{n+1}$. Here the same tables come from the real kernels.
#
# The package has two PCR kernels. `pcr_shared` runs all the steps of a system in shared memory,
# one block per system (or per group of small systems), with a barrier between steps.
# `pcr_global_step` runs **one step** in global memory, one thread per row; `pcr.split` launches
# it for $s = 1, 2, 4, \dots$ until each system has fallen apart into interleaved subsystems small
# enough for one block, and `pcr_shared` finishes those. That is the path for systems larger than
# a block (more than 768 rows in float64).

# %%
print(inspect.getsource(pcr.pcr_global_step))
print(inspect.getsource(pcr.split))

# %% [markdown]
# Asking `split` for subsystems of **one row** runs every PCR step as its own launch; then
# `pcr_shared` only divides $x_i = d_i / b_i$. Each step's reads are the kernel's reads of its
# arguments `a`, `b`, `c`, `d`, so the trace shows exactly which rows every thread combined.

# %%
def on_device(run, a, b, c, d):
    """x on the host from ``run(a, b, c, d, x, info)``: a path of the package called directly, on
    device copies of the (batch, n) systems."""
    x = cuda.device_array(d.shape, d.dtype)
    info = cuda.to_device(np.zeros(d.shape[0], np.int32))
    run(*[cuda.to_device(v) for v in (a, b, c, d)], x, info)
    return x.copy_to_host()


def pcr_global_steps(a, b, c, d, x, info):
    """Every PCR step as a launch of pcr_global_step, then x_i = d_i / b_i (the package's kernels)."""
    rows, stride = pcr.split(a, b, c, d, info, 1)  # global steps until every subsystem has 1 row
    _common.shared_launch(_common.launchers(pcr.kernels, x.dtype)[pcr.pcr_shared], rows, x, info, stride, pcr.BUFFERS)


def pcr_in_global_memory(a, b, c, d):
    """x of host systems by :func:`pcr_global_steps`."""
    return on_device(pcr_global_steps, a, b, c, d)


def combined_rows(trace, n):
    """{stride: [(i - s, i, i + s) for each row]} from the reads of b, rows from 1, identity rows 0 and n + 1."""
    table = {}
    for launch in trace.launches:
        if launch.kernel != "pcr_global_step":
            continue
        s = 1 << launch.number  # launch k is the step at stride 2^k
        read = collections.defaultdict(set)
        for r in trace.select(launch=launch.number, array="b"):
            read[r.block * launch.block[0] + r.thread].add(r.index % n)
        table[s] = [(i - s + 1 if i - s in read[i] else 0, i + 1, i + s + 1 if i + s in read[i] else n + 1)
                    for i in range(n)]
    return table


traces, tables = {}, {}
for n in (7, 11):
    traces[n] = ps.trace.record(pcr_in_global_memory, *dominant_systems(1, n, seed=n))
    tables[n] = combined_rows(traces[n], n)
    print(f"n = {n}: {len(traces[n].launches)} launches "
          f"({', '.join(launch.kernel for launch in traces[n].launches)})")
    for s, triples in tables[n].items():
        print(f"  stride {s}: " + " ".join(f"({l},{i},{r})" for l, i, r in triples))

# %% [markdown]
# The seed's tables, as written in the notes:

# %%
SEED_7 = {1: [(0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 5), (4, 5, 6), (5, 6, 7), (6, 7, 8)],
          2: [(0, 1, 3), (0, 2, 4), (1, 3, 5), (2, 4, 6), (3, 5, 7), (4, 6, 8), (5, 7, 8)],
          4: [(0, 1, 5), (0, 2, 6), (0, 3, 7), (0, 4, 8), (1, 5, 8), (2, 6, 8), (3, 7, 8)]}
SEED_11 = {1: [(i - 1, i, i + 1) for i in range(1, 12)],
           2: [(0, 1, 3), (0, 2, 4), (1, 3, 5), (2, 4, 6), (3, 5, 7), (4, 6, 8), (5, 7, 9), (6, 8, 10), (7, 9, 11),
               (8, 10, 12), (9, 11, 12)],
           4: [(0, 1, 5), (0, 2, 6), (0, 3, 7), (1, 4, 8), (1, 5, 9), (2, 6, 10), (3, 7, 11), (4, 8, 12), (5, 9, 12),
               (6, 10, 12), (7, 11, 12)],
           8: [(0, 1, 9), (0, 2, 10), (0, 3, 11), (0, 4, 12), (0, 5, 12), (0, 6, 12), (0, 7, 12), (0, 8, 12), (1, 9, 12),
               (2, 10, 12), (3, 11, 12)]}
for n, seed_table in ((7, SEED_7), (11, SEED_11)):
    pairs = [(s, mine, theirs) for s in seed_table for mine, theirs in zip(tables[n][s], seed_table[s])]
    differ = [(s, mine, theirs) for s, mine, theirs in pairs if mine != theirs]
    print(f"n = {n}: {len(pairs) - len(differ)} of {len(pairs)} triples as in seed 003"
          + "".join(f"; at stride {s} the seed has {theirs}, the trace {mine}" for s, mine, theirs in differ))

# %% [markdown]
# The kernels reproduce the notes, with one exception: for $n = 11$ at stride 4, row 4 combines
# with row $4 - 4 = 0$, the identity row, as the formula says; the notes' $(1, 4, 8)$ is a slip
# of the pen. Note also that every step uses *every* row: the triples never skip a row, they only
# reach further, and from stride 4 on ($n = 7$) or 8 ($n = 11$) most rows meet the identity rows
# on one side or both.
#
# The same trace as a picture: one row per step, an arrow from each row read to the row written
# (`ps.viz.dataflow` draws the phases of one launch, so the launches of this run are first
# renumbered as the phases of one launch; only the reads of `b` are drawn, and the first line
# stands for the input rows).

# %%
def steps_as_phases(trace, n):
    """The launch-per-step run as one launch whose phase k + 1 is launch k: reads of b, writes of out's b."""
    threads = trace.launches[0].block[0]
    records = [ps.trace.Record(0, 0, i, "rows", "global", i, True, 0, 0, 0, 8) for i in range(n)]  # the input rows
    for launch in trace.launches:
        if launch.kernel == "pcr_global_step":
            records += [r._replace(launch=0, block=0, thread=r.block * threads + r.thread, array="rows",
                                   index=r.index % n, phase=launch.number + 1)
                        for r in trace.select(launch=launch.number)
                        if (r.array == "b" and not r.write) or (r.array == "out" and r.write and r.index // n == _common.B)]
    return ps.trace.Trace(records, [ps.trace.Launch(0, "pcr_global_step", (1, 1, 1), (threads, 1, 1), 0)])


for n in (7, 11):
    ax = ps.viz.dataflow(steps_as_phases(traces[n], n), array="rows", title=f"PCR, n = {n}: rows combined at each step")
    _ = ax.set_yticklabels(["input"] + [f"stride {s}" for s in tables[n]])

# %% [markdown]
# Every row writes at every step (all threads busy), and the arrows double in length from step
# to step, like the Hillis–Steele scan of chapter 03, on both sides at once.
#
# ## 4. The seed's odd/even reordering, and why the package does without it
#
# After one step the even rows form one system and the odd rows another, but interleaved. Seed
# 003 moves them apart: the thread of row `tidx` writes its new row to position
#
# $$P = \left(\lfloor n/2 \rfloor + n \bmod 2\right) \cdot (\mathit{tidx} \bmod 2) + \lfloor \mathit{tidx} / 2 \rfloor .$$
#
# $\lfloor n/2 \rfloor + n \bmod 2 = \lceil n/2 \rceil$ is the number of even rows. An even row
# goes to position $\mathit{tidx}/2$, an odd row to $\lceil n/2 \rceil + \lfloor \mathit{tidx}/2 \rfloor$:
# **evens first, then odds**. The notes tabulate it for $n = 8$ (two systems in a block of 16
# threads) and $n = 11$ (a block of 22); computed from the formula:

# %%
def reorder(tidx, n):
    return (n // 2 + n % 2) * (tidx % 2) + tidx // 2


for n, threads in ((8, 16), (11, 22)):
    print(f"n = {n}, blockDim.x = {threads}")
    print("  threadIdx.x " + " ".join(f"{t:>2}" for t in range(threads)))
    print("  tidx        " + " ".join(f"{t % n:>2}" for t in range(threads)))
    print("  tidx % 2    " + " ".join(f"{t % n % 2:>2}" for t in range(threads)))
    print("  P           " + " ".join(f"{reorder(t % n, n):>2}" for t in range(threads)))

# %% [markdown]
# The first system's columns are the notes' tables. (The notes leave $P$ blank for the second
# system of the $n = 11$ block, and give threads 18 to 20 the wrong parity in the `tidx % 2`
# column.) Applied to the 7 × 7 system after its first step (section 2), the
# reordering turns the two interleaved systems into two contiguous tridiagonal blocks, each
# again at stride 1:

# %%
positions = [reorder(tidx, 7) for tidx in range(7)]
order = np.argsort(positions)  # order[p] = the row that moves to position p
print("P for rows 0..6:", positions, "-> position p holds row", [int(row) for row in order])
moved = dense(a1, b1, c1, 2)[np.ix_(order, order)]
print("\n".join(" ".join("x" if v else "." for v in line) for line in moved))

# %% [markdown]
# So with the reordering, every step of the notes' kernel is "combine with the rows at distance
# 1", inside ever more, ever smaller contiguous systems; each step halves them, and the notes'
# `count_iter` works out from the binary digits of $n$ how many steps it needs.
#
# **The package keeps the rows in place and doubles the stride instead.** Row $i$'s partners at
# step $k$ are rows $i \pm 2^k$ of the original order, which are exactly its neighbours at
# distance 1 after $k$ reorderings: the same arithmetic on the same numbers, without moving any
# row. What it saves:
#
# - **No bookkeeping of subsystems.** After $k$ reorderings there are $2^k$ contiguous systems of
#   $\lfloor n/2^k \rfloor$ or $\lceil n/2^k \rceil$ rows, and every thread must know where its
#   own starts and ends to find its identity rows. In place, the test is `row >= s` and
#   `row + s < m`.
# - **One layout for both kernels.** After global steps up to stride $s$, each system consists
#   of $s$ interleaved subsystems. `pcr_shared` loads subsystem $g$'s rows $g \bmod s,
#   g \bmod s + s, \dots$ into consecutive slots (`_common.locate`): the interleaving is undone
#   once, while loading, rather than after every step.
# - **Nothing to gain in shared memory.** At stride $s$, the threads of a warp read slots
#   $j - s$ for consecutive $j$: consecutive words, in distinct banks, whatever $s$ is. Moving
#   rows would cost a write pattern and a barrier, and buy no faster reads.
#
# Contiguous subsystems do pay off when they are handed to something else, for instance each to
# one thread running Thomas once they are small (the PCR-Thomas hybrids of Sakharnykh, GTC 2010;
# Davidson, Zhang and Owens, IPDPS 2011; Kim, Wu, Chang and Hwu, ICPP 2011). The shared kernel:

# %%
print(inspect.getsource(pcr.pcr_shared))
print(inspect.getsource(_common.locate))

# %% [markdown]
# Each step reads one buffer (`buf[src]`) and writes the other (`buf[1 - src]`), so a row is
# never overwritten while a neighbour may still read it: one barrier per step is enough.
#
# ## 5. Several systems per block
#
# A block of 7 threads would waste 25 of the 32 lanes of a warp. Seed 003 packs several systems
# into one block: `tidx = threadIdx.x % n` is the row, `Qt = (threadIdx.x - tidx) / n` the
# system within the block, and `gbx = Qt + blockIdx.x * (blockDim.x / n)` the system in the
# batch. The package does the same in `locate`: slot `j` is row `j % m` of subsystem
# `blockIdx.x * per_block + j // m`. It passes `per_block` explicitly (up to 256 rows per block),
# because it rounds the block up to whole warps, so `blockDim.x` is not a multiple of $n$; and a
# thread loops over several slots when a system has more rows than the block has threads.
#
# Three systems of $n = 7$: one launch, one block of 32 threads. Which thread loads which row
# (its reads of `b` before the first barrier):

# %%
small_batch = ps.trace.record(tridiag.solve, *dominant_systems(3, 7, seed=3), method="pcr")
launch = small_batch.launches[0]
print(f"{launch.kernel}: grid {launch.grid[0]} block, {launch.block[0]} threads")
loads = sorted((r.thread, r.index) for r in small_batch.select(array="b") if r.phase == 0)
print("threadIdx.x        " + " ".join(f"{t:>2}" for t, _ in loads))
print("system = t // 7    " + " ".join(f"{t // 7:>2}" for t, _ in loads))
print("row = t % 7        " + " ".join(f"{t % 7:>2}" for t, _ in loads))
print("reads b[sys, row]  " + " ".join(f"{i // 7:>1}{i % 7:>1}" for _, i in loads))
print("threads without a row:", launch.block[0] - len(loads))

# %% [markdown]
# With 40 systems of 7 rows, a block takes $\lfloor 256 / 7 \rfloor = 36$ of them and a second
# block the other 4. The global-memory picture, which block wrote which element of `x`: block 0
# the first $36 \times 7 = 252$, block 1 the last 28.

# %%
many = ps.trace.record(tridiag.solve, *dominant_systems(40, 7, seed=40), method="pcr")
print([(launch.kernel, launch.grid[0], launch.block[0]) for launch in many.launches])
_ = ps.viz.launches(many)

# %% [markdown]
# ## 6. Work and depth: Thomas, CR and PCR
#
# **Thomas** runs one system per thread: a forward sweep and a back substitution (exercise
# 07.thomas-sweep; the instructor's version prints the package's code here).

# %% tags=["instructor"]
print(inspect.getsource(thomas.thomas))

# %% [markdown]
# **Cyclic reduction** (CR) uses the same row algebra as PCR but only on half the rows per
# level: at stride $s$ the rows with $(i + 1) \bmod 2s = 0$ eliminate their neighbours, so the
# system halves at every level, down to one row; then a back substitution walks up the levels,
# each solved row giving the ones between. About $2n$ row operations instead of
# $n \log_2 n$, but $2 \log_2 n$ steps instead of $\log_2 n$, and most threads idle in most
# steps (`cr.cr_shared`).
#
# The tracer counts, for one system of each size: launches, barriers, *steps* (launches plus
# barriers: the synchronisation points, i.e. the depth), global reads and writes, and the
# longest chain of global accesses made by one thread. "PCR, global" is the launch-per-step run
# of section 3; there every row update is a global write of its four coefficients, so the
# writes count the work.

# %%
runs = (("Thomas", tridiag.solve, dict(method="thomas")), ("CR", tridiag.solve, dict(method="cr")),
        ("PCR", tridiag.solve, dict(method="pcr")), ("PCR, global", pcr_in_global_memory, {}))
print(f"{'n':>4} {'method':<12} {'launches':>8} {'barriers':>8} {'steps':>5} {'global reads':>12} "
      f"{'global writes':>13} {'longest thread':>14}")
for n in (16, 64, 256):
    system = dominant_systems(1, n, seed=n)
    for label, fn, options in runs:
        run = ps.trace.record(fn, *system, **options)
        counts = run.counts()
        chain = max(collections.Counter((r.launch, r.block, r.thread) for r in run.records if r.space == "global").values())
        print(f"{n:>4} {label:<12} {counts['launches']:>8} {counts['barriers']:>8} {counts['steps']:>5} "
              f"{counts['global_reads']:>12} {counts['global_writes']:>13} {chain:>14}")
    row_updates = (counts["global_writes"] - n) // 4  # the last run, PCR, global: 4 writes per row update, then x
    print(f"{'':>4} PCR, global: {row_updates} row updates = n * ceil(log2 n) = {n * int(np.ceil(np.log2(n)))}")

# %% [markdown]
# What the counts say:
#
# - **Thomas** touches global memory the least per system (each element once or twice), but one
#   thread makes all of it, one access after another: a chain of about $9n$ accesses. Its
#   parallelism is the batch only.
# - **PCR in shared memory** reads each band once ($4n$ reads, $n$ writes) and synchronises
#   $\lceil \log_2 n \rceil + 1$ times; **CR** has the same global traffic and about twice the
#   barriers ($2\log_2 n + 2$). Inside the block PCR updates $n \lceil \log_2 n \rceil$ rows (12
#   shared reads and 4 writes each), CR about $2n$.
# - **PCR through global memory** pays for the $\log_2 n$ factor in global traffic: every step
#   reads three rows and writes one for every row, $n \lceil \log_2 n\rceil$ row updates, and
#   every step is a launch. This is the path the package takes for systems larger than a block.
# - **Which wins: Brent's theorem** (chapter 03), $T_p \le W/p + D$ on $p$ threads. PCR has
#   $W \approx n \log_2 n$ row updates and $D \approx \log_2 n$ steps; CR $W \approx 2n$ and
#   $D \approx 2 \log_2 n$; Thomas $W \approx 2n$ and $D \approx 2n$ per system. When the threads
#   cover the system ($p \ge n$: one thread per row, as in one block per system), PCR's $W/p$ is
#   $\log_2 n$, no more than its depth, and its halved depth wins. When $p \ll n$ (one system of a
#   million rows on a GPU that runs some $10^5$ threads at once), $W/p$ dominates: PCR pays its
#   factor $\log_2 n$ of extra work in full, and the work-efficient methods win: CR, or the
#   partition method (section 12.2: each thread runs Thomas over a chunk, $W \approx$ a constant
#   times $n$, and only a small reduced system is left). Section 12's measurements on one system
#   of $2^{20}$ rows show it: the partition method beats PCR there.
#
# ## 7. Is it right, and when is it not?
#
# Against LAPACK's banded solver (`scipy.linalg.solve_banded`, Gaussian elimination with partial
# pivoting), on random diagonally dominant systems: the relative residual
# $\lVert A x - d \rVert / \lVert d \rVert$ and the relative error against LAPACK's $x$.

# %%
def banded(a, b, c, d):
    """x from LAPACK's gbsv (partial pivoting); a[0] and c[-1] are ignored."""
    bands = np.zeros((3, len(b)))
    bands[0, 1:], bands[1], bands[2, :-1] = c[:-1], b, a[1:]
    return scipy.linalg.solve_banded((1, 1), bands, d)


def residual(a, b, c, d, x):
    r = b * x - d
    r[..., 1:] += a[..., 1:] * x[..., :-1]
    r[..., :-1] += c[..., :-1] * x[..., 1:]
    return np.linalg.norm(r) / np.linalg.norm(d)


batch, n = ps.size_for_device(4, 256), ps.size_for_device(100, 4096)
a, b, c, d = dominant_systems(batch, n, seed=1)
reference = np.array([banded(*(v[k] for v in (a, b, c, d))) for k in range(batch)])
for dtype, bound in ((np.float64, 1e-12), (np.float32, 1e-5)):
    for method in tridiag.METHODS:
        x = tridiag.solve(*(v.astype(dtype) for v in (a, b, c, d)), method=method).astype(np.float64)
        error = np.abs(x - reference).max() / np.abs(reference).max()
        print(f"{np.dtype(dtype).name} {method:>6}: residual < {bound:g}: {residual(a, b, c, d, x) < bound}, "
              f"error < {bound:g}: {error < bound}")

# %% [markdown]
# Now a system that is **not** diagonally dominant, but perfectly well conditioned: random bands
# with $|b_i| \le 0.5$ and $|a_i|, |c_i| \le 1$, and one diagonal entry, $b_5$, set to 0. The
# matrix is invertible, and LAPACK, which exchanges rows when a pivot is small, solves it to
# the last digit. PCR divides by $b_{i \pm s}$ of its neighbours, and $b_5 = 0$ is one of them:

# %%
rng = np.random.default_rng(0)
n_bad = 16
a_bad, c_bad = rng.uniform(-1, 1, (2, n_bad))
b_bad, d_bad = rng.uniform(-1, 1, n_bad) * 0.5, rng.normal(size=n_bad)
a_bad[0] = c_bad[-1] = 0
for b5 in (0.0, 1e-12):
    b_try = b_bad.copy()
    b_try[5] = b5
    matrix = dense(a_bad, b_try, c_bad, 1)
    x_lapack = banded(a_bad, b_try, c_bad, d_bad)
    print(f"b_5 = {b5:g}: condition number < 100: {np.linalg.cond(matrix) < 100}; "
          f"LAPACK residual < 1e-14: {residual(a_bad, b_try, c_bad, d_bad, x_lapack) < 1e-14}")
    for method in tridiag.METHODS:
        try:
            x = tridiag.solve(a_bad, b_try, c_bad, d_bad, method=method)
        except np.linalg.LinAlgError as error:
            print(f"  {method:>6}: LinAlgError: {str(error).split(':')[1].split('.')[0].strip()}")
        else:
            error = np.abs(x - x_lapack).max() / np.abs(x_lapack).max()
            print(f"  {method:>6}: error < 1e-12: {error < 1e-12}, error > 1e-6: {error > 1e-6}")

# %% [markdown]
# With $b_5 = 0$ PCR meets a zero pivot in its first step (rows 4 and 6 divide by $b_5$) and
# says so with a `LinAlgError`. CR and Thomas get through, by luck rather than design: they never
# divide by $b_5$ itself but by $b_5$ minus corrections (Thomas's pivot $b_5 - a_5 c'_4$; CR
# eliminates with row 5 only after its first level has changed it), which are not small here.
# With $b_5 = 10^{-12}$ nothing is zero and no method complains, but PCR multiplies rows 4 and 6
# by $k = a_i / b_5 \approx 10^{12}$ and subtracts: its $x$ is wrong in the sixth digit, without
# a word, while LAPACK is exact. Move the small entry elsewhere and CR or Thomas fail instead:
# without pivoting, *some* matrix always defeats the method. **What to use instead:** a solver
# that pivots. `method="pivoting"` (the last line of each case above) is Gaussian elimination
# with partial pivoting, one thread per system, as LAPACK's `gtsv` (`scipy.linalg.solve_banded`,
# `scipy.linalg.lapack.dgtsv`): at each step it takes the larger of the pivot and the entry below
# it as the pivot, exchanging the two rows, and its $U$ gains one super-diagonal of fill. On the
# GPU cuSPARSE's `gtsv2` pivots too (diagonal pivoting inside SPIKE partitions), unlike
# `gtsv2_nopivot` and `gtsv2StridedBatch`. Or make sure the matrix is dominant or positive
# definite: chapter 08 checks whether its $T$ is positive definite and pivots only where it is
# not.
#
# **Condition numbers.** A small residual is what every solver above reports; what it promises
# about the error depends on the matrix. With $r = A \hat x - d$ we have $\hat x - x = A^{-1} r$,
# and since $\lVert d \rVert \le \lVert A \rVert \lVert x \rVert$,
#
# $$\frac{\lVert \hat x - x \rVert}{\lVert x \rVert} \le \kappa(A) \,
# \frac{\lVert r \rVert}{\lVert d \rVert}, \qquad \kappa(A) = \lVert A \rVert \, \lVert A^{-1} \rVert .$$
#
# A backward-stable solver (LAPACK, `"pivoting"`; the others on dominant or positive definite
# matrices) makes $\lVert r \rVert / \lVert d \rVert$ a modest multiple of $n \varepsilon$, so
# its error is at most about $\kappa(A)\, n \varepsilon$. A strictly diagonally dominant matrix
# is well conditioned: in the $\infty$-norm $\lVert A^{-1} \rVert \le 1 / \min_i (|b_i| - |a_i|
# - |c_i|)$, so the systems of this chapter, with a margin of at least 0.5 and rows summing to at
# most 5.5, have $\kappa_\infty \le 11$. The $b_5 = 10^{-12}$ matrix above is well
# conditioned too ($\kappa < 100$): PCR's wrong sixth digit is therefore the method's fault, not
# the matrix's, and its residual, at least the error over $\kappa$, is far above $n \varepsilon$. Exercise 07.residual computes $r$; together
# with an estimate of $\kappa$ it tells how far $\hat x$ can be from $x$.
#
# ## 8. Check
#
# `ps.check.tridiagonal` runs a solver on batches of random diagonally dominant systems of sizes
# 1, 2, 3, 7, 11, 32 and 33, with every new device array and all shared memory poisoned, traces
# every launch, compares with a float64 reference, and prints one line: PASS, or the first thing
# that went wrong (a race, a read of an unwritten cell, an index out of bounds, a wrong row) with
# a hint. The package's methods, `"pivoting"` included:

# %%
for dtype in (np.float64, np.float32):
    for method in tridiag.METHODS:
        print(ps.check.tridiagonal(lambda a, b, c, d: tridiag.solve(a, b, c, d, method=method), dtype=dtype,
                                   name=f"{method} {np.dtype(dtype).name}"))

# %% [markdown]
# ## 9. Exercises
#
# Three exercises, from a few lines to an algorithm of its own: the residual that tells whether
# a solve is right (warm-up), one PCR step (core), and, after section 12, the Thomas sweep that
# finishes the hybrid (stretch). `ps.hint("07.residual")` opens the hints one at a time.
#
# ### Exercise 07.residual (warm-up, 1 point)
#
# Every solver above was judged by its **residual** $r = A x - d$: row by row,
# $r_i = a_i x_{i-1} + b_i x_i + c_i x_{i+1} - d_i$, where $a_0$ and $c_{n-1}$ lie outside the
# matrix (the arrays hold garbage there, which must not leak in). Write the kernel
# `my_residual(a, b, c, d, x, r)` for a batch of systems, arrays of shape `(batch, n)`: one thread
# per row of one system, a 2-D grid (`cuda.grid(2)` gives the row, then the system), every
# `r[system, i]` written, nothing outside the arrays touched. In numpy it is
# `b * x + a * roll(x, 1) + c * roll(x, -1) - d` with the wrapped-around terms left out.
# The check runs it on batches of 1 to 5 systems of 1 to 70 rows, traced, with `r` poisoned, and
# allows a thread at most 8 memory accesses: one thread looping over a system fails.

# %% tags=["exercise"] exercise_id="07.residual" points=1 todo="my_residual: thread (i, system) writes r[system, i], the i-th row of A x - d for that system, leaving out the terms of a_0 and c_(n-1) (outside the matrix) and touching nothing outside the arrays"
@cuda.jit
def my_residual(a, b, c, d, x, r):
    i, system = cuda.grid(2)
    batch, n = x.shape
    ### BEGIN SOLUTION
    if system < batch and i < n:
        row = b[system, i] * x[system, i] - d[system, i]
        if i > 0:
            row += a[system, i] * x[system, i - 1]
        if i < n - 1:
            row += c[system, i] * x[system, i + 1]
        r[system, i] = row
    ### END SOLUTION


def my_residual_of(a, b, c, d, x):
    r = cuda.device_array(x.shape, x.dtype)
    threads = (32, 4)
    blocks = (-(-x.shape[1] // threads[0]), -(-x.shape[0] // threads[1]))
    my_residual[blocks, threads](*(cuda.to_device(v) for v in (a, b, c, d, x)), r)
    return r


# %% tags=["check"] exercise_id="07.residual"
def residual_reference(a, b, c, d, x):
    r = b * x - d
    r[:, 1:] += a[:, 1:] * x[:, :-1]
    r[:, :-1] += c[:, :-1] * x[:, 1:]
    return r


residual_cases = [tuple(np.random.default_rng(10 * batch + n).uniform(-2, 2, (5, batch, n)))
                  for batch, n in ((1, 1), (1, 2), (2, 3), (3, 31), (2, 33), (5, 70))]
print(ps.check.function(my_residual_of, residual_reference, residual_cases, name="my_residual",
                        budget=ps.check.Budget(accesses_per_step=8)))

# %% [markdown]
# ### Exercise 07.pcr-step (core, 2 points)
#
# Below is a PCR kernel for float64 systems of up to 64 rows, one system per block and one thread
# per row, with the rows in a shared array `rows[buffer, coefficient, i]` (coefficients 0 to 3
# are $a, b, c, d$) and two buffers. The loads, the barriers, the stride loop and the final
# division are there; the update of row `i` at stride `s` is missing. Write it, from section 2's
# elimination: after the step, row `i` of buffer `1 - src` must be a combination of rows `i - s`,
# `i` and `i + s` of buffer `src` in which $x_{i-s}$ and $x_{i+s}$ no longer appear, so that it
# couples $x_{i-2s}$, $x_i$ and $x_{i+2s}$ only, and it must have the same solution as the
# system before. A neighbour outside $0 \dots n-1$ changes nothing. After the last step every
# row couples $x_i$ alone, and the given division solves it: the result is
# `scipy.linalg.solve_banded` of each system. (Try writing into `src` instead, or reading row
# `i - s` without a guard: the checker names both mistakes.)
#
# The check solves batches of 1 to 33 rows, traced, with the shared memory poisoned, and allows
# a thread at most 20 memory accesses between two barriers (a step needs 16: its own row, its
# two neighbours, its new row): one thread eliminating for the whole system fails.

# %% tags=["exercise"] points=2 todo="in the step loop, for row i < n: write into rows[1 - src] the combination of rows i - s, i and i + s of rows[src] that eliminates x_(i-s) and x_(i+s), so that row i then couples x_(i-2s), x_i and x_(i+2s) only and the solution is unchanged; a neighbour outside 0..n-1 acts as a row of the identity" exercise_id="07.pcr-step"
ROWS = 64


@cuda.jit
def my_pcr(a, b, c, d, x):
    rows = cuda.shared.array((2, 4, ROWS), float64)
    system = cuda.blockIdx.x
    i = cuda.threadIdx.x
    n = x.shape[1]
    if i < n:
        rows[0, 0, i] = a[system, i] if i > 0 else 0.0  # a_0 and c_(n-1) are outside the matrix
        rows[0, 1, i] = b[system, i]
        rows[0, 2, i] = c[system, i] if i < n - 1 else 0.0
        rows[0, 3, i] = d[system, i]
    cuda.syncthreads()
    src = 0
    s = 1
    while s < n:
        if i < n:
            ai, bi, ci, di = rows[src, 0, i], rows[src, 1, i], rows[src, 2, i], rows[src, 3, i]
            ### BEGIN SOLUTION
            if i >= s:
                al, bl, cl, dl = rows[src, 0, i - s], rows[src, 1, i - s], rows[src, 2, i - s], rows[src, 3, i - s]
            else:
                al, bl, cl, dl = 0.0, 1.0, 0.0, 0.0
            if i + s < n:
                ar, br, cr, dr = rows[src, 0, i + s], rows[src, 1, i + s], rows[src, 2, i + s], rows[src, 3, i + s]
            else:
                ar, br, cr, dr = 0.0, 1.0, 0.0, 0.0
            k1 = ai / bl
            k2 = ci / br
            rows[1 - src, 0, i] = -al * k1
            rows[1 - src, 1, i] = bi - cl * k1 - ar * k2
            rows[1 - src, 2, i] = -cr * k2
            rows[1 - src, 3, i] = di - dl * k1 - dr * k2
            ### END SOLUTION
        cuda.syncthreads()
        src = 1 - src
        s *= 2
    if i < n:
        x[system, i] = rows[src, 3, i] / rows[src, 1, i]


def my_pcr_solve(a, b, c, d):
    x = cuda.device_array(d.shape, d.dtype)
    my_pcr[d.shape[0], ROWS](cuda.to_device(a), cuda.to_device(b), cuda.to_device(c), cuda.to_device(d), x)
    return x


# %% tags=["check"] exercise_id="07.pcr-step"
print(ps.check.tridiagonal(my_pcr_solve, budget=ps.check.Budget(accesses_per_step=20)))

# %% [markdown]
# ## 10. What PCR has to do with scans
#
# Read row $i$ as a recurrence: if $c_i \ne 0$, it gives the next unknown from the two before,
# $x_{i+1} = (d_i - a_i x_{i-1} - b_i x_i) / c_i$. With the state vector $v_i = (x_{i-1}, x_i, 1)$
# this is a matrix product,
#
# $$v_{i+1} = M_i v_i, \qquad M_i = \begin{pmatrix} 0 & 1 & 0 \\ -a_i/c_i & -b_i/c_i & d_i/c_i \\
#   0 & 0 & 1 \end{pmatrix},$$
#
# so $v_{i+1} = M_i M_{i-1} \cdots M_0 \, v_0$: the vectors are a **scan of 3 × 3 matrices** under
# matrix multiplication, which is associative (not commutative: the newer matrix goes on the
# left). The unknown $x_0$ enters linearly through $v_0 = (0, x_0, 1)$, and the last row fixes
# it: with $c_{n-1}$ taken as 1, the "next" unknown $x_n$ must come out 0. Any scan of the
# earlier chapters computes these prefix products in $\log_2 n$ steps; below, Hillis–Steele
# (chapter 03) in numpy: at step $k$ element $i$ takes the product with element $i - 2^k$.

# %%
def solve_by_matrix_scan(a, b, c, d):
    """x from a Hillis-Steele scan of the 3 x 3 matrices M_i (numpy; needs c_i != 0)."""
    n = len(b)
    c = c.copy()
    c[-1] = 1.0  # x_n := (d - a x_{n-2} - b x_{n-1}) / 1 must be 0: the last equation
    prefix = np.zeros((n, 3, 3))
    prefix[:, 0, 1], prefix[:, 2, 2] = 1, 1
    prefix[:, 1, 0], prefix[:, 1, 1], prefix[:, 1, 2] = -a / c, -b / c, d / c
    reach, steps = 1, 0
    while reach < n:
        prefix[reach:] = prefix[reach:] @ prefix[:-reach]  # the right side reads the previous step only
        reach, steps = 2 * reach, steps + 1
    x0 = -prefix[-1, 1, 2] / prefix[-1, 1, 1]  # x_n = P[1, 1] x_0 + P[1, 2] = 0
    return np.concatenate([[x0], prefix[:-1, 1, 1] * x0 + prefix[:-1, 1, 2]]), steps


for n in (8, 16, 32, 64):
    a_s, b_s, c_s, d_s = (v[0] for v in dominant_systems(1, n, seed=5))
    x_scan, steps = solve_by_matrix_scan(a_s, b_s, c_s, d_s)
    x_lapack = banded(a_s, b_s, c_s, d_s)
    error = np.abs(x_scan - x_lapack).max() / np.abs(x_lapack).max()
    print(f"n = {n:>2}: {steps} scan steps, error < 1e-10: {error < 1e-10}, error > 1: {error > 1}")

# %% [markdown]
# The scan gets $n = 8$ right in 3 steps, and then falls apart. The recurrence runs the system
# *as an initial-value problem*: for a diagonally dominant matrix $|b_i / c_i| > 1$, so the
# products grow geometrically (like $\prod |b_i / c_i|$), and $x_0$ comes from the ratio of two
# huge numbers. PCR does the same **doubling** on the equations instead of on the recurrence:
# after step $k$ each row couples unknowns $2^k$ apart, as each scan element after step $k$
# spans $2^k$ matrices, with all $n$ elements busy in every one of the $\log_2 n$ steps: the
# work and depth of Hillis–Steele, $n \log_2 n$ and $\log_2 n$. The differences are that a PCR
# row reaches out on both sides, and that its combination, an elimination, stays bounded for a
# diagonally dominant matrix: it is the stable way to do this scan. Cyclic reduction is, in the
# same sense, the work-efficient (Blelloch-like) scan: an up-sweep that halves the system, a
# down-sweep that substitutes back, about $2n$ row operations in $2 \log_2 n$ steps.
#
# ## 11. On the GPU
#
# `benchmarks/tridiag.py` (the `tridiag` stage of `bash benchmarks/run_gpu.sh`) ran every method
# and two library baselines on one GPU, on random diagonally dominant systems of eight shapes
# (batch × n; this section shows four) in float32 and float64, and checked every result by its residual before timing it
# (`benchmarks/tridiag.csv`; `benchmarks/README.md` describes the method). Every time is a median
# of 25 after warm-up calls, and the CSV's `timing` column says how each row was measured:
#
# - *ours (kernels)*: a method's launches on device arrays, the durations of its kernels summed
#   from CUPTI's trace (`torch.profiler`, which records every kernel of the process, whoever
#   launched it): the GPU's work alone. The host's cost of launching (tens of microseconds of
#   Python per numba launch, chapter 05) is *not* in this figure. (`--method events` times the
#   same launches queued behind a short busy kernel between two CUDA events instead.)
# - *ours (whole call)*: a whole `tridiag.solve` on device arrays, on the host clock, as a user
#   pays for it: the checks of the arguments, the allocations, the launches from Python, the
#   kernels, and the copy of the failure flags back to the host.
# - *cuSPARSE*: `gtsv2StridedBatch` through CuPy, measured the same way: the library's device
#   time, its kernels summed (the copy that restores $d$, which the solve overwrites, before each
#   run is a memcpy, not counted).
# - *JAX*: `jax.lax.linalg.tridiagonal_solve` (which calls cuSPARSE), a whole jitted call on the
#   host clock.
#
# The device and the date, how each kind of row was timed, and the times, all read from the CSV
# (microseconds; Thomas was not run on systems longer than $2^{16}$ rows, which one thread
# would walk alone):

# %%
# The rows of method="pivoting" and cuSPARSE's pivoting solvers come from a run of their own on another GPU (chapter 08).
bench = [row for row in results.read("tridiag.csv") if "--only-pivoting" not in row["command"]]
print(f"{bench[0]['device']}, {bench[0]['date']}; every result correct: {all(row['correct'] for row in bench)}")
for label, timing in sorted({(row["method"] if row["kind"] == "library" else row["kind"], row["timing"]) for row in bench}):
    print(f"  {label:<28} timing: {timing}")

CASES = [(512, 512), (4096, 256), (16384, 64), (1, 2**20)]
OURS = ("pcr", "cr", "thomas")
CUSPARSE, JAX = "cusparse gtsv2StridedBatch", "jax tridiagonal_solve"


def time_us(method, kind, dtype, batch, n):
    """median_us of the one matching row of tridiag.csv; NaN for Thomas on one system (not run)."""
    if method == "thomas" and batch == 1:
        return float("nan")
    return results.value("tridiag.csv", "median_us", method=method, kind=kind, dtype=dtype, batch=batch, n=n)


def case_label(batch, n):
    return f"{batch} x {n}" if n < 2**20 else "1 x 2^20"


kernels = {(m, dtype, case): time_us(m, "ours (kernels)", dtype, *case) for m in OURS
           for dtype in ("float32", "float64") for case in CASES}
whole = {(m, dtype, case): time_us(m, "ours (whole call)", dtype, *case) for m in OURS
         for dtype in ("float32", "float64") for case in CASES}
cusparse = {(dtype, case): time_us(CUSPARSE, "library", dtype, *case) for dtype in ("float32", "float64") for case in CASES}
jax_call = {(dtype, case): time_us(JAX, "library", dtype, *case) for dtype in ("float32", "float64") for case in CASES}

print(f"\n{'median time (us)':<20}{'ours (kernels)':^24}{'cuSPARSE':>10}  {'ours (whole call)':^27}{'JAX':>8}")
print(f"{'dtype':<8} {'batch x n':>11}" + "".join(f" {m:>7}" for m in OURS) + f" {'device':>9}  "
      + "".join(f" {m:>8}" for m in OURS) + f" {'call':>7}")
for dtype in ("float32", "float64"):
    for case in CASES:
        print(f"{dtype:<8} {case_label(*case):>11}" + "".join(f" {kernels[m, dtype, case]:>7.1f}" for m in OURS)
              + f" {cusparse[dtype, case]:>9.1f}  " + "".join(f" {whole[m, dtype, case]:>8.1f}" for m in OURS)
              + f" {jax_call[dtype, case]:>7.1f}")

# %% [markdown]
# The same, as ratios: each of our methods against cuSPARSE's device time, its kernels and its
# whole call, and our whole call against JAX's:

# %%
print(f"{'':20}{'kernels / cuSPARSE':^24}  {'whole call / cuSPARSE':^24}  {'whole call / JAX':^24}")
print(f"{'dtype':<8} {'batch x n':>11}" + "".join(f" {m:>7}" for m in OURS) * 3)
for dtype in ("float32", "float64"):
    for case in CASES:
        print(f"{dtype:<8} {case_label(*case):>11}"
              + "".join(f" {kernels[m, dtype, case] / cusparse[dtype, case]:>7.2f}" for m in OURS) + "  "
              + "".join(f" {whole[m, dtype, case] / cusparse[dtype, case]:>7.2f}" for m in OURS) + "  "
              + "".join(f" {whole[m, dtype, case] / jax_call[dtype, case]:>7.2f}" for m in OURS))


def span(values, digits=2):
    values = [v for v in values if v == v]  # without the NaNs of Thomas on one system
    return f"{min(values):.{digits}f} to {max(values):.{digits}f}"


DTYPES = ("float32", "float64")
BATCHES = [case for case in CASES if case[0] > 1]
print("\nPCR's kernels / cuSPARSE, on the batches:", span(kernels["pcr", t, c] / cusparse[t, c] for t in DTYPES for c in BATCHES))
print("PCR's kernels / cuSPARSE, on one system of 2^20:", span(kernels["pcr", t, CASES[-1]] / cusparse[t, CASES[-1]] for t in DTYPES))
print("the fastest of our kernels:", "; ".join(
    f"{dtype} {case_label(*case)}: {min(('pcr', 'cr') if case[0] == 1 else OURS, key=lambda m: kernels[m, dtype, case])}"
    for dtype in DTYPES for case in CASES))
print("PCR's kernels faster than CR's in every case:", all(kernels["pcr", t, c] < kernels["cr", t, c] for t in DTYPES for c in CASES))
print("our whole calls / cuSPARSE's device time:", span(whole[m, t, c] / cusparse[t, c] for m in OURS for t in DTYPES for c in CASES))
print("our whole calls / JAX's whole call:", span(whole[m, t, c] / jax_call[t, c] for m in OURS for t in DTYPES for c in CASES))

# %% [markdown]
# Kernel times and whole calls were measured separately, so their difference is what a call
# costs beyond the GPU's work: roughly the host's part, Python included. For JAX the same
# difference holds only where JAX runs the kernel that cuSPARSE's row timed. In jaxlib's
# CUDA lowering of `tridiagonal_solve` (by a reading of its source, not a measurement) a
# batch goes to `gtsv2StridedBatch`, the routine timed here, but a single system to `gtsv2`,
# cuSPARSE's *pivoting* solver, another kernel altogether: so JAX's call minus cuSPARSE's device
# time is printed for the batches only. (Timing JAX's own kernels, with CUPTI or Nsight, would
# settle it for every shape.)

# %%
print(f"{'whole call - kernels (us)':<26}" + "".join(f" {m:>8}" for m in OURS) + "   JAX call - cuSPARSE device (us)")
for dtype in DTYPES:
    for case in CASES:
        print(f"{dtype:<8} {case_label(*case):>11}{'':6}" + "".join(f" {whole[m, dtype, case] - kernels[m, dtype, case]:>8.1f}" for m in OURS)
              + (f"   {jax_call[dtype, case] - cusparse[dtype, case]:>8.1f}" if case[0] > 1 else "   (JAX calls gtsv2 here)"))
print("\nours, on the batches (one launch each), us:",
      span((whole[m, t, c] - kernels[m, t, c] for m in OURS for t in DTYPES for c in BATCHES), 1))
print("ours, on one system of 2^20, us:", span((whole[m, t, CASES[-1]] - kernels[m, t, CASES[-1]] for m in ("pcr", "cr") for t in DTYPES), 1))
print("JAX, on the batches, us:", span((jax_call[t, c] - cusparse[t, c] for t in DTYPES for c in BATCHES), 1))
print("beyond the kernels more than the kernels themselves, for every call of ours:",
      all(whole[m, t, c] - kernels[m, t, c] > kernels[m, t, c] for m in OURS for t in DTYPES for c in CASES if c[0] > 1 or m != "thomas"))

# %% [markdown]
# Two more things to look at: how many bytes PCR's kernels move per microsecond, and, for the
# single system of $2^{20}$ rows, the global path of section 3. On the batches `pcr_shared`
# reads the four bands once and writes $x$: $5 \cdot \text{batch} \cdot n$ values. On the large
# system `pcr.split` first runs global steps until the interleaved subsystems fit into a block
# (its loop, repeated below); each step reads at least the four bands and writes four new ones,
# then `pcr_shared` reads four and writes $x$. Those are lower bounds on the traffic (a step
# reads three rows for every row it writes; caches serve some of it), divided by the kernel
# times of the table:

# %%
print(f"{'dtype':<8} {'batch x n':>11} {'global steps':>12} {'least traffic (MB)':>19} {'kernels (us)':>13} "
      f"{'least traffic / time (GB/s)':>28}")
for dtype in DTYPES:
    itemsize = np.dtype(dtype).itemsize
    for batch_, n_ in CASES:
        limit, stride, steps = pcr.max_block_rows(dtype), 1, 0
        while -(-n_ // stride) > limit:  # pcr.split's loop
            stride, steps = 2 * stride, steps + 1
        traffic = (8 * steps + 5) * batch_ * n_ * itemsize
        t = kernels["pcr", dtype, (batch_, n_)]
        print(f"{dtype:<8} {case_label(batch_, n_):>11} {steps:>12} {traffic / 1e6:>19.1f} {t:>13.1f} {traffic / t / 1e3:>28.0f}")
print("PCR's float32 kernels faster than its float64 kernels in every case:",
      all(kernels["pcr", "float32", c] < kernels["pcr", "float64", c] for c in CASES),
      "| float64 / float32:", span(kernels["pcr", "float64", c] / kernels["pcr", "float32", c] for c in CASES))

# %% [markdown]
# The same times as grouped bars, one group per shape (the shapes are unrelated: each has its
# own batch and $n$, so no line joins them): our kernels and PCR's whole call beside cuSPARSE's
# device time and JAX's whole call.

# %%
series = {("pcr", "ours (kernels)"): "PCR (kernels)", ("cr", "ours (kernels)"): "CR (kernels)",
          ("thomas", "ours (kernels)"): "Thomas (kernels)", ("pcr", "ours (whole call)"): "PCR (whole call)",
          (CUSPARSE, "library"): "cuSPARSE gtsv2StridedBatch (device)", (JAX, "library"): "JAX (whole call)"}
import matplotlib.pyplot as plt  # noqa: E402

for dtype in DTYPES:
    fig, ax = plt.subplots(figsize=(9, 3.2))
    width = 1 / (len(series) + 1)
    for k, (key, label) in enumerate(series.items()):
        heights = [next((row["median_us"] for row in bench if (row["method"], row["kind"]) == key
                         and row["dtype"] == dtype and (row["batch"], row["n"]) == case), np.nan) for case in CASES]
        ax.bar(np.arange(len(CASES)) + k * width, heights, width, label=label)  # NaN: not measured (Thomas, 1 x 2^20)
    ax.set_xticks(np.arange(len(CASES)) + width * (len(series) - 1) / 2, [case_label(*case) for case in CASES])
    ax.set_yscale("log")
    ax.set_ylabel("median time (us), log scale")
    ax.set_title(f"tridiagonal solves, {bench[0]['device']}, {dtype}")
    _ = ax.legend(fontsize=7, ncol=3)

# %% [markdown]
# What this shows, plainly (every figure below is printed by one of the cells above):
#
# - **PCR is not as fast as cuSPARSE, but within a small factor of it.** PCR's kernels take
#   between 2.6 and 4.0 times cuSPARSE's device time on the batches, and about 3.2 to 3.3 times on
#   the one system of $2^{20}$ rows (the ratio table). cuSPARSE's documentation describes
#   `gtsv2StridedBatch` as a combination of CR and PCR without pivoting: the same building
#   blocks as ours, organised better.
# - **PCR is the fastest of these three kernels except at 16384 × 64, where Thomas is** (section
#   12 adds a fourth, faster on every batch): there 16384
#   threads each walk 64 rows, and Thomas's kernel comes within 1.4 (float64) to 1.8 (float32)
#   times cuSPARSE. At 512 × 512 Thomas is the slowest by far, about 20 to 25 times
#   cuSPARSE: 512 threads in all, each walking 512 rows. CR's kernels are slower than PCR's in
#   every case, although CR does fewer row operations (section 6: twice the barriers, and most
#   threads idle in most steps).
# - **On the batches, bytes do not set the time.** PCR's kernels move their least traffic at
#   the rates of the last column above, a small fraction of what the GPU's memory delivers (a
#   few terabytes a second). float32 is faster than float64 in every case, but by 1.15 to 1.42 times, not by the
#   factor of 2 in bytes. The candidates are latency (a barrier per step, two divisions per row update,
#   the integer divisions of `locate`); the benchmark does not separate them. One run per case:
#   differences of some tens of percent may be noise.
# - **On one large system** PCR takes the global path of section 3: 10 (float32) or 11 (float64)
#   launches of `pcr_global_step`, each updating every one of the $2^{20}$ rows, $O(n \log n)$
#   work in all, then `pcr_shared` on the interleaved subsystems. Its kernels move their least
#   traffic at about 1.0 (float32) and 1.5 (float64) TB/s: far closer to the memory's bandwidth
#   than on the batches.
# - **A whole call costs more than its kernels.** The spans printed above set our whole calls
#   beside cuSPARSE's device time and JAX's whole call, and "whole call - kernels" is roughly
#   what driving the GPU from Python costs, call by call. On the large system PCR's and CR's
#   calls first run global PCR steps (section 3), one launch each; on the batches each method
#   makes one launch. Section 12 says what was done to make that cost small.

# %% [markdown]
# ## 12. The hybrid: a few PCR steps, then Thomas
#
# Section 11 left PCR several times behind cuSPARSE on the batches, with the bytes far from
# setting the time. The way out in the literature (Sakharnykh 2010; Davidson, Zhang and Owens
# 2011; Kim, Wu, Chang and Hwu 2011; the Thomas-PCR hybrid of Laszlo, Giles and Appleyard 2016;
# Zhang, Cohen and Owens 2010 combine CR with PCR and with recursive doubling instead) is to
# **stop PCR early**. After $k$ steps a
# system of $m$ rows has split into $2^k$ independent interleaved systems (rows
# $r, r + 2^k, r + 2 \cdot 2^k, \dots$), each of about $m / 2^k$ rows. Give each of them to one
# thread, which solves it by Thomas: $2 m / 2^k$ dependent steps, with the least work of all
# methods. PCR's remaining $\log_2(m / 2^k)$ steps over all $m$ rows are gone.
#
# `tridiag.solve(..., method="hybrid")` (`prefixsum.tridiag.hybrid`) does this in one kernel,
# `hybrid_shared`: `plan` gives each system `lanes` threads, the power of two nearest below
# $m /$ `THOMAS_ROWS` (4 rows a thread), and as many systems per block as 256 threads and 48 KiB
# allow; `pcr_steps` runs PCR at strides $1, 2, \dots$ up to `lanes / 2`, and `sweep` is Thomas
# on one thread's rows. Each thread updates in the PCR steps the same rows its sweep takes, so
# their slots come without a division (`locate` costs four 64-bit divisions a row and a step).
# Systems
# longer than a block are first split by PCR steps in global memory, several per launch
# (`pcr_window`), until their pieces are 64 rows. This was the hybrid's first form; `tridiag.solve`
# now hands most shapes to the two kernels of sections 12.1 and 12.2, and `hybrid.run_shared`
# runs this one alone (the trace below calls it).

# %%
print(inspect.getsource(hybrid.pcr_steps))

# %% tags=["instructor"]
print(inspect.getsource(hybrid.sweep))

# %% [markdown]
# A trace shows which rows each step touches. One system of 32 rows gets 8 threads (4 rows each):
# after the load (the first line), three PCR steps at strides 1, 2 and 4 combine each row with
# rows ever further away, as in section 3; then each thread walks its own rows 8 apart, down and
# back up (the coloured bars join the rows one thread writes in the sweep; the value it carries
# from row to row stays in a register, which the trace does not see). Only the $d$ coefficients
# of the shared buffer are drawn, by row.

# %%
def hybrid_rows(trace, n, coefficient=_common.D):
    """The hybrid's shared-buffer accesses to one coefficient, by row (one system in one block)."""
    records = [r._replace(array="rows", index=r.index % n) for r in trace.select(array="buf")
               if r.index // n % 4 == coefficient]
    return ps.trace.Trace(records, trace.launches)


def hybrid_shared_solve(a, b, c, d):
    """The hybrid by ``hybrid_shared`` whatever n (``hybrid.run_shared``: no warp solver)."""
    return on_device(hybrid.run_shared, a, b, c, d)


hybrid_trace = ps.trace.record(hybrid_shared_solve, *dominant_systems(1, 32, seed=32))
print(hybrid_trace.launches[0].kernel, hybrid_trace.launches[0].block, "threads;",
      hybrid.plan(1, 32, 1, np.float64)[-1], "lanes")
ax = ps.viz.steps(hybrid_rows(hybrid_trace, 32), "rows", block=0,
                  row_labels=["load", "PCR, stride 1", "PCR, stride 2", "PCR, stride 4", "Thomas sweeps"],
                  title="hybrid, n = 32, 8 threads: which rows each step combines")

# %% [markdown]
# The count for a system of $m$ rows with $L$ lanes: $m \log_2 L$ row updates in $\log_2 L$
# barrier phases, then $2 m / L$ dependent Thomas steps per thread; for 512 rows and $L = 128$,
# 7 PCR steps and sweeps of 4 rows instead of PCR's 9 steps. The measurements (the same run as
# section 11) with half and twice the rows per thread, from which `THOMAS_ROWS = 4` was chosen:

# %%
VARIANTS = ("hybrid_shared:thomas_rows=2", "hybrid_shared", "hybrid_shared:thomas_rows=8")
print(f"{'kernels (us)':<20}" + "".join(f"{label:>17}" for label in ("rows=2", "rows=4", "rows=8"))
      + f"{'PCR':>9}{'cuSPARSE':>10}")
for dtype in DTYPES:
    for case in CASES:
        print(f"{dtype:<8} {case_label(*case):>11}" + "".join(f"{time_us(v, 'ours (kernels)', dtype, *case):>17.1f}" for v in VARIANTS)
              + f"{kernels['pcr', dtype, case]:>9.1f}{cusparse[dtype, case]:>10.1f}")
shared_k = {(t, c): time_us("hybrid_shared", "ours (kernels)", t, *c) for t in DTYPES for c in CASES}
print("\n4 rows a thread the fastest of the three on every batch:",
      all(shared_k[t, c] <= min(time_us(v, "ours (kernels)", t, *c) for v in VARIANTS) for t in DTYPES for c in BATCHES))
print("hybrid_shared's kernels / cuSPARSE, on the batches:", span(shared_k[t, c] / cusparse[t, c] for t in DTYPES for c in BATCHES))
print("PCR's kernels / hybrid_shared's, on the batches:", span(kernels["pcr", t, c] / shared_k[t, c] for t in DTYPES for c in BATCHES))
print("on one system of 2^20, hybrid_shared's kernels / PCR's:", span(shared_k[t, CASES[-1]] / kernels["pcr", t, CASES[-1]] for t in DTYPES))

# %% [markdown]
# So `hybrid_shared` halves PCR's kernel time on the batches or better, but stays behind
# cuSPARSE (the spans above), and on one system of $2^{20}$ rows its windows of global PCR
# steps are no faster than PCR's global path. Nsight Compute (`benchmarks/tridiag_ncu.py`) says
# why on the batches: `hybrid_shared` is bound by instruction issue, with its compute
# throughput high and its DRAM throughput low, and its registers per thread let only three
# blocks share an SM, so few warps hide the latencies. Compiling it with `fastmath` or capping
# its registers (`benchmarks/tridiag_variants.py`) did not help: the caps made it slower. What
# is left is fewer instructions per row, which the next two kernels do.
#
# ### 12.1 Systems of up to 512 rows: one warp, in registers
#
# `prefixsum.tridiag.warp` is the register-resident Thomas-PCR of Laszlo, Giles and Appleyard
# (2016). A group of $G \le 32$ lanes of one warp solves a system, each lane holding $R$
# consecutive rows (a *chunk*) in registers. Each lane first eliminates inside its chunk: this
# is **Wang's partition method** (1981), which rewrites every row of the chunk in terms of the
# chunk's first and last unknowns,
#
# $$x_k = d'_k - a'_k\, x_{\text{first}} - c'_k\, x_{\text{last}},$$
#
# and leaves two rows per lane, the chunk's first and last, coupled only to the ends of the
# neighbouring chunks: a tridiagonal system of $2G$ rows with a unit diagonal. One odd-even step
# and $\log_2 G$ PCR steps solve that across the lanes with `cuda.shfl_up_sync` and
# `cuda.shfl_down_sync`, without shared memory or barriers, and each lane then recovers its
# chunk's interior from its two ends by the formula above. Loads and stores still go through
# shared memory, so that neighbouring threads touch neighbouring addresses. The hybrid takes it
# for every system of up to 512 rows (`hybrid.WARP_ROWS`), so the hybrid's kernel times on the
# three batches of the CSV are its:

# %%
hyb = {(t, c): time_us("hybrid", "ours (kernels)", t, *c) for t in DTYPES for c in CASES}
print(f"{'kernels (us)':<20}{'warp solver':>12}{'hybrid_shared':>14}{'cuSPARSE':>10}")
for dtype in DTYPES:
    for case in BATCHES:
        print(f"{dtype:<8} {case_label(*case):>11}{hyb[dtype, case]:>12.1f}{shared_k[dtype, case]:>14.1f}{cusparse[dtype, case]:>10.1f}")
print("\nthe warp solver's kernels / cuSPARSE, on the batches:", span(hyb[t, c] / cusparse[t, c] for t in DTYPES for c in BATCHES))

# %% [markdown]
# `benchmarks/tridiag_warp.py` measured every $R$ that fits: 4 rows a lane in float64 and 8 in
# float32 (32 bytes of each coefficient, one memory sector) were the fastest.
#
# ### 12.2 Longer systems: the partition method across the grid
#
# A system longer than 512 rows does not fit one warp's registers, but the partition step does
# not need a warp: `prefixsum.tridiag.partition` gives every thread of the grid a chunk of
# $R$ rows of the systems laid end to end (each system padded, in the indexing only, to whole
# chunks with identity rows; $R$ = 8 or 16, `partition.rows_per_thread`). `partition_reduce` eliminates inside each chunk
# and writes the chunk's two end rows to global memory, in order: the reduced system, of
# $2n / R$ rows. `hybrid.run` solves that by the same route (another level while it is longer than
# 512 rows, then the warp solver), and `partition_substitute` redoes each chunk's elimination
# (cheaper than storing it: registers are free, bandwidth is not), reads its two end values and
# writes the interior. For $n = 2^{20}$ and $R = 16$ at every level: $2^{20} \to 2^{17} \to
# 2^{14} \to 2^{11} \to 2^8$ rows, four levels and a warp solve, nine launches. Each level moves the four bands twice and $x$
# once, about $9n$ values, where PCR's global path reads three rows and writes one for every row
# at each of its steps.
#
# A trace of one level on a system of 32 rows, in chunks of $R = 4$ (the picture needs few
# rows; the package uses 8 or 16), the reduced system of 16 rows solved by the warp solver. Each row
# of the picture is a step: the load into shared memory, the reduction (each thread reads its
# chunk and writes the chunk's two ends), the warp solver on the ends (its lanes exchange values
# by shuffles, which the trace does not see: each lane reads and writes only its own rows), and
# the substitution (each thread reads its chunk and the two solved ends, and writes the chunk).

# %%
CHUNK = 4


def partition_level(a, b, c, d):
    """One level of the partition method in chunks of CHUNK rows, the reduced system by the warp solver."""
    return on_device(lambda *arrays: partition.run(*arrays, warp.run, rows=CHUNK), a, b, c, d)


def partition_rows(trace, n):
    """The rows of one system of n rows that each thread of a partition level reads and writes.

    Reads: a thread's chunk in registers (``ld``) and the solved ends (``xr``); writes: the load
    and the results in shared memory (the ``d`` buffer, one padding slot every chunk) and the
    reduced rows (``rd``). The warp solver's rows are rows of the reduced system: chunks' ends.
    """
    reduced_rows = warp.plan(1, 2 * n // CHUNK, np.float64)[0]

    def end_row(j):
        return j // 2 * CHUNK + (CHUNK - 1) * (j % 2)

    records = []
    for r in trace.records:
        launch = trace.launches[r.launch]
        rows, to_system = (reduced_rows, end_row) if launch.kernel == "warp_solve" else (CHUNK, lambda i: i)
        slot = r.index - 3 * launch.block[0] * (rows + 1)  # in the shared d buffer, the last quarter
        row = None
        if r.array == "ld" and not r.write:
            row = to_system(r.thread * rows + r.index)
        elif r.space == "shared" and r.write and slot >= 0 and r.phase == 0 and launch.kernel == "partition_reduce":
            row = slot - slot // (rows + 1)  # the load: neighbouring threads, neighbouring rows
        elif r.space == "shared" and r.write and slot >= 0 and r.phase > 0:
            row = to_system(slot // (rows + 1) * rows + slot % (rows + 1))  # a thread's results
        elif (r.array == "rd" and r.write) or r.array == "xr":
            row = end_row(r.index)
        if row is not None and row < n:
            records.append(r._replace(array="rows", index=row, space="global"))
    return ps.trace.Trace(records, trace.launches)


level_system = dominant_systems(1, 32, seed=33)
level_trace = ps.trace.record(partition_level, *level_system)
print("kernels:", ", ".join(launch.kernel for launch in level_trace.launches),
      "| x right:", np.allclose(partition_level(*level_system)[0], banded(*[v[0] for v in level_system]), rtol=1e-12, atol=1e-12))
ax = ps.viz.steps(partition_rows(level_trace, 32), "rows",
                  row_labels=["load", "reduce", "warp solver", "substitute"],
                  title="one level of the partition method, n = 32, chunks of 4 rows")

# %% [markdown]
# The chunk size trades the work of a level against the number of levels, and, on small levels,
# against the threads that fill the GPU. The same run measured $R = 4$, 8 and 16 at every level
# beside the package's choice per level (`partition.rows_per_thread`: float64 8; float32 16 on a
# level of more than $2^{19}$ rows, else 8) on the system of $2^{20}$ rows:

# %%
print(f"{'kernels (us), 1 x 2^20':<24}" + "".join(f"{f'R = {r}':>9}" for r in (4, 8, 16)) + f"{'chosen':>9}{'PCR':>9}{'cuSPARSE':>10}")
for dtype in DTYPES:
    by_rows = [time_us(f"hybrid:partition_rows={r}", "ours (kernels)", dtype, *CASES[-1]) for r in (4, 8, 16)] + [hyb[dtype, CASES[-1]]]
    print(f"{dtype:<24}" + "".join(f"{t:>9.1f}" for t in by_rows)
          + f"{kernels['pcr', dtype, CASES[-1]]:>9.1f}{cusparse[dtype, CASES[-1]]:>10.1f}")
print("\nthe partition method's kernels / cuSPARSE, on one system of 2^20:", span(hyb[t, CASES[-1]] / cusparse[t, CASES[-1]] for t in DTYPES))
print("PCR's kernels / the partition method's:", span(kernels["pcr", t, CASES[-1]] / hyb[t, CASES[-1]] for t in DTYPES))

# %% [markdown]
# In float64 $R = 8$ is the fastest in kernel time, though it needs six levels instead of four
# (every launch costs the whole call host time); in float32 16 on the large level, 8 on the
# small ones below it. `benchmarks/tridiag.csv` holds the same comparison on batches of 100,
# 1000 and 64 systems, where $R = 8$ wins in both dtypes. What the partition method does not do:
# pivot (like every method here it is for diagonally dominant or symmetric positive definite
# systems).
#
# ### 12.3 The hybrid against cuSPARSE and JAX
#
# Everything together, as `tridiag.solve(..., method="hybrid")` runs it (and `"auto"`, which
# takes the hybrid at every measured shape): the kernels against cuSPARSE's device time, and the
# whole call on device arrays against JAX's whole call, from the same run:

# %%
hybrid_call = {(t, c): time_us("hybrid", "ours (whole call)", t, *c) for t in DTYPES for c in CASES}
print(f"{'median time (us)':<20}{'kernels':>9}{'cuSPARSE':>10}{'ratio':>7}   {'whole call':>10}{'JAX':>8}{'ratio':>7}")
for dtype in DTYPES:
    for case in CASES:
        print(f"{dtype:<8} {case_label(*case):>11}{hyb[dtype, case]:>9.1f}{cusparse[dtype, case]:>10.1f}"
              f"{hyb[dtype, case] / cusparse[dtype, case]:>7.2f}   {hybrid_call[dtype, case]:>10.1f}"
              f"{jax_call[dtype, case]:>8.1f}{hybrid_call[dtype, case] / jax_call[dtype, case]:>7.2f}")
print("\n'auto' takes:", sorted({tridiag.api.choose("auto", *c, t) for t in DTYPES for c in CASES}))
print("hybrid's kernels at most cuSPARSE's device time in every case:",
      all(hyb[t, c] <= cusparse[t, c] for t in DTYPES for c in CASES))
print("hybrid's whole call shorter than JAX's in every case:",
      all(hybrid_call[t, c] < jax_call[t, c] for t in DTYPES for c in CASES))
print("hybrid's whole call beyond its kernels, us:", span((hybrid_call[t, c] - hyb[t, c] for t in DTYPES for c in CASES), 0),
      "| on the batches:", span((hybrid_call[t, c] - hyb[t, c] for t in DTYPES for c in BATCHES), 0))

# %% [markdown]
# **A bandwidth bound for the batch.** On the batches the hybrid reads the four bands once and
# writes $x$ once: $5 \cdot \text{batch} \cdot n$ values, the least any solver can move. Divided
# by the kernel time, that is the bandwidth it reaches. The bound is the rate a plain copy of
# about as many bytes reaches on the same kind of GPU (the float32 `copy` rows of
# `benchmarks/scan_throughput.csv`, the one whose bytes are nearest): a copy of a few MB does not
# reach the rate of a copy of hundreds. Time against bytes, one line per dtype, with the bound as
# the time such a copy of those bytes takes:

# %%
copies = sorted((2 * row["n"] * 4 / 1e6, row["gbps"]) for row in results.read("scan_throughput.csv", variant="copy", dtype="float32"))


def copy_gbps(megabytes):
    """GB/s of the float32 copy in scan_throughput.csv whose bytes (2 n x 4) are nearest, by ratio, to megabytes."""
    return min(copies, key=lambda copy: abs(np.log(copy[0] / megabytes)))[1]



print(f"{'dtype':<8} {'batch x n':>11} {'least MB':>9} {'hybrid us':>10} {'GB/s':>7} {'of copy':>8} {'cuSPARSE GB/s':>14}")
roof_rows, of_copy = [], []
for dtype in DTYPES:
    for case in BATCHES:
        megabytes = 5 * case[0] * case[1] * np.dtype(dtype).itemsize / 1e6
        rate = megabytes / hyb[dtype, case] * 1e3
        of_copy.append(rate / copy_gbps(megabytes))
        print(f"{dtype:<8} {case_label(*case):>11} {megabytes:>9.1f} {hyb[dtype, case]:>10.1f} {rate:>7.0f} "
              f"{rate / copy_gbps(megabytes):>8.0%} {megabytes / cusparse[dtype, case] * 1e3:>14.0f}")
        roof_rows += [{"MB": megabytes, "us": hyb[dtype, case], "series": f"hybrid (kernels), {dtype}"},
                      {"MB": megabytes, "us": cusparse[dtype, case], "series": f"cuSPARSE (device), {dtype}"},
                      {"MB": megabytes, "us": megabytes / copy_gbps(megabytes) * 1e3,
                       "series": "bandwidth bound: a copy of about as many bytes"}]
print("of the copy's rate, on the batches:", span(of_copy))
ax = ps.viz.throughput(roof_rows, x="MB", y="us", group="series",
                       title=f"batched solves, {bench[0]['device']}: least bytes moved against time")
_ = ax.set_ylabel("median time (us)")

# %% [markdown]
# Plainly: the hybrid's kernels now take less time than cuSPARSE's on every shape measured
# (the ratios printed above), and its whole call less than JAX's. The `of copy` column says how
# close to a copy of about as many bytes it comes, float64 closer than float32 (the same work
# per row, twice the bytes). One run per
# case: differences of some percent between runs are noise.
#
# **The whole call.** Every launch goes through a `prefixsum.core.launch.Launcher` (cuda.core,
# without numba's per-call dispatch: one per kernel and dtype), the result through recycled
# device memory (`result_array`), the work arrays and their views are kept per shape, the
# failure flags stay zero between calls (only a failure clears them) and come back in one
# small copy without numba's checks, and host inputs are packed into one pinned buffer and
# cross in one transfer. That took the host's part of a batch call from several hundred
# microseconds to the span printed above; on one system of $2^{20}$ rows the nine launches of
# the partition levels cost the most of it. `benchmarks/tridiag_call_profile.py --steps` times
# each part of a call alone.
#
# ### Exercise 07.thomas-sweep (stretch, 2 points)
#
# Below is a hybrid for float64 systems of up to 64 rows, one system per block and one thread
# per row. It runs PCR at strides 1, 2 and 4 (with the package's `reduce_row`), after which rows
# $i, i + 8, i + 16, \dots$ form a system of their own for each $i < 8$; threads 0 to 7 then
# each call `my_sweep` on theirs. Write `my_sweep`: solve the system of the `count` rows
# `first, first + step, ...` of `rows[coefficient, j]` (coefficients 0 to 3 are $a, b, c, d$)
# with the Thomas algorithm of section 6, Gaussian elimination without pivoting, in place.
# The sweep down must leave every row of the subsystem in the form $x_j + c'_j x_{j+step} = d'_j$
# (no coupling to the row above, a unit diagonal; $c'$ in `rows[2]`, $d'$ in `rows[3]`),
# so that the last row holds its $x$; the sweep back up then turns every `rows[3, j]` into $x_j$.
# It is `scipy.linalg.solve_banded` on those rows, done by one thread. (Walk the rows 1 apart
# instead of `step` apart, and the checker shows what goes wrong.)

# %% tags=["exercise"] points=2 todo="my_sweep: solve the tridiagonal system formed by the count rows first, first + step, ... of rows with the Thomas algorithm (a sweep down, a sweep back up), in place, leaving x_j in rows[3, j] of each of its rows" exercise_id="07.thomas-sweep"
ROWS = 64
LANES = 8  # PCR steps until the system has fallen apart into 8 interleaved ones


@cuda.jit(device=True)
def my_sweep(rows, first, count, step):
    ### BEGIN SOLUTION
    cp, dp = 0.0, 0.0
    for t in range(count):
        j = first + t * step
        pivot = rows[1, j] - rows[0, j] * cp
        cp = rows[2, j] / pivot
        dp = (rows[3, j] - rows[0, j] * dp) / pivot
        rows[2, j], rows[3, j] = cp, dp
    for t in range(count - 2, -1, -1):
        j = first + t * step
        dp = rows[3, j] - rows[2, j] * dp
        rows[3, j] = dp
    ### END SOLUTION


@cuda.jit
def my_hybrid(a, b, c, d, x):
    rows = cuda.shared.array((2, 4, ROWS), float64)
    system, i, n = cuda.blockIdx.x, cuda.threadIdx.x, x.shape[1]
    if i < n:
        rows[0, 0, i] = a[system, i] if i > 0 else 0.0  # a_0 and c_(n-1) are outside the matrix
        rows[0, 1, i] = b[system, i]
        rows[0, 2, i] = c[system, i] if i < n - 1 else 0.0
        rows[0, 3, i] = d[system, i]
    identity = (0.0, 1.0, 0.0, 0.0)
    src, s = 0, 1
    while s < LANES:
        cuda.syncthreads()
        if i < n:
            left = hybrid.slot(rows[src], i - s) if i >= s else identity
            right = hybrid.slot(rows[src], i + s) if i + s < n else identity
            new, _ = _common.reduce_row(left, hybrid.slot(rows[src], i), right)
            hybrid.put(rows[1 - src], i, new)
        src, s = 1 - src, 2 * s
    cuda.syncthreads()
    if i < LANES and i < n:
        my_sweep(rows[src], i, (n - i + LANES - 1) // LANES, LANES)
    cuda.syncthreads()
    if i < n:
        x[system, i] = rows[src, 3, i]


def my_hybrid_solve(a, b, c, d):
    x = cuda.device_array(d.shape, d.dtype)
    my_hybrid[d.shape[0], ROWS](cuda.to_device(a), cuda.to_device(b), cuda.to_device(c), cuda.to_device(d), x)
    return x


# %% tags=["check"] exercise_id="07.thomas-sweep"
print(ps.check.tridiagonal(my_hybrid_solve))

# %% [markdown]
# ## 13. Summary
#
# For one system of $n$ rows (a batch multiplies the work and the traffic, not the depth):
#
# | | Thomas | cyclic reduction | PCR | `hybrid_shared` ($L$ lanes) | partition ($R$ rows a chunk) |
# | --- | --- | --- | --- | --- | --- |
# | work (row operations) | $2n$ (about $8n$ flops) | about $2n$: $n$ eliminations, $n$ substitutions | $n \lceil \log_2 n \rceil$ | $n \log_2 L + 2n$ | about $4n$ a level (each chunk eliminated twice), the next level on $2n/R$ rows |
# | depth | $2n$ dependent steps in one thread | $2 \lceil \log_2 n \rceil + 2$ barrier phases | $\lceil \log_2 n \rceil + 1$ barrier phases | $\log_2 L + 2$ phases, then $2n/L$ dependent steps | two launches a level, about $2R$ dependent steps a thread in each, then the warp solver |
# | parallelism per system | none (one thread) | $n/2, n/4, \dots$ rows per level | all $n$ rows at every step | all $n$ rows, then $L$ threads | $n / R$ threads |
# | global memory, in a block | $6n$ reads, $3n$ writes (bands, scratch, $x$) | read 4 bands, write $x$ | read 4 bands, write $x$ | read 4 bands, write $x$ | read 4 bands twice, write $x$; the reduced system ($8n/R$ values) written and read |
# | shared memory | none | $n$ rows, in place | $2n$ rows (two buffers) | $2n$ rows (two buffers) | a block's chunks, for coalesced loads and stores |
# | global memory, launch per step | | | up to $12n$ reads and $4n$ writes per step, $\lceil \log_2 n \rceil$ launches | several steps a launch (windows with a halo) | two launches a level, $\lceil \log_{R/2}(n / 512) \rceil$ levels |
# | pivoting | none | none | none: diagonally dominant or SPD systems only | none | none |
#
# PCR's stride doubling is Hillis–Steele's doubling applied to equations instead of elements;
# seed 003's odd/even reordering is the same computation with the rows moved so that each
# subsystem is contiguous.
#
# **Questions.**
# 1. After two PCR steps on $n = 11$, which rows form the four independent subsystems? Check your
#    answer against the stride-4 row of the table in section 3.
# 2. Prove the invariant of section 2: after any number of steps, a row's coefficient of an
#    unknown outside $0 \dots n-1$ is 0. Where does the kernel rely on it, and what goes wrong
#    if `load` kept $a_0$ as the caller passed it?
# 3. Seed 003's reordering writes row `tidx` to position $P$. Write the position after the
#    *second* reordering as a formula in `tidx` (for $n$ a power of two it is a bit reversal of
#    the low bits: why?).
# 4. The exercise kernel uses two buffers. Rewrite the step with one buffer and two barriers per
#    step (as chapter 02's fold does); which values must a thread hold in registers across the
#    first barrier?
# 5. CR does half the row operations of PCR at $n = 512$, but its kernels took longer on the GPU
#    in every case (section 11). Give two reasons from section 6's counts.
# 6. Construct a $3 \times 3$ tridiagonal matrix that is nonsingular, on which PCR meets a zero
#    pivot. Does CR meet it too? Thomas?
# 7. Section 11 divided a lower bound on the traffic of PCR's global path ($n = 2^{20}$) by the
#    kernel time. Count instead the bytes `pcr_global_step` *requests* over its 10 launches in
#    float32 (section 6: three rows read and one written per row update). How many of them must
#    come from memory, and how many can the caches serve? Then the whole call, which takes
#    longer than its kernels: how would you find out where the rest of its time goes?
# 8. The hybrid's trace in section 12 shows each thread's sweep walking rows 8 apart. Why are
#    the threads of a warp free of bank conflicts there, and what would change if each thread
#    took a contiguous piece of rows instead (Laszlo, Giles and Appleyard's layout)?
# 9. Section 12's roof is a copy of the least bytes. The warp solver reaches about half of it in
#    float32 on the large batches, and float64 more. What would you measure to find out what
#    holds float32 back (a kernel variant, a count from the trace, a profiler metric)?
# 10. `partition_substitute` redoes each chunk's elimination instead of reading it back. Count the
#    bytes a level would move if `partition_reduce` stored the eliminated $a'$, $c'$, $d'$ of every
#    row and the substitution read them, against the bytes it moves now, for $R = 16$ in float32.
#    Which costs more on the GPU of the measurements, the extra arithmetic or the extra bytes
#    (section 12's bandwidth bound)?
