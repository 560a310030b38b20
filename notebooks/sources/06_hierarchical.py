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
# # 06 · Warp, block, grid: seed 001's hierarchical scan
#
# Seed 001 (Lungu, Petroşanu and Pîrjan, *Solutions for optimizing the data parallel prefix sum
# algorithm using the Compute Unified Device Architecture*) builds its scan the way the hardware
# is built: *"Within a warp, the parallel prefix sum function processes the instructions and
# then, the results are being processed using instructions at the thread blocks' level. Finally,
# the results obtained at the grids of thread blocks level are combined and thus it is obtained
# a global sum."* On top comes one more level, below the warp: each thread first combines
# **8 elements** sequentially in registers. The paper timed the result on a GeForce GTX 280 and a
# GTX 480 (Fermi, 2010).
#
# This chapter climbs the levels one at a time: the warp scan three ways (the seed's, which has
# been unsafe since 2017, and two correct ones), the block scan of the seed's Figure 2, eight
# elements per thread, and the grid level. Then it reruns the paper's experiments on an NVIDIA
# H200 and asks what fifteen years changed.

# %%
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import collections
import csv
import inspect

import matplotlib.pyplot as plt
import numpy as np
from numba import cuda

print(ps.device_info())

# %% [markdown]
# ## 1. The warp: Figure 1, on shared memory
#
# A **warp** is 32 consecutive threads of a block (its *lanes*). The seed's Figure 1 scans the 32
# values of a warp, held in shared memory, in five steps: at step $d = 1, 2, 4, 8, 16$ every lane
# $l \ge d$ combines the value of lane $l - d$ into its own (Hillis–Steele, chapter 03, on 32
# elements):
#
# ```c++
# const unsigned int IndexFir = index & 31;
# if (IndexFir >= 1)  ptr[index] = Operatorul::proceseaza(ptr[index - 1], ptr[index]);
# if (IndexFir >= 2)  ptr[index] = Operatorul::proceseaza(ptr[index - 2], ptr[index]);
# ...
# if (IndexFir >= 16) ptr[index] = Operatorul::proceseaza(ptr[index - 16], ptr[index]);
# ```
#
# There is no barrier between the steps, and the paper says why: *"threads within a warp are
# executed synchronously, eliminating the necessity of synchronization"*. Every lane reads its
# neighbour's slot before any lane writes, because the 32 lanes execute each instruction
# together; `ptr` is `volatile` so that the compiler does not keep the slots in registers. The
# package keeps this version (numba has no `volatile`):

# %%
print(inspect.getsource(ps.scans.warp.scan_volatile))

# %% [markdown]
# **Since Volta (compute capability 7.0, 2017) this is a bug.** Volta gave every thread its own
# program counter (*independent thread scheduling*): the lanes of a warp may run apart and
# reconverge later, so nothing guarantees that lane 5 reads `ptr[4]` before lane 4 overwrites
# it. CUDA 9 added `__syncwarp()` and the `_sync` shuffles for this, and the CUDA programming
# guide has called such implicit "warp-synchronous" code unsafe ever since.
#
# The classroom simulator runs each lane of a warp to its end before the next one starts, one of
# the schedules Volta allows. The tracer records every shared-memory access; with no barrier
# and no `syncwarp`, every access of the warp is in one *phase* (nothing orders them), so every
# slot that one lane writes and another reads is a race. Two warps, inputs $1, 2, \dots, 64$:

# %%
x64 = np.arange(1, 65, dtype=np.int32)
expected = np.concatenate([ps.reference.scan(x64[:32]), ps.reference.scan(x64[32:])])  # one scan per warp
volatile_run = ps.trace.record(ps.scans.warp.warp_scan, x64, "volatile", threads=64)
print("volatile, lanes 0-7:", volatile_run.result[:8])
print("the scan, lanes 0-7:", expected[:8])
races = volatile_run.races()
print(f"{len(races)} races, for example:\n  {races[1]}\n  {races[31]}")

# %% [markdown]
# Lane 2 shows what happened. Lane 1 had already finished, so at step 1 lane 2 read
# $x_0 + x_1 = 3$ instead of $x_1 = 2$ and got $6$; at step 2 it added lane 0's $1$ once more:
# $7$. Lanes executing in lockstep would have read the old values. The race on `buf[1]` lists
# who touches it: lane 1 writes it, lanes 2, 3, 5, 9 and 17 read it at steps $d = 1, 2, 4, 8,
# 16$.
#
# ## 2. The same steps, made safe: `syncwarp`
#
# `cuda.syncwarp(mask)` is a barrier for the lanes named in `mask` (and it orders their memory
# accesses). Each step now reads the neighbour's slot into a register, waits until every lane has
# read, writes, and waits until every lane has written:

# %%
print(inspect.getsource(ps.scans.warp.scan_syncwarp))

# %% [markdown]
# Every `syncwarp` starts a new phase for the tracer, so the races are gone, and the dataflow of
# `buf` (one row per phase that writes; an arrow from every slot a lane read to the slot it
# wrote; colour: the warp) shows the five steps of Figure 1. A step spans two phases (read,
# `syncwarp`, write, `syncwarp`), so the writes land in phases 2, 4, ..., 10. The two warps
# never exchange a value.

# %%
syncwarp_run = ps.trace.record(ps.scans.warp.warp_scan, x64, "syncwarp", threads=64)
print("races:", len(syncwarp_run.races()), "| equal to the scan of each warp:", np.array_equal(syncwarp_run.result, expected))
_ = ps.viz.dataflow(syncwarp_run, array="buf", title="scan_syncwarp: two warps, buf in shared memory")

# %% [markdown]
# ## 3. Registers only: `shfl_up_sync`
#
# The values need not go through shared memory at all. `cuda.shfl_up_sync(mask, value, d)`
# returns `value` as held by lane $l - d$, and the caller's own value in lanes $l < d$, one
# instruction for the whole warp. The warp scan becomes a loop of five shuffles:

# %%
print(inspect.getsource(ps.scans.warp.scan_shfl))

# %% [markdown]
# Every lane must execute the shuffle (it is a rendezvous of the lanes in `mask`), even a lane
# that will not use the result: the `if lane >= d` comes after it.
#
# A shuffle moves registers, so a memory trace does not see it. The picture below is drawn from
# a run instead: a kernel in which every lane shuffles its own lane number, so that what arrives
# is the number of the lane it came from, at each of the five deltas. Grey dots are lanes that
# got their own value back (lane $< d$).


# %%
@cuda.jit
def whose_value(sources):
    """sources[step, lane] = the lane whose value shfl_up_sync brought to this lane at this step."""
    lane = cuda.laneid
    d = 1
    step = 0
    while d < 32:
        sources[step, lane] = cuda.shfl_up_sync(ps.scans.warp.FULL_MASK, lane, d)
        d *= 2
        step += 1


measured = np.zeros((5, 32), dtype=np.int32)
whose_value[1, 32](measured)
rule = np.array([[lane - d if lane >= d else lane for lane in range(32)] for d in (1, 2, 4, 8, 16)])
print("the shuffles follow PTX's rule (lane - d, or the lane's own value):", np.array_equal(measured, rule))
_ = ps.viz.shuffles((1, 2, 4, 8, 16), kind="up", sources=measured, title="shfl_up_sync in the warp scan: lane l - d to lane l")

# %% [markdown]
# The classroom simulator's warp intrinsics were not only written to follow the PTX manual:
# `benchmarks/warp_semantics.py` runs 822 small cases (every shuffle, vote and `syncwarp`, full
# and partial masks, deltas past the warp, six dtypes) on the simulator and on an H200, and
# compares every result that is defined on a GPU:

# %%
with open("../benchmarks/warp_semantics_compare.txt") as handle:
    print(*[line.strip() for line in handle if line.startswith(("A:", "B:", "VERDICT"))], sep="\n")

# %% [markdown]
# The three warp scans side by side, as the tracer counts them (two warps, 64 values):

# %%
shfl_run = ps.trace.record(ps.scans.warp.warp_scan, x64, "shfl", threads=64)
print(f"{'variant':<9} {'correct':>7} {'races':>6} {'shared reads':>13} {'shared writes':>14} {'sync phases':>12}")
for name, run in (("volatile", volatile_run), ("syncwarp", syncwarp_run), ("shfl", shfl_run)):
    c = run.counts()
    correct = np.array_equal(run.result, expected)
    print(f"{name:<9} {str(correct):>7} {len(run.races()):>6} {c['shared_reads']:>13} {c['shared_writes']:>14} {c['barriers']:>12}")

# %% [markdown]
# The shuffle version needs no shared memory and no synchronisation beyond the shuffles
# themselves; the package builds everything that follows on it.
#
# ## 4. The block: Figure 2
#
# A block has up to 32 warps. The seed's Figure 2 scans a block with warp scans: (1) every warp
# scans its 32 values; (2) the last lane of every warp stores the warp's total; (3) one warp
# scans those totals; (4) every thread combines the scanned total of the warps before its own
# into its result. The package's version, on shuffles (it returns each thread's *exclusive*
# result and the block's total, which is what the next level needs):

# %%
print(inspect.getsource(ps.scans.hierarchical.block_scan))

# %% [markdown]
# The same steps by hand for 128 values (four warps), with the package's warp scan for step 1:

# %%
xb = np.random.default_rng(6).integers(0, 10, 128).astype(np.int32)
per_warp = ps.scans.warp.warp_scan(xb, "shfl", threads=128)  # step 1: each warp scans its 32 values
warp_totals = per_warp[31::32]  # step 2: lane 31 of each warp holds its warp's total
scanned_totals = ps.reference.scan(warp_totals)  # step 3: warp 0 scans the totals
before = np.concatenate([[0], scanned_totals[:-1]])  # step 4: warp w adds the totals of warps 0..w-1
block = per_warp + np.repeat(before, 32)
print("warp totals:       ", warp_totals)
print("scanned by warp 0: ", scanned_totals)
print("added to each warp:", before)
print("equal to the scan of the 128 values:", np.array_equal(block, ps.reference.scan(xb)))
one_block = ps.trace.record(ps.scan, xb, algorithm="hierarchical", block_size=128, items_per_thread=1)
print("the package's block scan (one element per thread) gives the same:", np.array_equal(one_block.result, block),
      "| barriers:", one_block.counts()["barriers"], "| races:", len(one_block.races()))

# %% [markdown]
# Unlike the warp level, the block level needs barriers: the totals cross from warp to warp
# through shared memory. `block_scan` has two (after the totals are stored, after they are
# scanned); the other two barriers of this run belong to the loads and stores of section 5.
#
# ## 5. Eight elements per thread
#
# *"Processing a single element per thread does not generate enough computational load to
# reduce the memory latency. [...] Thus, in the parallel prefix sum function in CUDA we have
# assigned eight input elements per thread."* A tile of `block_size * items_per_thread`
# elements is scanned in three steps: every thread combines its 8 consecutive elements
# sequentially (7 dependent operations, no communication), the block scans the 256 per-thread
# totals (section 4), and every thread rescans its 8 elements starting from its exclusive result.
# The expensive communication (shuffles, barriers) now happens once per 8 elements.
#
# Which 8 elements? If thread $t$ loaded elements $8t, \dots, 8t + 7$ directly, the 32 lanes
# of a warp would read addresses 8 words apart in each load instruction: 32 different 32-byte
# sectors, 4 bytes used of each, where a coalesced load touches 4 sectors and uses all of them.
# (The seed's threads read "two groups of four elements"; the package reads one run of 8.) So
# the package loads **coalesced** (at step $k$, thread $t$ reads element $k \cdot$ `block_size`
# $+ t$: the warp reads 32 consecutive words) into shared memory, and after a barrier each
# thread reads its own run from there, a transpose through shared memory. With 32 threads and
# 8 items:

# %%
threads, items = 32, 8
for t in (0, 1, 2, 31):
    loads = [k * threads + t for k in range(items)]
    print(f"thread {t:>2}: loads elements {loads}, then scans elements {t * items}..{t * items + items - 1}")


# %% [markdown]
# Reading the runs back from shared memory has a problem of its own: lane $t$ reads word $8t + k$,
# and 32 lanes 8 words apart hit only 4 of the 32 banks (chapter 04). The package skips one slot
# every 32 words (word $j$ lives at $j + \lfloor j/32 \rfloor$). Passes the warp needs for one
# read of the runs, by hand:


# %%
def passes(words):
    """Passes a warp needs for one access to these word indices: the most distinct words in one bank."""
    banks = collections.defaultdict(set)
    for w in words:
        banks[w % 32].add(w)
    return max(len(b) for b in banks.values())


print(f"{'items per thread':>16} {'plain':>6} {'padded':>7}")
for items_per_thread in (1, 2, 4, 8, 16):
    runs = [t * items_per_thread for t in range(32)]
    print(f"{items_per_thread:>16} {passes(runs):>6} {passes([j + (j >> 5) for j in runs]):>7}")

# %% [markdown]
# The tracer checks every shared-memory access of a real tile (the default 256 threads × 8
# items = 2048 elements, one launch):

# %%
tile_run = ps.trace.record(ps.scan, np.ones(2048, dtype=np.float32), algorithm="hierarchical")
print("one tile of 2048:", tile_run.conflict_summary(), "| races:", len(tile_run.races()))

# %% [markdown]
# ## 6. The grid: reduce-then-scan
#
# A tile is one block; the array has many tiles. The seed: *"The partial result for each of the
# thread blocks is stored in the array "rezultate_bloc[]". The parallel prefix sum function is
# applied to this storage array and each thread of the block stores the previous result."* That
# is **scan-then-propagate**, the scheme of chapters 01 and 04: scan every tile and write it
# ($n$ reads, $n$ writes), scan the tile totals, then read and rewrite every element to add its
# carry ($n$ + $n$ more): **4n** words of global traffic.
#
# The package does **reduce-then-scan** instead, 3n words:
#
# 1. `reduce_tiles`: block $b$ only *sums* tile $b$ and writes its total ($n$ reads);
# 2. `scan_totals` (the *spine*): one block scans the totals in place;
# 3. `rescan_tiles`: block $b$ scans tile $b$ again, starting from the total of tiles
#    $0..b-1$, and writes the result ($n$ reads, $n$ writes).
#
# Reading the input a second time costs $n$ words; reading and rewriting the output costs $2n$.
# The tile scan (sections 4 and 5 in one device function; `seed` is the carry):

# %%
print(inspect.getsource(ps.scans.hierarchical.tile_scanner))

# %% [markdown]
# The three kernels and the host code that launches them:

# %%
print(inspect.getsource(ps.scans.hierarchical.reduce_kernel))
print(inspect.getsource(ps.scans.hierarchical.spine_kernel))
print(inspect.getsource(ps.scans.hierarchical.scan_kernel))
print(inspect.getsource(ps.scans.hierarchical.run))

# %% [markdown]
# The reduction kernel needs only a total, not a scan, so its warps combine by a **butterfly**
# (`ps.scans.warp.reduce_shfl`, `shfl_xor_sync` with masks 16, 8, 4, 2, 1): after five steps every lane
# holds the warp's total. Sums taken in another order are fine for the four operators, which are
# commutative (for floats the carries round a little differently).

# %%
print(inspect.getsource(ps.scans.hierarchical.block_reduce))
_ = ps.viz.shuffles((16, 8, 4, 2, 1), kind="xor", title="reduce_shfl: the butterfly (shfl_xor_sync)")

# %% [markdown]
# Global memory, launch by launch, for 300 elements in tiles of 64 (32 threads × 2 items): five
# tile totals, the spine scanning them in place, and every tile written once, by the rescan:

# %%
launches_run = ps.trace.record(ps.scan, np.arange(1, 301, dtype=np.int32), algorithm="hierarchical", block_size=32,
                               items_per_thread=2)
_ = ps.viz.launches(launches_run)

# %% [markdown]
# The traffic, counted by the tracer for 2000 elements: the hierarchical scan (tiles of 512:
# 64 threads × 8 items) against Blelloch's scan-then-propagate from chapter 04 (tiles of 256).
# Reads of the one carry a block needs are listed apart: the tracer counts one per thread, a GPU
# serves the 32 lanes of a warp that read one word with one broadcast.


# %%
def traffic(run, n, label):
    """Print global reads and writes per launch and per element; carry reads (broadcasts) apart."""
    print(label)
    carry_reads = 0
    for launch in run.launches:
        rs = [r for r in run.records if r.launch == launch.number and r.space == "global"]
        reads = collections.Counter(r.array for r in rs if not r.write)
        writes = collections.Counter(r.array for r in rs if r.write)
        carry_reads += reads.pop("carries", 0)
        print(f"  {launch.number}: {launch.kernel:<16} {launch.grid[0]:>3} blocks  reads {dict(reads)}  writes {dict(writes)}")
    c = run.counts()
    words = c["global_reads"] - carry_reads + c["global_writes"]
    print(f"  {words} words = {words / n:.2f} n (+ {carry_reads} carry reads, one per thread)")


traffic_n = 2000
x_traffic = np.ones(traffic_n, dtype=np.float32)
traffic(ps.trace.record(ps.scan, x_traffic, algorithm="hierarchical", block_size=64), traffic_n,
        "hierarchical (reduce-then-scan)")
traffic(ps.trace.record(ps.scan, x_traffic, algorithm="blelloch", block_size=128), traffic_n,
        "blelloch (scan-then-propagate)")

# %% [markdown]
# About $3n$ against about $4n$ (Blelloch's first tile skips the carry pass, hence a little less
# than $4n$). A device copy moves $2n$; so does a single-pass scan, which passes the carry from
# tile to tile inside one launch (section 11).
#
# Finally, the whole thing against the reference on a larger array (size from the device), and
# the full check for the default options and for a small tile in the other direction:

# %%
n_large = ps.size_for_device(simulator=5000, gpu=2 ** 24)
x_large = np.random.default_rng(7).integers(-1000, 1000, n_large).astype(np.int32)
print(f"n = {n_large}: equal to the reference:",
      np.array_equal(ps.scan(x_large, algorithm="hierarchical"), ps.reference.scan(x_large)))
print(ps.check.scan(lambda x: ps.scan(x, algorithm="hierarchical"), name="hierarchical (256 threads x 8 items)"))
print(ps.check.scan(lambda x: ps.scan(x, "max", inclusive=False, reverse=True, algorithm="hierarchical", block_size=32,
                                      items_per_thread=4),
                    op="max", inclusive=False, reverse=True, dtype=np.int32, name="hierarchical exclusive max suffix (32 x 4)"))

# %% [markdown]
# ## 7. Exercise: a warp scan with shuffles
#
# Write the five steps of the warp scan with `cuda.shfl_up_sync` (section 3). One block of 32
# threads scans up to 32 float32 values; lanes past the end hold 0, so the whole warp takes part
# and the mask is `FULL_MASK`. Remember that every lane must execute the shuffle.

# %% tags=["exercise"] todo="for d = 1, 2, 4, 8, 16: other = cuda.shfl_up_sync(FULL_MASK, value, d) in every lane, then value += other in lanes >= d"
from numba import float32

FULL_MASK = ps.scans.warp.FULL_MASK


@cuda.jit
def my_warp_scan_kernel(x, out, n):
    lane = cuda.threadIdx.x
    value = x[lane] if lane < n else float32(0)
    ### BEGIN SOLUTION
    d = 1
    while d < 32:
        other = cuda.shfl_up_sync(FULL_MASK, value, d)
        if lane >= d:
            value += other
        d *= 2
    ### END SOLUTION
    if lane < n:
        out[lane] = value


def my_warp_scan(x):
    out = cuda.device_array(len(x), x.dtype)
    my_warp_scan_kernel[1, 32](cuda.to_device(x), out, len(x))
    return out


# %% tags=["check"]
print(ps.check.scan(my_warp_scan, sizes=(1, 2, 5, 17, 31, 32)))

# %% [markdown]
# ## 8. Exercise: the block combine
#
# Below is a tile kernel for blocks of 128 threads (4 warps), one element per thread: each warp
# scans with the package's shuffle scan, lane 31 of each warp stores the warp's total, and
# warp 0 scans the totals in place. Write step 4 of Figure 2: every thread of warp $w > 0$
# adds the scanned total of warps $0..w-1$ to its `value`. `ps.check.tiled` runs the kernel on
# every tile and carries the tile totals between tiles.

# %% tags=["exercise"] todo="in warps w > 0 (warp = t >> 5), add warp_totals[warp - 1] (the scanned total of warps 0..w-1) to value"
BLOCK = 128
WARPS = BLOCK // 32
warp_scan = ps.scans.warp.scan_shfl("add", np.float32)


@cuda.jit
def my_block_tile(x, out, totals, n):
    warp_totals = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    lane, warp = t & 31, t >> 5
    i = cuda.blockIdx.x * BLOCK + t
    value = warp_scan(x[i] if i < n else float32(0), FULL_MASK)  # 1. each warp scans
    if lane == 31:
        warp_totals[warp] = value  # 2. the warp's total
    cuda.syncthreads()
    if warp == 0:  # 3. warp 0 scans the totals
        scanned = warp_scan(warp_totals[lane] if lane < WARPS else float32(0), FULL_MASK)
        if lane < WARPS:
            warp_totals[lane] = scanned
    cuda.syncthreads()
    ### BEGIN SOLUTION
    if warp > 0:
        value += warp_totals[warp - 1]
    ### END SOLUTION
    if i < n:
        out[i] = value
    if t == BLOCK - 1:
        totals[cuda.blockIdx.x] = value


# %% tags=["check"]
print(ps.check.tiled(my_block_tile, block_size=BLOCK))

# %% [markdown]
# ## 9. Seed 001's Table 1, fifteen years later
#
# The paper timed its scan of float32 arrays of 22 sizes, from 35 to 8,388,600 elements, with
# CUDA events around the GPU work (averages of 10,000 runs), against a sequential loop on an
# Intel i7-2600K. `benchmarks/table1.py` reran the table on a machine with an NVIDIA H200: the
# package's hierarchical scan (CUDA events around its launches on device arrays, median of 50),
# a whole `ps.scan` call on a device array (options, allocation, launches; host clock),
# `torch.cumsum`, a device copy (`torch` `copy_`) and `numpy.cumsum` on the machine's CPU. All
# in milliseconds:

# %%
def read_csv(name):
    with open(f"../benchmarks/{name}", newline="") as handle:
        return list(csv.DictReader(handle))


table1 = read_csv("table1.csv")
columns = {"paper_cpu_ms": "i7 CPU", "paper_gtx280_ms": "GTX 280", "paper_gtx480_ms": "GTX 480",
           "numpy_cumsum_ms": "numpy", "hierarchical_kernel_ms": "our kernels", "ps_scan_call_ms": "ps.scan",
           "torch_cumsum_ms": "torch.cumsum", "torch_copy_ms": "torch copy"}
widths = [9, 9, 9, 9, 12, 9, 13, 11]
print(f"{'':>12} {'--- 2011: the paper ---':^29} {'--- 2026: the ' + table1[0]['device'] + ' machine ---':^58}")
print(f"{'test':>4} {'n':>7} " + " ".join(f"{label:>{w}}" for label, w in zip(columns.values(), widths)))
for row in table1:
    print(f"{row['test']:>4} {row['n']:>7} " + " ".join(f"{float(row[key]):>{w}.4f}" for key, w in zip(columns, widths)))

# %% [markdown]
# The same numbers as a picture (the paper's columns dashed):

# %%
long_rows = [{"variant": ("2011 " if key.startswith("paper") else "2026 ") + label, "n": row["n"], "ms": row[key]}
             for row in table1 for key, label in columns.items()]
ax = ps.viz.throughput(long_rows, y="ms", title="Seed 001's Table 1: float32 scans, 35 to 8,388,600 elements")
for line in ax.get_lines():
    if line.get_label().startswith("2011"):
        line.set_linestyle("--")
ax.legend(fontsize=8, ncol=2)
ax.set_ylabel("ms per scan")
_ = ax.set_xlabel("n (elements)")

# %% [markdown]
# The numbers the discussion below rests on, straight from the file:

# %%
by_n = {int(row["n"]): row for row in table1}


def span(rows, key):
    values = [float(row[key]) for row in rows]
    return f"{min(values):.4f}-{max(values):.4f} ms"


small = [row for row in table1 if int(row["n"]) <= 1024]
print(f"n <= 1024 ({len(small)} sizes): GTX 480 {span(small, 'paper_gtx480_ms')}, GTX 280 {span(small, 'paper_gtx280_ms')}")
print(f"{'':>21}our kernels {span(small, 'hierarchical_kernel_ms')}, torch.cumsum {span(small, 'torch_cumsum_ms')}, "
      f"torch copy {span(small, 'torch_copy_ms')}")
print(f"n = 1024 -> 1030: GTX 480 {float(by_n[1024]['paper_gtx480_ms']):.4f} -> {float(by_n[1030]['paper_gtx480_ms']):.4f} ms, "
      f"our kernels {float(by_n[1024]['hierarchical_kernel_ms']):.4f} -> {float(by_n[1030]['hierarchical_kernel_ms']):.4f} ms")
three_launches = [row for row in table1 if 32768 <= int(row["n"]) <= 2097999]
print(f"32768 <= n <= 2097999: our kernels {span(three_launches, 'hierarchical_kernel_ms')} "
      f"(median {np.median([float(r['hierarchical_kernel_ms']) for r in three_launches]):.4f}), "
      f"GTX 480 {span(three_launches, 'paper_gtx480_ms')}")
big = by_n[8388600]
print("n = 8388600:", ", ".join(f"{label} {float(big[key]):.4f} ms" for key, label in columns.items()))
print(f"  GTX 480 / our kernels = {float(big['paper_gtx480_ms']) / float(big['hierarchical_kernel_ms']):.1f}x, "
      f"GTX 480 / torch.cumsum = {float(big['paper_gtx480_ms']) / float(big['torch_cumsum_ms']):.1f}x")
for label, key in (("GTX 480", "paper_gtx480_ms"), ("our kernels", "hierarchical_kernel_ms"), ("torch.cumsum", "torch_cumsum_ms"),
                   ("torch copy", "torch_copy_ms")):
    print(f"  {label:<12} {2 * 8388600 * 4 / (float(big[key]) * 1e-3) / 1e9:>6.0f} GB/s (2n x 4 bytes / time)")
print("CPU, ns per element:", ", ".join(
    f"n={n}: i7 {float(by_n[n]['paper_cpu_ms']) * 1e6 / n:.2f}, numpy {float(by_n[n]['numpy_cumsum_ms']) * 1e6 / n:.2f}"
    for n in (32768, 1048576, 8388600)))
for n in (1030, 32768, 45555):
    row = by_n[n]
    print(f"n = {n}: i7 {float(row['paper_cpu_ms']):.4f} vs GTX 480 {float(row['paper_gtx480_ms']):.4f} ms; "
          f"numpy {float(row['numpy_cumsum_ms']):.4f} vs our kernels {float(row['hierarchical_kernel_ms']):.4f} ms")

# %% [markdown]
# What changed in fifteen years, and what did not:
#
# - **The small sizes never measured a scan.** Up to 1024 elements the GTX 480 takes
#   0.035–0.041 ms whatever $n$ (the GTX 280 0.077–0.081 ms): a fixed cost per call, the launch
#   and the API calls between the two events, not arithmetic (1024 additions take a GPU well
#   under a microsecond). Our kernels on the H200 take 0.034–0.037 ms for the same sizes: the
#   same floor, for the same reason. One numba launch costs some 30 µs of Python on the host
#   before the GPU sees the kernel (chapter 04); `torch.cumsum` launches from C++ and floors at
#   0.020–0.021 ms, a copy at 0.013–0.014 ms. Fifteen years of GPUs did nothing for this
#   column: it is software.
# - **The step at 1030.** Six more elements cost the GTX 480 2.7 times as long
#   (0.035 → 0.096 ms): past 1024 elements the paper's scan needs its grid level, presumably
#   more launches. Ours steps later, when a second tile of 2048 is needed (one launch → three): it
#   takes 0.035 ms at 1030 and 0.087–0.148 ms (median 0.093) from 32,768 to 2,097,999
#   elements, flat, because three launches (about 3 × 30 µs) cost more than the work.
# - **Large arrays.** At 8,388,600 elements the GTX 480 needed 1.077 ms; our kernels need
#   0.107 ms (10 times less), `torch.cumsum` 0.042 ms (26 times less), a copy 0.026 ms. In
#   bandwidth: the GTX 480 moved 62 GB/s of input and output, about a third of its memory's
#   177 GB/s; our kernels reach 629 GB/s, `torch.cumsum` 1.6 TB/s, a copy 2.6 TB/s. Even
#   here our time is mostly the launch floor (0.093 ms at 1 M elements, 0.107 ms at 8 M):
#   Table 1 stops before an H200 is busy (section 11 goes to $2^{28}$).
# - **The CPU line did not move.** The i7-2600K needed 3.3 ns per element; `numpy.cumsum` on
#   the H200 machine's CPU needs 3.1–3.9 ns per element (33 ms at 8,388,600, slower than the
#   i7's 27.7 ms). A sequential scan is a chain of dependent additions: more cores and wider
#   vector units do not help a chain, and clock rates have hardly grown since 2011. (At the
#   smallest sizes numpy's 2 µs per call are overhead, as the GPU floors are.)
# - **So the crossover stayed where it was.** The paper's GPU overtook its CPU at about 32,768
#   elements (0.107 against 0.108 ms); ours overtakes numpy at the same size (0.091 against
#   0.103 ms): both sides of the comparison are where they were, the floor of the GPU and the
#   speed of the CPU's chain.
#
# ## 10. Figures 6 and 7: element types and operators
#
# The paper's Figure 6 varies the element type: int, unsigned int and float take 0.033475 to
# 1.076924 ms, the 8-byte types (double, long long, unsigned long long) 0.036127 to
# 2.142949 ms: twice as many bytes, twice the time at 8 M elements. Figure 7 varies the operator
# (sum, max, min, product on floats): 0.034305 to 1.090579 ms, *"comparable in all four cases"*.
# The same sweeps on the H200, our kernels only, at every third size of Table 1 (the script's
# size list repeats the last size, 8,388,600, so it was measured twice; the plots show the mean
# of the two runs):

# %%
def sweep(name, group):
    """{label: {n: [ms, ...]}} from a sweep CSV, and the rows (mean per n) for ps.viz.throughput."""
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    for row in read_csv(name):
        runs[row[group]][int(row["n"])].append(float(row["hierarchical_kernel_ms"]))
    rows = [{group: label, "n": n, "ms": np.mean(times)} for label, by in runs.items() for n, times in by.items()]
    return runs, rows


dtype_runs, dtype_rows = sweep("dtypes.csv", "dtype")
op_runs, op_rows = sweep("operators.csv", "op")
fig, (left, right) = plt.subplots(1, 2, figsize=(14, 4.5))
ps.viz.throughput(dtype_rows, y="ms", group="dtype", ax=left, title="Figure 6 on an H200: element types (add)")
ps.viz.throughput(op_rows, y="ms", group="op", ax=right, title="Figure 7 on an H200: operators (float32)")
for ax in (left, right):
    ax.set_ylabel("ms per scan (our kernels)")

# %%
for title, runs in (("dtype (add)", dtype_runs), ("op (float32)", op_runs)):
    print(f"{title:<13} {'n <= 1024':>15} {'45555 .. 2097152':>18}   {'n = 8388600, two runs':>22}")
    for label, by in runs.items():
        low = [t for n, ts in by.items() if n <= 1024 for t in ts]
        mid = [t for n, ts in by.items() if 45555 <= n <= 2097152 for t in ts]
        print(f"{label:<13} {min(low):.4f}-{max(low):.4f} {min(mid):>8.4f}-{max(mid):.4f}   "
              f"{' and '.join(f'{t:.4f}' for t in by[8388600]):>22}")

# %% [markdown]
# Our sweeps cannot see the element type or the operator, and they show why:
#
# - **Everything sits on the launch floor.** 8,388,600 elements of 8 bytes are 67 MB; three
#   passes over them ($3n$ words, 201 MB) take an H200 about 60 µs at copy speed, less than three
#   numba launches. So the 8-byte types take 0.127–0.204 ms at that size and the 4-byte types
#   0.108–0.151 ms: overlapping ranges, not the paper's factor of 2.
# - **The spread is noise, and it is large.** The same float64 scan of 8,388,600 elements took
#   0.130 ms in one run and 0.204 ms in the next. The first configuration of each sweep ran
#   slow at small sizes (int32 add at 260 and 1024: 0.058 and 0.064 ms; float32 add in the
#   operator sweep, 0.057–0.064 ms where mul and min take 0.034–0.039), and the float32 sum took
#   0.17–0.18 ms from 45,555 elements on in the operator sweep but 0.096–0.151 ms in the dtype
#   sweep: one kernel, two runs of the same script. Host-side launch time varies (the
#   Python interpreter, the driver, the CPU's clock) by tens of microseconds, and at these sizes
#   that is all there is to measure.
# - One thing stands out consistently: uint64 takes 0.135–0.138 ms at all four middle sizes,
#   0.03–0.04 ms more than every other type. Its traffic at 2 M elements (3 × 2 M × 8 bytes =
#   50 MB, about 15 µs at copy speed) cannot explain a constant 40 µs, from 45,555 elements on;
#   the CSV cannot tell whether the host or the kernel spends it (question 6).
# - The paper's conclusion, that the operator does not matter, holds on the H200 for a
#   simpler reason than in 2011: a combine costs a few cycles, and a memory-bound scan has
#   cycles to spare. The paper's second conclusion, that 8-byte types cost twice as much at
#   large sizes, is a statement about bytes; it would reappear on the H200 only well above
#   $2^{24}$ elements, where the traffic outweighs the launches.
#
# ## 11. Half a copy? Large arrays, and `torch.cumsum`
#
# The goal set for this scan: for $n \ge 2^{24}$, float32 and int32, reach at least half the
# bandwidth of a device copy. A copy moves $2n$ words; we count the scan's bandwidth over the
# same $2n$ words (its real traffic is $3n$), so the ratio is simply copy time / scan time.
# `benchmarks/scan_throughput.csv` (up to $2^{26}$) and `benchmarks/hierarchical_bench.csv`
# (up to $2^{28}$, with two other tile shapes; its int32 `torch.cumsum` rows sum into int64 and
# are left out; a copy moves 4-byte words alike for both types, so the float32 `torch copy`
# row serves for both). Median times in µs:

# %%
throughput = read_csv("scan_throughput.csv")
bench = read_csv("hierarchical_bench.csv")


def median_us(rows, variant, dtype, n):
    (row,) = [r for r in rows if r["variant"] == variant and r["dtype"] == dtype and int(r["n"]) == n]
    return float(row["median_us"])


print(f"{'source':<6} {'dtype':<7} {'n':>5} {'ours µs':>8} {'GB/s':>6} {'torch copy':>10} {'ratio':>6} {'numba copy':>10} "
      f"{'ratio':>6} {'cumsum':>7} {'ours/cumsum':>11}")
target_rows = []
for dtype in ("float32", "int32"):
    for k in (22, 23, 24, 25, 26, 27, 28):
        n = 2 ** k
        if k <= 26:
            source, rows, copy_dtype = "scan", throughput, dtype
        else:
            source, rows, copy_dtype = "bench", bench, "float32"
        ours = median_us(rows, "hierarchical", dtype, n)
        torch_copy = median_us(rows, "torch copy", copy_dtype, n)
        numba_copy = median_us(rows, "copy", dtype, n)
        cumsum = median_us(rows, "torch.cumsum", "float32" if source == "bench" else dtype, n)
        target_rows.append((dtype, k, ours, torch_copy))
        print(f"{source:<6} {dtype:<7} {'2^' + str(k):>5} {ours:>8.1f} {2 * n * 4 / ours / 1e3:>6.0f} {torch_copy:>10.1f} "
              f"{torch_copy / ours:>6.2f} {numba_copy:>10.1f} {numba_copy / ours:>6.2f} {cumsum:>7.1f} {ours / cumsum:>11.2f}")
big_copy = median_us(bench, "torch copy", "float32", 2 ** 28)
print("16 items per thread at 2^28:", ", ".join(
    f"{dtype} {median_us(bench, 'hierarchical:items_per_thread=16', dtype, 2 ** 28):.1f} µs "
    f"(ratio {big_copy / median_us(bench, 'hierarchical:items_per_thread=16', dtype, 2 ** 28):.2f})"
    for dtype in ("float32", "int32")))
met = [f"{dtype} 2^{k}" for dtype, k, ours, copy in target_rows if k >= 24 and copy / ours >= 0.5]
missed = [f"{dtype} 2^{k}" for dtype, k, ours, copy in target_rows if k >= 24 and copy / ours < 0.5]
print("at least half of torch copy:", ", ".join(met))
print("below half:                 ", ", ".join(missed))

# %% [markdown]
# (For $2^{27}$ and $2^{28}$ the cumsum column is float32 for both types.) Plainly:
#
# - **The target is not met at $2^{24}$ and $2^{25}$.** At $2^{24}$ float32 the scan takes
#   123.5 µs (1087 GB/s) where `torch` copies in 39.6 µs (3385 GB/s): 32% of a copy; int32,
#   26%. At $2^{25}$, 45% and 43%. Against numba's own copy kernel (74.2 µs at $2^{24}$, launched
#   the way our kernels are) it is 60%.
# - **It is met, narrowly, from $2^{26}$ on, for float32:** 270.6 µs against 137.2 µs, 51%
#   (1984 GB/s); at $2^{27}$ 53%, at $2^{28}$ 54% (939 µs against 510 µs), and 57% with 16 items
#   per thread (898 µs). int32 sits on the line: 49% at $2^{26}$ and $2^{27}$, 52% at $2^{28}$
#   (56% with 16 items per thread).
# - **`torch.cumsum` is 1.8 times faster at $2^{24}$** (68.3 µs) and 1.23 times at $2^{26}$
#   (220.4 µs); at $2^{28}$, 1.12 times (839 µs against 939 µs).
#
# **Why.** Two reasons, one per end of the range.
#
# 1. *Launches.* Our scan is three numba launches; from Table 1, three of them cost about
#    0.09 ms of host time even when the GPU has nothing to do. The rescan, which moves $2n$
#    words (as long as a copy, ~40 µs at $2^{24}$), can only start after the third launch. A
#    rough budget at $2^{24}$: 90 µs of launches + 40 µs of rescan ≈ 130 µs; measured 123.5 µs.
#    `torch.cumsum` runs CUB's scan, launched from C++ (about 20 µs for both of its launches,
#    Table 1's floor). At $2^{24}$ most of the 55 µs between us and `torch.cumsum` is Python
#    launching kernels, not the GPU.
# 2. *Traffic.* CUB's scan is **single-pass**: each tile publishes its total as soon as it has
#    it, and the next tile *looks back* at its predecessors' published totals ("decoupled
#    look-back", Merrill and Garland 2016), so the input is read once and the output written
#    once: $2n$ words. Ours reads the input twice: $3n$. At $2^{26}$, where launches no longer
#    matter, $3n$ words at copy speed take $1.5 \times 137$ ≈ 206 µs and we need 271 µs;
#    $2n$ words take 137 µs and CUB needs 220 µs. Both are about 1.3 and 1.6 times their
#    traffic at copy speed; CUB is ahead because it moves a third less, not because it streams
#    faster.
#
# What would close the gap: fewer launches (or launching from C++, or CUDA graphs), and a
# single-pass scan. Bigger tiles help at the largest sizes (16 items per thread: 898 µs at
# $2^{28}$ against 939 µs) but not at $2^{24}$, where the launches dominate.
#
# ## 12. Summary
#
# The tracer's count for a real run of the default configuration (256 threads × 8 items, tiles
# of 2048) over four tiles:

# %%
summary_n = 8192
summary_run = ps.trace.record(ps.scan, np.ones(summary_n, dtype=np.float32), algorithm="hierarchical")
counts = summary_run.counts()
carry_reads = sum(1 for r in summary_run.records if r.array == "carries")
print(f"n = {summary_n}: {counts['launches']} launches, {counts['barriers']} barriers, "
      f"{counts['combines'] / summary_n:.2f} combines per element, "
      f"{(counts['global_reads'] - carry_reads + counts['global_writes']) / summary_n:.2f} global words per element "
      f"(+ {carry_reads} carry reads)")

# %% [markdown]
# The sequential combines are $3n$ ($n$ in the reduction, $2n$ in the rescan); the rest are
# the warp-level steps (about 12 per thread over both passes, $12/k$ per element) and the
# spine, which scans a whole tile of 4096 even for four totals.
#
# | | warp (shuffles) | block of $b$ threads, $k$ items each | grid, $n$ elements (reduce-then-scan) |
# | --- | --- | --- | --- |
# | work (combines) | 5 steps, 129 combines per 32 | $2bk$ sequential + $\approx 7b$ in warp scans and carries | $\approx 3n + 12n/k$ + the spine (5.9 per element above) |
# | depth | 5 shuffles | $2k$ sequential + 11 shuffles + 4 barriers | 3 launches (1 if $n \le bk$); the spine loops over tiles of up to 4096 totals |
# | global memory | | $bk$ reads, $bk$ writes per tile | $2n$ reads + $n$ writes = $3n$ words (scan-then-propagate: $4n$; single-pass: $2n$) |
# | shared memory | none | $bk \cdot 33/32$ staged + 32 warp totals | |
# | on an H200, float32 | | | $2^{24}$: 123.5 µs, 32% of a copy; $2^{26}$: 270.6 µs, 51%; $2^{28}$: 939 µs, 54% |
#
# **Questions.**
# 1. The warp-synchronous scan of section 1 gave `7` in lane 2 on the simulator. Find a schedule
#    of the 32 lanes under which it gives the right answer, and one under which lane 3 is wrong
#    while lane 2 is right. Why does `volatile` not fix it?
# 2. `scan_syncwarp` calls `syncwarp` twice per step. Which of the two could you drop if every
#    step wrote to a second buffer (as Hillis–Steele does in chapter 03)?
# 3. In `block_scan`, why must the warp totals go through shared memory, while the values inside
#    a warp never do? Could warp 0 read the other warps' totals with a shuffle?
# 4. With 8 items per thread and the padding $j + \lfloor j/32 \rfloor$, the read of the runs is
#    conflict-free. Is the *write* at step $k$ (thread $t$ writes word $k \cdot b + t$) conflict-free
#    too? What happens with 8-byte elements?
# 5. Reduce-then-scan reads the input twice. For which kind of input (think of a scan whose input
#    is computed on the fly, say the flags of a stream compaction) is that nearly free?
# 6. Table 1's floor: estimate from the CSV how much one numba launch costs, and predict our
#    time for $n = 2^{30}$ float32 from the copy's bandwidth. Which of the two reasons in section
#    11 would then dominate? How would you find out where uint64's extra 40 µs go (section 10)?
# 7. A single-pass scan with decoupled look-back lets tile $b$ wait for tile $b - 1$. Why can
#    that deadlock if blocks are not scheduled in order, and how do CUB's tiles avoid it?
