"""Blelloch's work-efficient scan (GPU Gems 3, ch. 39.2.2-39.2.3; the lab sheet on prefix sums): up-sweep, down-sweep.

For n = 2^k elements, the up-sweep builds a binary tree of partial sums in place, from the
leaves up: at level d = 0..k-1 every index ``i = 2^(d+1) - 1, 2 * 2^(d+1) - 1, ...`` adds
``x[i - 2^d]``, so ``x[i]`` becomes the sum of the 2^(d+1) elements ending at i, and ``x[n - 1]``
ends as the total. The down-sweep clears the root and walks back down, d = k-1..0: each node
passes its value (everything before its subtree) to its left child, and that value combined with
the left child's old sum (everything before the right subtree) to its right child. The leaves
end with the exclusive scan.

Work 2(n - 1) combines (a sequential scan needs n - 1), depth 2 log2(n) levels. A level only
ever touches disjoint pairs of cells, so one barrier per level suffices.

Three versions:

* :func:`blelloch_256_kernel` and :func:`blelloch_256`: the lab sheet's exercise exactly, 256
  elements, one block of 256 threads, one thread per index i active where the sheet's loop over
  i would visit it; integer or float sums.
* :func:`blelloch_tile_kernel`, registered as ``"blelloch"``: any op, dtype, direction and n.
  A block of ``block_size`` threads scans a tile of ``2 * block_size`` elements, two per thread
  (the GPU Gems layout); the exclusive scan comes from the tree and the inclusive one combines
  each element into it. Tile totals are carried by :func:`prefixsum.scans.tiles.scan_tiles`.
* The same with ``conflict_free=True`` (the default): GPU Gems 3's CONFLICT_FREE_OFFSET padding,
  for today's 32 banks (the book's GPUs had 16, so its macro shifted by 4). At level d the
  active threads touch indices 2^(d+1) apart, so in a shared memory of 32 banks of 4-byte words
  up to 32 of them hit the same bank and wait for each other. Storing index i at
  ``i + (i >> 5)`` shifts every run of 32 indices by one more bank, spreading those accesses
  over different banks. It changes where values live, never the result.
"""

import functools

import numpy as np
from numba import cuda

from ..core.registry import Capability
from ..primitives.fields import device_function, kernel
from .ops import device_op, identity, numba_type
from .registry import check_block_size
from .tiles import position, register_tiled

SEED_LENGTH = 256
"""The lab sheet exercise's fixed length, also its number of threads."""

_SEED_LEVELS = 8  # k = log2(SEED_LENGTH)

LOG_NUM_BANKS = 5
"""log2 of the number of shared-memory banks (32; GPU Gems 3's CONFLICT_FREE_OFFSET used 4, for 16)."""


# (a) The lab sheet's exercise: 256 elements, one block of 256 threads.


@functools.lru_cache(maxsize=None)
def blelloch_256_kernel(dtype):
    """Kernel ``(x, out)``: the exclusive prefix sums of 256 elements, launched ``[1, 256]``.

    The lab sheet's exercise: copy to shared memory, up-sweep, down-sweep, copy back, with a barrier
    after the copy in, after every level of both sweeps, and so before the copy out. ``dtype``
    is the element type (:func:`blelloch_256` allows int32 and float32).
    """
    element = numba_type(dtype)
    zero = identity("add", dtype)

    def blelloch_256_block(x, out):
        i = cuda.threadIdx.x
        tree = cuda.shared.array(SEED_LENGTH, element)
        tree[i] = x[i]
        cuda.syncthreads()
        for d in range(_SEED_LEVELS):  # up-sweep
            if (i + 1) % (2 << d) == 0:  # the sheet's i = 2^(d+1) - 1; i < n; i += 2^(d+1)
                tree[i] += tree[i - (1 << d)]
            cuda.syncthreads()
        if i == SEED_LENGTH - 1:
            tree[i] = zero  # no barrier: the first down-sweep level runs on this thread alone
        for d in range(_SEED_LEVELS - 1, -1, -1):  # down-sweep
            if (i + 1) % (2 << d) == 0:  # the same i as the up-sweep's level d
                parent = tree[i]
                tree[i] += tree[i - (1 << d)]
                tree[i - (1 << d)] = parent
            cuda.syncthreads()
        out[i] = tree[i]

    return cuda.jit(blelloch_256_block)


def blelloch_256(x):
    """Exclusive prefix sums of exactly 256 int32 or float32 values, by :func:`blelloch_256_kernel`.

    Parameters
    ----------
    x : numpy.ndarray
        1-D, 256 elements, int32 or float32. Not modified.

    Returns
    -------
    numpy.ndarray
        Same dtype; element i is ``x[0] + ... + x[i-1]`` (int32 sums wrap around).

    Raises
    ------
    ValueError
        ``x`` is not 1-D with 256 elements.
    TypeError
        ``x`` is neither int32 nor float32.

    Examples
    --------
    >>> import numpy as np
    >>> blelloch_256(np.ones(256, dtype=np.int32))[:4]
    array([0, 1, 2, 3], dtype=int32)
    """
    x = np.asarray(x)
    if x.shape != (SEED_LENGTH,):
        raise ValueError(f"blelloch_256 needs a 1-D array of {SEED_LENGTH} elements; got shape {x.shape}")
    if x.dtype not in (np.int32, np.float32):
        raise TypeError(f"blelloch_256 needs int32 or float32; got {x.dtype.name}")
    out = cuda.device_array(SEED_LENGTH, x.dtype)
    blelloch_256_kernel(x.dtype)[1, SEED_LENGTH](cuda.to_device(np.ascontiguousarray(x)), out)
    return out.copy_to_host()


# (b), (c) The general version: tiles of 2 * block_size elements, optional bank padding.


@functools.lru_cache(maxsize=None)
def tree_slot(conflict_free):
    """Device function ``slot(i)``: where tree index ``i`` lives in shared memory."""
    if conflict_free:
        return cuda.jit(device=True)(lambda i: i + (i >> LOG_NUM_BANKS))
    return cuda.jit(device=True)(lambda i: i)


def tree_cells(tile, conflict_free):
    """Shared-memory cells a tree of ``tile`` indices occupies (padding included)."""
    return tile + (tile >> LOG_NUM_BANKS) if conflict_free else tile


@functools.lru_cache(maxsize=None)
def blelloch_upsweep(op, dtype, tile, conflict_free):
    """Device function ``upsweep(tree, t)``: thread t's part in the up-sweep of a ``tile``-tree.

    Afterwards (all threads past the final barrier) the root, tree index ``tile - 1``, holds the
    tile's total. At the level where ``active`` nodes combine, node t joins the subtrees ending at
    ``offset * (2t + 1) - 1`` and ``offset * (2t + 2) - 1``.
    """
    combine = device_op(op, dtype)
    slot = tree_slot(conflict_free)

    def upsweep(tree, t):
        offset = 1
        active = tile >> 1
        while active > 0:
            cuda.syncthreads()
            if t < active:
                left = slot(offset * (2 * t + 1) - 1)
                right = slot(offset * (2 * t + 2) - 1)
                tree[right] = combine(tree[left], tree[right])
            offset <<= 1
            active >>= 1
        cuda.syncthreads()

    return device_function(upsweep, dtype, arrays=("tree",))


@functools.lru_cache(maxsize=None)
def blelloch_downsweep(op, dtype, tile, conflict_free):
    """Device function ``downsweep(tree, t)``: thread t's part in the down-sweep of a ``tile``-tree.

    Expects the up-swept tree with the identity at the root; leaves every index with the
    exclusive scan (all threads past the final barrier).
    """
    combine = device_op(op, dtype)
    slot = tree_slot(conflict_free)

    def downsweep(tree, t):
        offset = tile
        active = 1
        while active < tile:
            offset >>= 1
            cuda.syncthreads()
            if t < active:
                left = slot(offset * (2 * t + 1) - 1)
                right = slot(offset * (2 * t + 2) - 1)
                left_sum = tree[left]
                tree[left] = tree[right]
                tree[right] = combine(tree[right], left_sum)
            active <<= 1
        cuda.syncthreads()

    return device_function(downsweep, dtype, arrays=("tree",))


@functools.lru_cache(maxsize=None)
def from_exclusive(op, dtype, inclusive):
    """Device function ``(exclusive, element)``: what a lane stores, given its exclusive scan."""
    if inclusive:
        return device_op(op, dtype)
    return cuda.jit(device=True)(lambda exclusive, element: exclusive)


@functools.lru_cache(maxsize=None)
def blelloch_tile_kernel(op, dtype, inclusive, reverse, block_size, conflict_free):
    """Kernel ``(x, out, totals, n)``: block b scans tile b of ``2 * block_size`` elements."""
    tile = 2 * block_size
    neutral = identity(op, dtype)
    where = position(reverse)
    slot = tree_slot(conflict_free)
    upsweep = blelloch_upsweep(op, dtype, tile, conflict_free)
    downsweep = blelloch_downsweep(op, dtype, tile, conflict_free)
    result = from_exclusive(op, dtype, inclusive)
    cells = tree_cells(tile, conflict_free)
    element = numba_type(dtype)
    root = tile - 1

    def blelloch_tile(x, out, totals, n):
        tree = cuda.shared.array(cells, element)
        t = cuda.threadIdx.x
        start = cuda.blockIdx.x * tile
        # Thread t owns lanes t and t + block_size: consecutive threads load consecutive elements.
        a = start + t
        b = a + block_size
        element_a = x[where(a, n)] if a < n else neutral
        element_b = x[where(b, n)] if b < n else neutral
        tree[slot(t)] = element_a
        tree[slot(t + block_size)] = element_b
        upsweep(tree, t)
        if t == 0:  # the thread that wrote the root at the last level
            totals[cuda.blockIdx.x] = tree[slot(root)]
            tree[slot(root)] = neutral
        downsweep(tree, t)
        if a < n:
            out[where(a, n)] = result(tree[slot(t)], element_a)
        if b < n:
            out[where(b, n)] = result(tree[slot(t + block_size)], element_b)

    return kernel(blelloch_tile, dtype, arrays=("x", "out", "totals"))


def check_options(block_size, conflict_free):
    """Raise ValueError naming a bad ``block_size`` or ``conflict_free`` and the allowed values."""
    check_block_size("block_size", block_size)
    if not isinstance(conflict_free, bool):
        raise ValueError(f"option conflict_free={conflict_free!r} must be True or False")


ALGORITHM = register_tiled(
    "blelloch",
    blelloch_tile_kernel,
    items_per_thread=2,
    options={"block_size": 256, "conflict_free": True},
    check_options=check_options,
    summary="Blelloch: up-sweep then down-sweep of a tree, 2 elements per thread; work 2n, depth 2 log n",
    source="GPU Gems 3, ch. 39.2.2-39.2.3 (Harris, Sengupta, Owens 2007); the lab sheet on prefix sums",
    simulator_us_per_element=(75, 3300),
    capabilities=Capability.USER_OPERATOR,
)
