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
# # 04 · Blelloch's scan for large arrays: tiles, bank conflicts, and what a GPU measures
#
# Chapter 03 scanned 256 elements in one block, as the lab sheet on prefix sums asks
# ([the lab sheet](../docs/references.md#a-lab-sheet-on-prefix-sums); every work cited is on the
# [references page](../docs/references.md)). The sheet ends with the next step: *"Später kann der jetzt implementierte Teil dazu benutz[t] werden, ein größeres
# Feld in 256-Element-Stücke aufzuteilen, die Stücke separat zu berechnen und anschließend wieder
# zusammenzusetzen"* — later, the part implemented now can be used to split a larger array into
# pieces of 256 elements, compute the pieces separately and put them together again. This
# chapter does that the way GPU Gems 3 (chapter 39.2.2–39.2.4) does: two elements per thread,
# the tile totals scanned recursively and added back, and shared memory padded against bank
# conflicts. Then it looks at what all this is worth on a real GPU.

# %% tags=["setup"]
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import collections
import inspect

import matplotlib.pyplot as plt
import numpy as np
from numba import cuda

from prefixsum.cli import results

print(ps.device_info())

# %% [markdown]
# ## 1. One tile: two elements per thread
#
# The sheet's kernel used one thread per element, and at most half of them ever work: at level
# $d$ of the up-sweep only $n / 2^{d+1}$ do. GPU Gems gives each thread **two** elements, so a
# block of `block_size` threads scans a tile of `2 * block_size`, and numbers the work
# differently: at a level where `active` threads work, thread $t <$ `active` joins the
# $t$-th pair of neighbouring subtrees of that level, adding the end of the left one into the
# end of the right one. The working threads are always $0, 1, \dots$, `active` $- 1$. For a
# tile of 16 (8 threads), the two indices $(l, r)$ each thread joins at each level:
#
# | `offset` | t0 | t1 | t2 | t3 | t4 | t5 | t6 | t7 |
# |---|---|---|---|---|---|---|---|---|
# | 1 | (0, 1) | (2, 3) | (4, 5) | (6, 7) | (8, 9) | (10, 11) | (12, 13) | (14, 15) |
# | 2 | (1, 3) | (5, 7) | (9, 11) | (13, 15) | | | | |
# | 4 | (3, 7) | (11, 15) | | | | | | |
# | 8 | (7, 15) | | | | | | | |
#
# Finding the rule behind this table is the first step of exercise 04.packed-upsweep below. The
# instructor's version prints it from that rule.

# %% tags=["instructor"]
tile = 16
offset, active = 1, tile // 2
while active > 0:
    pairs = "  ".join(f"t{t}:({offset * (2 * t + 1) - 1},{offset * (2 * t + 2) - 1})" for t in range(active))
    print(f"up-sweep, offset {offset:>2}: {pairs}")
    offset, active = offset * 2, active // 2

# %% [markdown]
# It is the same tree as the sheet's (the right index is the sheet's $i$, the left one
# $i - 2^d$), but the threads that work are packed together. A warp (32 threads) whose threads
# all skip a level is done with it at once; a warp with one working thread costs as much as a
# full one. For 256 elements, the warps that have work at each up-sweep level:

# %%
print(f"{'level d':>8} {'sheet: 256 threads':>18} {'GPU Gems: 128 threads':>22}")
for d in range(8):
    seed_warps = len({i // 32 for i in range(256) if (i + 1) % (2 << d) == 0})
    packed_warps = -(-(128 >> d) // 32)
    print(f"{d:>8} {seed_warps:>18} {packed_warps:>22}")

# %% [markdown]
# ### Exercise 04.packed-upsweep (core, 2 points)
#
# **Spec.** `my_packed_tile` scans tiles of `TILE` = 128 elements with one block of
# `THREADS` = 64 threads, two elements per thread (the check carries the totals between tiles).
# The loads, the root, the down-sweep and the stores are given. Write the **up-sweep** with the
# threads packed: at the level where `active` nodes combine (64, 32, ..., 1), threads
# $0, \dots,$ `active` $- 1$ do the work, one node each, and the others skip the level;
# afterwards `tree[TILE - 1]` holds the tile's total. The given down-sweep expects `offset` to
# end at `TILE`.
#
# **Invariant.** The tree is the sheet's (section 4 of chapter 03): after the level that joins
# subtrees of `offset` elements, every index $i$ with $i + 1$ a multiple of $2 \cdot$ `offset`
# holds the sum of the $2 \cdot$ `offset` elements ending at $i$; the other indices keep their
# value. Section 1's printout lists, level by level, which two subtrees each thread joins. On a
# tile of 8 (4 threads), for the input $3, 1, 4, 1, 5, 9, 2, 6$ ($t$: $r \leftarrow l$, thread
# $t$ adds index $l$ into index $r$):
#
# | `offset` | `active` | work | `tree` after the level |
# |---|---|---|---|
# | (load) | | | 3 1 4 1 5 9 2 6 |
# | 1 | 4 | t0: 1←0, t1: 3←2, t2: 5←4, t3: 7←6 | 3 4 4 5 5 14 2 8 |
# | 2 | 2 | t0: 3←1, t1: 7←5 | 3 4 4 9 5 14 2 22 |
# | 4 | 1 | t0: 7←3 | 3 4 4 9 5 14 2 31 |
#
# A level reads what the level before wrote (index 3 at `offset` 2 was written by thread 1 at
# `offset` 1), so a barrier separates every level from the one before it. After your last
# level only thread 0 reads the root, which thread 0 itself wrote, and the down-sweep begins
# every level with a barrier: a barrier after your last level is allowed, not needed.
# **Budget:** 16 barriers per thread, at most 6 memory accesses per thread between two
# barriers, 2 global accesses per element.
#
# `ps.hint("04.packed-upsweep")` for hints.

# %% tags=["exercise"] exercise_id="04.packed-upsweep" points=2 todo="write the up-sweep with packed threads: at each level thread t < active combines the two subtrees it owns, offset doubling and active halving, a barrier before every level, so that tree[TILE - 1] ends with the tile's total and offset with TILE"
from numba import cuda, float32

THREADS = 64
TILE = 2 * THREADS


@cuda.jit
def my_packed_tile(x, out, totals, n):
    tree = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    a = cuda.blockIdx.x * TILE + t
    b = a + THREADS
    element_a = x[a] if a < n else float32(0)
    element_b = x[b] if b < n else float32(0)
    tree[t] = element_a
    tree[t + THREADS] = element_b
    offset = 1
    ### BEGIN SOLUTION
    active = THREADS
    while active > 0:
        cuda.syncthreads()
        if t < active:
            tree[offset * (2 * t + 2) - 1] += tree[offset * (2 * t + 1) - 1]
        offset *= 2
        active //= 2
    cuda.syncthreads()
    ### END SOLUTION
    if t == 0:
        totals[cuda.blockIdx.x] = tree[TILE - 1]
        tree[TILE - 1] = float32(0)
    active = 1
    while active < TILE:
        offset //= 2
        cuda.syncthreads()
        if t < active:
            left, right = offset * (2 * t + 1) - 1, offset * (2 * t + 2) - 1
            left_sum = tree[left]
            tree[left] = tree[right]
            tree[right] += left_sum
        active *= 2
    cuda.syncthreads()
    if a < n:
        out[a] = tree[t] + element_a
    if b < n:
        out[b] = tree[t + THREADS] + element_b


# %% tags=["check"] exercise_id="04.packed-upsweep"
print(ps.check.tiled(my_packed_tile, block_size=128, threads=64,  # the check's tile, whatever TILE and THREADS say
                     budget=ps.check.Budget(barriers=16, accesses_per_step=6, traffic_per_element=2)))

# %% [markdown]
# The package's tile kernel and its two sweeps, for comparison (`slot` is where a tree index
# lives in shared memory; section 3 explains it):

# %% tags=["instructor"]
print(inspect.getsource(ps.scans.blelloch.blelloch_upsweep))
print(inspect.getsource(ps.scans.blelloch.blelloch_downsweep))
print(inspect.getsource(ps.scans.blelloch.blelloch_tile_kernel))

# %% [markdown]
# Thread $t$ loads elements $t$ and $t +$ `block_size` of its tile (consecutive threads read
# consecutive addresses, which a GPU serves in few memory transactions), and the thread that
# made the root writes the tile's total before clearing it. For an inclusive scan each thread
# combines its own element into the exclusive result at the end.
#
# ## 2. Many tiles: scan the totals, add them back
#
# The driver is the one every tiled scan of the package shares (chapter 01), `scan_tiles` in
# `prefixsum/scans/tiles.py`:
#
# 1. **tile pass**: block $b$ scans tile $b$ and writes its total to `totals[b]`;
# 2. **scan the totals**: `totals` is an array of its own, scanned (inclusively) by the same
#    algorithm, recursively, until it fits one tile;
# 3. **carry pass**: block $b$ combines `carries[b]` (everything in tiles $0..b$) into every
#    element of tile $b + 1$.
#
# A tiled algorithm does not write this driver again: it hands its tile kernel to
# `register_tiled`, whose `run` calls `scan_tiles` with tiles of `items_per_thread * block_size`
# elements and passes *itself* as the scan of the totals, which is where the recursion comes
# from. Below: the driver, the helper, and the last lines of
# `prefixsum/scans/blelloch.py`, where Blelloch plugs in its tile kernel with
# `items_per_thread=2` (tiles of 512 for the default 256 threads). The carry kernel is yours to
# write (exercise 04.blelloch-carry, below).

# %%
print(inspect.getsource(ps.scans.tiles.scan_tiles))
print(inspect.getsource(ps.scans.tiles.register_tiled))
blelloch_module = inspect.getsource(ps.scans.blelloch)
print(blelloch_module[blelloch_module.index("ALGORITHM = register_tiled"):])

# %% [markdown]
# The global-memory picture of a scan of 300 elements with 32 threads per block (tiles of 64):
# five tiles, one tile for the five totals, a carry into the last four tiles.

# %%
launches_trace = ps.trace.record(ps.scan, np.arange(1, 301, dtype=np.int32), algorithm="blelloch", block_size=32)
_ = ps.viz.launches(launches_trace)

# %% [markdown]
# How many launches? A tile holds $T$ elements; $n$ elements make $\lceil n/T \rceil$ tiles, and
# every level of recursion adds a tile launch and a carry launch:


# %%
def launches(n, tile):
    """Kernel launches of a tiled scan of n elements (tile pass, recursion on the totals, carry)."""
    tiles = -(-n // tile)
    return 1 if tiles == 1 else 2 + launches(tiles, tile)


for n in (2 ** 10, 2 ** 16, 2 ** 18, 2 ** 19, 2 ** 24, 2 ** 26):
    print(f"n = {n:>8}: {launches(n, 512)} launches with tiles of 512 (blelloch), {launches(n, 256)} with tiles of 256 (ladder)")
print("the trace above:", launches_trace.counts()["launches"], "launches")

# %% [markdown]
# And the memory traffic, counted by the tracer for 2000 elements in tiles of 64:

# %%
traffic_n = 2000
traffic = ps.trace.record(ps.scan, np.ones(traffic_n, dtype=np.float32), algorithm="blelloch", block_size=32).counts()
print(f"n = {traffic_n}: {traffic['launches']} launches, {traffic['global_reads']} global reads "
      f"({traffic['global_reads'] / traffic_n:.2f} per element), {traffic['global_writes']} global writes "
      f"({traffic['global_writes'] / traffic_n:.2f} per element)")

# %% [markdown]
# The tile pass reads and writes every element once, and the carry pass reads and writes every
# element outside tile 0 once more: about $2n$ reads and $2n$ writes, **4n words** of traffic,
# twice the $2n$ of a copy. (The tracer counts a read of `carries[b]` for every thread of the
# carry kernel; a GPU serves the 32 threads of a warp that read one word with one broadcast.)
# A single-pass scan, which carries the totals within one launch (the look-back scan), moves
# only the $2n$.
#
# ### Exercise 04.blelloch-carry (warm-up, 1 point)
#
# The lab sheet's last step, written by you. `scan_device` below runs the package's tile kernel
# (Blelloch, 32 threads, tiles of 64, padded), scans the tile totals by calling itself, and then
# launches `my_carry` with one block of `THREADS` = 32 threads per tile after the first.
#
# **Spec.** `my_carry(out, carries, n)`, launched with `tiles - 1` blocks of 32 threads: block
# $b$ adds `carries[b]` (the sum of tiles $0..b$) to every element of tile $b + 1$ that exists
# (index below `n`), each thread taking two elements of that tile, consecutive threads on
# consecutive elements. Then `my_blelloch_scan(x)` equals `np.cumsum(x)`. **Budget:** at most
# 5 memory accesses per thread (one read of its carry, a read and a write per element), 3
# global accesses per element in `my_carry`.
#
# `ps.hint("04.blelloch-carry")` for hints.

# %% tags=["exercise"] exercise_id="04.blelloch-carry" points=1 todo="write my_carry: block b adds carries[b] to every element of tile b + 1 below n, two elements per thread, consecutive threads on consecutive elements"
from numba import cuda

THREADS = 32
TILE = 2 * THREADS
tile_kernel = ps.scans.blelloch.blelloch_tile_kernel("add", np.float32, True, False, THREADS, True)


@cuda.jit
def my_carry(out, carries, n):
    ### BEGIN SOLUTION
    carry = carries[cuda.blockIdx.x]
    start = (cuda.blockIdx.x + 1) * TILE
    for k in range(cuda.threadIdx.x, TILE, THREADS):
        if start + k < n:
            out[start + k] += carry
    ### END SOLUTION


def scan_device(source, out):
    """Inclusive sums of device array source into out: tile pass, totals scanned by recursion, carry pass."""
    n = source.shape[0]
    tiles = (n + TILE - 1) // TILE
    totals = cuda.device_array(tiles, source.dtype)
    tile_kernel[tiles, THREADS](source, out, totals, n)
    if tiles > 1:
        carries = cuda.device_array(tiles, source.dtype)
        scan_device(totals, carries)
        my_carry[tiles - 1, THREADS](out, carries, n)


def my_blelloch_scan(x):
    out = cuda.device_array(len(x), x.dtype)
    scan_device(cuda.to_device(x), out)
    return out


# %% tags=["check"] exercise_id="04.blelloch-carry"
# The check's own scan, on its own arrays: the package's tiles of 64 on 32 threads, the totals
# scanned by recursion, and your my_carry launched with one block of 32 threads per tile after the first.
tiles_of_64 = ps.scans.blelloch.blelloch_tile_kernel("add", np.float32, True, False, 32, True)


def scan_by_the_check(source, out):
    n = source.shape[0]
    tiles = (n + 63) // 64
    totals = cuda.device_array(tiles, source.dtype)
    tiles_of_64[tiles, 32](source, out, totals, n)
    if tiles > 1:
        carries = cuda.device_array(tiles, source.dtype)
        scan_by_the_check(totals, carries)
        my_carry[tiles - 1, 32](out, carries, n)


def blelloch_scan_by_the_check(x):
    out = cuda.device_array(len(x), x.dtype)
    scan_by_the_check(cuda.to_device(x), out)
    return out


print(ps.check.scan(blelloch_scan_by_the_check, name="my_carry",
                    budget=ps.check.Budget(accesses_per_step=5, traffic_per_element=3, kernels=("my_carry",))))

# %% [markdown]
# The package's carry kernel, for comparison (it serves every tiled scan, any number of
# elements per thread):

# %% tags=["instructor"]
print(inspect.getsource(ps.scans.tiles.carry_kernel))

# %% [markdown]
# ## 3. Bank conflicts
#
# Shared memory is split into 32 **banks**; word $w$ (4 bytes) lives in bank $w \bmod 32$. The 32
# threads of a warp are served in one pass if they touch 32 different banks (or the same word,
# by broadcast), and in $k$ passes if $k$ different words fall into one bank. The paper of Lungu, Petroşanu and Pîrjan (chapter 06) puts it
# this way: *"Multiple data requests from the same memory bank generate memory banks conflicts.
# [...] The hardware device serializes memory operations when a conflict occurs."*
#
# At the up-sweep level with `offset` $o$, thread $t$ touches index $o(2t+2) - 1$: neighbouring
# threads are $2o$ words apart, so only $32 / 2o$ banks are hit and the accesses queue up, $2o$
# of them per bank (as long as the whole warp works). GPU Gems 3's fix (chapter 39, Harris,
# Sengupta and Owens 2007) **pads** the array: it leaves a cell empty at regular intervals, so
# that indices that fell into one bank are pushed into different ones (its macro
# `CONFLICT_FREE_OFFSET`; GPUs had 16 banks then, today's have 32). Which interval, and by how
# much each index moves, is exercise 04.conflict-free below. Worst passes for warp 0 at each
# up-sweep level of a tile of 512 in the plain layout, computed by hand, beside the passes the
# package's padding (`conflict_free=True`) gives:


# %%
def passes(indices):
    """Passes a warp needs for one access to these word indices: the most distinct words in one bank."""
    words = collections.defaultdict(set)
    for i in indices:
        words[i % 32].add(i)
    return max(len(w) for w in words.values())


padded_cell = ps.scans.blelloch.tree_slot(True).py_func  # the package's padding, as a Python function
offset, active = 1, 256
print(f"{'offset':>6} {'threads':>7} {'plain':>5} {'padded':>6}")
while active > 0:
    right = [offset * (2 * t + 2) - 1 for t in range(min(32, active))]
    print(f"{offset:>6} {active:>7} {passes(right):>5} {passes([padded_cell(i) for i in right]):>6}")
    offset, active = offset * 2, active // 2

# %% [markdown]
# The tracer does this for every warp and every shared-memory access of a real run. One tile of
# 512 elements with the package's default 256 threads, with and without the padding (the option
# `conflict_free`):

# %%
x512 = np.ones(512, dtype=np.float32)
plain = ps.trace.record(ps.scan, x512, algorithm="blelloch", conflict_free=False)
padded = ps.trace.record(ps.scan, x512, algorithm="blelloch", conflict_free=True)
for label, run in (("conflict_free=False", plain), ("conflict_free=True", padded)):
    ways = collections.Counter(f["ways"] for f in run.bank_conflicts())
    print(f"{label:<20} {run.conflict_summary()}  warp accesses by passes: {dict(sorted(ways.items()))}")
_ = ps.viz.bank_conflicts({"conflict_free=False": plain, "conflict_free=True": padded})

# %% [markdown]
# Without padding the 194 warp-wide shared-memory accesses of the tile need three times as many
# passes, up to 16 for one access; with it, all but a few are conflict-free and none needs more
# than 2 (the padding does not remove every conflict of the down-sweep). The padding costs
# $512 / 32 = 16$ extra shared cells per tile and changes where values live, never what they
# are:

# %%
n_large = ps.size_for_device(simulator=3000, gpu=2 ** 24)
x_large = np.random.default_rng(4).integers(-1000, 1000, n_large).astype(np.int32)
same = np.array_equal(ps.scan(x_large, algorithm="blelloch", conflict_free=False),
                      ps.scan(x_large, algorithm="blelloch", conflict_free=True))
print("padded and plain results identical:", same, "| equal to the reference:",
      np.array_equal(ps.scan(x_large, algorithm="blelloch"), ps.reference.scan(x_large)))
for conflict_free in (False, True):
    print(ps.check.scan(lambda x: ps.scan(x, algorithm="blelloch", conflict_free=conflict_free),
                        name=f"blelloch conflict_free={conflict_free}"))

# %% [markdown]
# ### Exercise 04.conflict-free (stretch, 2 points)
#
# **Spec.** `my_slot(i)` is a device function that says where tree index `i` (0 to 127) of a
# tile of `TILE` = 128 lives in the shared array `tree` of `CELLS` = 132 cells. The kernel
# `padded_tile` (given: the packed sweeps of exercise 04.packed-upsweep, every index through
# `my_slot`) must still scan correctly, so `my_slot` must map the 128 indices to distinct cells
# below 132; and **no warp-wide shared-memory access may need more than 2 passes** of the 32
# banks (the tracer counts them). Budget: `bank_conflict_ways=2`.
#
# **The goal, on one access.** With the plain layout (`my_slot(i) = i`) the indices a warp
# touches at one up-sweep level share few banks (bank = cell mod 32); the passes are the most
# distinct cells in one bank:
#
# | `offset` | threads of warp 0 at work | indices they add into | banks (plain) | passes (plain) |
# |---|---|---|---|---|
# | 1 | 32 | 1, 3, 5, ..., 63 | the 16 odd banks, twice each | 2 |
# | 2 | 32 | 3, 7, 11, ..., 127 | 3, 7, ..., 31, four times each | 4 |
# | 16 | 4 | 31, 63, 95, 127 | 31, 31, 31, 31 | 4 |
#
# Your `my_slot` keeps every index in a cell of its own (the results must not change) and
# spreads such sets over the banks so that no bank holds more than 2 of the cells of one access,
# at every level of both sweeps and in the loads and stores; the 4 spare cells are yours to use.
#
# `ps.hint("04.conflict-free")` for hints.

# %% tags=["exercise"] exercise_id="04.conflict-free" points=2 todo="make my_slot map the tree indices 0..TILE-1 to distinct cells below CELLS such that no warp's access to tree needs more than 2 passes of the 32 banks"
from numba import cuda, float32

THREADS = 64
TILE = 2 * THREADS
CELLS = TILE + TILE // 32


@cuda.jit(device=True)
def my_slot(i):
    ### BEGIN SOLUTION
    return i + (i >> 5)
    ### END SOLUTION


@cuda.jit
def padded_tile(x, out, totals, n):
    tree = cuda.shared.array(CELLS, float32)
    t = cuda.threadIdx.x
    a = cuda.blockIdx.x * TILE + t
    b = a + THREADS
    element_a = x[a] if a < n else float32(0)
    element_b = x[b] if b < n else float32(0)
    tree[my_slot(t)] = element_a
    tree[my_slot(t + THREADS)] = element_b
    offset, active = 1, THREADS
    while active > 0:
        cuda.syncthreads()
        if t < active:
            tree[my_slot(offset * (2 * t + 2) - 1)] += tree[my_slot(offset * (2 * t + 1) - 1)]
        offset, active = offset * 2, active // 2
    cuda.syncthreads()
    if t == 0:
        totals[cuda.blockIdx.x] = tree[my_slot(TILE - 1)]
        tree[my_slot(TILE - 1)] = float32(0)
    active = 1
    while active < TILE:
        offset //= 2
        cuda.syncthreads()
        if t < active:
            left, right = my_slot(offset * (2 * t + 1) - 1), my_slot(offset * (2 * t + 2) - 1)
            left_sum = tree[left]
            tree[left] = tree[right]
            tree[right] += left_sum
        active *= 2
    cuda.syncthreads()
    if a < n:
        out[a] = tree[my_slot(t)] + element_a
    if b < n:
        out[b] = tree[my_slot(t + THREADS)] + element_b


# %% tags=["check"] exercise_id="04.conflict-free"
print(ps.check.tiled(padded_tile, block_size=128, threads=64,
                     budget=ps.check.Budget(bank_conflict_ways=2, accesses_per_step=5)))

# %% [markdown]
# ## 4. What a GPU measures
#
# `benchmarks/scan_throughput.csv` was written by `bash benchmarks/run_gpu.sh scans` (which runs
# `python -m prefixsum bench`; every row records the command, the device and the date,
# printed below). For each $n$ from $2^{10}$ to $2^{26}$ and for inclusive float32 and int32
# sums, it holds two kinds of time (`benchmarks/README.md` describes the method):
#
# - **kernel time** (column `timing` = "events, queued"): each sample queues a short busy
#   kernel, then a CUDA event, the scan's launches and a second event. The busy kernel outlasts
#   the host's work, so all launches are queued before the first event fires, and the events
#   time the GPU's work alone: not the tens of microseconds of Python that numba spends on the
#   host for every launch. Median of 25 samples after 3 warm-up calls.
# - **whole-call time** ("host clock, ..."): a whole `ps.scan(x, algorithm="ladder")` on a
#   device array (options, allocation, launches, synchronisation) on the host's clock, median
#   of 25 after a warm-up; and the same call on a numpy array, copies to and from the GPU
#   included.
#
# Throughput counts the $2n$ words a scan must at least move ($2n \times 4$ bytes / time), so a
# copy is the ceiling. Brent's theorem (chapter 03, $T_p \le W/p + D$) says why the ceiling, not
# the work, should decide at large $n$: with $p$ in the hundred thousands and $n$ in the tens of
# millions, $W/p$ is a few hundred combines per thread for Hillis–Steele or Blelloch alike, each
# a few cycles, while the same thread waits far longer for the bytes it must move. A
# work-efficient tile matters less than a tile that moves few bytes. Baselines: a numba copy kernel (one element per thread), PyTorch's
# `copy_`, `torch.cumsum` (CUB's single-pass scan) and `cupy.cumsum`. Every result was checked
# before it was timed. Below, float32 kernel times, without the k-step scan of chapter 05
# (chapter 05) and the hierarchical scan (chapter 06), and with folding left out (the printout
# says how close it lies to the ladder):

# %%
measured = results.read("scan_throughput.csv")
sizes = sorted({row["n"] for row in measured})
print(f"scan_throughput.csv: {len(measured)} rows from {', '.join(sorted({row['device'] for row in measured}))}, "
      f"{', '.join(sorted({row['date'] for row in measured}))}; every result correct: {all(row['correct'] for row in measured)}")
print("timings:", "; ".join(sorted({row["timing"] for row in measured})))


def kernel_us(variant, n, dtype="float32"):
    """Median kernel time (queued launches) of ``variant`` at ``n``, from scan_throughput.csv."""
    return results.value("scan_throughput.csv", "median_us", variant=variant, dtype=dtype, n=n)


folding_off = max(abs(kernel_us("folding", n) / kernel_us("ladder", n) - 1) for n in sizes)
print(f"folding differs from the ladder by at most {folding_off:.0%} at any n")
shown = ["blelloch", "blelloch:conflict_free=False", "ladder", "hillis_steele", "copy", "torch copy", "torch.cumsum", "cupy.cumsum"]
float_rows = [row for row in measured if row["dtype"] == "float32" and row["variant"] in shown]
fig, (left, right) = plt.subplots(1, 2, figsize=(14, 4.8))
ps.viz.throughput(float_rows, ax=left, title=f"float32 sums on an {float_rows[0]['device']}: throughput")
ps.viz.throughput(float_rows, y="median_us", ax=right, title="the same runs: kernel time per scan")
left.set_ylabel("GB/s (2n x 4 bytes / time)")
right.set_ylabel("µs per scan (median, launches queued)")
right.get_legend().remove()

# %% [markdown]
# The numbers at the two largest sizes, each variant's speed relative to `torch.cumsum`
# (its time divided by the variant's), and the ratios the discussion below rests on:

# %%
print(f"{'variant':<30} {'2^24: µs':>9} {'GB/s':>7} {'vs cumsum':>9}   {'2^26: µs':>9} {'GB/s':>7} {'vs cumsum':>9}")
at = {(row["variant"], row["n"]): row for row in float_rows}
for variant in shown:
    line = f"{variant:<30}"
    for n in (2 ** 24, 2 ** 26):
        row, cub = at[(variant, n)], at[("torch.cumsum", n)]
        line += f" {row['median_us']:>9.1f} {row['gbps']:>7.0f} {cub['median_us'] / row['median_us']:>8.2f}x  "
    print(line)
padded = {n: kernel_us("blelloch", n) for n in sizes}
plain = {n: kernel_us("blelloch:conflict_free=False", n) for n in sizes}
print()
print("padding faster at every n >= 2^19:", all(padded[n] < plain[n] for n in sizes if n >= 2 ** 19))
print("padding slower at every n <= 2^17:", all(padded[n] > plain[n] for n in sizes if n <= 2 ** 17))
small = [n for n in sizes if n <= 2 ** 17]
print(f"up to 2^17: plain {min(plain[n] for n in small):.1f} to {max(plain[n] for n in small):.1f} us, "
      f"padded slower by at most {max(padded[n] - plain[n] for n in small):.1f} us")
print("time padding saves:", ", ".join(f"2^{n.bit_length() - 1}: {1 - padded[n] / plain[n]:.0%}" for n in sizes if n >= 2 ** 20))
ours = [kernel_us("torch.cumsum", n) / kernel_us(v, n) for v in ("blelloch", "ladder", "hillis_steele") for n in (2 ** 24, 2 ** 26)]
print(f"padded Blelloch, ladder, Hillis-Steele at 2^24 and 2^26: {min(ours):.2f} to {max(ours):.2f} of torch.cumsum's speed")
big = 2 ** 26
print(f"at 2^26: Hillis-Steele / Blelloch {kernel_us('hillis_steele', big) / kernel_us('blelloch', big):.2f}, "
      f"Hillis-Steele / ladder {kernel_us('hillis_steele', big) / kernel_us('ladder', big):.2f}; "
      f"torch.cumsum / numba copy {kernel_us('torch.cumsum', big) / kernel_us('copy', big):.2f}, "
      f"torch copy / torch.cumsum {kernel_us('torch copy', big) / kernel_us('torch.cumsum', big):.2f}, "
      f"Blelloch / numba copy {kernel_us('blelloch', big) / kernel_us('copy', big):.2f}, "
      f"hierarchical / Blelloch {kernel_us('hierarchical', big) / kernel_us('blelloch', big):.2f}")

# %% [markdown]
# What the measurements show:
#
# - **Padding pays once there is work to do.** From $n = 2^{19}$ on, the padded Blelloch scan is
#   faster than the plain one at every size, and the saving grows with $n$, to about a fifth of
#   the time at $2^{24}$ and $2^{26}$ (the lines above). Up to $2^{17}$, where a tile pass has
#   little to do, the plain layout is a little faster (by the small margin printed above): a
#   difference between single medians that this benchmark cannot attribute (the padding's extra
#   index arithmetic is a guess; nothing here measured it). Padded, Blelloch is the fastest
#   of this chapter's two-pass scans at $2^{24}$ and $2^{26}$. (The package's `hierarchical`
#   scan, chapter 06, moves $3n$ words instead of $4n$ and is faster still.)
# - **Our tiled scans reach about a third of `torch.cumsum`'s speed** at the largest sizes (the
#   range printed above). Work efficiency hardly matters: Hillis–Steele's tile pass does 7
#   combines per element (1793 for a tile of 256, chapter 03), Blelloch's 3 (two sweeps and the
#   inclusive step), and Hillis–Steele is only about 5% slower than the ladder and 16% slower
#   than padded Blelloch at $2^{26}$.
# - **Traffic.** Our scans move $4n$ words (two passes), a single-pass scan $2n$. At $2^{26}$
#   `torch.cumsum` takes only about 15% longer than the numba copy kernel, and PyTorch's own
#   copy is faster still. Two passes explain a factor of 2 against a copy; padded Blelloch takes
#   about 3 times as long as the numba copy kernel, so the tile pass itself does not stream at
#   copy speed either (two elements per thread, 20 barriers per tile of 512; the CSV does not
#   split the time between the kernels).
#
# **The floor.** With the launches queued, what is left at small $n$ is the GPU's own cost of
# running one kernel after another. Up to $n = 2^{16}$ (Blelloch: $2^{18}$) a tiled scan makes
# three launches, then five (one more level of recursion, counted by the `launches` function of
# section 2):

# %%
print(f"{'variant':<10} {'n':>9} {'launches':>8} {'kernel µs':>9} {'µs per launch':>13}")
for variant in ("copy", "ladder", "blelloch"):
    for n in (2 ** 10, 2 ** 16, 2 ** 17, 2 ** 18, 2 ** 19, 2 ** 20):
        count = {"ladder": launches(n, 256), "blelloch": launches(n, 512)}.get(variant, 1)
        print(f"{variant:<10} {n:>9} {count:>8} {kernel_us(variant, n):>9.1f} {kernel_us(variant, n) / count:>13.1f}")

# %% [markdown]
# Queued back to back, a launch costs the GPU a few microseconds while the work is small (the
# `µs per launch` column, the copy kernel's one launch included), and one more level of recursion adds about two such launches:
# the ladder's time steps up from $2^{16}$ to $2^{17}$, Blelloch's from $2^{18}$ to $2^{19}$ (where
# the data also double).
# From about $2^{20}$ on, the time grows with $n$: the GPU's work outweighs the launches.
#
# **A whole call.** Kernel times leave out the host. A user who calls `ps.scan` waits for the
# host too: the Python of the call and of every launch, and, from a numpy array, the copies to
# and from the GPU. For a scan of a few thousand elements it is the host that decides. What a
# call costs beyond its kernels, and why, is measured once for the workbook, in
# chapter 08 (`08_tridiagonal_hybrid`), section 3; the ladder's whole calls are the
# `ps.scan(ladder) call` rows of `benchmarks/scan_throughput.csv`.
#
# The int32 measurements in the same file give about the same kernel times as float32 at the
# largest sizes. Left to their defaults, `torch.cumsum` and `cupy.cumsum` would follow numpy and
# sum int32 into **int64**, writing twice the bytes; the benchmark asks them for int32 results
# (`dtype=` the input's type), so they are a fair baseline here too:

# %%
print(f"{'at 2^26':<14} {'float32 µs':>10} {'int32 µs':>9} {'ratio':>6}")
for variant in ("blelloch", "ladder", "torch.cumsum", "cupy.cumsum"):
    f32, i32 = kernel_us(variant, big), kernel_us(variant, big, "int32")
    print(f"{variant:<14} {f32:>10.1f} {i32:>9.1f} {i32 / f32:>6.2f}")

# %% [markdown]
# ## 5. Summary
#
# | $n$ elements, tiles of $T = 2 \times$ `block_size` | Blelloch, tiled |
# | --- | --- |
# | work (combines) | $\approx 2n$ (sweeps) + $n$ (inclusive) + $n$ (carry) |
# | depth | $2\log_2 T + 2$ barriers per tile pass, $\lceil \log_T n \rceil$ levels, $2\lceil \log_T n \rceil - 1$ launches |
# | global memory | $\approx 2n$ reads + $2n$ writes (a single-pass scan: $n + n$) |
# | shared memory | $T + T/32$ cells per block (with padding) |
# | on a GPU, $n = 2^{26}$ float32 (section 4) | about 3 times a copy kernel's time, about 0.4 times `torch.cumsum`'s speed; padding saves about a fifth; a whole call adds far more time in Python than a small scan's kernels take |
#
# **Questions.**
# 1. With tiles of 512, how many levels of recursion and launches does a scan of $2^{30}$
#    elements need? How much of the traffic do the levels after the first add?
# 2. In the hand-computed table of section 3, why does the plain layout need 16 passes at
#    offsets 8 and 16 but only 8 at offset 32? Why is a broadcast (all threads reading one
#    word) no conflict?
# 3. For 8-byte elements (float64), which index pattern is conflict-free, and would the padding
#    of exercise 04.conflict-free still be the right one?
# 4. For $n \le 2^{12}$ the kernels of every tiled scan take a few launches' worth of time (section 4),
#    but a whole `ps.scan` call of the ladder takes many times as long (its `call` rows in the CSV).
#    Where does the rest go? Estimate what one numba launch costs on the host, and name two
#    ways to make a whole scan of $2^{12}$ elements faster.
# 5. `torch.cumsum` at $2^{26}$ takes only about 15% longer than the numba copy kernel. What
#    must a scan do to move only $2n$ words, and what does a tile then have to wait for?
