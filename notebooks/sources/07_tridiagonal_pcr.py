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
# # 07 · Tridiagonal systems: PCR, CR and Thomas
#
# A **tridiagonal system** couples each unknown to its two neighbours only:
#
# $$a_i x_{i-1} + b_i x_i + c_i x_{i+1} = d_i, \qquad i = 0, \dots, n-1,$$
#
# where $a_0$ and $c_{n-1}$ lie outside the matrix. Such systems come from implicit time steps of
# the heat equation, cubic splines and the line sweeps of ADI methods, often thousands at a time.
# The sequential **Thomas algorithm** ([Thomas 1949](../docs/references.md#thomas-1949); Gaussian
# elimination without pivoting) solves one in about $8n$ operations, but every step needs the
# one before: depth $2n$.
#
# The [handwritten notes on tridiagonal solvers](../docs/references.md#tridiagonal-solvers-handwritten-notes),
# mostly in Chinese, are about two GPU kernels: ① *"Parallel
# cyclic reduction (PCR) diagonally dominant matrices or symmetric and positive definite
# matrices"* and ② *"Householder reduction → tridiagonal decomposition of any symmetric matrix"*
# (chapter 09). For PCR the notes give the elimination formulas,
# a layout with several systems per thread block (`tidx = threadIdx.x % n`), an odd/even
# reordering of the rows, the doubling of the stride, identity rows at the boundary, and two
# tables of which rows each step combines, for $n = 7$ and $n = 11$. This chapter rebuilds all
# of it from the package's kernels (`prefixsum.tridiag`), draws the notes' tables from a trace,
# counts the work and depth of Thomas, cyclic reduction (CR, [Hockney 1965](../docs/references.md#hockney-1965))
# and PCR ([Hockney and Jesshope 1981](../docs/references.md#hockney-and-jesshope-1981)), says from Brent's
# theorem which wins when, shows where PCR fails and what backward error and condition number
# promise, and relates PCR to the scans of the earlier chapters. Chapter 08 measures the three on
# a GPU against cuSPARSE, whose batched solver follows [Zhang, Cohen and Owens 2010](../docs/references.md#zhang-cohen-and-owens-2010),
# and builds from the same pieces what beats it.

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import collections
import inspect

import numpy as np
import scipy.linalg
from numba import cuda, float64

from prefixsum import tridiag
from prefixsum.tridiag import _common, hybrid, pcr, thomas

print(ps.device_info())

# %% [markdown]
# ## 1. The solver
#
# `tridiag.solve(a, b, c, d, method=...)` takes the three bands and the right-hand side, for one
# system (shape `(n,)`) or a batch (shape `(batch, n)`), and solves by `"pcr"`, `"cr"`,
# `"thomas"`, `"hybrid"` (chapter 08) or `"pivoting"` (section 7); the default, `"auto"`, takes
# the method whose whole calls were fastest (chapter 08). Its docstring's example, the matrix
# $\begin{pmatrix}4&1&0\\1&4&1\\0&1&4\end{pmatrix}$:

# %%
for method in tridiag.METHODS:
    x = tridiag.solve(np.array([0.0, 1, 1]), np.array([4.0, 4, 4]), np.array([1.0, 1, 0]), np.array([5.0, 6, 5]),
                      method=method)
    print(f"{method:>6}: x = {np.round(x, 12)}")

# %% [markdown]
# None of the methods but `"pivoting"` **pivots** (exchanges rows to avoid dividing by a small
# number). That is safe when the matrix is diagonally dominant ($|b_i| > |a_i| + |c_i|$) or
# symmetric positive definite, which is what the notes' title says; section 7 shows what happens
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
# These are the notes' formulas, with their remark *"对应的行是不变的，但是对应的列有变化 — stride"*:
# the row stays where it is; what changes is the columns it couples, by the **stride**. Do this
# for every row at once and the system splits in two: even rows couple only with even rows, odd
# with odd. Repeat with stride $s = 2, 4, 8, \dots$ (neighbours $i \pm s$ instead of $i \pm 1$):
# after step $k$ row $i$ couples $x_{i - 2^k}$, $x_i$, $x_{i + 2^k}$. Once $2^k \ge n$ both
# neighbours are outside the system, and $x_i = d_i / b_i$. That is **parallel cyclic reduction**:
# $\lceil \log_2 n \rceil$ steps of $n$ independent row updates.
#
# **Rows outside the matrix.** Row $i - s$ does not exist when $i < s$ (nor $i + s$ when
# $i + s \ge n$). The notes zero the multipliers there (*"if idx_row − stride < 0 … $k_{01} = 0$,
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


a7, b7, c7, d7 = (v[0] for v in ps.check.dominant_systems(1, 7, seed=7))
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
# ## 3. Who combines with whom: the notes' tables, from a trace
#
# For $n = 7$ and $n = 11$ the notes list, for each step, the triple $(i - s, i, i + s)$ of rows
# that builds the new row $i$, counting rows from 1 and calling the identity rows above and below
# the system $P_0$ and $P_{n+1}$. Here the same tables come from the real kernels.
#
# The package has two PCR kernels. `pcr_shared` runs all the steps of a system in shared memory,
# one block per system (or per group of small systems), with a barrier between steps.
# `pcr_global_step` runs **one step** in global memory, one thread per row; `pcr.split` launches
# it for $s = 1, 2, 4, \dots$ until each system has fallen apart into interleaved subsystems small
# enough for one block, and `pcr_shared` finishes those. That is the path for systems larger than
# a block (more than 768 rows in float64). Asking `split` for subsystems of **one row** runs
# every PCR step as its own launch; then `pcr_shared` only divides $x_i = d_i / b_i$. Each step's
# reads are the kernel's reads of its arguments `a`, `b`, `c`, `d`, so the trace shows exactly
# which rows every thread combined.

# %%
print(inspect.getsource(pcr.pcr_global_step))
print(inspect.getsource(pcr.split))

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
    traces[n] = ps.trace.record(pcr_in_global_memory, *ps.check.dominant_systems(1, n, seed=n))
    tables[n] = combined_rows(traces[n], n)
    print(f"n = {n}: {len(traces[n].launches)} launches "
          f"({', '.join(launch.kernel for launch in traces[n].launches)})")
    for s, triples in tables[n].items():
        print(f"  stride {s}: " + " ".join(f"({l},{i},{r})" for l, i, r in triples))

# %%
# The tables as written in the notes:
NOTES_7 = {1: [(0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 5), (4, 5, 6), (5, 6, 7), (6, 7, 8)],
          2: [(0, 1, 3), (0, 2, 4), (1, 3, 5), (2, 4, 6), (3, 5, 7), (4, 6, 8), (5, 7, 8)],
          4: [(0, 1, 5), (0, 2, 6), (0, 3, 7), (0, 4, 8), (1, 5, 8), (2, 6, 8), (3, 7, 8)]}
NOTES_11 = {1: [(i - 1, i, i + 1) for i in range(1, 12)],
           2: [(0, 1, 3), (0, 2, 4), (1, 3, 5), (2, 4, 6), (3, 5, 7), (4, 6, 8), (5, 7, 9), (6, 8, 10), (7, 9, 11),
               (8, 10, 12), (9, 11, 12)],
           4: [(0, 1, 5), (0, 2, 6), (0, 3, 7), (1, 4, 8), (1, 5, 9), (2, 6, 10), (3, 7, 11), (4, 8, 12), (5, 9, 12),
               (6, 10, 12), (7, 11, 12)],
           8: [(0, 1, 9), (0, 2, 10), (0, 3, 11), (0, 4, 12), (0, 5, 12), (0, 6, 12), (0, 7, 12), (0, 8, 12), (1, 9, 12),
               (2, 10, 12), (3, 11, 12)]}
for n, notes_table in ((7, NOTES_7), (11, NOTES_11)):
    pairs = [(s, mine, theirs) for s in notes_table for mine, theirs in zip(tables[n][s], notes_table[s])]
    differ = [(s, mine, theirs) for s, mine, theirs in pairs if mine != theirs]
    print(f"n = {n}: {len(pairs) - len(differ)} of {len(pairs)} triples as in the notes"
          + "".join(f"; at stride {s} the notes have {theirs}, the trace {mine}" for s, mine, theirs in differ))

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
# ## 4. The notes' odd/even reordering, and why the package does without it
#
# After one step the even rows form one system and the odd rows another, but interleaved. The
# notes move them apart: the thread of row `tidx` writes its new row to position
#
# $$P = \left(\lfloor n/2 \rfloor + n \bmod 2\right) \cdot (\mathit{tidx} \bmod 2) + \lfloor \mathit{tidx} / 2 \rfloor .$$
#
# $\lfloor n/2 \rfloor + n \bmod 2 = \lceil n/2 \rceil$ is the number of even rows. An even row
# goes to position $\mathit{tidx}/2$, an odd row to $\lceil n/2 \rceil + \lfloor \mathit{tidx}/2 \rfloor$:
# **evens first, then odds**. The notes tabulate it for $n = 8$ (two systems in a block of 16
# threads) and $n = 11$ (a block of 22), computed from the formula, and then applied to the 7 × 7
# system after its first step (section 2):

# %%
def reorder(tidx, n):
    return (n // 2 + n % 2) * (tidx % 2) + tidx // 2


for n, threads in ((8, 16), (11, 22)):
    print(f"n = {n}, blockDim.x = {threads}")
    print("  threadIdx.x " + " ".join(f"{t:>2}" for t in range(threads)))
    print("  tidx        " + " ".join(f"{t % n:>2}" for t in range(threads)))
    print("  tidx % 2    " + " ".join(f"{t % n % 2:>2}" for t in range(threads)))
    print("  P           " + " ".join(f"{reorder(t % n, n):>2}" for t in range(threads)))
positions = [reorder(tidx, 7) for tidx in range(7)]
order = np.argsort(positions)  # order[p] = the row that moves to position p
print("P for rows 0..6:", positions, "-> position p holds row", [int(row) for row in order])
moved = dense(a1, b1, c1, 2)[np.ix_(order, order)]
print("\n".join(" ".join("x" if v else "." for v in line) for line in moved))

# %% [markdown]
# The first system's columns are the notes' tables. (The notes leave $P$ blank for the second
# system of the $n = 11$ block, and give threads 18 to 20 the wrong parity in the `tidx % 2`
# column.) On the 7 × 7 system the reordering turns the two interleaved systems into two
# contiguous tridiagonal blocks, each again at stride 1.
#
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
# A block of 7 threads would waste 25 of the 32 lanes of a warp. The notes pack several systems
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
small_batch = ps.trace.record(tridiag.solve, *ps.check.dominant_systems(3, 7, seed=3), method="pcr")
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
many = ps.trace.record(tridiag.solve, *ps.check.dominant_systems(40, 7, seed=40), method="pcr")
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
# steps (`cr.cr_shared`). On a diagonally dominant matrix both shrink the off-diagonal entries
# quadratically from step to step ([Heller 1976](../docs/references.md#heller-1976)), so that the
# reduction may stop early, once they are negligible.
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
    system = ps.check.dominant_systems(1, n, seed=n)
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
#   partition method (chapter 08: each thread runs Thomas over a chunk, $W \approx$ a constant
#   times $n$, and only a small reduced system is left). Chapter 08's measurements on one system
#   of $2^{20}$ rows show it: the partition method beats PCR there.
#
# ## 7. Is it right, and when is it not?
#
# A computed $\hat x$ is judged by its **normwise backward error**
# ([Rigal and Gaches 1967](../docs/references.md#rigal-and-gaches-1967); [Higham 2002](../docs/references.md#higham-2002),
# Theorem 7.1), $\infty$-norms here:
#
# $$\eta(\hat x) = \frac{\lVert A \hat x - d \rVert}{\lVert A \rVert \, \lVert \hat x \rVert + \lVert d \rVert},$$
#
# the smallest $\epsilon$ for which $\hat x$ solves exactly a system whose $A$ and $d$ each moved
# by at most $\epsilon$ of their norm. A backward-stable solver keeps $\eta$ a small multiple of
# $\varepsilon$. Against LAPACK's banded solver (`scipy.linalg.solve_banded`, Gaussian elimination
# with partial pivoting), on random diagonally dominant systems: $\eta$, and the error against
# LAPACK's $x$. Then LAPACK itself on the matrix of an implicit heat-equation step,
# $\mathrm{tridiag}(-1, 2 + \delta, -1)$ (the rows of $\mathrm{tridiag}(-r, 1 + 2r, -r)$, $r = \Delta t / h^2$,
# divided by $r = 1/\delta$), where $\eta$ and the relative residual $\lVert A \hat x - d \rVert / \lVert d \rVert$ part ways.

# %%
def banded(a, b, c, d):
    """x from LAPACK's gbsv (partial pivoting); a[0] and c[-1] are ignored."""
    bands = np.zeros((3, len(b)))
    bands[0, 1:], bands[1], bands[2, :-1] = c[:-1], b, a[1:]
    return scipy.linalg.solve_banded((1, 1), bands, d)


def residual(a, b, c, d, x):
    """r = A x - d of (batch, n) or (n,) systems; a[..., 0] and c[..., -1] are left out."""
    r = b * x - d
    r[..., 1:] += a[..., 1:] * x[..., :-1]
    r[..., :-1] += c[..., :-1] * x[..., 1:]
    return r


def backward_error(a, b, c, d, x):
    """The largest normwise backward error |A x - d| / (|A| |x| + |d|) of the systems, infinity norms."""
    rows = np.abs(b) + np.abs(a) * (np.arange(b.shape[-1]) > 0) + np.abs(c) * (np.arange(b.shape[-1]) < b.shape[-1] - 1)
    norm = lambda v: np.abs(v).max(axis=-1)  # noqa: E731
    return np.max(norm(residual(a, b, c, d, x)) / (rows.max(axis=-1) * norm(x) + norm(d)))


batch, n = ps.size_for_device(4, 256), ps.size_for_device(100, 4096)
a, b, c, d = ps.check.dominant_systems(batch, n, seed=1)
reference = np.array([banded(*(v[k] for v in (a, b, c, d))) for k in range(batch)])
for dtype in (np.float64, np.float32):
    eps = np.finfo(dtype).eps
    for method in tridiag.METHODS:
        x = tridiag.solve(*(v.astype(dtype) for v in (a, b, c, d)), method=method).astype(np.float64)
        error = np.abs(x - reference).max() / np.abs(reference).max()
        print(f"{np.dtype(dtype).name} {method:>6}: backward error < n eps: {backward_error(a, b, c, d, x) < n * eps}, "
              f"error < 11 n eps: {error < 11 * n * eps}")
n_heat, eps = 10_000, np.finfo(np.float64).eps
d_heat = np.random.default_rng(2).normal(size=n_heat)
for delta in (1.0, 1e-6):
    heat = (-np.ones(n_heat), np.full(n_heat, 2 + delta), -np.ones(n_heat))
    eigenvalues = delta + 4 * np.sin(np.arange(1, n_heat + 1) * np.pi / (2 * n_heat + 2)) ** 2  # exact, of the matrix
    x_heat = banded(*heat, d_heat)
    relative_residual = np.abs(residual(*heat, d_heat, x_heat)).max() / np.abs(d_heat).max()
    print(f"tridiag(-1, 2 + {delta:g}, -1), n = 10^4, kappa_2 = {eigenvalues.max() / eigenvalues.min():.1e}; LAPACK: "
          f"backward error < 10 eps: {backward_error(*heat, d_heat, x_heat) < 10 * eps}, "
          f"|r| / |d| < 10 eps: {relative_residual < 10 * eps}")

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
          f"LAPACK backward error < n eps: {backward_error(a_bad, b_try, c_bad, d_bad, x_lapack) < n_bad * np.finfo(float).eps}")
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
# with partial pivoting, as LAPACK's `gtsv` (`scipy.linalg.solve_banded`,
# `scipy.linalg.lapack.dgtsv`): at each step it takes the larger of the pivot and the entry below
# it as the pivot, exchanging the two rows, and its $U$ gains one super-diagonal of fill. A long
# system is cut into chunks that threads eliminate so, coupled by a small system of their
# boundary rows (chapter 09 says more). On the
# GPU cuSPARSE's `gtsv2` pivots too (diagonal pivoting inside SPIKE partitions), unlike
# `gtsv2_nopivot` and `gtsv2StridedBatch`. Or make sure the matrix is dominant or positive
# definite: chapter 09 checks whether its $T$ is positive definite and pivots only where it is
# not.
#
# **What the backward error promises.** If $\hat x$ solves a system perturbed by $\eta$, then
#
# $$\frac{\lVert \hat x - x \rVert}{\lVert x \rVert} \le \frac{2\,\kappa(A)\, \eta}{1 - \kappa(A)\, \eta},
# \qquad \kappa(A) = \lVert A \rVert \, \lVert A^{-1} \rVert$$
#
# (Higham 2002, Theorem 7.2): a backward-stable solve errs by about $\kappa(A)\, n \varepsilon$ at
# most. The relative residual is another measure: $\lVert d \rVert$ may be as small as
# $\lVert A \rVert \lVert x \rVert / \kappa(A)$, so $\lVert r \rVert / \lVert d \rVert$ may exceed
# $\eta$ by up to $\kappa(A)$, and on an ill-conditioned matrix even LAPACK's is large (the heat
# lines above). **Dominance does not make a matrix well conditioned.** In the $\infty$-norm
# $\lVert A^{-1} \rVert \le 1 / \min_i (|b_i| - |a_i| - |c_i|)$: small when the margin is
# comparable to the entries (this chapter's systems, margin at least 0.5, rows summing to at most
# 5.5: $\kappa_\infty \le 11$), large when it is not: $\mathrm{tridiag}(-1, 2 + 10^{-6}, -1)$ is
# strictly dominant, with $\kappa_2 \approx 3.6 \cdot 10^6$ at $n = 10^4$. The $b_5 = 10^{-12}$
# matrix above is well conditioned ($\kappa < 100$): PCR's wrong sixth digit is the method's
# fault, and its backward error, at least its error over $2\kappa$, is far above $n\varepsilon$.
# Exercise 07.residual computes $r$, from which $\eta$ follows.
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
# a solve is right (warm-up), one PCR step (core), and the Thomas sweep that finishes a PCR
# stopped early (stretch).
# `ps.hint("07.residual")` opens the hints one at a time.
#
# ### Exercise 07.residual (warm-up, 1 point)
#
# **Goal.** Every solver above was judged by its backward error, made of the **residual**
# $r = A x - d$. Write the kernel
# `my_residual(a, b, c, d, x, r)` that computes it for a batch of systems, arrays of shape
# `(batch, n)`, on a 2-D grid: `cuda.grid(2)` gives the row, then the system.
#
# **Invariant.** Thread (row $i$, system) writes `r[system, i]` and nothing else, from row $i$'s
# coefficients and the unknowns that row couples. $a_0$ and $c_{n-1}$ lie outside the matrix:
# the arrays hold garbage there, which must not reach $r$, and no access may leave the arrays.
#
# **Worked example.** Section 1's system, $a = (\ast, 1, 1)$, $b = (4, 4, 4)$, $c = (1, 1, \ast)$,
# $d = (5, 6, 5)$, with $x = (1, 2, 1)$: $r = (1, 4, 1)$, whatever the two entries $\ast$
# hold. With its solution $x = (1, 1, 1)$, $r = (0, 0, 0)$.
#
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
def residual_by_the_check(a, b, c, d, x):  # the check launches the kernel itself: its arrays, blocks of 32 x 4 threads
    r = cuda.device_array(x.shape, x.dtype)
    my_residual[(-(-x.shape[1] // 32), -(-x.shape[0] // 4)), (32, 4)](*(cuda.to_device(v) for v in (a, b, c, d, x)), r)
    return r


print(ps.check.function(residual_by_the_check, residual_reference, residual_cases, name="my_residual",
                        budget=ps.check.Budget(accesses_per_step=8)))

# %% [markdown]
# ### Exercise 07.pcr-step (core, 2 points)
#
# Below is a PCR kernel for float64 systems of up to 64 rows, one system per block and one thread
# per row, with the rows in a shared array `rows[buffer, coefficient, i]` (coefficients 0 to 3
# are $a, b, c, d$) and two buffers. The loads, the barriers, the stride loop and the final
# division are there; the update of row `i` at stride `s` is missing.
#
# **Goal.** After the step, row `i` of buffer `1 - src` is a combination of rows `i - s`, `i`
# and `i + s` of buffer `src` (section 2's elimination) in which $x_{i-s}$ and $x_{i+s}$ no
# longer appear: it couples $x_{i-2s}$, $x_i$ and $x_{i+2s}$ only.
#
# **Invariant.** Every step keeps the solution: the new system has the same $x$ as the old one.
# A neighbour outside $0 \dots n-1$ is an identity row and changes nothing. After the last step
# every row couples $x_i$ alone, and the given division solves it: the result is
# `scipy.linalg.solve_banded` of each system.
#
# **Worked example.** Section 1's system, rows $(a, b, c, d)$ = $(0, 4, 1, 5)$, $(1, 4, 1, 6)$,
# $(1, 4, 0, 5)$. After the step at $s = 1$ they are $(0, 3.75, -0.25, 3.5)$,
# $(0, 3.5, 0, 3.5)$ and $(-0.25, 3.75, 0, 3.5)$: row 1 couples $x_1$ alone, rows 0 and 2 couple
# each other at stride 2, and $x = (1, 1, 1)$ still solves all three. (Try writing into `src`
# instead, or reading row `i - s` without a guard: the checker names both mistakes.)
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
def pcr_solve_by_the_check(a, b, c, d):  # the check launches the kernel itself: its arrays, a block of 64 threads a system
    x = cuda.device_array(d.shape, d.dtype)
    my_pcr[d.shape[0], 64](cuda.to_device(a), cuda.to_device(b), cuda.to_device(c), cuda.to_device(d), x)
    return x


print(ps.check.tridiagonal(pcr_solve_by_the_check, name="my_pcr", budget=ps.check.Budget(accesses_per_step=20)))

# %% [markdown]
# ### Exercise 07.thomas-sweep (stretch, 2 points)
#
# Below is a hybrid for float64 systems of up to 64 rows, one system per block and one thread
# per row. It runs PCR at strides 1, 2 and 4 (with the package's `reduce_row`), after which rows
# $i, i + 8, i + 16, \dots$ form a system of their own for each $i < 8$; threads 0 to 7 then
# each call `my_sweep` on theirs: PCR stopped early and finished by Thomas, the hybrid that
# chapter 08 builds into a solver faster than cuSPARSE.
#
# **Goal.** `my_sweep(rows, first, count, step)` solves the system of the `count` rows `first,
# first + step, ...` of `rows[coefficient, j]` (coefficients 0 to 3 are $a, b, c, d$) by the
# Thomas algorithm (section 6), in place, one thread alone: afterwards `rows[3, j]`
# holds $x_j$ for each of its rows, as `scipy.linalg.solve_banded` would give.
#
# **Invariant.** The sweep down leaves every row it has passed in the form
# $x_j + c'_j\, x_{j + \text{step}} = d'_j$: no coupling to the row above, a unit diagonal, $c'$ in
# `rows[2]` and $d'$ in `rows[3]`. So the last row holds its $x$, and the sweep back up turns
# each `rows[3, j]` into $x_j$, from the row below it. A thread touches its own rows only.
#
# **Worked example.** Section 1's system, rows $(a, b, c, d)$ = $(0, 4, 1, 5)$,
# $(1, 4, 1, 6)$, $(1, 4, 0, 5)$ with `step` 1. The sweep down leaves $(c', d')$ =
# $(0.25, 1.25)$, $(4/15, 19/15)$, $(0, 1)$; the sweep up gives $x_1 = 19/15 - 4/15 \cdot 1 = 1$,
# then $x_0 = 1.25 - 0.25 \cdot 1 = 1$. (Walk the rows 1 apart instead of `step` apart, and the
# checker shows what goes wrong.)

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
@cuda.jit
def hybrid_by_the_check(a, b, c, d, x):  # the check's own hybrid: PCR at strides 1, 2, 4, then your sweep on 8 threads
    rows = cuda.shared.array((2, 4, 64), float64)
    system, i, n = cuda.blockIdx.x, cuda.threadIdx.x, x.shape[1]
    if i < n:
        rows[0, 0, i] = a[system, i] if i > 0 else 0.0
        rows[0, 1, i] = b[system, i]
        rows[0, 2, i] = c[system, i] if i < n - 1 else 0.0
        rows[0, 3, i] = d[system, i]
    identity = (0.0, 1.0, 0.0, 0.0)
    src, s = 0, 1
    while s < 8:
        cuda.syncthreads()
        if i < n:
            left = hybrid.slot(rows[src], i - s) if i >= s else identity
            right = hybrid.slot(rows[src], i + s) if i + s < n else identity
            new, _ = _common.reduce_row(left, hybrid.slot(rows[src], i), right)
            hybrid.put(rows[1 - src], i, new)
        src, s = 1 - src, 2 * s
    cuda.syncthreads()
    if i < 8 and i < n:
        my_sweep(rows[src], i, (n - i + 7) // 8, 8)
    cuda.syncthreads()
    if i < n:
        x[system, i] = rows[src, 3, i]


def hybrid_solve_by_the_check(a, b, c, d):
    x = cuda.device_array(d.shape, d.dtype)
    hybrid_by_the_check[d.shape[0], 64](cuda.to_device(a), cuda.to_device(b), cuda.to_device(c), cuda.to_device(d), x)
    return x


print(ps.check.tridiagonal(hybrid_solve_by_the_check, name="my_sweep"))

# %% tags=["instructor"]
print(inspect.getsource(hybrid.sweep))  # the package's sweep, which solves the exercise


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
# earlier chapters computes these prefix products in $\log_2 n$ steps (recursive doubling,
# [Kogge and Stone 1973](../docs/references.md#kogge-and-stone-1973)); below, Hillis–Steele (chapter 03)
# in numpy: at step $k$ element $i$ takes the product with element $i - 2^k$. Each line also
# compares the error with $\varepsilon\,|\alpha_n|$, where $x_n = \alpha_n x_0 + \beta_n$ is the last
# prefix product's row.

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
    return np.concatenate([[x0], prefix[:-1, 1, 1] * x0 + prefix[:-1, 1, 2]]), steps, abs(prefix[-1, 1, 1])


for n in (8, 16, 32, 64):
    a_s, b_s, c_s, d_s = (v[0] for v in ps.check.dominant_systems(1, n, seed=5))
    x_scan, steps, alpha = solve_by_matrix_scan(a_s, b_s, c_s, d_s)
    x_lapack = banded(a_s, b_s, c_s, d_s)
    error = np.abs(x_scan - x_lapack).max() / np.abs(x_lapack).max()
    print(f"n = {n:>2}: {steps} scan steps, error < 1e-10: {error < 1e-10}, error > 1: {error > 1}; "
          f"|alpha_n| > 1e{n // 2}: {alpha > 10.0 ** (n // 2)}, error < eps |alpha_n|: {error < np.finfo(float).eps * alpha}")

# %% [markdown]
# **Why it fails.** The scan turns a boundary-value problem into an initial-value one. The
# recurrence $c_i x_{i+1} + b_i x_i + a_i x_{i-1} = 0$ has two independent solutions; on a
# diagonally dominant matrix one grows by about $|b_i / c_i| > 1$ a row, the other decays.
# $\alpha_i$ and $\beta_i$ follow the growing one, the true $x$ stays of the size of $d$: each
# $x_i = \alpha_i x_0 + \beta_i$ is a difference of numbers about $|\alpha_i|$ times larger than
# itself, whose rounding errors become its error (below $\varepsilon |\alpha_n|$ above, with
# $|\alpha_n|$ past $10^{n/2}$). Once $\alpha$ overflows, $x$ is $\infty - \infty$: NaN.
# Elimination never forms these numbers; chapter 11 scans the elimination's pivots instead
# (Stone's method, 1973).
#
# ## 11. Summary
#
# For one system of $n$ rows (a batch multiplies the work and the traffic, not the depth):
#
# | | Thomas | cyclic reduction | PCR |
# | --- | --- | --- | --- |
# | work (row operations) | $2n$ (about $8n$ flops) | about $2n$: $n$ eliminations, $n$ substitutions | $n \lceil \log_2 n \rceil$ |
# | depth | $2n$ dependent steps in one thread | $2 \lceil \log_2 n \rceil + 2$ barrier phases | $\lceil \log_2 n \rceil + 1$ barrier phases |
# | parallelism per system | none (one thread) | $n/2, n/4, \dots$ rows per level | all $n$ rows at every step |
# | global memory, in a block | $6n$ reads, $3n$ writes (bands, scratch, $x$) | read 4 bands, write $x$ | read 4 bands, write $x$ |
# | shared memory | none | $n$ rows, in place | $2n$ rows (two buffers) |
# | global memory, launch per step | | | up to $12n$ reads and $4n$ writes per step, $\lceil \log_2 n \rceil$ launches |
# | wins, by Brent's theorem (section 6) | many small systems, one a thread | few threads for a long system ($p \ll n$) | threads that cover the system ($p \ge n$) |
# | pivoting | none | none | none: diagonally dominant or SPD systems only |
#
# PCR's stride doubling is Hillis–Steele's doubling applied to equations instead of elements;
# the notes' odd/even reordering is the same computation with the rows moved so that each
# subsystem is contiguous. Only `"pivoting"` is safe for any nonsingular matrix (section 7); the
# error of a solve is at most about $2\kappa(A)$ times its backward error.
#
# **Questions.**
# 1. After two PCR steps on $n = 11$, which rows form the four independent subsystems? Check your
#    answer against the stride-4 row of the table in section 3.
# 2. Prove the invariant of section 2: after any number of steps, a row's coefficient of an
#    unknown outside $0 \dots n-1$ is 0. Where does the kernel rely on it, and what goes wrong
#    if `load` kept $a_0$ as the caller passed it?
# 3. The notes' reordering writes row `tidx` to position $P$. Write the position after the
#    *second* reordering as a formula in `tidx` (for $n$ a power of two it is a bit reversal of
#    the low bits: why?).
# 4. The exercise kernel uses two buffers. Rewrite the step with one buffer and two barriers per
#    step (as chapter 02's fold does); which values must a thread hold in registers across the
#    first barrier?
# 5. Construct a $3 \times 3$ tridiagonal matrix that is nonsingular, on which PCR meets a zero
#    pivot. Does CR meet it too? Thomas?
# 6. By Brent's theorem, on how many threads does CR overtake PCR for one system of $2^{20}$
#    rows? Count the row operations of each from section 6's table.
