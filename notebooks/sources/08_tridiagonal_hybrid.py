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
# # 08 · Beating cuSPARSE's batched solver: the hybrid, a warp solver and the partition method
#
# Chapter 07 built PCR, cyclic reduction (CR) and Thomas, counted their work and depth, and
# said from Brent's theorem which should win when. This chapter measures them on a GPU against
# NVIDIA's cuSPARSE and JAX, finds PCR a few times behind the library, and builds from the same
# pieces what beats it. "The library" is one routine throughout, `gtsv2StridedBatch` (CR and
# PCR without pivoting, after [Zhang, Cohen and Owens 2010](../docs/references.md#zhang-cohen-and-owens-2010)),
# on device arrays; cuSPARSE's other tridiagonal solvers (the pivoting `gtsv2`,
# `gtsvInterleavedBatch`) meet only `method="pivoting"`, in section 2.4. So "beating cuSPARSE"
# means beating that routine:
#
# 1. the three methods against `gtsv2StridedBatch`, the library's batched solver;
# 2. the **hybrid** (a few PCR steps, then Thomas: Sakharnykh 2010; Davidson, Zhang and Owens
#    2011; Kim, Wu, Chang and Hwu 2011), then a **warp** that keeps a system in registers, the
#    same across a **block** for systems longer than a warp can hold, and **Wang's partition
#    method** across the grid for systems longer than a block can hold;
# 3. what a whole call costs beyond its kernels: the workbook's one account of the host's part,
#    to which the other chapters refer.
#
# The hybrid's last step, the Thomas sweep over one interleaved subsystem, is chapter 07's
# stretch exercise (07.thomas-sweep); this chapter's exercises (section 4) are the warp solver's
# shuffles and the partition method's reduced system.
#
# None of these methods pivots: they are for diagonally dominant or symmetric positive definite
# systems, as is `gtsv2StridedBatch`, and every time below is on dominant systems. **Off that
# class every method of this chapter fails silently**: a small pivot that is not exactly zero
# passes unnoticed, and x comes back wrong without an error (chapter 07, section 7: the hybrid
# wrong in the sixth digit of a well-conditioned system). Only an exactly zero pivot or a
# non-finite result raises. For other systems, `method="pivoting"`. Every work cited is on the
# [references page](../docs/references.md).

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import inspect

import matplotlib.pyplot as plt
import numpy as np
import scipy.linalg
from numba import cuda, float64

from prefixsum import tridiag
from prefixsum.cli import results
from prefixsum.tridiag import _common, hybrid, partition, pcr, warp

print(ps.device_info())

# %%
def on_device(run, a, b, c, d):
    """x on the host from ``run(a, b, c, d, x, info)``: a path of the package called directly, on
    device copies of the (batch, n) systems."""
    x = cuda.device_array(d.shape, d.dtype)
    info = cuda.to_device(np.zeros(d.shape[0], np.int32))
    run(*[cuda.to_device(v) for v in (a, b, c, d)], x, info)
    return x.copy_to_host()


def banded(a, b, c, d):
    """x from LAPACK's gbsv (partial pivoting); a[0] and c[-1] are ignored."""
    bands = np.zeros((3, len(b)))
    bands[0, 1:], bands[1], bands[2, :-1] = c[:-1], b, a[1:]
    return scipy.linalg.solve_banded((1, 1), bands, d)

# %% [markdown]
# ## 1. PCR, CR and Thomas against cuSPARSE
#
# `benchmarks/tridiag.py` (the `tridiag` stage of `bash benchmarks/run_gpu.sh`) ran every method
# and two library baselines on one GPU, on random diagonally dominant systems of eight shapes
# (batch × n; this chapter shows four) in float32 and float64, and checked every result by its
# residual before timing it (`benchmarks/tridiag.csv`; `benchmarks/README.md` describes the
# method). Every time is a median of 25 after warm-up calls, and the CSV's `timing` column says
# how each row was measured:
#
# - *ours (kernels)*: a method's launches on device arrays, the durations of its kernels summed
#   from CUPTI's trace (`torch.profiler`, which records every kernel of the process, whoever
#   launched it): the GPU's work alone, without the host's part of a call (section 3).
# - *ours (whole call)*: a whole `tridiag.solve` on device arrays, on the host clock, as a user
#   pays for it.
# - *cuSPARSE*: `gtsv2StridedBatch` through CuPy, measured the same way as our kernels: the
#   library's device time (the copy that restores $d$, which the solve overwrites, before each
#   run is a memcpy, not counted).
# - *JAX*: `jax.lax.linalg.tridiagonal_solve`, a whole jitted call on the host clock. It calls
#   cuSPARSE: `gtsv2StridedBatch` for a batch, but the pivoting `gtsv2` for one system
#   (section 3 shows the measurement), so on one system it runs another algorithm, one that pivots.
#
# The device and the date, how each kind of row was timed, and the times, all read from the CSV
# (microseconds; Thomas was not run on systems longer than $2^{16}$ rows, which one thread
# would walk alone):

# %%
# One run of benchmarks/tridiag.py on every method; the rows of a later run of its own
# (--only-pivoting: the pivoting solver and its baselines, chapter 09) are left aside here.
bench = [row for row in results.read("tridiag.csv") if "--only-pivoting" not in row["command"]]
FULL_RUN = bench[0]["command"]
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
    return results.value("tridiag.csv", "median_us", command=FULL_RUN, method=method, kind=kind, dtype=dtype, batch=batch, n=n)


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
# Two more things to look at: how many bytes PCR's kernels move per microsecond, and, for the
# single system of $2^{20}$ rows, the global path of chapter 07, section 3. On the batches `pcr_shared`
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
# What this shows (every figure is printed by one of the cells above):
#
# - **PCR is not as fast as cuSPARSE, but within a small factor of it**, on the batches and on
#   the one system of $2^{20}$ rows (the spans under the ratio table). cuSPARSE's documentation
#   describes `gtsv2StridedBatch` as a combination of CR and PCR without pivoting: the same
#   building blocks as ours, organised better.
# - **PCR is the fastest of the three kernels except at 16384 × 64, where Thomas is**: there
#   16384 threads each walk 64 rows. At 512 × 512 Thomas is the slowest by far: 512 threads in
#   all, each walking 512 rows. CR's kernels are slower than PCR's in every case, although CR
#   does fewer row operations: one block per system gives each row a thread, and with threads
#   that cover the system Brent's theorem favours the smaller depth (chapter 07, section 6).
# - **On the batches, bytes do not set the time.** PCR's kernels move their least traffic at
#   the rates of the last column above, a small fraction of what the GPU's memory delivers
#   (section 2.3 measures a copy), and float64 costs less than its factor of 2 in bytes over
#   float32 (the last line). The candidates are latency (a barrier per step, two divisions per
#   row update, the integer divisions of `locate`); the benchmark does not separate them.
# - **On one large system** PCR takes the global path of chapter 07, section 3 (the `global
#   steps` column: one launch each, every one updating all $2^{20}$ rows, $O(n \log n)$ work in
#   all), then `pcr_shared` on the interleaved subsystems. Its kernels move their least traffic
#   far closer to the memory's bandwidth than on the batches.

# %% [markdown]
# ## 2. The hybrid: a few PCR steps, then Thomas
#
# Section 1 left PCR several times behind cuSPARSE on the batches, with the bytes far from
# setting the time. The way out in the literature is to **stop PCR early** and hand what is left
# to Thomas: the PCR-Thomas hybrids of Sakharnykh (GTC 2010), Davidson, Zhang and Owens (IPDPS
# 2011) and Kim, Wu, Chang and Hwu (ICPP 2011), and the register-resident Thomas-PCR of Laszlo,
# Giles and Appleyard (2016). After $k$ steps a system of $m$ rows has split into $2^k$
# independent interleaved systems (rows $r, r + 2^k, r + 2 \cdot 2^k, \dots$), each of about
# $m / 2^k$ rows. Give each of them to one thread, which solves it by Thomas: $2 m / 2^k$
# dependent steps, with the least work of all methods. PCR's remaining $\log_2(m / 2^k)$ steps
# over all $m$ rows are gone.
#
# `prefixsum.tridiag.hybrid` does this in one kernel, `hybrid_shared`: `plan` gives each system
# `lanes` threads, the power of two nearest below $m /$ `THOMAS_ROWS` (4 rows a thread), and as
# many systems per block as 256 threads and 48 KiB allow; `pcr_steps` runs PCR at strides
# $1, 2, \dots$ up to `lanes / 2`, and `sweep` is Thomas on one thread's rows. Each thread
# updates in the PCR steps the same rows its sweep takes, so their slots come without a division
# (`locate` costs four 64-bit divisions a row and a step). Systems longer than a block are first
# split by PCR steps in global memory, several per launch (`pcr_window`), until their pieces are
# 64 rows. `tridiag.solve(..., method="hybrid")` hands most shapes to the two kernels of
# sections 2.1 and 2.2; `hybrid.run_shared` runs this one alone (the trace below calls it).

# %%
print(inspect.getsource(hybrid.pcr_steps))


# %% tags=["instructor"]
print(inspect.getsource(hybrid.sweep))


# %% [markdown]
# A trace shows which rows each step touches. One system of 32 rows gets 8 threads (4 rows each):
# after the load (the first line), three PCR steps at strides 1, 2 and 4 combine each row with
# rows ever further away, as in chapter 07, section 3; then each thread walks its own rows 8 apart, down and
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


hybrid_trace = ps.trace.record(hybrid_shared_solve, *ps.check.dominant_systems(1, 32, seed=32))
print(hybrid_trace.launches[0].kernel, hybrid_trace.launches[0].block, "threads;",
      hybrid.plan(1, 32, 1, np.float64)[-1], "lanes")
ax = ps.viz.steps(hybrid_rows(hybrid_trace, 32), "rows", block=0,
                  row_labels=["load", "PCR, stride 1", "PCR, stride 2", "PCR, stride 4", "Thomas sweeps"],
                  title="hybrid, n = 32, 8 threads: which rows each step combines")


# %% [markdown]
# The count for a system of $m$ rows with $L$ lanes: $m \log_2 L$ row updates in $\log_2 L$
# barrier phases, then $2 m / L$ dependent Thomas steps per thread; for 512 rows and $L = 128$,
# 7 PCR steps and sweeps of 4 rows instead of PCR's 9 steps. The measurements (the same run as
# section 1) with half and twice the rows per thread, from which `THOMAS_ROWS = 4` was chosen:

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
# So `hybrid_shared` takes about half of PCR's kernel time on the batches, or less (the span of
# PCR's over its own, above), but stays behind
# cuSPARSE (the spans above), and on one system of $2^{20}$ rows its windows of global PCR
# steps are no faster than PCR's global path. A profiler (Nsight Compute,
# `benchmarks/tridiag_ncu.py`) says why on the batches: `hybrid_shared` is bound by instruction
# issue, with its compute throughput high and its DRAM throughput low, and its registers per
# thread let only three blocks share an SM, so few warps hide the latencies. What helps is fewer
# instructions per row, which the next two kernels do.
#
# ### 2.1 Systems of up to 512 rows: one warp, in registers
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
# ### 2.2 Longer systems: the partition method across the grid
#
# A system longer than 512 rows does not fit one warp's registers, but the partition step does
# not need a warp: `prefixsum.tridiag.partition` gives every thread of the grid a chunk of
# $R$ rows of the systems laid end to end (each system padded, in the indexing only, to whole
# chunks with identity rows; $R$ = 8 or 16, `partition.rows_per_thread`). `partition_reduce` eliminates inside each chunk
# and writes the chunk's two end rows to global memory, in order: the reduced system, of
# $2n / R$ rows. `hybrid.run` solves that by the same route (another level while it is longer than
# a block holds, then the block solver below, or the warp solver for at most 512 rows), and `partition_substitute` redoes each chunk's elimination
# (cheaper than storing it: registers are free, bandwidth is not), reads its two end values and
# writes the interior. For $n = 2^{20}$ and $R = 16$ at every level in float32: $2^{20} \to 2^{17} \to
# 2^{14} \to 2^{11}$ rows, three levels and a block solve, seven launches. Each level moves the four bands twice and $x$
# once, about $9n$ values, where PCR's global path reads three rows and writes one for every row
# at each of its steps.
#
# Systems of up to a block's worth skip the levels: `prefixsum.tridiag.block` runs the warp
# solver's method with one system per block of $G$ lanes ($G$ a power of two, $W = G / 32$
# warps). After the partition step in registers, lane $l$ of warp $w$ takes row $l W + w$ of the
# reduced system's $G$ rows of last unknowns: $\log_2 W$ PCR steps through shared memory, a
# barrier each, leave every row coupled to the rows $W$ away, lanes $l \pm 1$ of its own warp,
# and the warp solver's five shuffle steps finish. One launch instead of a level's three, and
# the bands read once instead of twice.
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


level_system = ps.check.dominant_systems(1, 32, seed=33)
level_trace = ps.trace.record(partition_level, *level_system)
print("kernels:", ", ".join(launch.kernel for launch in level_trace.launches),
      "| x right:", np.allclose(partition_level(*level_system)[0], banded(*[v[0] for v in level_system]), rtol=1e-12, atol=1e-12))
ax = ps.viz.steps(partition_rows(level_trace, 32), "rows",
                  row_labels=["load", "reduce", "warp solver", "substitute"],
                  title="one level of the partition method, n = 32, chunks of 4 rows")


# %% [markdown]
# The chunk size trades the work of a level against the number of levels, and, on small levels,
# against the threads that fill the GPU. The same run measured $R = 4$, 8 and 16 at every level
# beside the package's choice per level (`partition.rows_per_thread`: the shorter of 8 and 16 whose
# level leaves a block's worth of rows, else float64 8 and float32 16) on the system of $2^{20}$ rows:

# %%
print(f"{'kernels (us), 1 x 2^20':<24}" + "".join(f"{f'R = {r}':>9}" for r in (4, 8, 16)) + f"{'chosen':>9}{'PCR':>9}{'cuSPARSE':>10}")
for dtype in DTYPES:
    by_rows = [time_us(f"hybrid:partition_rows={r}", "ours (kernels)", dtype, *CASES[-1]) for r in (4, 8, 16)] + [hyb[dtype, CASES[-1]]]
    print(f"{dtype:<24}" + "".join(f"{t:>9.1f}" for t in by_rows)
          + f"{kernels['pcr', dtype, CASES[-1]]:>9.1f}{cusparse[dtype, CASES[-1]]:>10.1f}")
print("\nthe partition method's kernels / cuSPARSE, on one system of 2^20:", span(hyb[t, CASES[-1]] / cusparse[t, CASES[-1]] for t in DTYPES))
print("PCR's kernels / the partition method's:", span(kernels["pcr", t, CASES[-1]] / hyb[t, CASES[-1]] for t in DTYPES))


# %% [markdown]
# In float64 $R = 8$ is the fastest in kernel time, though it needs more levels than 16 (every
# launch adds to the host's part of a call, section 3); in float32 16. `benchmarks/tridiag.csv`
# holds the same comparison on 64 x 8192 and 7 x 100000, where the level whose reduced systems a
# block solves at once (at 64 x 8192, $R = 8$ in float32 and 16 in float64) was the fastest:
# a level fewer is two launches fewer. What the partition method does not do:
# pivot (like every method here it is for diagonally dominant or symmetric positive definite
# systems).
#
# ### 2.3 The hybrid against cuSPARSE and JAX
#
# Everything together, as `tridiag.solve(..., method="hybrid")` runs it (`"auto"` takes a method
# that pivots, as printed below): the kernels against cuSPARSE's device time, and the
# whole call on device arrays against JAX's whole call, from the same run. Then the hybrid's
# kernels against cuSPARSE on both cards the course was measured on, the H100 above and an H200
# (`benchmarks/h200/tridiag.csv`, the same script), on every shape of `benchmarks/tridiag.py`: the
# four above and 100 x 1000 (n > 512, not a multiple of 16), 64 x 8192, 7 x 100000 and
# 1000 x 1000, as cuSPARSE's device time over the hybrid's (above 1: the hybrid is faster):

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
print("hybrid's whole call shorter than JAX's on every batch:",
      all(hybrid_call[t, c] < jax_call[t, c] for t in DTYPES for c in BATCHES),
      "| on one system of 2^20, float32 and float64:", [bool(hybrid_call[t, CASES[-1]] < jax_call[t, CASES[-1]]) for t in DTYPES])
print("hybrid's whole call beyond its kernels, us:", span((hybrid_call[t, c] - hyb[t, c] for t in DTYPES for c in CASES), 0),
      "| on the batches:", span((hybrid_call[t, c] - hyb[t, c] for t in DTYPES for c in BATCHES), 0))


def hybrid_against_cusparse(name):
    """{(dtype, batch, n): cuSPARSE's device time / the hybrid's kernels} for every shape of ``name``."""
    rows = [row for row in results.read(name) if "--only-pivoting" not in row["command"]]
    times = {(row["method"], row["dtype"], row["batch"], row["n"]): row["median_us"]
             for row in rows if row["kind"] in ("ours (kernels)", "library")}
    return {key[1:]: times[(CUSPARSE, *key[1:])] / us for key, us in times.items()
            if key[0] == "hybrid" and (CUSPARSE, *key[1:]) in times}


print()
for name in ("tridiag.csv", "h200/tridiag.csv"):
    ratios = hybrid_against_cusparse(name)
    print(f"{results.read(name)[0]['device']:<22} {len(ratios)} shapes x dtypes: {span(ratios.values())},"
          f" faster than cuSPARSE on every one: {min(ratios.values()) > 1}")


# %% [markdown]
# **A bandwidth bound for the batch.** On the batches the hybrid reads the four bands once and
# writes $x$ once: $5 \cdot \text{batch} \cdot n$ values, the least any solver can move. Divided
# by the kernel time, that is the bandwidth it reaches. The bound is the rate a plain copy of
# about as many bytes reaches on the same kind of GPU (the float32 `copy` rows of
# `benchmarks/scan_throughput.csv`, the one whose bytes are nearest): a copy of a few MB does not
# reach the rate of a copy of hundreds. The rates as grouped bars, one group per shape and one
# panel per dtype, the bound beside them:

# %%
copies = sorted((2 * row["n"] * 4 / 1e6, row["gbps"]) for row in results.read("scan_throughput.csv", variant="copy", dtype="float32"))


def copy_gbps(megabytes):
    """GB/s of the float32 copy in scan_throughput.csv whose bytes (2 n x 4) are nearest, by ratio, to megabytes."""
    return min(copies, key=lambda copy: abs(np.log(copy[0] / megabytes)))[1]


print(f"{'dtype':<8} {'batch x n':>11} {'least MB':>9} {'hybrid us':>10} {'GB/s':>7} {'of copy':>8} {'cuSPARSE GB/s':>14}")
rates, of_copy = {}, []
for dtype in DTYPES:
    for case in BATCHES:
        megabytes = 5 * case[0] * case[1] * np.dtype(dtype).itemsize / 1e6
        rate = megabytes / hyb[dtype, case] * 1e3
        of_copy.append(rate / copy_gbps(megabytes))
        rates[dtype, case] = (rate, megabytes / cusparse[dtype, case] * 1e3, copy_gbps(megabytes))
        print(f"{dtype:<8} {case_label(*case):>11} {megabytes:>9.1f} {hyb[dtype, case]:>10.1f} {rate:>7.0f} "
              f"{rate / copy_gbps(megabytes):>8.0%} {rates[dtype, case][1]:>14.0f}")
print("of the copy's rate, on the batches:", span(of_copy))
fig, axes = plt.subplots(1, len(DTYPES), figsize=(10, 3.2), sharey=True)
labels = ("hybrid (kernels)", "cuSPARSE gtsv2StridedBatch (device)", "bandwidth bound: a copy of as many bytes")
for ax, dtype in zip(axes, DTYPES):
    for k, label in enumerate(labels):
        ax.bar(np.arange(len(BATCHES)) + k / 4, [rates[dtype, case][k] for case in BATCHES], 1 / 4, label=label)
    ax.set_xticks(np.arange(len(BATCHES)) + 1 / 4, [case_label(*case) for case in BATCHES])
    ax.set_title(f"{dtype}, least bytes moved / time")
axes[0].set_ylabel("GB/s")
_ = axes[0].legend(fontsize=7)


# %% [markdown]
# Plainly: the hybrid's kernels take less time than `gtsv2StridedBatch`'s on every shape measured,
# on both cards. Its whole call is shorter than JAX's on the batches; on the one long system the
# host's part of its many launches decides it (section 3). The `of copy` column: how near a copy
# of as many bytes the kernels come, float64 nearer (twice the bytes).
#
# ### 2.4 Systems that need pivoting
#
# On a matrix like chapter 07's `tridiag(1, 1e-10, 1)` only a pivoting solver is right.
# cuSPARSE's are `gtsv2` (a system a call, SPIKE with diagonal pivoting: [Chang, Stratton, Kim and
# Hwu 2012](../docs/references.md#chang-stratton-kim-and-hwu-2012)) and `gtsvInterleavedBatch`'s LU and QR, a thread per system. They meet
# `method="pivoting"` (chapter 09) on random indefinite systems, the H100's rows of
# `benchmarks/tridiag.csv`, as cuSPARSE's time over ours; the interleaved batch is closest on
# short systems:

# %%
against = tridiag.registry.against_cusparse("pivoting")
print(f"{'dtype':<8}{'shape':>13}{'ours (us)':>10}   cuSPARSE's routine: its us, its time over ours")
for row in against:
    routines = "; ".join(f"{name} {us:.1f}, {ratio:.2f}" for name, us, ratio in row["library"])
    print(f"{row['dtype']:<8}{case_label(row['batch'], row['n']):>13}{row['ours_us']:>10.1f}   {routines}")
print("at least as fast as each routine named for its shape:",
      all(ratio >= 1 for row in against for _, _, ratio in row["library"]))


# %% [markdown]
# ## 3. What a call costs beyond its kernels
#
# Every *kernels* figure above is the GPU's work alone. A user waits for more: a call of
# `tridiag.solve` on device arrays checks its arguments, finds or allocates its work and result
# arrays, launches each kernel from Python, and copies the failure flags back to learn whether
# a pivot was zero; from numpy arrays it also copies the bands to the GPU and $x$ back. This
# section is the workbook's one account of that host's part; chapters 04, 05 and 09 time whole
# calls of their own and refer here.
#
# Kernel times and whole calls were measured separately, so their difference is what a call
# costs beyond the GPU's work: roughly the host's part, Python included. For JAX a run of its
# own (`python benchmarks/tridiag.py --jax-kernels`, `benchmarks/tridiag_jax.csv`) timed JAX's
# own kernels by CUPTI and named the cuSPARSE routine they belong to: `gtsv2StridedBatch` for a
# batch, the routine of section 1, but for a single system `gtsv2`, cuSPARSE's *pivoting*
# solver, another kernel altogether. So JAX's host part is its call minus its own kernels, from
# that run, for every shape:

# %%
CALLERS = OURS + ("hybrid",)
beyond = {(m, t, c): time_us(m, "ours (whole call)", t, *c) - time_us(m, "ours (kernels)", t, *c)
          for m in CALLERS for t in DTYPES for c in CASES}
jax_run = {(row["dtype"], (row["batch"], row["n"])): row for row in results.read("tridiag_jax.csv")}
jax_beyond = {(t, c): jax_run[t, c]["jax_whole_call_us"] - jax_run[t, c]["jax_kernels_us"] for t in DTYPES for c in CASES}
print(f"{'whole call - kernels (us)':<26}" + "".join(f" {m:>8}" for m in CALLERS) + f" {'JAX':>8}   JAX's routine")
for dtype in DTYPES:
    for case in CASES:
        print(f"{dtype:<8} {case_label(*case):>11}{'':6}" + "".join(f" {beyond[m, dtype, case]:>8.1f}" for m in CALLERS)
              + f" {jax_beyond[dtype, case]:>8.1f}   {jax_run[dtype, case]['cusparse_routine']}")
print("JAX's kernels / the routine's own, by CUPTI:", span(jax_run[t, c]["jax_kernels_us"] / jax_run[t, c]["routine_kernels_us"]
                                                          for t in DTYPES for c in CASES), "|", jax_run["float32", CASES[0]]["device"])
print("\nours, on the batches (one launch each, the hybrid's warp solver included), us:",
      span((beyond[m, t, c] for m in CALLERS for t in DTYPES for c in BATCHES), 1))
print("the hybrid on one system of 2^20 (the partition method's levels), us:", span((beyond["hybrid", t, CASES[-1]] for t in DTYPES), 1))
print("JAX, every shape, us:", span(jax_beyond.values(), 1))
print("the hybrid's host part above its kernel time on every batch:",
      all(beyond["hybrid", t, c] > hyb[t, c] for t in DTYPES for c in BATCHES))
on_numpy = {(t, c): time_us("auto (hybrid)", "ours (whole call, numpy)", t, *c) for t in DTYPES for c in CASES}
print("a call on numpy arrays / the same call on device arrays:", span(on_numpy[t, c] / hybrid_call[t, c] for t in DTYPES for c in CASES))


# %% [markdown]
# What the differences say:
#
# - **A call costs tens of microseconds beyond its kernels even with one launch** (the
#   batches): Python's checks and the driver's launch. The hybrid's kernels on a batch take less
#   than that, so for batches of small systems it is the host, not the algorithm, that sets the
#   time of a call, and a faster kernel hardly shows in it.
# - **More launches, more host time.** On one system of $2^{20}$ rows the hybrid launches two
#   kernels a partition level, then the block solver (section 2.2), and its host part there
#   is the longest of its shapes (the second line). A solver driven from Python pays for its
#   launch count; hence the warp solver in one launch, and `hybrid_shared`'s PCR steps several
#   to a launch (`pcr_window`).
# - **Memory kept between calls** costs nothing the second time: the package keeps work arrays,
#   result memory and the flags per shape (`prefixsum.core.workspace`), so that a call allocates
#   nothing it had before. `benchmarks/tridiag_call_profile.py --steps` times each part of a call
#   alone.
# - **From numpy arrays** the copies to the GPU and back join the call (the last line, the hybrid
#   by `"auto"`): they make it many times the call on device arrays.
#
# The scans show the same: a whole `ps.scan` takes many times its kernels below some $2^{20}$
# elements (chapter 04's ladder, chapter 05's launch-per-step path, chapter 10's look-back),
# and the fewer the launches, the shorter the call.

# %% [markdown]
# ## 4. Exercises
#
# Three exercises on the pieces that beat the library: the shuffles that let a warp's lanes
# trade rows without shared memory or barriers (warm-up), the partition method's reduced system
# and its back substitution (core), and the elimination inside a chunk that produces it
# (stretch). `ps.hint("08.lane-exchange")` opens the hints one at a time.
#
# ### Exercise 08.lane-exchange (warm-up, 1 point)
#
# Below is PCR in registers for float64 systems of up to 32 rows, as the warp solver runs it on
# its reduced system: a group of `lanes` lanes (a power of two, at least $n$) per system, one
# row per lane, several groups per warp, each row divided by its diagonal so that a row is
# $(a, c, d)$ with $b = 1$. The step is there; the rows it combines are missing.
#
# **Goal.** `my_neighbours(a, c, d, lane, lanes, s)` returns the rows of the lanes `s` before
# (*up*, lane − `s`) and `s` after (*down*, lane + `s`) this one in its group,
# `(a_up, c_up, d_up, a_down, c_down, d_down)`, taken from their registers by warp shuffles.
#
# **Invariant.** Every lane of the warp calls it with the same `s`, and gets its own group's
# rows only: a neighbour outside the group (before its first lane or past its last) is the
# identity row $(0, 0, 0)$, which changes nothing, even when another system's lane sits there.
# The kernel keeps $a_0$ and $c_{n-1}$ as the arrays hold them (garbage, outside the matrix):
# only a neighbour of zeros cancels them.
#
# **Worked example.** `lanes` = 4, `s` = 1, two groups in lanes 0-3 and 4-7 holding $d$ =
# (10, 11, 12, 13) and (20, 21, 22, 23): lane 2 gets $d_\text{up}$ = 11 and $d_\text{down}$ =
# 13, lane 3 gets 12 and 0 (not lane 4's 20), lane 4 gets 0 and 21.
#
# ```
# lane      0    1    2    3  |  4    5    6    7
# up (s=1)  id   0    1    2  |  id   4    5    6
# down      1    2    3    id |  5    6    7    id
# ```
#
# The check runs it in one warp on rows that name their lanes, for groups of 1 to 32 lanes,
# then solves batches of 1 to 32 rows, several systems to a warp.

# %% tags=["exercise"] exercise_id="08.lane-exchange" points=1 todo="my_neighbours: return the rows (a, c, d) of lane - s (up) and lane + s (down), fetched from their registers with warp shuffles, and the identity row (0, 0, 0) for a neighbour outside this lane's group of lanes lanes"
FULL_MASK = 0xFFFFFFFF


@cuda.jit(device=True)
def my_neighbours(a, c, d, lane, lanes, s):
    ### BEGIN SOLUTION
    a_up = cuda.shfl_up_sync(FULL_MASK, a, s)
    c_up = cuda.shfl_up_sync(FULL_MASK, c, s)
    d_up = cuda.shfl_up_sync(FULL_MASK, d, s)
    a_down = cuda.shfl_down_sync(FULL_MASK, a, s)
    c_down = cuda.shfl_down_sync(FULL_MASK, c, s)
    d_down = cuda.shfl_down_sync(FULL_MASK, d, s)
    if lane < s:
        a_up, c_up, d_up = 0.0, 0.0, 0.0
    if lane + s >= lanes:
        a_down, c_down, d_down = 0.0, 0.0, 0.0
    return a_up, c_up, d_up, a_down, c_down, d_down
    ### END SOLUTION


@cuda.jit
def my_warp_pcr(a, b, c, d, x, lanes):
    batch, n = x.shape
    lane = cuda.threadIdx.x % lanes
    system = cuda.blockIdx.x * (32 // lanes) + cuda.threadIdx.x // lanes
    holds_row = system < batch and lane < n
    ai, ci, di = 0.0, 0.0, 0.0  # lanes past the system hold the identity row
    if holds_row:  # a_0 and c_(n-1), outside the matrix, as the arrays hold them: the identity beyond cancels them
        ai, ci, di = a[system, lane] / b[system, lane], c[system, lane] / b[system, lane], d[system, lane] / b[system, lane]
    s = 1
    while s < lanes:
        a_up, c_up, d_up, a_down, c_down, d_down = my_neighbours(ai, ci, di, lane, lanes, s)
        inverse = 1.0 / (1.0 - ai * c_up - ci * a_down)
        di = (di - ai * d_up - ci * d_down) * inverse
        ai, ci = -ai * a_up * inverse, -ci * c_down * inverse
        s *= 2
    if holds_row:
        x[system, lane] = di


def my_warp_solve(a, b, c, d):
    x = cuda.device_array(d.shape, d.dtype)
    lanes = 1 << (d.shape[1] - 1).bit_length()
    my_warp_pcr[-(-d.shape[0] * lanes // 32), 32](*(cuda.to_device(v) for v in (a, b, c, d)), x, lanes)
    return x

# %% tags=["check"] exercise_id="08.lane-exchange"
@cuda.jit
def exchange_in_one_warp(rows, lanes, s, out):
    lane = cuda.threadIdx.x
    fetched = my_neighbours(rows[0, lane], rows[1, lane], rows[2, lane], lane % lanes, lanes, s)
    for k in range(6):
        out[k, lane] = fetched[k]


def my_exchange_of(rows, lanes, s):
    out = cuda.device_array((6, 32))
    exchange_in_one_warp[1, 32](cuda.to_device(rows), lanes, s, out)
    return out


def warp_solve_by_the_check(a, b, c, d):  # the solver's kernel launched by the check: its arrays, blocks of 32 threads
    x = cuda.device_array(d.shape, d.dtype)
    lanes = 1 << (d.shape[1] - 1).bit_length()
    my_warp_pcr[-(-d.shape[0] * lanes // 32), 32](*(cuda.to_device(v) for v in (a, b, c, d)), x, lanes)
    return x


print(ps.check.neighbours(my_exchange_of, name="my_neighbours"))
print(ps.check.tridiagonal(warp_solve_by_the_check, n_values=(1, 2, 3, 7, 11, 32), name="my_neighbours in the warp solver"))

# %% [markdown]
# ### Exercise 08.interface-system (core, 2 points)
#
# Below is one level of the partition method (section 2.2) in chunks of 4 rows: `load_chunk`
# brings thread $t$'s rows $4t \dots 4t + 3$ into registers (identity rows past $n$) and runs
# the package's partition on them. Afterwards each row has $b = 1$ and reads: the first,
# $a_0\, x_{\text{previous last}} + x_{\text{first}} + c_0\, x_{\text{last}} = d_0$; the last,
# $a_3\, x_{\text{first}} + x_{\text{last}} + c_3\, x_{\text{next first}} = d_3$; an interior row
# $k$, $a_k\, x_{\text{first}} + x_k + c_k\, x_{\text{last}} = d_k$. The warp solver solves the
# reduced system; the two places where the chunks meet it are missing.
#
# **Goal.** In `my_reduce`, thread $t$ writes its chunk's two end rows into the reduced system
# `ra, rb, rc, rd` (one per system, $2T$ rows for $T$ chunks); in `my_substitute`, it reads its
# two ends from the reduced solution `xr` and writes $x$ of every row of its chunk inside the
# system.
#
# **Invariant.** The reduced system is tridiagonal: its rows are the chunks' first and last rows
# in the order of the chunks, so that each couples the rows next to it there, and its solution is
# the original system's $x$ at the chunks' ends. Every thread writes its own two reduced rows and
# its own chunk's $x$, nothing else, and nothing past row $n - 1$.
#
# **Worked example.** Section 2.2's picture: 32 rows, 8 chunks, a reduced system of 16 rows,
# whose rows 6 and 7 are chunk 3's rows 12 and 15, and whose solution holds $x_{12}$ and $x_{15}$.
# Then thread 3 writes $x_{12} \dots x_{15}$. Who writes which reduced row (`my_reduce`):
#
# ```
# system row      0  1  2  3 | 4  5  6  7 | 8  9 10 11 | 12 13 14 15 | ...
# chunk (thread)  0          | 1          | 2          | 3           |
# reduced row     0        1 | 2        3 | 4        5 | 6         7 | ...
# ```
#
# The check solves batches of 1 to 33 rows (systems that are not whole chunks too), traced, every
# new array poisoned, and allows a thread of `my_reduce` or `my_substitute` at most 120 memory
# accesses, registers' local arrays included (the solution makes 106): one thread for many
# chunks fails.

# %% tags=["exercise"] exercise_id="08.interface-system" points=2 todo="my_reduce: write chunk t's first and last rows as rows of the reduced system; my_substitute: write x of every row of chunk t from the reduced solution xr and the chunk's rows"
ROWS = 4
partition_chunk = ps.primitives.chunk.chunk_partition(ROWS)


@cuda.jit(device=True)
def load_chunk(a, b, c, d, system, t, la, lb, lc, ld):
    n = b.shape[1]
    for k in range(ROWS):
        i = t * ROWS + k
        if i < n:
            la[k] = a[system, i] if i > 0 else 0.0  # a_0 and c_(n-1) are outside the matrix
            lb[k] = b[system, i]
            lc[k] = c[system, i] if i < n - 1 else 0.0
            ld[k] = d[system, i]
        else:
            la[k], lb[k], lc[k], ld[k] = 0.0, 1.0, 0.0, 0.0
    partition_chunk(la, lb, lc, ld, 1.0)


@cuda.jit
def my_reduce(a, b, c, d, ra, rb, rc, rd):
    t, system = cuda.grid(2)
    if system < b.shape[0] and 2 * t < rb.shape[1]:
        la, lb = cuda.local.array(ROWS, float64), cuda.local.array(ROWS, float64)
        lc, ld = cuda.local.array(ROWS, float64), cuda.local.array(ROWS, float64)
        load_chunk(a, b, c, d, system, t, la, lb, lc, ld)
        ### BEGIN SOLUTION
        ra[system, 2 * t], rb[system, 2 * t], rc[system, 2 * t], rd[system, 2 * t] = la[0], 1.0, lc[0], ld[0]
        ra[system, 2 * t + 1], rb[system, 2 * t + 1] = la[ROWS - 1], 1.0
        rc[system, 2 * t + 1], rd[system, 2 * t + 1] = lc[ROWS - 1], ld[ROWS - 1]
        ### END SOLUTION


@cuda.jit
def my_substitute(a, b, c, d, xr, x):
    t, system = cuda.grid(2)
    n = x.shape[1]
    if system < b.shape[0] and 2 * t < xr.shape[1]:
        la, lb = cuda.local.array(ROWS, float64), cuda.local.array(ROWS, float64)
        lc, ld = cuda.local.array(ROWS, float64), cuda.local.array(ROWS, float64)
        load_chunk(a, b, c, d, system, t, la, lb, lc, ld)
        ### BEGIN SOLUTION
        first, last = xr[system, 2 * t], xr[system, 2 * t + 1]
        for k in range(ROWS):
            if t * ROWS + k < n:
                if k == 0:
                    x[system, t * ROWS] = first
                elif k == ROWS - 1:
                    x[system, t * ROWS + k] = last
                else:
                    x[system, t * ROWS + k] = ld[k] - la[k] * first - lc[k] * last
        ### END SOLUTION


def my_partition_solve(a, b, c, d):
    batch, n = d.shape
    chunks = -(-n // ROWS)
    bands = [cuda.to_device(v) for v in (a, b, c, d)]
    ra, rb, rc, rd, xr = (cuda.device_array((batch, 2 * chunks)) for _ in range(5))
    grid, block = (-(-chunks // 32), batch), (32, 1)
    my_reduce[grid, block](*bands, ra, rb, rc, rd)
    warp.run(ra, rb, rc, rd, xr, cuda.to_device(np.zeros(batch, np.int32)))
    x = cuda.device_array((batch, n))
    my_substitute[grid, block](*bands, xr, x)
    return x

# %% tags=["check"] exercise_id="08.interface-system"
def partition_solve_by_the_check(a, b, c, d):  # the check's own solve: its arrays, chunks of 4 rows, blocks of 32 threads
    batch, n = d.shape
    chunks = -(-n // 4)
    bands = [cuda.to_device(v) for v in (a, b, c, d)]
    ra, rb, rc, rd, xr = (cuda.device_array((batch, 2 * chunks)) for _ in range(5))
    grid, block = (-(-chunks // 32), batch), (32, 1)
    my_reduce[grid, block](*bands, ra, rb, rc, rd)
    warp.run(ra, rb, rc, rd, xr, cuda.to_device(np.zeros(batch, np.int32)))
    x = cuda.device_array((batch, n))
    my_substitute[grid, block](*bands, xr, x)
    return x


print(ps.check.tridiagonal(partition_solve_by_the_check, n_values=(1, 2, 3, 7, 11, 32, 33), chunk=4, name="my_reduce and my_substitute",
                           budget=ps.check.Budget(accesses_per_step=120, kernels=("my_reduce", "my_substitute"))))

# %% [markdown]
# ### Exercise 08.chunk-partition (stretch, 2 points)
#
# The partition itself, which the core exercise took from the package: the elimination by which
# a thread turns its chunk of 4 rows into the two rows of the reduced system, in registers.
#
# **Goal.** `my_partition(la, lb, lc, ld)` rewrites the chunk's rows $(a_k, b_k, c_k, d_k)$, $k =
# 0 \dots 3$, in place, into the form the core exercise's spec gives: $b_k = 1$ in every row, an
# interior row coupling $x_\text{first}$, $x_k$ and $x_\text{last}$, the first row the previous
# chunk's last unknown, $x_\text{first}$ and $x_\text{last}$, the last row $x_\text{first}$,
# $x_\text{last}$ and the next chunk's first unknown.
#
# **Invariant.** Every rewritten row is a combination of the chunk's original rows, so the
# system's solution still satisfies it: the check puts the solution into every row. One sweep
# down and one back up, each row eliminated with a row already rewritten: about $10R$ operations.
# Which unknowns each row couples, before and after (`*` a coefficient, `1` the unit diagonal):
#
# ```
#          x_prev  x_0  x_1  x_2  x_3  x_next          x_prev  x_0  x_1  x_2  x_3  x_next
# row 0      *      *    *    .    .    .       ->       *      1    .    .    *    .
# row 1      .      *    *    *    .    .       ->       .      *    1    .    *    .
# row 2      .      .    *    *    *    .       ->       .      *    .    1    *    .
# row 3      .      .    .    *    *    *       ->       .      *    .    .    1    *
# ```
#
# **Worked example.** Four rows $(a, b, c, d)$ = $(1, 4, 1, 6)$ for each $k$ of a chunk in the
# middle of a system. Divided by its pivot, row 1 reads $0.25\, x_0 + x_1 + 0.25\, x_2 = 1.5$:
# it couples $x_\text{first} = x_0$ already. Row 2 couples $x_1$; with row 1 it becomes
# $-\tfrac{1}{15} x_0 + x_2 + \tfrac{4}{15} x_3 = \tfrac{18}{15}$, which couples $x_\text{first}$
# and $x_\text{last} = x_3$ and is done. (Skip the sweep back up, or leave the first row
# coupling $x_1$, and the check names the row that still couples it.)
#
# The check runs it on systems of 1, 2, 3 and 8 chunks, judges every row of every chunk, and
# allows a thread of `my_chunks` at most 160 memory accesses, registers included (the solution
# makes 132).

# %% tags=["exercise"] exercise_id="08.chunk-partition" points=2 todo="my_partition: rewrite the chunk in place so that every row has b = 1, each interior row couples x_first, x_k and x_last only, the first row the previous chunk's last x, x_first and x_last, and the last row x_first, x_last and the next chunk's first x, all still true for the system's solution"
ROWS = 4


@cuda.jit(device=True)
def my_partition(la, lb, lc, ld):
    ### BEGIN SOLUTION
    for k in range(2):
        la[k], lc[k], ld[k], lb[k] = la[k] / lb[k], lc[k] / lb[k], ld[k] / lb[k], 1.0
    for k in range(2, ROWS):
        pivot = lb[k] - la[k] * lc[k - 1]
        ld[k] = (ld[k] - la[k] * ld[k - 1]) / pivot
        la[k] = -la[k] * la[k - 1] / pivot
        lc[k] = lc[k] / pivot
        lb[k] = 1.0
    for k in range(ROWS - 3, 0, -1):
        ld[k] -= lc[k] * ld[k + 1]
        la[k] -= lc[k] * la[k + 1]
        lc[k] = -lc[k] * lc[k + 1]
    pivot = 1.0 - lc[0] * la[1]
    ld[0] = (ld[0] - lc[0] * ld[1]) / pivot
    la[0] = la[0] / pivot
    lc[0] = -lc[0] * lc[1] / pivot
    ### END SOLUTION


@cuda.jit
def my_chunks(a, b, c, d):
    t, system = cuda.grid(2)
    if system < b.shape[0] and t < b.shape[1] // ROWS:
        la, lb = cuda.local.array(ROWS, float64), cuda.local.array(ROWS, float64)
        lc, ld = cuda.local.array(ROWS, float64), cuda.local.array(ROWS, float64)
        for k in range(ROWS):
            i = t * ROWS + k
            la[k], lb[k], lc[k], ld[k] = a[system, i], b[system, i], c[system, i], d[system, i]
        my_partition(la, lb, lc, ld)
        for k in range(ROWS):
            i = t * ROWS + k
            a[system, i], b[system, i], c[system, i], d[system, i] = la[k], lb[k], lc[k], ld[k]


def my_partition_of(a, b, c, d):
    bands = [cuda.to_device(v) for v in (a, b, c, d)]
    my_chunks[(-(-b.shape[1] // ROWS // 32), b.shape[0]), (32, 1)](*bands)
    return [v.copy_to_host() for v in bands]

# %% tags=["check"] exercise_id="08.chunk-partition"
@cuda.jit
def chunks_by_the_check(a, b, c, d):  # the check's own kernel: chunks of 4 rows, each thread's through your my_partition
    t, system = cuda.grid(2)
    if system < b.shape[0] and t < b.shape[1] // 4:
        la, lb = cuda.local.array(4, float64), cuda.local.array(4, float64)
        lc, ld = cuda.local.array(4, float64), cuda.local.array(4, float64)
        for k in range(4):
            i = t * 4 + k
            la[k], lb[k], lc[k], ld[k] = a[system, i], b[system, i], c[system, i], d[system, i]
        my_partition(la, lb, lc, ld)
        for k in range(4):
            i = t * 4 + k
            a[system, i], b[system, i], c[system, i], d[system, i] = la[k], lb[k], lc[k], ld[k]


def partition_by_the_check(a, b, c, d):
    bands = [cuda.to_device(v) for v in (a, b, c, d)]
    chunks_by_the_check[(-(-b.shape[1] // 4 // 32), b.shape[0]), (32, 1)](*bands)
    return [v.copy_to_host() for v in bands]


print(ps.check.partition(partition_by_the_check, rows=4, name="my_partition",
                         budget=ps.check.Budget(accesses_per_step=160, kernels=("chunks_by_the_check",))))

# %% tags=["instructor"]
# the package's code that solves the three exercises: the warp solver and its shuffles (pcr_lanes), a level of the partition method, the partition
for solving in (warp._make, warp.reduced, ps.primitives.chunk.pcr_lanes, partition._make, ps.primitives.chunk.chunk_partition):
    print(inspect.getsource(solving))


# %% [markdown]
# ## 5. Summary
#
# For one system of $n$ rows (a batch multiplies the work and the traffic, not the depth), beside
# PCR (chapter 07):
#
# | | PCR | `hybrid_shared` ($L$ lanes) | warp solver ($G$ lanes, $R$ rows a lane) | block solver ($G = 32 W$ lanes) | partition ($R$ rows a chunk) |
# | --- | --- | --- | --- | --- | --- |
# | work (row operations) | $n \lceil \log_2 n \rceil$ | $n \log_2 L + 2n$ | a chunk's elimination and substitution in registers, then $2G (\log_2 G + 1)$ on the ends | as the warp solver's | about $4n$ a level (each chunk eliminated twice), the next level on $2n/R$ rows |
# | depth | $\lceil \log_2 n \rceil + 1$ barrier phases | $\log_2 L + 2$ phases, then $2n/L$ dependent steps | about $2R$ dependent steps, then $\log_2 G + 1$ shuffle steps, no barrier | about $2R$ dependent steps, then $\log_2 W$ PCR steps through shared memory and 5 by shuffles, $5 + \log_2 W$ barriers | two launches a level, about $2R$ dependent steps a thread in each, then the block or warp solver |
# | global memory | read 4 bands, write $x$ | read 4 bands, write $x$ | read 4 bands, write $x$ | read 4 bands, write $x$ | read 4 bands twice, write $x$; the reduced system ($8n/R$ values) written and read |
# | where it runs | one block per system (or per group), or a launch per step | one block per group of systems; longer ones first split in global memory | up to 512 rows | one block per system, up to a block's worth (2048 rows in float32, 1024 in float64) | longer systems, across the grid |
# | pivoting | none | none | none | none | none |
#
# On the GPU of the measurements the hybrid (the warp solver up to 512 rows, the block solver
# up to a block's worth, the partition method above) takes less kernel time than cuSPARSE's `gtsv2StridedBatch` on every shape
# measured, and a call on a batch costs the host more than the kernels (section 3).
#
# **Questions.**
# 1. CR does half the row operations of PCR at $n = 512$, but its kernels took longer on the GPU
#    in every case (section 1). Give two reasons from chapter 07's counts (its section 6).
# 2. Section 1 divided a lower bound on the traffic of PCR's global path ($n = 2^{20}$) by the
#    kernel time. Count instead the bytes `pcr_global_step` *requests* over its launches in
#    float32 (three rows read and one written per row update). How many of them must come from
#    memory, and how many can the caches serve?
# 3. The hybrid's trace in section 2 shows each thread's sweep walking rows 8 apart. Why are the
#    threads of a warp free of bank conflicts there, and what would change if each thread took a
#    contiguous piece of rows instead (Laszlo, Giles and Appleyard's layout)?
# 4. Section 2.3's bound is a copy of the least bytes. The warp solver reaches less of it in
#    float32 than in float64. What would you measure to find out what holds float32 back (a
#    kernel variant, a count from the trace, a profiler metric)?
# 5. `partition_substitute` redoes each chunk's elimination instead of reading it back. Count the
#    bytes a level would move if `partition_reduce` stored the eliminated $a'$, $c'$, $d'$ of every
#    row and the substitution read them, against the bytes it moves now, for $R = 16$ in float32.
#    Which costs more on the GPU of the measurements, the extra arithmetic or the extra bytes?
# 6. Section 3 found the host's part of a call on a batch larger than the hybrid's kernels. For
#    which batch of systems of 256 rows would the kernels take as long as the host's part, if
#    their time grew in proportion to the bytes? What would you change in a program that solves
#    many small batches one after another?
