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
# # 00 · GPU programming with numba.cuda, with or without a GPU
#
# This workbook writes GPU kernels in Python with [numba.cuda](https://nvidia.github.io/numba-cuda/).
# This first chapter covers what every later one needs: threads, blocks and grids, shared
# memory and barriers, and how to run everything on a laptop without a GPU — including the
# mistakes a simulator can hide, and how this workbook catches them.

# %%
# NBVAL_IGNORE_OUTPUT
import prefixsum as ps  # first: it chooses the GPU or the simulator before numba.cuda loads

import inspect

import numpy as np
from numba import cuda

from prefixsum import basics

print(ps.device_info())

# %% [markdown]
# ## 1. Threads, blocks, grids
#
# A **kernel** is a function that many threads run at once. Threads come in **blocks** (up to
# 1024 threads, which can cooperate), and blocks in a **grid** (as many as you like, which
# cannot). Each thread finds its place from `cuda.threadIdx` (inside its block),
# `cuda.blockIdx` and `cuda.blockDim`; `cuda.grid(1)` is the usual
# `blockIdx.x * blockDim.x + threadIdx.x`. Launching picks the grid and block sizes:
# `kernel[blocks, threads_per_block](arguments)`.

# %%
print(inspect.getsource(basics.add_one))

# %%
x = np.arange(10, dtype=np.float32)
out = cuda.device_array_like(x)
threads = 4
blocks = (len(x) + threads - 1) // threads  # round up: the last block is partly idle
basics.add_one[blocks, threads](cuda.to_device(x), out)
print(f"{blocks} blocks of {threads} threads:", out.copy_to_host())

# %% [markdown]
# Three habits show already: copy data to the device (`cuda.to_device`), allocate outputs there
# (`cuda.device_array`), and **guard** every access with `i < n`, because the last block has
# threads past the end of the array.
#
# ## 2. Shared memory and barriers
#
# The threads of one block share a small, fast memory (`cuda.shared.array`, 48 KiB per block)
# and can wait for each other at a **barrier**, `cuda.syncthreads()`: no thread passes it until
# every thread of the block has reached it. Blocks cannot wait for each other; the only
# barrier between blocks is the end of a kernel launch.
#
# Reversing every tile of 32 elements: each thread writes one cell, then reads its mirror cell,
# which another thread wrote. The barrier sits between the writes and the reads.

# %%
print(inspect.getsource(basics.reverse_tiles))
y = np.arange(64, dtype=np.float32)
reversed_tiles = cuda.device_array_like(y)
basics.reverse_tiles[2, basics.TILE](cuda.to_device(y), reversed_tiles)
print(reversed_tiles.copy_to_host())

# %% [markdown]
# ## 3. Running without a GPU
#
# numba ships a **CUDA simulator**: it runs each CUDA thread as Python, so kernels can be run,
# printed from and debugged on any laptop. `import prefixsum` chooses for you: a usable GPU if
# there is one, otherwise the simulator (it sets `NUMBA_ENABLE_CUDASIM=1` before numba is
# imported; set that variable yourself to force either choice).
#
# The simulator is a teaching tool with gaps: it is slow, and it accepts mistakes that a GPU
# punishes. This workbook puts its own **classroom simulator** (`prefixsum.sim`) on top of it:
# faster, deterministic, and strict. `with ps.sim.enabled(False):` runs numba's stock simulator
# instead, so we can compare the two on the same buggy kernels.

# %%


def stock_and_classroom(run, *args):
    print("stock simulator:    ", basics.outcome(run, *args, stock=True))
    print("classroom simulator:", basics.outcome(run, *args))


# %% [markdown]
# ### Gap 1: shared memory is garbage, and carries over between blocks
#
# On a GPU a shared array starts with whatever was there before. The stock simulator hands each
# block an uninitialised numpy array, and the *same* one to the next block, so block 1 reads what
# block 0 wrote and a bug looks like a plausible value. The classroom simulator fills shared
# memory with a poison value (NaN for floats) at the start of every block.

# %%
print(inspect.getsource(basics.gap_shared_leftovers))
print("stock simulator:    ", basics.outcome(lambda: basics.run_gap_shared_leftovers()[1, :6], stock=True), "(block 0's values)")
print("classroom simulator:", basics.outcome(lambda: basics.run_gap_shared_leftovers()[1, :6]))

# %% [markdown]
# ### Gap 2: negative indices wrap around
#
# numba indexes like Python: `x[-1]` is the last element — on a GPU as well. So `x[i - 1]` at
# `i = 0` silently reads the end of the array, a classic off-by-one in scans. The classroom
# simulator stops it (`ps.sim.allow_negative_indices()` permits it where it is meant).

# %%
print(inspect.getsource(basics.gap_shift_right))
stock_and_classroom(basics.run_gap_shift_right)

# %% [markdown]
# ### Gap 3: a barrier that only some threads reach
#
# A `syncthreads()` inside an `if` that not every thread takes is undefined behaviour on a GPU
# (it may hang or corrupt data). The stock simulator lets it pass.

# %%
print(inspect.getsource(basics.gap_barrier_in_branch))
stock_and_classroom(basics.run_gap_barrier_in_branch)

# %% [markdown]
# ### Gap 4: blocks larger than a GPU allows
#
# A block has at most 1024 threads; a GPU refuses to launch a larger one. The stock simulator
# runs it (slowly).

# %%
stock_and_classroom(basics.run_gap_block_too_large, 2048)

# %% [markdown]
# ### Gap 5: races are (almost) never visible
#
# Without a barrier between writing a shared cell and reading a neighbour's, a GPU gives wrong
# answers some of the time. The simulator runs threads one after another, so the answer is
# usually right, and a test passes by luck. The classroom simulator is deterministic, so it
# cannot *show* a race either — instead the **tracer** (`ps.trace`) records every access and
# finds two threads touching one cell between two barriers.

# %%
print(inspect.getsource(basics.gap_missing_barrier))
run = ps.trace.record(basics.run_gap_missing_barrier)
races = run.races()
print(f"{len(races)} races; the first: {races[0]}")

# %% [markdown]
# ### Gap 6: code that only Python accepts
#
# The simulator runs kernels as Python, so a list comprehension works there, while numba's GPU
# compiler rejects it. Compiling a kernel to PTX (the GPU's assembly) finds this without a GPU;
# the test suite compiles every kernel of the package this way.

# %%
print(inspect.getsource(basics.gap_python_only))
print("simulator:", basics.outcome(basics.run_gap_python_only))
compiled, complaint = ps.ptx.compiles_in_child(basics.gap_python_only, "void(float32[::1], float32[::1])")
print("GPU compiler:", "compiles" if compiled else complaint)

# %% [markdown]
# ### Gap 7: warp intrinsics are missing
#
# The stock simulator has no `shfl_*_sync`, `syncwarp`, `ballot_sync` or `activemask`; chapter
# 06 needs them, and the classroom simulator will provide them there.

# %%
print("stock simulator has shfl_up_sync:", basics.outcome(lambda: hasattr(cuda, "shfl_up_sync"), stock=True))

# %% [markdown]
# ## 4. Blocks that talk to each other
#
# Blocks have no barrier between them, but inside one launch they can still pass values through
# global memory: a block stores a value, then raises a flag; another block waits for the flag,
# then reads the value. The **chained scan** carries the running total from tile to tile this
# way: each tile's last thread waits for the inclusive prefix of the tile before, adds its own
# tile's total and publishes the sum for the next tile. Three details make it right on a GPU:
#
# - **a flag**, so that a block reads the prefix only once it is there. The flag is polled with
#   an atomic (`cuda.atomic.add(flags, b - 1, 0)` reads it), which the compiler cannot hoist
#   out of the loop as it may hoist a plain load;
# - **a fence**, `cuda.threadfence()`, between storing the prefix and raising the flag: without
#   it, another block may see the flag before the prefix;
# - **waiting only for blocks that have started**: a GPU starts the blocks of a launch in
#   blockIdx order, as many as fit, and more only as those finish. Tiles numbered by an atomic
#   counter, in the order blocks start, guarantee that a tile's predecessor is already running.

# %%
from prefixsum import mutants
from prefixsum.cli import results

print(inspect.getsource(mutants.chained_tile))
print(inspect.getsource(mutants.hand_off))

# %% [markdown]
# numba's stock simulator runs the blocks of a launch one after another, in blockIdx order, so
# every block finds the one before it finished: leave out the flag or the fence and the answer
# is still right, and waiting for a block that starts later hangs it forever. The classroom
# simulator runs a few blocks at once (`ps.sim.resident_blocks()`, 4 unless set), taking turns
# in a seeded order at barriers, atomics, fences and polling loads (`ps.sim.block_order_seed()`
# changes the order); holds a block's global stores back from the other blocks until a fence,
# an atomic on them or the block's end, as a GPU's caches and store queues may; and stops a
# launch in which every thread waits with a `ps.sim.DeadlockError`. The tracer knows what orders
# two blocks (a fence, then an atomic flag, then an atomic read of it), so the checker names
# each mistake. The last column is an H100: `benchmarks/blocks_gpu.py` ran each kernel 20 times
# on 16,384 blocks (`blocks_gpu.csv`), the kernels that hang there as variants that give up
# after a bounded number of polls.

# %%
chained = [mutants.CORRECT_CHAINED] + [m for m in mutants.MUTANTS if m.name.startswith("chained_")]
tiles = np.random.default_rng(0).integers(-9, 10, 7 * mutants.BLOCK).astype(np.float32)  # 7 tiles
gpu = {row["kernel"]: row for row in results.read("blocks_gpu.csv")}


def on_gpu(row):
    if row["gave_up"]:
        return f"hangs: {row['gave_up']} waits gave up"
    right = row["launches"] - row["wrong_launches"]
    return f"right in {right} of {row['launches']}"


print(f"{'kernel':<30} {'stock simulator':<18} {'classroom simulator':<21} {'checker':<20} H100")
for m in chained:
    stock = "hangs (not run)" if m.hangs_stock else basics.verdict(m.run, tiles, stock=True)
    checked = ps.check.scan(m.run, name=m.name).diagnosis
    print(f"{m.name:<30} {stock:<18} {basics.verdict(m.run, tiles):<21} {checked:<20} {on_gpu(gpu[m.name])}")

# %% [markdown]
# The deadlock, as the classroom simulator reports it (the first of its four resident blocks,
# and the end of the message):

# %%
waits_for_later = next(m for m in mutants.MUTANTS if m.name == "chained_waits_for_later_block")
message = basics.outcome(waits_for_later.run, tiles, lines=100).splitlines()
print("\n".join(message[:9] + ["  ..."] + message[-3:]))

# %%
fence_row, poll_row = gpu["chained_without_fence"], gpu["chained_plain_poll"]
print(f"H100, no fence: wrong in {fence_row['wrong_launches']} of {fence_row['launches']} launches, "
      f"first at element {fence_row['first_wrong_index']:,} of {fence_row['n']:,}; plain-load poll: "
      f"{poll_row['gave_up']:,} of {(poll_row['blocks'] - 1) * poll_row['launches']:,} waits gave up "
      f"after {poll_row['patience']:,} polls")

# %% [markdown]
# On the GPU every mistake shows, but not all alike: without flags the result is wrong at the
# second tile already; without a fence it is wrong deep into the array, after thousands of
# tiles came out right, where a small test would never look; the plain load was read once, so
# every waiting block polled a stale flag until it gave up (unbounded, the kernel hangs), and
# waiting for a block that starts later hangs too. On the stock simulator all four pass or
# hang without a word about why, and compute-sanitizer's racecheck looks at shared memory only.
# The classroom simulator and the checker name each one, on a laptop.
#
# %% [markdown]
# ## 5. Checking a kernel properly
#
# Puzzle collections check a kernel with one `allclose` on one input. The workbook's checker,
# `ps.check.scan`, runs a kernel on many sizes with poisoned memory and traces every launch.
# `prefixsum.mutants` holds scan kernels with one typical mistake each, the chained ones above
# among them. How many does each kind of check catch?

# %%
one_block = mutants.allclose_catches(n=mutants.BLOCK)
two_blocks = mutants.allclose_catches(n=2 * mutants.BLOCK)
ours = {m.name: ps.check.scan(m.run, inclusive=m.inclusive, name=m.name) for m in mutants.MUTANTS}
print(f"{'mutant':<30} {'allclose, 1 block':>17} {'allclose, 2 blocks':>18}  checker")
for m in mutants.MUTANTS:
    print(f"{m.name:<30} {'caught' if one_block[m.name] else '-':>17} {'caught' if two_blocks[m.name] else '-':>18}  {ours[m.name].diagnosis}")
print(f"caught: {sum(one_block.values())}, {sum(two_blocks.values())} and "
      f"{sum(not r.passed for r in ours.values())} of {len(mutants.MUTANTS)}")

# %% [markdown]
# And each verdict says what went wrong and where to look:

# %%
print(ours["missing_carry"])
print(ours["uninitialized_shared"])

# %% [markdown]
# ## Summary
#
# - A kernel runs on a grid of blocks of threads; guard every index with `i < n`.
# - Threads of a block share memory and meet at `cuda.syncthreads()`; blocks meet only at the
#   end of a launch.
# - Blocks can pass values inside a launch through global memory: a fence, then an atomic
#   flag, polled with atomics, and waits only for blocks that have started.
# - Without a GPU, `prefixsum` runs its classroom simulator: poisoned shared memory, no negative
#   indices, no divergent barriers, no oversized blocks, several blocks at once with their own
#   view of memory, deadlocks stopped, and a tracer for races. Every kernel is also compiled for
#   real GPUs by the tests.
#
# **Questions.**
# 1. Why can blocks not wait for each other inside a kernel? What does that mean for a scan of
#    an array larger than one block?
# 2. In `reverse_tiles`, which results could go wrong on a GPU without the barrier, and why
#    would the stock simulator rarely show it?
# 3. `x[i - 1]` at `i = 0` reads `x[-1]` on a GPU too. What does a scan kernel usually want
#    there instead?
# 4. In `chained_tile`, why must the tile number come from an atomic counter rather than from
#    `cuda.blockIdx.x`, when a GPU starts blocks in blockIdx order anyway?
