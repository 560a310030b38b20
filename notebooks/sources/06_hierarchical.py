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
# elements per thread, and the grid level. Then it reruns the paper's experiments on a current
# GPU and asks what fifteen years changed.

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import collections
import inspect

import matplotlib.pyplot as plt
import numpy as np
from numba import cuda

from prefixsum.cli import results  # the committed benchmark CSVs (sections 3, 9-12)

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
print(inspect.getsource(ps.lessons.scan_volatile))

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
# read, writes, and waits until every lane has written:

# %%
print(inspect.getsource(ps.primitives.warp.scan_syncwarp))

# %% [markdown]
# Every `syncwarp` starts a new phase for the tracer, so the races are gone, and the dataflow of
# `buf` (one row per phase that writes; an arrow from every slot a lane read to the slot it
# wrote; colour: the warp) shows the five steps of Figure 1. A step spans two phases (read,
# `syncwarp`, write, `syncwarp`), so the writes land in phases 2, 4, ..., 10. The two warps
# never exchange a value.

# %%
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
# `benchmarks/warp_semantics.py` runs 822 small cases (every shuffle, vote and `syncwarp`, full
# and partial masks, deltas past the warp, six dtypes) on the simulator and on a GPU (line B
# below names it; stage `warp` of `bash benchmarks/run_gpu.sh`), and compares every result that is
# defined on a GPU:

# %%
with open(results.path("warp_semantics_compare.txt")) as handle:
    print(*[line.strip() for line in handle if line.startswith(("A:", "B:", "VERDICT"))], sep="\n")

# %% [markdown]
# The three warp scans side by side, as the tracer counts them (two warps, 64 values):

# %%
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
# ## 4. The block: Figure 2
#
# A block has up to 32 warps. The seed's Figure 2 scans a block with warp scans: (1) every warp
# scans its 32 values; (2) the last lane of every warp stores the warp's total; (3) one warp
# scans those totals; (4) every thread combines the scanned total of the warps before its own
# into its result. The package's version, on shuffles, is `ps.scans.hierarchical.block_scan`
# (it returns each thread's *exclusive* result and the block's total, which is what the next
# level needs); exercise 06.block-combine in section 8 writes step 4, and its source follows the
# check there.
#
# The same steps by hand for 128 values (four warps), with the package's warp scan for step 1:

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
# (`ps.primitives.warp.reduce_shfl`, `shfl_xor_sync` with masks 16, 8, 4, 2, 1): after five steps every lane
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
print(ps.check.scan(my_warp_scan, sizes=(1, 2, 5, 17, 31, 32), budget=ps.check.Budget(accesses_per_step=2)))

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
print(ps.check.scan(my_exclusive_warp_scan, inclusive=False, sizes=(1, 2, 5, 17, 31, 32),
                    budget=ps.check.Budget(accesses_per_step=2)))

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
print(ps.check.tiled(my_block_tile, block_size=BLOCK, budget=ps.check.Budget(barriers=3, accesses_per_step=3)))

# %% [markdown]
# The package's block scan, for comparison (exclusive results and the block's total):

# %% tags=["instructor"]
print(inspect.getsource(ps.scans.hierarchical.block_scan))

# %% [markdown]
# ## 9. Seed 001's Table 1, fifteen years later
#
# The paper timed its scan of float32 arrays of 22 sizes, from 35 to 8,388,600 elements, with
# CUDA events around the GPU work (averages of 10,000 runs), against a sequential loop on an
# Intel i7-2600K. `benchmarks/table1.py` (stage `table1` of `bash benchmarks/run_gpu.sh`) reran
# the table on a machine with a current GPU (the header of the table below names it), and timed
# our scan in two ways:
#
# - **our kernels**: CUDA events around the launches (three; one when the array fits in one
#   tile), with the launches *queued* behind a short busy kernel, so that the first event fires
#   only when the GPU reaches our work. This times the GPU alone, without the host's cost of
#   launching (median of 25 after 3 warm-ups). `torch.cumsum` and a device copy (`torch`
#   `copy_`) are timed the same way.
# - **ps.scan**: a whole `ps.scan` call on a device array, synchronised, on the host clock
#   (checking the arguments, allocating the output, launching, waiting; median of 25): what a
#   program that calls it pays.
#
# `numpy.cumsum` runs on the machine's CPU (host clock). Every result was checked before it was
# timed. All in milliseconds, from `benchmarks/table1.csv`:

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
# Two of the new columns time the same scan: the kernels alone, and the whole call. Their
# difference is what the host spends per call: Python checking the arguments, numba launching
# each kernel, allocating the output. Grouped by the number of launches (one while the array
# fits in one tile of 256 threads × 8 items):

# %%
options = ps.ALGORITHMS["hierarchical"].options
tile = options["block_size"] * options["items_per_thread"]
one_launch = [row for row in table1 if row["n"] <= tile]
three_small = [row for row in table1 if tile < row["n"] <= 2 ** 17]
three_large = [row for row in table1 if row["n"] > 2 ** 17]


def span(rows, key, scale=1.0, digits=4):
    values = [row[key] * scale for row in rows]
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


def host_ms(row):
    return row["ps_scan_call_ms"] - row["hierarchical_kernel_ms"]


print(f"{'n':<18} {'launches':>8} {'our kernels ms':>15} {'ps.scan ms':>14} {'host ms':>14}")
for rows, launches in ((one_launch, 1), (three_small, 3), (three_large, 3)):
    hosts = [host_ms(row) for row in rows]
    print(f"{str(rows[0]['n']) + '..' + str(rows[-1]['n']):<18} {launches:>8} {span(rows, 'hierarchical_kernel_ms'):>15} "
          f"{span(rows, 'ps_scan_call_ms'):>14} {min(hosts):.4f}-{max(hosts):.4f}")
extra = np.median([host_ms(row) for row in three_small]) - np.median([host_ms(row) for row in one_launch])
print(f"two more launches: {extra:.4f} ms more host time (medians), about {extra / 2 * 1e3:.0f} us per numba launch")
print("host time above kernel time at every size of Table 1:", all(host_ms(row) > row["hierarchical_kernel_ms"] for row in table1))

# %% [markdown]
# The table above is the key to Table 1. On the GPU our scan of up to 2048 elements takes about
# 4 µs; the call that asks for it takes about 0.13 ms, more than thirty times as long, and every
# further numba launch adds some 34 µs of Python on the host. (Above $2^{17}$ elements the host's share
# grows to 0.3–0.4 ms though the launches are the same; the CSV cannot say which step grows,
# question 6.) The other numbers the discussion below rests on, straight from the file:

# %%
by_n = {row["n"]: row for row in table1}
small = [row for row in table1 if row["n"] <= 1024]
print(f"n <= 1024 ({len(small)} sizes): GTX 480 {span(small, 'paper_gtx480_ms')} ms, GTX 280 {span(small, 'paper_gtx280_ms')} ms")
print(f"{'':>21}our kernels {span(small, 'hierarchical_kernel_ms')} ms, ps.scan {span(small, 'ps_scan_call_ms')} ms, "
      f"torch.cumsum {span(small, 'torch_cumsum_ms')} ms, torch copy {span(small, 'torch_copy_ms')} ms, "
      f"numpy {span(small, 'numpy_cumsum_ms')} ms")
ratios = [row["paper_gtx480_ms"] / row["hierarchical_kernel_ms"] for row in small]
print(f"{'':>21}GTX 480 / our kernels {min(ratios):.1f}-{max(ratios):.1f}x")
print(f"n = 1024 -> 1030: GTX 480 {by_n[1024]['paper_gtx480_ms']:.4f} -> {by_n[1030]['paper_gtx480_ms']:.4f} ms "
      f"({by_n[1030]['paper_gtx480_ms'] / by_n[1024]['paper_gtx480_ms']:.1f}x), "
      f"our kernels {by_n[1024]['hierarchical_kernel_ms']:.4f} -> {by_n[1030]['hierarchical_kernel_ms']:.4f} ms")
grid = [row for row in table1 if 32768 <= row["n"] <= 2097999]
print(f"32768 <= n <= 2097999: our kernels {span(grid, 'hierarchical_kernel_ms')} ms, GTX 480 {span(grid, 'paper_gtx480_ms')} ms; "
      f"our kernels at 32768 - at 1030: {by_n[32768]['hierarchical_kernel_ms'] - by_n[1030]['hierarchical_kernel_ms']:.4f} ms")
big = by_n[8388600]
print("n = 8388600:", ", ".join(f"{label} {big[key]:.4f} ms" for key, label in columns.items()))
print("  GTX 480 / ...:", ", ".join(f"{label} {big['paper_gtx480_ms'] / big[key]:.1f}x" for key, label in
                                    (("hierarchical_kernel_ms", "our kernels"), ("torch_cumsum_ms", "torch.cumsum"),
                                     ("ps_scan_call_ms", "ps.scan"))))
for label, key in (("GTX 480", "paper_gtx480_ms"), ("our kernels", "hierarchical_kernel_ms"), ("torch.cumsum", "torch_cumsum_ms"),
                   ("torch copy", "torch_copy_ms")):
    print(f"  {label:<12} {2 * 8388600 * 4 / (big[key] * 1e-3) / 1e9:>6.0f} GB/s (2n x 4 bytes / time)")
print("CPU, ns per element:", ", ".join(
    f"n={n}: i7 {by_n[n]['paper_cpu_ms'] * 1e6 / n:.2f}, numpy {by_n[n]['numpy_cumsum_ms'] * 1e6 / n:.2f}"
    for n in (32768, 1048576, 8388600)))
print(f"numpy, n >= 32768, ns per element: "
      f"{min(row['numpy_cumsum_ms'] * 1e6 / row['n'] for row in table1 if row['n'] >= 32768):.2f}-"
      f"{max(row['numpy_cumsum_ms'] * 1e6 / row['n'] for row in table1 if row['n'] >= 32768):.2f} ns")


def faster_from(fast, slow):
    """The smallest n of Table 1 from which column ``fast`` is below column ``slow`` at every larger n."""
    sizes = [row["n"] for row in table1]
    return next(n for n in sizes if all(row[fast] < row[slow] for row in table1 if row["n"] >= n))


for fast, slow, label in (("paper_gtx480_ms", "paper_cpu_ms", "GTX 480 faster than the i7"),
                          ("hierarchical_kernel_ms", "numpy_cumsum_ms", "our kernels faster than numpy"),
                          ("ps_scan_call_ms", "numpy_cumsum_ms", "a whole ps.scan call faster than numpy")):
    n = faster_from(fast, slow)
    print(f"{label:<40} from n = {n:>6} ({by_n[n][fast]:.4f} against {by_n[n][slow]:.4f} ms)")

# %% [markdown]
# What changed in fifteen years, and what did not:
#
# - **The small sizes never measured a scan, and neither does our whole call.** Up to 1024
#   elements the GTX 480 takes 0.035–0.041 ms whatever $n$ (the GTX 280 0.077–0.081 ms): a
#   fixed cost per call, not arithmetic (1024 additions take a GPU well under a microsecond).
#   Our kernels take 0.0040–0.0042 ms at the same sizes, 8.6 to 9.9 times less; a whole
#   `ps.scan` call takes 0.130–0.141 ms, more than the GTX 480. If the paper's events were
#   recorded, as usual, around the launches on an otherwise idle GPU, the first event fired at
#   once and the GPU then waited for the host to launch the kernel: its floor would then be
#   mostly the host's work (CUDA C's launch plus whatever API calls sat between the events),
#   the cost that our queued kernel times leave out and our whole calls include, with numba's
#   Python on top. Which time one compares decides the story: kernel against kernel, fifteen
#   years cut the floor nine- to tenfold; call against call, Python's launches ate the gain.
# - **The step at 1030.** Six more elements cost the GTX 480 2.7 times as long
#   (0.035 → 0.096 ms): past 1024 elements the paper's scan needs its grid level, presumably
#   more launches. Ours steps later, when a second tile of 2048 is needed (one launch → three):
#   0.0043 ms at 1030, 0.0102–0.0157 ms from 32,768 to 2,097,999 elements. On the GPU the three
#   kernels cost 0.006 ms more than one: each must finish before the next starts (the spine needs
#   every tile's total), and starting and draining a kernel takes the GPU microseconds. On the
#   host the two extra launches cost more than ten times that (the table of host time above).
# - **Large arrays.** At 8,388,600 elements the GTX 480 needed 1.077 ms; our kernels need
#   0.046 ms (23.5 times less), `torch.cumsum` 0.038 ms (28.3 times less), a copy 0.029 ms. In
#   bandwidth: the GTX 480 moved 62 GB/s of input and output, about a third of its memory's
#   177 GB/s; our kernels 1466 GB/s, `torch.cumsum` 1764 GB/s, a copy 2320 GB/s. A whole
#   `ps.scan` call, 0.384 ms, is only 2.8 times faster than the GTX 480's kernels: most of it is
#   the host. Table 1 stops before the GPU is busy (section 11 goes to $2^{28}$).
# - **The CPU line did not move.** The i7-2600K needed 3.3 ns per element; `numpy.cumsum` on
#   today's machine's CPU needs 3.2–4.1 ns per element from 32,768 elements on (34.6 ms at
#   8,388,600, slower than the i7's 27.7 ms). A sequential scan is a chain of dependent
#   additions: more cores and wider vector units do not help a chain, and clock rates have
#   hardly grown since 2011. (At the smallest sizes numpy's 2–5 µs per call are overhead, as
#   the GPU floors are.)
# - **So where the crossover is depends on what is timed.** The paper's GPU overtook its CPU at
#   32,768 elements (0.107 against 0.108 ms). Our kernels overtake numpy from 1000 elements on;
#   a whole `ps.scan` call only from 65,536 (0.210 against 0.212 ms). The paper's crossover sits
#   near our whole call's, not near our kernels': one more sign that its GPU times included the
#   cost of a call. A program that calls `ps.scan` once, on data already on the GPU, gains
#   from it only from some 65,536 elements on; one that keeps queueing kernels without waiting
#   for each (as the benchmark does) sees the kernel column.
#
# ## 10. Figures 6 and 7: element types and operators
#
# The paper's Figure 6 varies the element type: int, unsigned int and float take 0.033475 to
# 1.076924 ms, the 8-byte types (double, long long, unsigned long long) 0.036127 to
# 2.142949 ms: twice as many bytes, twice the time at 8 M elements. Figure 7 varies the operator
# (sum, max, min, product on floats): 0.034305 to 1.090579 ms, *"comparable in all four cases"*.
# The same sweeps on the same GPU as Table 1, our kernels only (timed as in Table 1, one run per
# size), at every third size of Table 1 and its last, 8,388,600 (`benchmarks/dtypes.csv` and
# `benchmarks/operators.csv`, from the same `table1` stage):

# %%
dtype_rows = results.read("dtypes.csv")
op_rows = results.read("operators.csv")
fig, (left, right) = plt.subplots(1, 2, figsize=(14, 4.5))
ps.viz.throughput(dtype_rows, y="hierarchical_kernel_ms", group="dtype", ax=left,
                  title=f"Figure 6 on an {dtype_rows[0]['device']}: element types (add)")
ps.viz.throughput(op_rows, y="hierarchical_kernel_ms", group="op", ax=right,
                  title=f"Figure 7 on an {op_rows[0]['device']}: operators (float32)")
for ax in (left, right):
    ax.set_ylabel("ms per scan (our kernels)")

# %%
def by_label(rows, group):
    """{label: {n: ms}} from a sweep's rows."""
    times = collections.defaultdict(dict)
    for row in rows:
        times[row[group]][row["n"]] = row["hierarchical_kernel_ms"]
    return times


dtype_ms, op_ms = by_label(dtype_rows, "dtype"), by_label(op_rows, "op")
print("every result correct:", all(row["correct"] for row in dtype_rows + op_rows),
      "| timing:", sorted({row["timing"] for row in dtype_rows + op_rows}))
for title, times in (("dtype (add)", dtype_ms), ("op (float32)", op_ms)):
    print(f"{title:<13} {'n <= 1024':>15} {'45555 .. 2097152':>17} {'n = 8388600':>12}")
    for label, by in times.items():
        low = [t for n, t in by.items() if n <= 1024]
        mid = [t for n, t in by.items() if 45555 <= n <= 2097152]
        print(f"{label:<13} {min(low):.4f}-{max(low):.4f} {min(mid):>8.4f}-{max(mid):.4f} {by[8388600]:>12.4f}")
print("8-byte / 4-byte type at n = 8388600, and above the three-launch floor (minus the time at 45555):")
for wide, narrow in (("int64", "int32"), ("uint64", "uint32"), ("float64", "float32")):
    w, s = dtype_ms[wide], dtype_ms[narrow]
    print(f"  {wide} / {narrow}: {w[8388600] / s[8388600]:.2f}, above the floor "
          f"{(w[8388600] - w[45555]) / (s[8388600] - s[45555]):.2f}")
large_ns = [n for n in op_ms["add"] if n >= 1048555]
print("max and min slower than add and mul at every n >= 1048555:",
      all(min(op_ms["max"][n], op_ms["min"][n]) > max(op_ms["add"][n], op_ms["mul"][n]) for n in large_ns),
      "| max, min / add there:", span([{"r": op_ms[op][n] / op_ms["add"][n]} for op in ("max", "min") for n in large_ns],
                                     "r", digits=2))
twice = [abs(dtype_ms["float32"][n] - op_ms["add"][n]) / op_ms["add"][n] for n in op_ms["add"]]
print(f"float32 add, measured in both sweeps: at most {max(twice):.1%} apart")

# %% [markdown]
# What the two figures show on today's GPU (the lines above):
#
# - **The paper's factor of two comes back, nearly.** Up to 1024 elements every type takes
#   about 4 µs (one kernel; the 8-byte types at most 0.3 µs more). At 8,388,600
#   elements the 8-byte types take 1.72–1.74 times as long as the 4-byte ones (0.081 against
#   0.047 ms). Part of each time is the floor of three kernels, 0.010–0.012 ms (the time at
#   45,555 elements); above it the ratio is 1.89–1.93: twice as many bytes, nearly twice the
#   time, as on the GTX 480. A scan of this size is memory-bound on both GPUs.
# - **The operator hardly matters**, as the paper found: add and mul take about the same time,
#   max and min 6–11% longer from about a million elements on. A float max here is not one
#   instruction: to propagate NaN as `np.maximum` does, the package's combine compares, tests
#   for NaN and selects (`prefixsum/scans/ops.py`), a few instructions where add has one; that
#   is the likely cause, and it stays small because the scan waits on memory.
# - **The measurements repeat.** The float32 add scan was measured in both sweeps, separately:
#   the two agree within 0.6% at every size. Timed with the launches queued, the kernel time
#   does not depend on how fast the host happened to be.
#
# ## 11. Half a copy? Large arrays, and `torch.cumsum`
#
# The goal set for this scan: for $n \ge 2^{24}$, float32 and int32, reach at least half the
# bandwidth of a device copy. A copy moves $2n$ words; we count the scan's bandwidth over the
# same $2n$ words (its real traffic is $3n$), so the ratio is simply copy time / scan time.
# `benchmarks/scan_throughput.csv` (up to $2^{26}$, stage `scans` of `run_gpu.sh`) and
# `benchmarks/hierarchical_bench.csv` (up to $2^{28}$, with two other tile shapes, stage
# `hierarchical`). Both time kernels as Table 1 does (queued, median of 25); `torch.cumsum`
# sums int32 in int32. Median times in µs:

# %%
print(f"{'source':<6} {'dtype':<7} {'n':>5} {'ours µs':>8} {'GB/s':>6} {'torch copy':>10} {'ratio':>6} {'numba copy':>10} "
      f"{'ratio':>6} {'cumsum':>7} {'ours/cumsum':>11}")
target_rows, timings = [], set()
for dtype in ("float32", "int32"):
    for k in (22, 23, 24, 25, 26, 27, 28):
        n = 2 ** k
        source, name = ("scan", "scan_throughput.csv") if k <= 26 else ("bench", "hierarchical_bench.csv")

        def us(variant):
            return results.value(name, "median_us", variant=variant, dtype=dtype, n=n)

        ours, torch_copy, numba_copy, cumsum = us("hierarchical"), us("torch copy"), us("copy"), us("torch.cumsum")
        timings |= {row["timing"] for row in results.read(name, dtype=dtype, n=n) if row["kind"] != "whole call"}
        target_rows.append((dtype, k, ours, torch_copy, cumsum))
        print(f"{source:<6} {dtype:<7} {'2^' + str(k):>5} {ours:>8.1f} {2 * n * 4 / ours / 1e3:>6.0f} {torch_copy:>10.1f} "
              f"{torch_copy / ours:>6.2f} {numba_copy:>10.1f} {numba_copy / ours:>6.2f} {cumsum:>7.1f} {ours / cumsum:>11.2f}")


def bench_us(variant, dtype, k):
    return results.value("hierarchical_bench.csv", "median_us", variant=variant, dtype=dtype, n=2 ** k)


print("16 items per thread at 2^28:", ", ".join(
    f"{dtype} {bench_us('hierarchical:items_per_thread=16', dtype, 28):.1f} µs "
    f"(ratio {bench_us('torch copy', dtype, 28) / bench_us('hierarchical:items_per_thread=16', dtype, 28):.2f})"
    for dtype in ("float32", "int32")))
met = [f"{dtype} 2^{k}" for dtype, k, ours, copy, cumsum in target_rows if k >= 24 and copy / ours >= 0.5]
missed = [f"{dtype} 2^{k}" for dtype, k, ours, copy, cumsum in target_rows if k >= 24 and copy / ours < 0.5]
print("at least half of torch copy:", ", ".join(met))
print("below half:                 ", ", ".join(missed) or "none")
print("torch.cumsum faster than ours at every size above:", all(cumsum < ours for _, _, ours, _, cumsum in target_rows),
      "| timing of these rows:", sorted(timings))

# %% [markdown]
# Plainly (the table above):
#
# - **The target is met at every size from $2^{24}$ on, for both types.** At $2^{24}$ float32
#   the scan takes 82.2 µs (1632 GB/s) where `torch` copies in 48.3 µs: 59% of a copy; int32,
#   58%. The ratio creeps up with $n$: 62% at $2^{26}$, 64–65% at $2^{27}$ and $2^{28}$ (1104.8
#   µs against 712.8 µs for float32), 66% with 16 items per thread (1082.3 µs). Against numba's
#   own copy kernel, which is slower than torch's, the scan reaches 71–81%.
# - **`torch.cumsum` is faster at every size**, by less as $n$ grows: 1.16 times at $2^{24}$
#   (70.6 µs), 1.12 times at $2^{26}$, 1.09 times at $2^{28}$ (1012.1 µs against 1104.8 µs).
# - Below $2^{24}$ (outside the target) the ratio is lower: 41–42% at $2^{22}$, where a copy takes
#   under 10 µs and the three kernels' fixed cost (section 9) weighs more.
#
# **Why.** These are kernel times, launches left out (section 9), so the difference between
# us and `torch.cumsum` is work on the GPU, and it is traffic. `torch.cumsum` runs CUB's scan,
# which is **single-pass**: each tile publishes its total as soon as it has it, and the next
# tile *looks back* at its predecessors' published totals ("decoupled look-back", Merrill and
# Garland 2016), so the input is read once and the output written once: $2n$ words. Ours reads
# the input twice: $3n$. Each against its own traffic at copy speed:

# %%
for dtype in ("float32", "int32"):
    for name, k in (("scan_throughput.csv", 24), ("scan_throughput.csv", 26), ("hierarchical_bench.csv", 28)):
        copy, ours, cumsum = (results.value(name, "median_us", variant=v, dtype=dtype, n=2 ** k)
                              for v in ("torch copy", "hierarchical", "torch.cumsum"))
        print(f"{dtype:<7} 2^{k}: ours {ours:7.1f} µs against 3n words at copy speed {1.5 * copy:7.1f} µs: "
              f"{ours / (1.5 * copy):.2f}x | torch.cumsum {cumsum:7.1f} µs against 2n words {copy:7.1f} µs: {cumsum / copy:.2f}x")

# %% [markdown]
# Our kernels stream their $3n$ words at close to copy speed (1.03–1.15 times a copy of that
# much, the lines above); CUB needs 1.42–1.47 times a copy of its $2n$. CUB is ahead only because
# it moves a third less, not because it streams faster; a single-pass scan that streamed as well
# as ours would take little more than a copy's time.
#
# **And the whole call.** A program does not call kernels; it calls `ps.scan`. The same file has
# whole calls (host clock), on a device array and on a numpy array (which adds the copies to the
# GPU and back), beside the kernels, float32:

# %%
print(f"{'n':>5} {'kernels µs':>10} {'ps.scan µs':>11} {'host µs':>8} {'call/kernels':>12} {'on numpy µs':>12}")
numpy_ratios = []
for k in range(20, 29):
    kernels = bench_us("hierarchical", "float32", k)
    call = bench_us("ps.scan(hierarchical) call", "float32", k)
    on_numpy = bench_us("ps.scan(hierarchical) call on numpy", "float32", k)
    numpy_ratios.append(on_numpy / kernels)
    print(f"{'2^' + str(k):>5} {kernels:>10.1f} {call:>11.1f} {call - kernels:>8.1f} {call / kernels:>12.2f} {on_numpy:>12.1f}")
print(f"a call on a numpy array takes {min(numpy_ratios):.0f} to {max(numpy_ratios):.0f} times as long as the kernels")
print("timing of the calls:", sorted({row["timing"] for row in results.read("hierarchical_bench.csv", kind="whole call")}))

# %% [markdown]
# On a device array the host adds 0.24 to 0.70 ms to every call (the `host` column above): at
# $2^{20}$ the call takes 21 times as long as its kernels, at $2^{24}$ 3.9 times, and only from
# $2^{26}$ on do the kernels make up half of it or more. On a numpy array the copies to the GPU
# and back dominate everything: 121 to 449 times the kernels. A scan is worth sending to the GPU
# only if the data are there already.
#
# What would close the gaps: for the kernels, a single-pass scan ($2n$ words instead of $3n$);
# bigger tiles help a little at the largest sizes (16 items per thread: 1082.3 µs at $2^{28}$
# against 1104.8 µs). For the whole call: fewer launches from Python (CUDA graphs, or launching
# from C++), and an output buffer that is reused instead of allocated on every call.
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
# | measured, float32 | | | kernels: 59–65% of a copy's rate from $2^{24}$ to $2^{28}$ (the last line above); a whole call adds 0.13–0.70 ms of host time (sections 9 and 11) |
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
# 6. Section 9 estimated one numba launch at some 34 µs of host time. Predict our kernel time
#    and our whole-call time for $n = 2^{30}$ float32 from the copy's bandwidth and the host times
#    of section 11: which part would dominate? Above $2^{17}$ elements the host's share of a
#    whole call grows though the launches stay three: which step of `ps.scan` does work that
#    depends on $n$, and how would you time it alone?
# 7. A single-pass scan with decoupled look-back lets tile $b$ wait for tile $b - 1$. Why can
#    that deadlock if blocks are not scheduled in order, and how do CUB's tiles avoid it?
