"""The limits a GPU puts on every launch, as numbers the simulator and the kernels share.

They hold for every GPU of compute capability 2.0 and later: the classroom simulator refuses a
launch beyond them, as a GPU does, and the scans and the tridiagonal solvers size their blocks
and their shared-memory tiles by them.
"""

WARP_SIZE = 32
"""Threads per warp: consecutive threads of a block, in linear order, scheduled together."""

MAX_THREADS_PER_BLOCK = 1024
"""Threads per block, over all three dimensions."""

MAX_BLOCK_DIM = (1024, 1024, 64)
"""The largest ``blockDim`` in x, y and z."""

MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
"""The largest ``gridDim`` in x, y and z."""

MAX_SHARED_BYTES_PER_BLOCK = 48 * 1024
"""Static shared memory per block (more needs dynamic shared memory and a per-kernel opt-in)."""
