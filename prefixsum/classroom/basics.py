"""The kernels of notebook 00: a first map, a first use of shared memory, and the simulator's gaps.

Each ``gap_*`` kernel has one mistake that numba's stock CUDA simulator lets through (silently
right, or silently wrong) and that a GPU would punish; :mod:`prefixsum.sim` stops each one with
an error that names the kernel, the block, the thread and the line.
"""

import numpy as np
from numba import cuda, float32

from . import child as _child

TILE = 32


@cuda.jit
def add_one(x, out):
    """out[i] = x[i] + 1: one thread per element, as many blocks as needed."""
    i = cuda.grid(1)  # blockIdx.x * blockDim.x + threadIdx.x
    if i < x.shape[0]:  # the last block may have threads past the end
        out[i] = x[i] + 1


@cuda.jit
def reverse_tiles(x, out):
    """Reverse every tile of TILE elements, through shared memory."""
    tile = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    start = cuda.blockIdx.x * TILE
    tile[t] = x[start + t]
    cuda.syncthreads()  # every thread must have written before any thread reads a partner's cell
    out[start + t] = tile[TILE - 1 - t]


@cuda.jit
def gap_shared_leftovers(out):
    """Reads a shared cell before writing it: on a GPU that is garbage."""
    cells = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    out[cuda.blockIdx.x, t] = cells[t]
    cells[t] = cuda.blockIdx.x + 1


@cuda.jit
def gap_shift_right(x, out):
    """out[i] = x[i - 1], forgetting that i - 1 is -1 for the first thread."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i - 1]


@cuda.jit
def gap_barrier_in_branch(x):
    """Half the threads wait at a barrier the other half never reaches."""
    t = cuda.threadIdx.x
    if t < cuda.blockDim.x // 2:
        x[t] += 1
        cuda.syncthreads()


@cuda.jit
def gap_python_only(x, out):
    """A list comprehension: plain Python to the simulator, a TypingError to the GPU compiler."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = sum([x[j] for j in range(i + 1)])


@cuda.jit
def gap_missing_barrier(x, out):
    """Neighbour sum in shared memory without the barrier between the writes and the reads."""
    cells = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    cells[t] = x[t]
    out[t] = cells[t] + cells[(t + 1) % TILE]


def run_gap_shared_leftovers(blocks=2):
    out = cuda.to_device(np.zeros((blocks, TILE), np.float32))
    gap_shared_leftovers[blocks, TILE](out)
    return out.copy_to_host()


def run_gap_shift_right(n=8):
    x = np.arange(1, n + 1, dtype=np.float32)
    out = cuda.device_array(n, np.float32)
    gap_shift_right[1, n](cuda.to_device(x), out)
    return out.copy_to_host()


def run_gap_barrier_in_branch(threads=32):
    x = cuda.to_device(np.zeros(threads, np.float32))
    gap_barrier_in_branch[1, threads](x)
    return x.copy_to_host()


def run_gap_block_too_large(threads=2048):
    x = cuda.to_device(np.zeros(threads, np.float32))
    add_one[1, threads](x, x)
    return x.copy_to_host()


def run_gap_python_only(n=6):
    x = np.arange(n, dtype=np.float32)
    out = cuda.device_array(n, np.float32)
    gap_python_only[1, n](cuda.to_device(x), out)
    return out.copy_to_host()


def run_gap_missing_barrier():
    x = np.arange(TILE, dtype=np.float32)
    out = cuda.device_array(TILE, np.float32)
    gap_missing_barrier[1, TILE](cuda.to_device(x), out)
    return out.copy_to_host()


def _outcome_here(fn, args, stock, lines):
    from . import sim

    try:
        with sim.enabled(not stock):
            result = fn(*args)
    except Exception as error:  # the point is to show any error a student's kernel can raise
        text = "\n".join(str(error).splitlines()[:lines])
        return f"{type(error).__name__}: {text}"
    return f"no error; result:\n{np.array2string(np.asarray(result), precision=3, threshold=40)}"


def _verdict_here(run, x, stock):
    from . import sim
    from .check import with_poisoned_allocations

    try:
        with sim.enabled(not stock):
            result = with_poisoned_allocations(run, x)
    except Exception as error:  # the point is to show any error a student's kernel can raise
        return type(error).__name__
    result = result.copy_to_host() if hasattr(result, "copy_to_host") else np.asarray(result)
    bad = np.flatnonzero(result != np.cumsum(x))
    return "right" if bad.size == 0 else f"wrong from index {bad[0]}"


def verdict(run, x, *, stock=False):
    """Run the inclusive sum scan ``run(x)`` on the simulator: "right", "wrong from index k", or
    the name of the error it raised.

    ``x`` holds small integers (as floats), whose every partial sum is exact, so that any difference from
    ``numpy.cumsum`` is a wrong element; fresh device arrays are poisoned, as the checker poisons them. ``stock=True``
    uses numba's stock simulator. On a GPU machine the run happens in a child process that simulates.
    """
    return _child.on_simulator(_verdict_here, run, x, stock)


def outcome(fn, *args, stock=False, lines=4):
    """Run ``fn(*args)`` on the simulator and describe, in a few lines, its result or its error.

    ``stock=True`` uses numba's stock simulator instead of the classroom one. On a GPU machine
    the run happens in a child process that simulates, so the description is the same everywhere.
    """
    return _child.on_simulator(_outcome_here, fn, args, stock, lines)
