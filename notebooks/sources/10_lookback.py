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
# # 10 · One pass: from the chained scan to decoupled look-back
#
# The hierarchical scan of chapter 06 reads its input twice (once to reduce each tile, once to
# rescan it with the carry) and writes it once: $3n$ words of global memory, where a copy moves
# $2n$; on the GPU of chapter 06's measurements its kernels stayed well below a copy's
# bandwidth and slower than `torch.cumsum`. `torch.cumsum` runs the kernel of NVIDIA's CUB
# library (`DeviceScanKernel`, as a profile of it names it, `benchmarks/lookback_ncu.txt`), which
# reads the input **once**: every block scans its tile, learns from the blocks before it what
# comes before its tile, and writes the result. The trick that makes this fast is Merrill and
# Garland's *decoupled look-back* ([Merrill and Garland 2016](../docs/references.md#merrill-and-garland-2016)). This chapter builds it up from the simplest single-pass
# scan, the *chained scan*, runs both on the classroom simulator with several blocks resident at
# once, and measures the package's `"lookback"` against `torch.cumsum` and a copy. What it says
# of CUB was read in CUB's source ([CUB](../docs/references.md#cub)); every work cited is on the
# [references page](../docs/references.md).

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import inspect

import numpy as np
from numba import cuda, float32

from prefixsum.classroom.child import on_simulator  # on a GPU machine: runs a call in a simulating child
from prefixsum.cli import results  # the committed benchmark CSVs (section 6)
from prefixsum.scans import lookback, tile_choice

print(ps.device_info())


def traced(resident, fn, *args, **kwargs):
    """``ps.trace.record(fn, ...)`` with ``resident`` blocks of a launch resident at once, on the simulator."""
    def record():
        with ps.sim.resident_blocks(resident):
            return ps.trace.record(fn, *args, **kwargs)
    return on_simulator(record)


def chained(kernel_name, x):
    """One of the chained-scan kernels of ``ps.mutants``, by name, on ``x``, on the simulator (a GPU would hang)."""
    return on_simulator(lambda: ps.mutants.chained_scan(getattr(ps.mutants, kernel_name), x).copy_to_host())

# %% [markdown]
# ## 1. The chained scan
#
# One launch, one block per tile. Block $b$ scans its tile, then **waits** until block $b - 1$
# has published the inclusive prefix of tiles $0..b-1$ (a flag says it is there), adds it to its
# own total, publishes the inclusive prefix of tiles $0..b$ and raises its own flag. The input
# is read once and the output written once: $2n$ words. The package keeps one, in the mutant
# collection of the checker (tiles of 64 float32, the ladder scan inside a tile). The last thread
# of each tile hands the carry on with `hand_off(prefixes, flags, b, total)`, which returns the
# sum of the tiles before `b`. That hand-off between blocks is exercise 10.chained-handoff
# (section 7); the instructor's version prints the package's code after the kernel.

# %%
print(inspect.getsource(ps.mutants.chained_tile))

# %% tags=["instructor"]
print(inspect.getsource(ps.mutants.hand_off))

# %% [markdown]
# The simulator now runs a few blocks at once (`ps.sim.resident_blocks`, 4 unless set), taking
# turns in a seeded order that is not `blockIdx` order, and switching at barriers, atomics, fences
# and polling loads: what a GPU's SMs do, slowed down. The tracer records every access. Each
# row of the picture below is a tile; the dots are the flags it read, black where it read the
# same flag again because its predecessor had not published yet:

# %%
chain_x = np.ones(64 * 12, dtype=np.float32)
chain_run = traced(4, lambda x: ps.mutants.chained_scan(ps.mutants.chained_tile, x).copy_to_host(), chain_x)
print("chained scan right:", np.array_equal(chain_run.result, np.cumsum(chain_x)))
_ = ps.viz.lookbacks(chain_run, array="flags")

# %% [markdown]
# Every tile waits for the one before, which waited for the one before it: the wait of tile
# $b$ is the whole chain's. On a GPU with ~132 SMs × several blocks, the first block of a wave
# finishes its tile in a few microseconds, and then the prefixes trickle along one block at a
# time, each hop a round trip through the L2 cache (section 6 measures one on a GPU): with
# $2^{28}$ elements in tiles of 2048 that is 131 072 hops in series. The chained scan moves $2n$ words, and still loses.
#
# ## 2. Decoupled look-back
#
# Merrill and Garland's observation: a block does not need its predecessor's *prefix*, only the
# *combination of everything before it*, and it can assemble that from whatever the
# predecessors have published. So every tile publishes twice:
#
# 1. as soon as it has scanned its own tile, its **aggregate** (its tile's total), flagged
#    AGGREGATE; tile 0 publishes it as its PREFIX;
# 2. as soon as it knows everything before it, its **inclusive prefix**, flagged PREFIX.
#
# In between it **looks back**: it reads the states of tiles $b-1, b-2, \dots$; an AGGREGATE is
# combined in and the look-back goes on; the first PREFIX ends it. A tile waits only until its
# predecessors have *scanned their own tiles*, which they did at about the same time, not until
# the chain reaches it. In the package, warp 0 of the block looks back: its 32 lanes read the
# states of 32 predecessors at once (each lane waiting for its own tile to publish something),
# a ballot finds the closest PREFIX, a butterfly reduction combines the states from there on,
# and if no lane saw a PREFIX the window moves 32 tiles back (exercise 10.lookback-loop;
# the instructor's version prints the package's code here):

# %% tags=["instructor"]
print(inspect.getsource(lookback.look_back))

# %% [markdown]
# The kernel around it (the tile's load, block scan and store are chapter 06's, shared with the
# hierarchical scan):

# %%
print(inspect.getsource(lookback.lookback_kernel))

# %% [markdown]
# ## 3. Tile ids in launch order
#
# Tile $b$ waits for tiles $< b$. If the tile were `blockIdx.x`, nothing in CUDA says block
# 999 starts before block 1000: if blocks 1000..1527 fill the GPU and spin waiting for block 999,
# which waits for an SM to come free, the GPU hangs. The mutant below makes the danger certain
# (tile $b$ is `gridDim.x - 1 - blockIdx.x`, so every tile's predecessor is dispatched *later*);
# the simulator sees every resident thread waiting and says so instead of hanging:

# %%
try:
    chained("chained_waits_for_later_block_tile", np.ones(64 * 6, dtype=np.float32))
except ps.sim.DeadlockError as error:
    print(str(error).splitlines()[0])

# %% [markdown]
# The package's cure: thread 0 of each block takes its tile id from a global counter with
# `cuda.atomic.add` **when the block starts**. Tile $b$ then waits only for tiles
# that drew smaller ids, hence started earlier and are running; each of those waits only for
# tiles with smaller ids still; by induction on the id every awaited tile finishes, whatever
# order the hardware starts blocks in. The block that draws the last id resets the counter to 0
# for the next scan (every other block has drawn by then), so no launch is spent on a reset. The
# tile states need no reset either: a flag is $2 \cdot \text{epoch} + \text{kind}$, where the
# epoch counts the calls, and a state from an older call reads as "not published yet".
#
# **CUB's scan does without the counter.** `DeviceScan` takes `tile_idx = start_tile + blockIdx.x`
# (`cub/agent/agent_scan.cuh`, under the comment *"Blocks are launched in increasing order, so
# just assign one tile per block"*). It relies on what NVIDIA's hardware does and CUDA does not
# promise: the scheduler dispatches a grid's blocks in increasing `blockIdx` order, and a
# dispatched block keeps its place until it finishes, so when block $b$ runs, every block before
# it is running or done. NVIDIA writes the library and the scheduler; the counter is the
# portable design, correct for any order in which blocks start (the simulator starts them
# shuffled, on purpose), for one atomic per block. CUB draws tile ids from a counter itself where
# it cannot lean on the order: its onesweep radix sort (`atomicAdd(d_ctrs, 1)`,
# `agent_radix_sort_onesweep.cuh`; chapter 11) and a newer scan kernel of CCCL for recent GPUs.
#
# ## 4. The fence between value and flag
#
# A flag must never become visible before the value it announces. Stores to different
# addresses are not ordered for another SM: the flag may reach the L2 cache before the value.
# The chained scan writes the prefix, executes `cuda.threadfence()` and only then raises the
# flag with an atomic (an atomic add of 1: a plain store of the flag may sit in the writer's
# cache), and the reader reads the flag with an atomic, before the value. Without the fence, the
# simulator (which keeps a block's plain stores hidden from other blocks until a fence, an
# atomic or the block's end) hands the waiting tile the prefix slot's old contents:

# %%
no_fence = chained("chained_without_fence_tile", chain_x)
print(f"without the fence: {(no_fence != np.cumsum(chain_x)).sum()} of {len(chain_x)} elements wrong")

# %% [markdown]
# In the language of memory models this is **release and acquire**. The writer's fence before
# the flag makes the flag's store a *release*: every store the block made before it (the value)
# is visible to anyone who sees the flag. The reader's side is the matching *acquire*: it reads
# the flag (atomically) and only then the value, ordered by a fence between the two in the
# two-word protocol below, so that nothing it reads afterwards comes from before the flag. Release without acquire, or acquire without release, is not enough: both sides must
# order their two accesses. (CUDA's `cuda::atomic_ref` spells these `memory_order_release` and
# `memory_order_acquire`; numba offers the fence, `cuda.threadfence()`, and atomics, which the
# package combines to the same effect.)
#
# The package avoids the question for 4-byte types by packing the flag (high half) and the
# value's bits (low half) into **one 64-bit word**, written by one atomic exchange and read by
# one atomic `or` with 0: a reader sees both or neither. An 8-byte value and its flag make 16
# bytes, and CUB keeps them in one 16-byte word too (`ScanTileState` in
# `single_pass_scan_operators.cuh`: written by one 16-byte vector store, `st.relaxed.gpu.v2.u64`,
# read by one vector load), counting on the hardware to move an aligned 16-byte vector whole.
# numba has no 16-byte atomic, but the package reaches the same relaxed 16-byte vector store and
# load at gpu scope through its one door to numba's internals
# (`prefixsum.core.numba_gpu.relaxed_words`), so an 8-byte value and its flag travel as CUB's do:
# one pair, written by one store and read by one load, with no fence. Only a user operator's
# tuple, which fits no word, takes the two-word protocol: a flag word, value slots written before
# a fence, and separate slots for the aggregate and the prefix, so that a reader that saw
# AGGREGATE cannot read a prefix written into the same slot later. (Exercise 10.publish writes
# the 4-byte types' packed word.) The instructor's version prints the package's code here:

# %% tags=["instructor"]
print(inspect.getsource(lookback.state_access))

# %% [markdown]
# ## 5. The real kernel on concurrent blocks
#
# The package's `"lookback"` with tiles of 32 elements, so that a short input makes 40 tiles,
# and eight blocks resident at once. Each row: the states a tile's warp read (the whole window of
# 32 predecessors at once, fewer at the start), black where a lane had to read again:

# %%
look_x = np.ones(32 * 40, dtype=np.float32)
look_run = traced(8, ps.scan, look_x, algorithm="lookback", block_size=32, items_per_thread=1)
print("lookback right:", np.array_equal(look_run.result, np.cumsum(look_x)))
# on a time axis, a tile per row: step from one publication to the next (the picture where there is no kernel)
ps.viz.step(look_run, by="time", fallback=ps.viz.lookbacks(look_run))

# %% [markdown]
# Compare with the chained scan: the waits (black) sit next to the diagonal (a tile waits for
# a neighbour that was still loading its tile), and they do not pile up along the chain. The
# traffic, counted by the tracer with blocks one at a time (so that nobody polls): the
# elements once in and once out, plus a few words of state per tile:

# %%
one_at_a_time = traced(1, ps.scan, look_x, algorithm="lookback", block_size=32, items_per_thread=1)
counted = one_at_a_time.counts()
state_atomics = sum(r.atomic for r in one_at_a_time.records)
print(f"{counted['launches']} launch; per element {counted['global_reads'] / len(look_x):.0f} read and "
      f"{(counted['global_writes'] - state_atomics) / len(look_x):.0f} write; "
      f"{state_atomics / 40:.1f} atomics per tile on the counter and the states")

# %% [markdown]
# ## 6. Measured on a GPU
#
# `benchmarks/lookback.py` (stage `lookback` of `run_gpu.sh`) times, in one run on one GPU:
#
# - **kernel time**: the durations of a call's kernels summed from CUPTI's trace
#   (`torch.profiler`, which sees every kernel of the process, numba's and CUB's alike, with no
#   host gap in the figure; median of 25, every result checked first; the CSV's `method` column),
#   for `"lookback"`, `"hierarchical"`, a numba copy kernel, `torch.cumsum` (its kernel is
#   CUB's decoupled look-back) and torch's `copy_` (a device-to-device memcpy, counted as one);
# - **whole-call time**: `ps.scan(device_array)` followed by a synchronize, on the host clock,
#   against `torch.cumsum` and a synchronize; and `ps.scan(numpy_array)` against torch's
#   numpy → GPU → numpy round trip.

# %%
# NBVAL_IGNORE_OUTPUT
meta = results.read("lookback.csv", part="kernel")[0]
print(f"{meta['device']}, driver {meta['driver']}, numba-cuda {meta['numba_cuda']}, torch {meta['torch']}, {meta['date']}")

# %%
def kernel_us(variant, dtype, k):
    return results.value("lookback.csv", "median_us", variant=variant, part="kernel", dtype=dtype, n=2 ** k)


for dtype in ("float32", "int32", "float64", "int64"):
    print(f"{dtype:8}" + "  ".join(
        f"2^{k}: {kernel_us('torch.cumsum', dtype, k) / kernel_us('lookback', dtype, k):.2f}x torch.cumsum, "
        f"{kernel_us('torch copy', dtype, k) / kernel_us('lookback', dtype, k):.0%} of torch's copy"
        for k in (24, 26, 28)))
for size, dtypes in (("4-byte", ("float32", "int32")), ("8-byte", ("float64", "int64"))):
    ranges = []
    for other in ("torch.cumsum", "torch copy", "copy"):
        ratios = [kernel_us(other, t, k) / kernel_us("lookback", t, k) for t in dtypes for k in (24, 26, 28)]
        ranges.append(f"{other} {min(ratios):.2f} to {max(ratios):.2f}")
    print(f"{size} types, 2^24 to 2^28, time / look-back's: " + ", ".join(ranges))

# %% [markdown]
# On this GPU, for 4-byte types the single pass is faster than `torch.cumsum` at every size,
# reaches most of the bandwidth of torch's copy and beats a plain numba copy kernel (`copy`; the
# ranges printed above); for 8-byte types it is faster too, by less: each element moves twice
# the bytes, and both kernels are bound by memory there. The run took, for each element size and
# length, the tile the package takes (`benchmarks/scan_tiles.csv`, below); an earlier run, with
# one tile of 128 threads × 32 elements for every length and the 8-byte states in two words with
# a fence, took 6-9 % longer for 8-byte types at $2^{24}$ to $2^{28}$ on the same kind of GPU.
# At $2^{24}$ the kernel was once bound by its instructions, not by memory: a profile by Nsight
# Compute (`benchmarks/lookback_ncu.py`) found about 3.5 times the instructions per cycle of
# `torch.cumsum`'s kernel and
# the ALU pipe far busier than DRAM. numba guards every signed array index against a negative
# value (`x[-1]` is the last element): a shift, an `and` and an add in 64 bits on every access,
# and the shared slot `j + j // 32` cost 64-bit shifts of its own. The tile's indices are now
# unsigned, a part per thread plus a constant of the unrolled loop, which the compiler puts into
# the address (`ps.primitives.block.staged_bases`): 3.4 times fewer instructions in the kernel
# (`benchmarks/ptx_counts.py`), about the rate per cycle of `torch.cumsum`'s kernel.
#
# **Against CUB itself.** `torch.cumsum` is CUB's kernel as torch builds it (its own CUB version,
# its own tuning), so beating it is not the same as beating CUB. NVIDIA ships CUB for Python users
# as `cuda.compute` (package `cuda-cccl`): `benchmarks/cub_tuning.py` (stage `cub_tuning`) built
# its `DeviceScan` inclusive sum once, kept its temporary storage, and timed its kernels from
# CUPTI in the same process as five tile shapes of ours, from $2^{12}$ to $2^{28}$, every result
# checked first. The package takes, for each element size and length, the shape that was
# fastest there (`prefixsum.scans.tile_choice`, from `benchmarks/scan_tiles.csv`); CUB's time
# over the time of the tile it takes (above 1: ours is faster), printed first below.
#
# On this GPU, ahead of CUB at every measured length: by 1.2 to 1.4 times at $2^{18}$ and below,
# where there are few tiles (there the package's larger tiles keep the look-back's chain short),
# and by a few percent only for 8-byte values from $2^{20}$ on, where both kernels are bound by
# memory; $2^{22}$ is the closest call for both sizes. Only the H100 ran this comparison.
# `docs/performance.md` holds the tables, the radix sort against CUB's `DeviceRadixSort` (where
# CUB is still faster) and what Nsight Compute says bounds each kernel.
# The whole-call comparison below is against `torch.cumsum`'s call.
#
# The other scans of the workbook on one plot with the look-back and torch's kernels, drawn after
# the ratios (float32; measured in an earlier run with CUDA events, `scan_throughput.csv`):

# %%
cub_rows = results.read("cub_tuning.csv", part="scan", variant="CUB inclusive sum")
cub_us = {(row["dtype"], row["n"]): row["kernel_us"] for row in cub_rows}
print(f"{cub_rows[0]['device']}, CUB {cub_rows[0]['cub']}, {cub_rows[0]['date']}")


def cub_over_ours(dtype, n):
    block_size, items = tile_choice.fastest_shape(np.dtype(dtype).itemsize, n)
    ours = results.value("cub_tuning.csv", "kernel_us", part="scan", dtype=dtype, n=n,
                         variant=f"lookback:block_size={block_size},items_per_thread={items}")
    return cub_us[dtype, n] / ours


for dtype in ("float32", "float64"):
    lengths = sorted(n for kind, n in cub_us if kind == dtype)
    print(f"{dtype}: " + ", ".join(f"2^{n.bit_length() - 1} {cub_over_ours(dtype, n):.2f}x" for n in lengths))

ours = results.read("lookback.csv", part="kernel", dtype="float32")
shown = [r for r in ours if r["variant"] in ("lookback", "hierarchical", "torch.cumsum", "torch copy")]
others = [r for r in results.read("scan_throughput.csv", dtype="float32", kind="ours")
          if r["variant"] in ("blelloch", "ladder", "kstep") and r["n"] >= 2 ** 20]
_ = ps.viz.throughput(shown + others, title=f"float32 kernels, {meta['device']}: GB/s = 2 n x 4 bytes / time")

# %% [markdown]
# **Why the chained scan loses, on a time axis.** `benchmarks/blocks_gpu.py` ran section 1's
# chained scan on the same GPU (`blocks_gpu.csv`): $2^{20}$ float32 in tiles of 64, one launch,
# host clock. Tile $b$ cannot publish its prefix before tile $b - 1$ has, so the scan's time
# divided by its tiles is the time of one hop of the chain: a flag seen, a prefix read, added,
# written and published through the L2 cache. `lookback.csv` holds the look-back kernel at the
# same $n$:

# %%
import matplotlib.pyplot as plt  # noqa: E402

chain = results.read("blocks_gpu.csv", kernel="chained")[0]
chain_us = chain["median_ms"] * 1000
hop_us = chain_us / chain["blocks"]
lookback_us = results.value("lookback.csv", "median_us", variant="lookback", part="kernel", dtype="float32", n=chain["n"])
print(f"n = {chain['n']}, {chain['device']}: chained scan {chain_us:.0f} us for {chain['blocks']} tiles, "
      f"one hop {hop_us:.2f} us; look-back {lookback_us:.2f} us, {chain_us / lookback_us:.0f} times less")

tiles = np.arange(16)
fig, ax = plt.subplots(figsize=(8, 3.2))
ax.barh(tiles - 0.2, hop_us * (tiles + 1), height=0.4, color="tab:red", label="chained: tile b publishes after tile b - 1")
ax.barh(tiles + 0.2, np.full(len(tiles), hop_us), height=0.4, color="tab:blue",
        label="look-back: one window of 32 predecessors' states")
ax.set_yticks(tiles)
ax.set_xlabel("time (us) until tile b's prefix is published")
ax.set_ylabel("tile b")
ax.set_title(f"a model from the measured hop ({hop_us:.2f} us): waits in a chain grow with b, a look-back does not")
_ = ax.legend(fontsize=8, loc="lower right")

# %% [markdown]
# The picture is a model, not a trace: it charges every hop the measured average and leaves out
# each tile's own loads and adds, which both protocols overlap with their waiting. It shows the
# point: in the chained scan the waits add up along the chain, tile $b$ waiting $b$ hops, so the
# last tile waits for all the others; with look-back a tile publishes its aggregate
# at once and reads a window of 32 predecessors' states in one round trip, finding a prefix
# close behind, so no tile waits much longer than one hop, however far from the start it is.

# %% [markdown]
# **Whole calls.** A kernel of a million elements takes microseconds (the curves above); a call
# from Python costs more.
# The package's call does little besides the launch: options checked once per distinct set,
# the result in recycled device memory (numba allocates every array with `cuMemAlloc` and frees
# it with `cuMemFree`, each longer than a small scan), one launch through cuda.core with the
# arguments marshalled once (`prefixsum.core.launch.Launcher`) instead of numba's dispatch,
# which types every argument on every call:

# %%
def call_us(variant, k, part="call on device"):
    return results.value("lookback.csv", "median_us", variant=variant, part=part, dtype="float32", n=2 ** k)


print("ps.scan(device array) / torch.cumsum, whole calls: " + ", ".join(
    f"2^{k} {call_us('ps.scan(auto)', k) / call_us('torch.cumsum', k):.2f}x" for k in (10, 16, 20)))

# %% [markdown]
# On device arrays the package's call is no longer than torch's (the calls of a size were timed
# in turn, so that a machine's drift touches both alike); what is left is host time (`benchmarks/scan_calls.py` takes a call apart: numba's synchronize, the result's
# array, the launch by `cuLaunchKernel`).
#
# **From numpy, the copies overlap the scan.** PCIe moves a few GB a second from pageable memory,
# a hundred times slower than the scan. So `ps.scan(numpy_array)` of 8 MiB or more
# (`prefixsum.scans.transfers`) cuts the array into chunks (four of 1 to 16 MiB, more for larger
# arrays) and keeps three engines busy at once: the host's cores copy chunks k + 1, k + 2, ...
# into page-locked memory on four threads, one copy engine moves chunk k to the device, the SMs
# scan it, and the other copy engine moves chunk k - 1 back, straight into the result
# (page-locked memory kept between calls). Each chunk is one launch of the
# look-back kernel over its own tiles (its argument `first` is the id of its first tile), so a
# chunk's first tiles find the carry of every chunk before in the previous chunk's published
# prefix: no kernel carries anything. One call of $2^{24}$ float32 traced by CUPTI
# (`transfers_timeline.csv`, stage `transfers_timeline`), and the whole calls against torch's
# numpy → GPU → numpy round trip (`transfers.csv`, stage `transfers`):

# %%
def round_trip(dtype, k):
    us = {r["variant"]: r["median_us"] for r in results.read("transfers.csv", dtype=dtype, n=2 ** k)}
    return f"2^{k} {us['ps.scan'] / us['torch round trip']:.2f}x"


for dtype in ("float32", "int32"):
    print(f"ps.scan({dtype} numpy array) / torch's round trip: " + ", ".join(round_trip(dtype, k) for k in (20, 22, 24, 26, 28)))
trace = results.read("transfers_timeline.csv")
engines = ["host copy", "copy in", "SMs (scan)", "copy out"]
fig, ax = plt.subplots(figsize=(8, 2.4))
for row in (r for r in trace if r["engine"] in engines):
    ax.barh(engines.index(row["engine"]), (row["end_us"] - row["start_us"]) / 1000, left=row["start_us"] / 1000,
            color=("tab:gray", "tab:green", "tab:blue", "tab:orange")[engines.index(row["engine"])])
ax.set_yticks(range(len(engines)), engines)
ax.invert_yaxis()
ax.set_xlabel("ms from the call's first event")
_ = ax.set_title(f"one ps.scan of 2^24 float32 from numpy, {trace[0]['device']}")

# %% [markdown]
# While the host's cores copy chunk k + 1 into page-locked memory (the grey row), a copy engine
# moves chunk k in, the SMs scan it and the other engine moves it out: each engine is busy at
# the same time as the host. On that machine the host's copy is the slowest of the four, so the
# engines wait for it between bursts; the call is still several times faster than torch's round
# trip, which copies through pageable memory with nothing overlapped. Below 8 MiB the host's
# work per chunk costs more than the overlap saves, and a call copies the plain way.
#
# ## 7. Exercises
#
# Three exercises, each checked on the simulator with **48 blocks resident** at once, taking
# turns in a seeded order, as the SMs of a GPU hold many blocks: a hand-off that works only when
# the blocks run one after another fails there, and so does a look-back that never meets a
# window without a PREFIX when few blocks run. `ps.hint("10.chained-handoff")` opens the hints
# one at a time.
#
# ### Exercise 10.chained-handoff (warm-up, 1 point)
#
# Write the hand-off of the chained scan (section 1) as the device function `my_hand_off(prefixes,
# flags, b, total)`, which the package's `chained_tile` calls from the last thread of tile `b`
# (tiles of 64 float32, tile ids from the atomic counter, each tile scanned by the ladder;
# `total` is tile `b`'s own sum). It must return the sum of all tiles before `b`, store the
# inclusive prefix of tiles `0..b` in `prefixes[b]` and then raise `flags[b]` with an atomic, so
# that tile `b + 1`, once it sees the flag raised, reads the right prefix. For example, with tile
# totals 3, 5, 2: tile 0 returns 0 and publishes 3, tile 1 waits for flag 0, returns 3 and
# publishes 8, tile 2 waits for flag 1, returns 8 and publishes 10.
# Sections 3 and 4 showed the three ways to get it wrong; the check (`ps.check.scan` of
# `ps.mutants.chained_scan(ps.mutants.chained_tile_with(my_hand_off), x)`) diagnoses each.

# %% tags=["exercise"] exercise_id="10.chained-handoff" points=1 todo="wait until tile b - 1 has published, then publish the inclusive prefix of tiles 0..b in prefixes[b] and raise flags[b], ordered so that a tile that sees the flag also sees the prefix; return the sum of the tiles before b"
@cuda.jit(device=True)
def my_hand_off(prefixes, flags, b, total):
    ### BEGIN SOLUTION
    before = float32(0)
    if b > 0:
        while cuda.atomic.add(flags, b - 1, 0) == 0:
            pass
        before = prefixes[b - 1]
    prefixes[b] = before + total
    cuda.threadfence()
    cuda.atomic.add(flags, b, 1)
    return before
    ### END SOLUTION


# %% tags=["check"] exercise_id="10.chained-handoff"
with ps.sim.resident_blocks(48):
    print(ps.check.scan(lambda x: ps.mutants.chained_scan(ps.mutants.chained_tile_with(my_hand_off), x),
                        sizes=(1, 33, 300, 1100, 2049), name="my_hand_off"))

# %% [markdown]
# ### Exercises 10.lookback-loop (core, 2 points) and 10.publish (stretch, 2 points)
#
# Both plug into the package's kernel through `ps.lessons.scan_with(x, look)`, which runs
# the real kernel (float32 sum, tiles of 32) with your look-back, on as many resident blocks as
# the simulator keeps. Helpers for both:

# %% tags=["setup"]
publish, peek = lookback.state_access(np.float32)  # the package's state protocol (section 4)
warp_sum = ps.primitives.warp.reduce_shfl("add", np.float32)  # a warp's total, in every lane
to_bits, from_bits = lookback.bit_carrier(np.float32)  # float32 <-> uint32, same bits
FULL_MASK, AGGREGATE, PREFIX = 0xFFFFFFFF, lookback.AGGREGATE, lookback.PREFIX

# %% [markdown]
# **The look-back loop (core).** Write `my_look_back(status, values, tile, aggregate, epoch)`,
# called by the 32 lanes of warp 0 of tile `tile`. The goal: every lane returns the sum of all
# tiles before `tile` (the exclusive prefix), and the tiles after it find this tile's state
# published, as early as possible.
#
# - States are written with `publish(status, values, tile, flag, value)` (one lane calls it) and
#   read with `peek(status, values, p)`, which returns `(flag, value)`. The flags of this call are
#   `2 * epoch + AGGREGATE` and `2 * epoch + PREFIX`; a flag below `2 * epoch` was left by an
#   earlier call and means "not published yet".
# - Tile 0 has nothing before it: it publishes its aggregate as its PREFIX at once and returns 0.
# - Every other tile publishes its AGGREGATE before it reads any predecessor (else each tile waits
#   for the one before, the chained scan of section 1, and the check says so), looks back 32
#   predecessors at a time, lane `l` reading tile `end - 32 + l` (one lane walking back tile by
#   tile fails the check too), and at the end publishes its inclusive PREFIX.
#
# **Invariant of the walk.** When the window ending at `end` has been read, the sum kept so far
# is the total of the tiles from the window's closest PREFIX (or from `end - 32`, if it has
# none) up to `tile - 1`; a PREFIX already holds everything before it, so the walk stops at the
# first window that has one.
#
# A worked example, tiles 0..3 with totals 5, 1, 4, 2: when tile 3 looks back, tile 0 has
# published PREFIX 5, tiles 1 and 2 only their AGGREGATEs 1 and 4. In the window `end = 3`, lanes
# 29, 30 and 31 read tiles 0, 1 and 2; lanes 0..28 have no tile (p < 0) and count nothing. The
# closest PREFIX is lane 29's, so the lanes from 29 on are summed: 5 + 1 + 4 = 10. Tile 3 returns
# 10 and publishes PREFIX 12. Had no lane seen a PREFIX, the window would move 32 tiles back
# (`end - 32`), keeping the sum so far.

# %% tags=["exercise"] exercise_id="10.lookback-loop" points=2 todo="return the exclusive prefix of tile `tile` in every lane, found by looking back over the states of the tiles before it, 32 at a time, waiting only for states of this call; publish the aggregate first and the inclusive prefix last"
@cuda.jit(device=True)
def my_look_back(status, values, tile, aggregate, epoch):
    ### BEGIN SOLUTION
    lane = cuda.laneid
    published = np.uint32(2 * epoch)
    if lane == 0:
        publish(status, values, tile, published + (PREFIX if tile == 0 else AGGREGATE), aggregate)
    exclusive = np.float32(0)
    end = tile
    while end > 0:
        p = end - 32 + lane
        flag, value = published + PREFIX, np.float32(0)
        if p >= 0:
            flag, value = peek(status, values, p)
            while flag < published:
                flag, value = peek(status, values, p)
        prefixes = cuda.ballot_sync(FULL_MASK, flag == published + PREFIX)
        closest = 31 - cuda.clz(prefixes)
        exclusive += warp_sum(value if lane >= closest else np.float32(0))
        if prefixes:
            break
        end -= 32
    if lane == 0 and tile > 0:
        publish(status, values, tile, published + PREFIX, exclusive + aggregate)
    return exclusive
    ### END SOLUTION


# %% tags=["check"] exercise_id="10.lookback-loop"
# At most 64 polls of one wait: a lane of a look-back waits a few polls for its predecessor's
# first state; one that waits for a PREFIX instead waits like a chained scan.
with ps.sim.resident_blocks(48):
    for call in ("first", "second"):  # the second call meets the states the first left behind, as real calls do
        print(ps.check.scan(lambda x: ps.lessons.scan_with(x, my_look_back), sizes=(1, 33, 300, 1100, 2049),
                            name=f"my_look_back, {call} call", budget=ps.check.Budget(look_back="status"),
                            polls=64))

# %% [markdown]
# **The publish step (stretch).** Write `my_publish(status, values, tile, flag, value)` for the
# packed state of a 4-byte type: one 64-bit word, `flag` in the high 32 bits and the bits of the
# float32 `value` in the low 32 (`to_bits(value)`), stored so that no reader can see half of it.
# `values` is unused here. The package's look-back then runs with your publish.
#
# **Worked example.** Tile 7 publishing its PREFIX 2.5 in epoch 3: the flag is
# `2 * 3 + PREFIX` = 7 and `to_bits(2.5)` is `0x40200000`, so afterwards `status[7]` holds
# `0x0000000740200000`. A reader of `status[7]`, on any SM and at any moment, sees the word as
# it was before the call or this whole word, never the new flag with the old value.

# %% tags=["exercise"] exercise_id="10.publish" points=2 todo="store flag and value in status[tile] as one 64-bit state (flag in the high half, the value's bits in the low half) so that a reader sees both or neither, and every SM sees the new state"
@cuda.jit(device=True)
def my_publish(status, values, tile, flag, value):
    ### BEGIN SOLUTION
    cuda.atomic.exch(status, tile, (np.uint64(flag) << np.uint64(32)) | np.uint64(to_bits(value)))
    ### END SOLUTION


# %% tags=["check"] exercise_id="10.publish"
with_my_publish = lookback.look_back("add", np.dtype(np.float32), publish=my_publish)
with ps.sim.resident_blocks(48):
    for call in ("first", "second"):
        print(ps.check.scan(lambda x: ps.lessons.scan_with(x, with_my_publish), sizes=(1, 33, 300, 1100, 2049),
                            name=f"my_publish, {call} call", polls=64))

# %% [markdown]
# ## 8. Summary
#
# | | chained scan | decoupled look-back (`"lookback"`) | reduce-then-scan (`"hierarchical"`) |
# | --- | --- | --- | --- |
# | launches | 1 | 1 | 3 (1 for one tile) |
# | global memory | $2n$ + a word per tile | $2n$ + a few words per tile | $3n$ |
# | work | the ladder's $\frac{b}{2}\log_2 b$ per tile of $b$ ($\frac{n}{2}\log_2 b$ in all) + 1 per tile | $2n$ + a warp's look-back per tile (usually one window) | about $6n$ (chapter 06's tracer counts 5.88 combines per element) |
# | wait of tile $b$ | the whole chain: $O(b)$ hops | about one tile's load | none (three launches) |
# | needs | ids in launch order, a fence | ids in launch order, a fence or a packed word | nothing across blocks |
#
# Section 6 prints, from `benchmarks/lookback.csv`, how the kernels and the whole calls compare
# with `torch.cumsum` and torch's copy on the GPU that ran it.
#
# **Questions.**
# 1. The look-back reads 32 states at once even when the closest predecessor already has its
#    prefix. What does that cost, and why is it still cheaper than reading one state at a time?
# 2. Tile 0 publishes its aggregate as a PREFIX. What would go wrong if it published it as an
#    AGGREGATE, like every other tile?
# 3. The counter is reset by the block that draws the last id. Why is it safe to reset it before
#    the other blocks have finished? What if two scans ran at the same time on two streams?
# 4. The epoch replaces a reset of the tile states. After how many calls does a 32-bit flag run
#    out, and what does the package do then?
# 5. Why can the 8-byte protocol not use one slot for the aggregate and the prefix of a tile?
#    Construct the interleaving that goes wrong.
# 6. Section 1's chained scan and section 5's look-back ran on the same simulator. Count, from
#    the two traces, how many times a tile read a state again (the black dots), and explain the
#    difference.
