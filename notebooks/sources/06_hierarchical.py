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
# # 06 · Warp, block, grid: a paper's hierarchical scan
#
# Lungu, Petroşanu and Pîrjan (*Solutions for optimizing the data parallel prefix sum algorithm
# using the Compute Unified Device Architecture*, 2011,
# [the paper](../docs/references.md#lungu-petrosanu-and-pirjan-2011)) build their scan the way the hardware
# is built: *"Within a warp, the parallel prefix sum function processes the instructions and
# then, the results are being processed using instructions at the thread blocks' level. Finally,
# the results obtained at the grids of thread blocks level are combined and thus it is obtained
# a global sum."* On top comes one more level, below the warp: each thread first combines
# **8 elements** sequentially in registers. The paper timed the result on a GeForce GTX 280 and a
# GTX 480 (Fermi, 2010).
#
# This chapter climbs the levels one at a time: the warp scan three ways (the paper's, which has
# been unsafe since 2017, and two correct ones), the block scan of the paper's Figure 2 (which
# races, and how the tracer finds it), eight elements per thread, and the grid level. Then it
# reruns the paper's experiments on a current GPU and asks what fifteen years changed. Every
# work cited is on the [references page](../docs/references.md).

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import collections
import inspect

import numpy as np
from numba import cuda

from prefixsum.cli import results  # the committed benchmark CSVs (sections 3, 9 and 10)

print(ps.device_info())

# %% [markdown]
# ## 1. The warp: Figure 1, on shared memory
#
# A **warp** is 32 consecutive threads of a block (its *lanes*). The paper's Figure 1 scans the 32
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
# together; `ptr` is `volatile` so that the compiler does not keep the slots in registers.
#
# **Since Volta (compute capability 7.0, 2017) this is a bug.** Volta gave every thread its own
# program counter (*independent thread scheduling*): the lanes of a warp may run apart and
# reconverge later, so nothing guarantees that lane 5 reads `ptr[4]` before lane 4 overwrites
# it. CUDA 9 added `__syncwarp()` and the `_sync` shuffles for this, and the CUDA programming
# guide has called such implicit "warp-synchronous" code unsafe ever since.
#
# The classroom simulator runs each lane of a warp to its end before the next one starts, one of
# the schedules Volta allows. The tracer records every shared-memory access; with no barrier
# and no `syncwarp`, every access of the warp is in one *phase* (nothing orders them), so every
# slot that one lane writes and another reads is a race. The package's copy of the paper's scan
# (numba has no `volatile`), on two warps, inputs $1, 2, \dots, 64$:

# %%
print(inspect.getsource(ps.lessons.scan_volatile))
x64 = np.arange(1, 65, dtype=np.int32)
expected = np.concatenate([ps.reference.scan(x64[:32]), ps.reference.scan(x64[32:])])  # one scan per warp
volatile_run = ps.trace.record(ps.lessons.warp_scan, x64, "volatile", threads=64)
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
# read, writes, and waits until every lane has written.
#
# Every `syncwarp` starts a new phase for the tracer, so the races are gone, and the dataflow of
# `buf` (one row per phase that writes; an arrow from every slot a lane read to the slot it
# wrote; colour: the warp) shows the five steps of Figure 1. A step spans two phases (read,
# `syncwarp`, write, `syncwarp`), so the writes land in phases 2, 4, ..., 10. The two warps
# never exchange a value.

# %%
print(inspect.getsource(ps.primitives.warp.scan_syncwarp))
syncwarp_run = ps.trace.record(ps.lessons.warp_scan, x64, "syncwarp", threads=64)
print("races:", len(syncwarp_run.races()), "| equal to the scan of each warp:", np.array_equal(syncwarp_run.result, expected))
_ = ps.viz.dataflow(syncwarp_run, array="buf", title="scan_syncwarp: two warps, buf in shared memory")

# %% [markdown]
# ## 3. Registers only: `shfl_up_sync`
#
# The values need not go through shared memory at all. `cuda.shfl_up_sync(mask, value, d)`
# returns `value` as held by lane $l - d$, and the caller's own value in lanes $l < d$, one
# instruction for the whole warp. The warp scan becomes the Hillis–Steele steps of chapter 03
# (Kogge–Stone's network) with a register for each lane's shared cell (exercise
# 06.warp-shuffle-scan in section 7 writes it; the package's `ps.primitives.warp.scan_shfl`
# follows its check).
#
# Every lane must execute the shuffle (it is a rendezvous of the lanes in `mask`), even a lane
# that will not use what it receives.
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
        sources[step, lane] = cuda.shfl_up_sync(ps.primitives.warp.FULL_MASK, lane, d)
        d *= 2
        step += 1


@cuda.jit
def shuffle_scan_steps(x, running):
    """The warp scan by shuffles, storing each lane's running value after every step: the
    tracer sees memory, not registers; a syncwarp after each store makes each step a phase."""
    lane = cuda.laneid
    value = x[lane]
    running[lane] = value
    cuda.syncwarp(ps.primitives.warp.FULL_MASK)
    d = 1
    while d < 32:
        other = cuda.shfl_up_sync(ps.primitives.warp.FULL_MASK, value, d)
        if lane >= d:
            value += other
        running[lane] = value
        cuda.syncwarp(ps.primitives.warp.FULL_MASK)
        d *= 2


def shuffle_steps(x):
    running = cuda.device_array(32, x.dtype)
    shuffle_scan_steps[1, 32](cuda.to_device(x), running)
    return running.copy_to_host()


measured = np.zeros((5, 32), dtype=np.int32)
whose_value[1, 32](measured)
rule = np.array([[lane - d if lane >= d else lane for lane in range(32)] for d in (1, 2, 4, 8, 16)])
print("the shuffles follow PTX's rule (lane - d, or the lane's own value):", np.array_equal(measured, rule))
shuffle_run = ps.trace.record(shuffle_steps, np.ones(32, dtype=np.int32))
print("the stored running values scan the warp:", np.array_equal(shuffle_run.result, np.arange(1, 33)))
# step through the five shuffles (the running values after each); the picture where there is no kernel
ps.viz.step(shuffle_run, fallback=ps.viz.shuffles((1, 2, 4, 8, 16), kind="up", sources=measured,
                                                  title="shfl_up_sync in the warp scan: lane l - d to lane l"))

# %% [markdown]
# The classroom simulator's warp intrinsics were not only written to follow the PTX manual:
# `benchmarks/warp_semantics.py` runs small cases (every shuffle, vote and `syncwarp`, full and
# partial masks, deltas past the warp, six dtypes, and the integer operators and bit counts a
# chapter uses) on the simulator and on a GPU (line B below names it; stage `warp` of
# `bash benchmarks/run_gpu.sh`), and compares every result that is defined on a GPU; the VERDICT
# line counts them. Then the three warp scans side by side, as the tracer counts them (two
# warps, 64 values):

# %%
with open(results.path("warp_semantics_compare.txt")) as handle:
    print(*[line.strip() for line in handle if line.startswith(("A:", "B:", "VERDICT"))], sep="\n")
print()
shfl_run = ps.trace.record(ps.lessons.warp_scan, x64, "shfl", threads=64)
print(f"{'variant':<9} {'correct':>7} {'races':>6} {'shared reads':>13} {'shared writes':>14} {'sync phases':>12}")
for name, run in (("volatile", volatile_run), ("syncwarp", syncwarp_run), ("shfl", shfl_run)):
    c = run.counts()
    correct = np.array_equal(run.result, expected)
    print(f"{name:<9} {str(correct):>7} {len(run.races()):>6} {c['shared_reads']:>13} {c['shared_writes']:>14} {c['barriers']:>12}")

# %% [markdown]
# The shuffle version needs no shared memory and no synchronisation beyond the shuffles
# themselves; the package builds everything that follows on it.
#
# ## 4. The block: Figure 2, and its race
#
# A block has up to 32 warps. The paper's Figure 2, `SumareBloc`, scans a block with warp scans,
# in place in the shared array `ptr` (comments translated from Romanian):
#
# ```c++
# T rez = SumareWarp<Operatorul, Tip>(ptr, index);  // 1. every warp scans its values
# __syncthreads();
# if (IndexFir == 31) ptr[IdWarp] = ptr[index];      // 2. the last lane stores its warp's total
# if (IdWarp == 0) SumareWarp<Operatorul, inclusiv>(ptr, index);  // 3. warp 0 scans the totals
# __syncthreads();
# if (IdWarp > 0) rez = Operatorul::proceseaza(ptr[IdWarp - 1], rez);  // 4. add the warps before
# __syncthreads();
# ptr[index] = rez;                                   // 5. the results
# __syncthreads();
# ```
#
# Four barriers, but none between steps 2 and 3. `ps.lessons.figure2_block_scan` runs Figure 2
# as written, on one block of 32 warps, with section 3's shuffle scan as `SumareWarp` (so that
# Figure 1's race does not mix in); the tracer lists the races (`fixed=True` is the repair
# described below):

# %%
print(inspect.getsource(ps.lessons.figure2_kernel))
x1024 = np.random.default_rng(5).integers(0, 10, 1024).astype(np.int32)
for fixed in (False, True):
    run = ps.trace.record(ps.lessons.figure2_block_scan, x1024, fixed=fixed)
    races = run.races()
    print(f"fixed={fixed}: equal to the scan: {np.array_equal(run.result, np.cumsum(x1024))}, {len(races)} races"
          + (f", on ptr[{races[0].index}] to ptr[{races[-1].index}]; for example:\n  {races[-1]}" if races else ""))

# %% [markdown]
# Warp 0 scans `ptr[0..31]` in the same phase as the last lanes of the other warps store their
# totals there, so it may read a slot before its total arrives: every slot races. With 32
# warps it is worse: `ptr[31]` is warp 0's own element, which lane 31 of warp 0 reads in step 2,
# and warp 31's total, which lane 31 of warp 31 (thread 1023) writes in the same phase. The
# simulator runs warp 0 to its next barrier before the other warps store their totals, and
# the sums come out wrong. The repair takes two
# changes: lane 31 stores its total from its register `rez`, and a barrier separates the stores
# from warp 0's scan. The package's `ps.primitives.block.block_scan` keeps the totals in an array
# of their own, with both barriers (exercise 06.block-combine in section 8 writes its step 4,
# and its source follows the check there). The same steps by hand for 128 values (four warps),
# with the package's warp scan for step 1:

# %%
xb = np.random.default_rng(6).integers(0, 10, 128).astype(np.int32)
per_warp = ps.lessons.warp_scan(xb, "shfl", threads=128)  # step 1: each warp scans its 32 values
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
# (The paper's threads read "two groups of four elements"; the package reads one run of 8.) So
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
# read of the runs, by hand, and then the tracer's check of every shared-memory access of a
# real tile (the default 256 threads × 8 items = 2048 elements, one launch):


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
tile_run = ps.trace.record(ps.scan, np.ones(2048, dtype=np.float32), algorithm="hierarchical")
print("one tile of 2048:", tile_run.conflict_summary(), "| races:", len(tile_run.races()))

# %% [markdown]
# ## 6. The grid: reduce-then-scan
#
# A tile is one block; the array has many tiles. The paper: *"The partial result for each of the
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
# The tile scan (sections 4 and 5 in one device function; `seed` is the carry), then the three
# kernels and the host code that launches them:

# %%
print(inspect.getsource(ps.scans.hierarchical.tile_scanner))
print(inspect.getsource(ps.scans.hierarchical.thread_total))
print(inspect.getsource(ps.scans.hierarchical.reduce_kernel))
print(inspect.getsource(ps.scans.hierarchical.spine_kernel))
print(inspect.getsource(ps.scans.hierarchical.scan_kernel))
print(inspect.getsource(ps.scans.hierarchical.run))

# %% [markdown]
# The reduction kernel needs only a total, not a scan, so its warps combine by a **butterfly**
# (`ps.primitives.warp.reduce_shfl`, `shfl_xor_sync` with masks 1, 2, 4, 8, 16): after five steps every lane
# holds the warp's total. Lane 0 always combines its own group with the next, so its total is in
# lane order; other lanes combine in another order, fine for the four operators, which are
# commutative (for floats the carries round a little differently), but not for a user's operator
# (chapter 11), which reads lane 0's.

# %%
print(inspect.getsource(ps.scans.hierarchical.block_reduce))
_ = ps.viz.shuffles((1, 2, 4, 8, 16), kind="xor", title="reduce_shfl: the butterfly (shfl_xor_sync)")

# %% [markdown]
# Global memory, counted by the tracer for 2000 elements: the hierarchical scan (tiles of 512:
# 64 threads × 8 items) against Blelloch's scan-then-propagate from chapter 04 (tiles of 256).
# Reads of the one carry a block needs are listed apart: the tracer counts one per thread, a GPU
# serves the 32 lanes of a warp that read one word with one broadcast. The picture shows it
# launch by launch for 300 elements in tiles of 64 (32 threads × 2 items): five tile totals,
# the spine scanning them in place, and every tile written once, by the rescan.


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
launches_run = ps.trace.record(ps.scan, np.arange(1, 301, dtype=np.int32), algorithm="hierarchical", block_size=32,
                               items_per_thread=2)
_ = ps.viz.launches(launches_run)

# %% [markdown]
# About $3n$ against about $4n$ (Blelloch's first tile skips the carry pass, hence a little less
# than $4n$). A device copy moves $2n$; so does a single-pass scan, which passes the carry from
# tile to tile inside one launch (section 9; chapter 10 builds it).
#
# Finally, the whole thing against the reference on a larger array (5000 elements on the
# simulator, $2^{24}$ on a GPU: `ps.size_for_device`), and the full check for the default
# options and for a small tile in the other direction:

# %%
n_large = ps.size_for_device(simulator=5000, gpu=2 ** 24)
x_large = np.random.default_rng(7).integers(-1000, 1000, n_large).astype(np.int32)
print("the larger array: equal to the reference:",
      np.array_equal(ps.scan(x_large, algorithm="hierarchical"), ps.reference.scan(x_large)))
print(ps.check.scan(lambda x: ps.scan(x, algorithm="hierarchical"), name="hierarchical (256 threads x 8 items)"))
print(ps.check.scan(lambda x: ps.scan(x, "max", inclusive=False, reverse=True, algorithm="hierarchical", block_size=32,
                                      items_per_thread=4),
                    op="max", inclusive=False, reverse=True, dtype=np.int32, name="hierarchical exclusive max suffix (32 x 4)"))

# %% [markdown]
# ## 7. Exercises: warp scans with shuffles
#
# ### Exercise 06.warp-shuffle-scan (core, 2 points)
#
# **Spec.** `my_warp_scan_kernel` runs as one block of 32 threads (one warp) on $n \le 32$
# float32 values and leaves in `out[lane]` the inclusive sum of `x[0..lane]`, computed in
# registers with `cuda.shfl_up_sync` (section 3): no shared memory, $\log_2 32 = 5$ shuffle
# steps. Lanes past the end hold 0, so the whole warp takes part and the mask is `FULL_MASK`;
# every lane must execute every shuffle.
#
# **Invariant.** After the step of delta $d$ ($d = 1, 2, 4, 8, 16$), lane $l$ holds the sum of
# the $2d$ values ending at lane $l$ (all of lanes $0..l$ if $l < 2d$), as chapter 03's lanes
# did after the step of that stride. The step of delta 2 on the first 8 lanes, for the input
# $3, 1, 4, 1, 5, 9, 2, 6$:
#
# | lane | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
# |---|---|---|---|---|---|---|---|---|
# | `value` before the step (delta 1 done) | 3 | 4 | 5 | 5 | 6 | 14 | 11 | 8 |
# | what `shfl_up_sync` brings at delta 2 | 3 | 4 | 3 | 4 | 5 | 5 | 6 | 14 |
# | `value` after the step | 3 | 4 | 8 | 9 | 11 | 19 | 17 | 22 |
#
# **Budget:** at most 2 memory accesses per thread
# between two synchronisations (its load and its store), so no lane loops over the others'
# values.
#
# `ps.hint("06.warp-shuffle-scan")` for hints.

# %% tags=["exercise"] exercise_id="06.warp-shuffle-scan" points=2 todo="scan value across the warp in registers with shfl_up_sync, in 5 steps, so that lane l ends with the sum of the values of lanes 0..l; every lane executes every shuffle"
from numba import cuda, float32

FULL_MASK = ps.primitives.warp.FULL_MASK


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


# %% tags=["check"] exercise_id="06.warp-shuffle-scan"
def warp_scan_by_the_check(x):  # the check launches the kernel itself: its arrays, one warp
    out = cuda.device_array(len(x), x.dtype)
    my_warp_scan_kernel[1, 32](cuda.to_device(x), out, len(x))
    return out


print(ps.check.scan(warp_scan_by_the_check, sizes=(1, 2, 5, 17, 31, 32), name="my_warp_scan_kernel",
                    budget=ps.check.Budget(accesses_per_step=2)))

# %% [markdown]
# The package's warp scan, for comparison:

# %% tags=["instructor"]
print(inspect.getsource(ps.primitives.warp.scan_shfl))

# %% [markdown]
# ### Exercise 06.exclusive-warp-scan (stretch, 2 points)
#
# **Spec.** The same warp, an **exclusive** scan: `out[lane]` is the sum of `x[0..lane-1]`,
# and 0 in lane 0 (`np.cumsum` shifted right by one, starting from the identity), still in
# registers only, with shuffles that every lane executes. Write everything between the load and
# the store.
#
# **Goal, on the first 8 lanes** for the input $3, 1, 4, 1, 5, 9, 2, 6$: each lane ends with
# what the inclusive scan leaves in the lane below it, and lane 0, which has no lane below,
# with the identity.
#
# | lane | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
# |---|---|---|---|---|---|---|---|---|
# | `value` after the load | 3 | 1 | 4 | 1 | 5 | 9 | 2 | 6 |
# | inclusive (exercise 06.warp-shuffle-scan) | 3 | 4 | 8 | 9 | 14 | 23 | 25 | 31 |
# | exclusive: `value` at the store | 0 | 3 | 4 | 8 | 9 | 14 | 23 | 25 |
#
# A lane's own value never enters its result, and nothing crosses from one lane to another
# except through a shuffle. **Budget:** at most 2 memory accesses per thread between two
# synchronisations.
#
# `ps.hint("06.exclusive-warp-scan")` for hints.

# %% tags=["exercise"] exercise_id="06.exclusive-warp-scan" points=2 todo="leave in value the sum of the values of lanes 0..lane-1 (0 in lane 0), computed in registers with shuffles that every lane executes"
from numba import cuda, float32

FULL_MASK = ps.primitives.warp.FULL_MASK


@cuda.jit
def my_exclusive_warp_kernel(x, out, n):
    lane = cuda.threadIdx.x
    value = x[lane] if lane < n else float32(0)
    ### BEGIN SOLUTION
    d = 1
    while d < 32:
        other = cuda.shfl_up_sync(FULL_MASK, value, d)
        if lane >= d:
            value += other
        d *= 2
    value = cuda.shfl_up_sync(FULL_MASK, value, 1)
    if lane == 0:
        value = float32(0)
    ### END SOLUTION
    if lane < n:
        out[lane] = value


def my_exclusive_warp_scan(x):
    out = cuda.device_array(len(x), x.dtype)
    my_exclusive_warp_kernel[1, 32](cuda.to_device(x), out, len(x))
    return out


# %% tags=["check"] exercise_id="06.exclusive-warp-scan"
def exclusive_warp_scan_by_the_check(x):  # the check launches the kernel itself: its arrays, one warp
    out = cuda.device_array(len(x), x.dtype)
    my_exclusive_warp_kernel[1, 32](cuda.to_device(x), out, len(x))
    return out


print(ps.check.scan(exclusive_warp_scan_by_the_check, inclusive=False, sizes=(1, 2, 5, 17, 31, 32),
                    name="my_exclusive_warp_kernel", budget=ps.check.Budget(accesses_per_step=2)))

# %% [markdown]
# ## 8. Exercise: the block combine
#
# ### Exercise 06.block-combine (warm-up, 1 point)
#
# **Spec.** `my_block_tile` scans tiles of `BLOCK` = 128 elements with blocks of 128 threads
# (4 warps), one element per thread; `ps.check.tiled` carries the tile totals between tiles.
# Steps 1 to 3 of Figure 2 are given: each warp scans with the package's shuffle scan, lane 31
# of each warp stores the warp's total, and warp 0 scans the totals in place. Write step 4, so
# that `value` of thread $t$ becomes the inclusive sum of the tile up to $t$. **Budget:** 3
# barriers per thread, at most 3 memory accesses per thread between two barriers.
#
# `ps.hint("06.block-combine")` for hints.

# %% tags=["exercise"] exercise_id="06.block-combine" points=1 todo="make value of every thread the inclusive sum of the tile up to its element, using the scanned warp totals"
from numba import cuda, float32

FULL_MASK = ps.primitives.warp.FULL_MASK
BLOCK = 128
WARPS = BLOCK // 32
warp_scan = ps.primitives.warp.scan_shfl("add", np.float32)


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


# %% tags=["check"] exercise_id="06.block-combine"
print(ps.check.tiled(my_block_tile, block_size=128, budget=ps.check.Budget(barriers=3, accesses_per_step=3)))

# %% [markdown]
# The package's block scan, for comparison (exclusive results and the block's total):

# %% tags=["instructor"]
print(inspect.getsource(ps.scans.hierarchical.block_scan))

# %% [markdown]
# ## 9. The paper's experiments, fifteen years later
#
# The paper timed its scan of float32 arrays of 22 sizes, from 35 to 8,388,600 elements
# (its Table 1), against a sequential loop on an Intel i7-2600K, and varied the element type
# (Figure 6) and the operator (Figure 7). `benchmarks/table1.py` (stage `table1` of `bash
# benchmarks/run_gpu.sh`) reran all three on a current GPU, named in the table's header, and
# `benchmarks/hierarchical_bench.csv` (stage `hierarchical`) goes on to $2^{28}$ elements. Our
# scan is timed in two ways:
#
# - **our kernels**: CUDA events around the launches, queued behind a short busy kernel, so
#   that the events time the GPU's work alone (median of 25). `torch.cumsum` and a device copy
#   are timed the same way.
# - **ps.scan**: a whole call on a device array, on the host clock: what a program pays, the
#   Python and the launches on the host included.
#
# `numpy.cumsum` runs on one core of the machine's CPU (a sequential loop, as the paper's CPU column). Every result was checked before it was timed.
# Table 1 in milliseconds, and under it the figures the discussion below rests on, each
# computed from the files:

# %%
table1 = results.read("table1.csv")
columns = {"paper_cpu_ms": "i7 CPU", "paper_gtx280_ms": "GTX 280", "paper_gtx480_ms": "GTX 480",
           "numpy_cumsum_ms": "numpy", "hierarchical_kernel_ms": "our kernels", "ps_scan_call_ms": "ps.scan",
           "torch_cumsum_ms": "torch.cumsum", "torch_copy_ms": "torch copy"}
widths = [9, 9, 9, 9, 12, 9, 13, 11]
print(f"{'':>12} {'--- 2011: the paper ---':^29} {'--- ' + table1[0]['date'][:4] + ': the ' + table1[0]['device'] + ' machine ---':^58}")
print(f"{'test':>4} {'n':>7} " + " ".join(f"{label:>{w}}" for label, w in zip(columns.values(), widths)))
for row in table1:
    print(f"{row['test']:>4} {row['n']:>7} " + " ".join(f"{row[key]:>{w}.4f}" for key, w in zip(columns, widths)))
print("every result correct:", all(row["correct"] for row in table1),
      "| every kernel time queued:", all(row["kernels_queued"] for row in table1))

by_n = {row["n"]: row for row in table1}
small = [row for row in table1 if row["n"] <= 1024]
big = by_n[8388600]
GTX480_PEAK_GBS = 177.4  # the GTX 480's memory bandwidth on NVIDIA's data sheet (not measured)


def span(values, digits=4):
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


def gbs(n, ms, itemsize=4):
    """Bandwidth over the 2n words a copy would move (input read, output written)."""
    return 2 * n * itemsize / (ms * 1e-3) / 1e9


def faster_from(fast, slow):
    """The smallest n of Table 1 from which column ``fast`` is below column ``slow`` at every larger n."""
    return next(row["n"] for row in table1 if all(later[fast] < later[slow] for later in table1 if later["n"] >= row["n"]))


print("\n1. n <= 1024, ms: " + ", ".join(f"{label} {span([row[key] for row in small])}" for key, label in columns.items()
                                          if key != "paper_cpu_ms")
      + f"; GTX 480 / our kernels {span([row['paper_gtx480_ms'] / row['hierarchical_kernel_ms'] for row in small], 1)}")
print(f"2. n = 1024 -> 1030, ms: GTX 480 {by_n[1024]['paper_gtx480_ms']:.4f} -> {by_n[1030]['paper_gtx480_ms']:.4f}; "
      f"our kernels {by_n[1030]['hierarchical_kernel_ms']:.4f} at 1030 (one launch) -> "
      f"{by_n[32768]['hierarchical_kernel_ms']:.4f} at 32768 (three)")
print(f"3. n = 8388600, GB/s over 2n words: GTX 480 {gbs(big['n'], big['paper_gtx480_ms']):.0f} (its memory's peak "
      f"{GTX480_PEAK_GBS:.0f}), " + ", ".join(f"{label} {gbs(big['n'], big[key]):.0f}" for key, label in columns.items()
                                                if key in ("hierarchical_kernel_ms", "torch_cumsum_ms", "torch_copy_ms")))
print(f"4. CPU, ns per element from n = 32768 on: i7 {span([r['paper_cpu_ms'] * 1e6 / r['n'] for r in table1 if r['n'] >= 32768], 2)}, "
      f"numpy {span([r['numpy_cumsum_ms'] * 1e6 / r['n'] for r in table1 if r['n'] >= 32768], 2)}")
print("5. faster than the CPU at every n from: " + ", ".join(
    f"{label} {faster_from(fast, slow)}" for fast, slow, label in (
        ("paper_gtx480_ms", "paper_cpu_ms", "GTX 480 (vs the i7)"), ("hierarchical_kernel_ms", "numpy_cumsum_ms", "our kernels"),
        ("ps_scan_call_ms", "numpy_cumsum_ms", "a whole ps.scan call"))))

dtype_rows, op_rows = results.read("dtypes.csv"), results.read("operators.csv")
kernel_ms = collections.defaultdict(dict)  # {dtype or operator: {n: ms}}
for rows, group in ((dtype_rows, "dtype"), (op_rows, "op")):
    for row in rows:
        kernel_ms[row[group]][row["n"]] = row["hierarchical_kernel_ms"]
floor_n, top_n = 45555, 8388600  # the floor of three launches, and Table 1's largest size
print(f"6. Figure 6, 8-byte / 4-byte time at n = {top_n} (above the floor, the time at n = {floor_n}): " + ", ".join(
    f"{wide}/{narrow} {kernel_ms[wide][top_n] / kernel_ms[narrow][top_n]:.2f} "
    f"({(kernel_ms[wide][top_n] - kernel_ms[wide][floor_n]) / (kernel_ms[narrow][top_n] - kernel_ms[narrow][floor_n]):.2f})"
    for wide, narrow in (("int64", "int32"), ("uint64", "uint32"), ("float64", "float32"))))
large_n = [n for n in kernel_ms["add"] if n >= 2 ** 20]
print("7. Figure 7, time / add's from n = 2^20 on: " + ", ".join(
    f"{op} {span([kernel_ms[op][n] / kernel_ms['add'][n] for n in large_n], 2)}" for op in ("mul", "max", "min"))
      + f"; every result correct: {all(row['correct'] for row in dtype_rows + op_rows)}")


def bench_us(variant, dtype, k):
    return results.value("hierarchical_bench.csv", "median_us", variant=variant, dtype=dtype, n=2 ** k)


large_k = range(24, 29)
print("8. n = 2^24..2^28, kernels, copy time / our time (at least 0.5 is the target): " + "; ".join(
    f"{dtype} {span([bench_us('torch copy', dtype, k) / bench_us('hierarchical', dtype, k) for k in large_k], 2)}"
    for dtype in ("float32", "int32")))
print("   our time / torch.cumsum's: " + "; ".join(
    f"{dtype} {span([bench_us('hierarchical', dtype, k) / bench_us('torch.cumsum', dtype, k) for k in large_k], 2)}"
    for dtype in ("float32", "int32")))
print("   time / a copy of the words it moves: ours (3n) " + span(
    [bench_us("hierarchical", dtype, k) / (1.5 * bench_us("torch copy", dtype, k)) for dtype in ("float32", "int32") for k in large_k], 2)
      + ", torch.cumsum (2n) " + span(
    [bench_us("torch.cumsum", dtype, k) / bench_us("torch copy", dtype, k) for dtype in ("float32", "int32") for k in large_k], 2))

# %%
long_rows = [{"variant": ("2011 " if key.startswith("paper") else table1[0]["date"][:4] + " ") + label, "n": row["n"],
              "ms": row[key]} for row in table1 for key, label in columns.items()]
ax = ps.viz.throughput(long_rows, y="ms", title="The paper's Table 1: float32 scans, 35 to 8,388,600 elements")
for line in ax.get_lines():
    if line.get_label().startswith("2011"):
        line.set_linestyle("--")
ax.legend(fontsize=8, ncol=2)
ax.set_ylabel("ms per scan (log scale)")
_ = ax.set_xlabel("n (elements, log scale)")

# %% [markdown]
# What fifteen years changed, and what they did not (the numbered lines above):
#
# - **The small sizes time a call, not a scan** (line 1). Up to 1024 elements every GPU column
#   is flat: a fixed cost per call, not arithmetic. Our kernels' floor is about a tenth of the
#   GTX 480's, but a whole `ps.scan` call costs more than the GTX 480's time. If the paper's
#   events were recorded, as usual, around the launch on an idle GPU, its floor was mostly the
#   host's launch, which our kernel column leaves out and our whole call includes, with numba's
#   Python on top. Which time one compares decides the story: kernel against kernel, the floor
#   fell nearly tenfold; call against call, Python's launches ate the gain.
# - **The grid level costs launches** (line 2). Past 1024 elements the GTX 480's time jumps, its
#   grid level presumably taking more launches; ours jumps later, when a second tile of 2048 is
#   needed and one launch becomes three. Each kernel must finish before the next starts (the
#   spine needs every tile's total), and starting and draining a kernel takes the GPU
#   microseconds.
# - **Large arrays are bound by memory** (lines 3, 6 and 7). At 8,388,600 elements the GTX 480
#   moved its data at about a third of its memory's peak; our kernels run at most of a copy's
#   rate. Figure 6 says the same today as in 2011: above the floor, 8-byte elements take nearly
#   twice as long as 4-byte ones, twice the bytes. The operator hardly matters (Figure 7): max
#   and min are a little slower than add, since a float max that propagates NaN as `np.maximum`
#   does is a compare, a test and a select where add is one instruction.
# - **One core's sequential scan did not get faster** (line 4). Both CPU columns are a loop on
#   one core (the paper's on its i7; `numpy.cumsum`, one thread), a chain of dependent additions
#   that more cores and wider vector units cannot shorten, on a clock that has hardly risen since
#   2011. That is not what a CPU can do: a parallel CPU scan (each core sums its chunk, one scans
#   the core totals, each rescans its chunk from its offset: section 6's reduce-then-scan) is
#   bound by the CPU's memory bandwidth, not by a chain. The workbook did not measure one, so
#   line 5 compares the GPU with one CPU core: our kernels overtake it early, a whole call only
#   at tens of thousands of elements, close to where the paper's GPU overtook its CPU: one more
#   sign that the paper timed calls.
# - **Half a copy, and why `torch.cumsum` is faster** (line 8). From $2^{24}$ on, our kernels
#   take less than twice a copy's time, the target set for this scan, and `torch.cumsum` is
#   faster still at every size. It moves a third fewer words: its kernel is **single-pass** (each
#   tile publishes its total as soon as it has it and the next tile *looks back* at it:
#   decoupled look-back, [Merrill and Garland 2016](../docs/references.md#merrill-and-garland-2016)), so the
#   input is read once, $2n$ words against our $3n$. Per word moved it is the slower of the two
#   (the last line: ours streams its $3n$ words at nearly a copy's rate, `torch.cumsum` its $2n$
#   well below it), so it leads by much less than the third it saves. Chapter 10 builds a single
#   pass that keeps the copy's rate.
#
# ## 10. Summary
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
print("measured (hierarchical_bench.csv, float32, kernels): " + "; ".join(
    f"2^{k} {bench_us('hierarchical', 'float32', k):.1f} µs, {bench_us('torch copy', 'float32', k) / bench_us('hierarchical', 'float32', k):.0%} of a copy"
    for k in (24, 26, 28)))

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
# | measured, float32 | | | kernels: more than half a copy's rate from $2^{24}$ to $2^{28}$ (the last line above); a whole call adds the host's launches (section 9) |
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
# 6. Predict our kernel time and `torch.cumsum`'s for $n = 2^{30}$ float32 from the copy's
#    bandwidth (section 9, lines 3 and 8). In Table 1 the whole call's time grows from about
#    $2^{17}$ elements on though the launches stay three: which step of `ps.scan` does work
#    that depends on $n$, and how would you time it alone?
# 7. A single-pass scan with decoupled look-back lets tile $b$ wait for tile $b - 1$. Why can
#    that deadlock if blocks are not scheduled in order? CUB's scan takes its tile from
#    `blockIdx.x`; what does it rely on, and what does a tile counter (chapter 10, section 3)
#    buy instead?
