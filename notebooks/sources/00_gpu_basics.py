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
# ## 4. Checking a kernel properly
#
# Puzzle collections check a kernel with one `allclose` on one input. The workbook's checker,
# `ps.check.scan`, runs a kernel on many sizes with poisoned memory and traces every launch.
# `prefixsum.mutants` holds thirteen scan kernels with one typical mistake each. How many does
# each kind of check catch?

# %%
from prefixsum import mutants

one_block = mutants.allclose_catches(n=mutants.BLOCK)
four_blocks = mutants.allclose_catches(n=4 * mutants.BLOCK)
ours = {m.name: ps.check.scan(m.run, inclusive=m.inclusive, name=m.name) for m in mutants.MUTANTS}
print(f"{'mutant':<24} {'allclose, 1 block':>17} {'allclose, 4 blocks':>18}  checker")
for m in mutants.MUTANTS:
    print(f"{m.name:<24} {'caught' if one_block[m.name] else '-':>17} {'caught' if four_blocks[m.name] else '-':>18}  {ours[m.name].diagnosis}")
print(f"caught: {sum(one_block.values())}, {sum(four_blocks.values())} and "
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
# - Without a GPU, `prefixsum` runs its classroom simulator: poisoned shared memory, no negative
#   indices, no divergent barriers, no oversized blocks, and a tracer for races. Every kernel is
#   also compiled for real GPUs by the tests.
#
# **Questions.**
# 1. Why can blocks not wait for each other inside a kernel? What does that mean for a scan of
#    an array larger than one block?
# 2. In `reverse_tiles`, which results could go wrong on a GPU without the barrier, and why
#    would the stock simulator rarely show it?
# 3. `x[i - 1]` at `i = 0` reads `x[-1]` on a GPU too. What does a scan kernel usually want
#    there instead?
