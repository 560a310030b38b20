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
# # 08 · Beating cuSPARSE: the hybrid, a warp solver and the partition method
#
# Chapter 07 built PCR, cyclic reduction (CR) and Thomas, counted their work and depth, and
# said from Brent's theorem which should win when. This chapter measures them on a GPU against
# NVIDIA's cuSPARSE and JAX, finds PCR a few times behind the library, and builds from the same
# pieces what beats it:
#
# 1. the three methods against `gtsv2StridedBatch`, the library's batched solver;
# 2. the **hybrid** (a few PCR steps, then Thomas: Sakharnykh 2010; Davidson, Zhang and Owens
#    2011; Kim, Wu, Chang and Hwu 2011), then a **warp** that keeps a system in registers, and
#    **Wang's partition method** across the grid for systems longer than a warp can hold;
# 3. what a whole call costs beyond its kernels: the workbook's one account of the host's part,
#    to which the other chapters refer.
#
# The hybrid's last step, the Thomas sweep over one interleaved subsystem, is chapter 07's
# stretch exercise (07.thomas-sweep); this chapter measures and explains, and asks its questions
# at the end.
#
# None of these methods pivots: they are for diagonally dominant or symmetric positive definite
# systems (chapter 07, section 7), as are cuSPARSE's batched solvers measured here.

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import inspect

import matplotlib.pyplot as plt
import numpy as np
import scipy.linalg
from numba import cuda

from prefixsum import tridiag
from prefixsum.cli import results
from prefixsum.tridiag import _common, hybrid, partition, pcr, warp

print(ps.device_info())

# %%
def dominant_systems(batch, n, seed):
    """Random strictly diagonally dominant systems (|b| >= |a| + |c| + 0.5), as in chapter 07."""
    rng = np.random.default_rng(seed)
    a, c = rng.uniform(-1, 1, (2, batch, n))
    b = (np.abs(a) + np.abs(c) + rng.uniform(0.5, 1.5, (batch, n))) * rng.choice([-1.0, 1.0], (batch, n))
    a[:, 0], c[:, -1] = 0, 0
    return a, b, c, rng.normal(size=(batch, n))


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
# The rows of method="pivoting" and cuSPARSE's pivoting solvers come from a run of their own on another GPU (chapter 09).
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
# So `hybrid_shared` halves PCR's kernel time on the batches or better, but stays behind
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
# (every launch adds to the host's part of a call, section 3); in float32 16 on the large level, 8 on the
# small ones below it. `benchmarks/tridiag.csv` holds the same comparison on batches of 100,
# 1000 and 64 systems, where $R = 8$ wins in both dtypes. What the partition method does not do:
# pivot (like every method here it is for diagonally dominant or symmetric positive definite
# systems).
#
# ### 2.3 The hybrid against cuSPARSE and JAX
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
print("hybrid's whole call shorter than JAX's on every batch:",
      all(hybrid_call[t, c] < jax_call[t, c] for t in DTYPES for c in BATCHES),
      "| on one system of 2^20, float32 and float64:", [bool(hybrid_call[t, CASES[-1]] < jax_call[t, CASES[-1]]) for t in DTYPES])
print("hybrid's whole call beyond its kernels, us:", span((hybrid_call[t, c] - hyb[t, c] for t in DTYPES for c in CASES), 0),
      "| on the batches:", span((hybrid_call[t, c] - hyb[t, c] for t in DTYPES for c in BATCHES), 0))


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
# Plainly: the hybrid's kernels take less time than cuSPARSE's on every shape measured (the
# ratios printed in section 2.3). Its whole call is shorter than JAX's on the batches; on the one
# long system the host's part of its many launches can undo that (the same table, and section
# 3). The `of copy` column says how close to a copy of about as many bytes the kernels come,
# float64 closer than float32 (the same work per row, twice the bytes). One run per case:
# differences of some percent between runs are noise.

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
#   kernels a partition level, then the warp solver (section 2.2), and its host part there
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
# ## 4. Summary
#
# For one system of $n$ rows (a batch multiplies the work and the traffic, not the depth), beside
# PCR (chapter 07):
#
# | | PCR | `hybrid_shared` ($L$ lanes) | warp solver ($G$ lanes, $R$ rows a lane) | partition ($R$ rows a chunk) |
# | --- | --- | --- | --- | --- |
# | work (row operations) | $n \lceil \log_2 n \rceil$ | $n \log_2 L + 2n$ | a chunk's elimination and substitution in registers, then $2G (\log_2 G + 1)$ on the ends | about $4n$ a level (each chunk eliminated twice), the next level on $2n/R$ rows |
# | depth | $\lceil \log_2 n \rceil + 1$ barrier phases | $\log_2 L + 2$ phases, then $2n/L$ dependent steps | about $2R$ dependent steps, then $\log_2 G + 1$ shuffle steps, no barrier | two launches a level, about $2R$ dependent steps a thread in each, then the warp solver |
# | global memory | read 4 bands, write $x$ | read 4 bands, write $x$ | read 4 bands, write $x$ | read 4 bands twice, write $x$; the reduced system ($8n/R$ values) written and read |
# | where it runs | one block per system (or per group), or a launch per step | one block per group of systems; longer ones first split in global memory | up to 512 rows | longer systems, across the grid |
# | pivoting | none | none | none | none |
#
# On the GPU of the measurements the hybrid (the warp solver up to 512 rows, the partition
# method above) takes less kernel time than cuSPARSE's `gtsv2StridedBatch` on every shape
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
