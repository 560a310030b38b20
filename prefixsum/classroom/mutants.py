"""Deliberately broken scan kernels, each with the diagnosis the checker must give it.

Every mutant is the ladder scan (or a Hillis-Steele or tiling step) with one typical student
mistake. The chained scans (:func:`chained_tile` and its mutants) carry between blocks inside
one launch: each tile waits for the inclusive prefix of the tile before it, which that tile's
block publishes behind a fence and an atomic flag; their mutants are the mistakes of blocks
that talk to each other (no flags, no fence, waiting for a block dispatched later, polling with
a plain load). The test suite runs :func:`prefixsum.check.scan` on each and requires the diagnosis
listed here; :func:`allclose_catches` measures how many a single ``allclose`` on one
power-of-two input (the puzzle collections' check) would catch on numba's stock simulator.

All mutants compute an inclusive forward float32 sum with tiles of :data:`BLOCK` elements.
"""

import functools
import inspect
import math
import re
import textwrap
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import cuda, float32, int32

from ..primitives import fields
from . import child as _child, lessons, mistakes

BLOCK = 64


def _ladder_scan_tiles(tile_kernel, x, *, grid=None, carry=True):
    """Run ``tile_kernel`` on every tile of ``x``, then carry the totals (sequentially, on the host)."""
    n = len(x)
    source = cuda.to_device(x)
    out = cuda.device_array(n, np.float32)
    tiles = math.ceil(n / BLOCK)
    totals = cuda.device_array(tiles, np.float32)
    tile_kernel[grid or tiles, BLOCK](source, out, totals, n)
    if carry and tiles > 1:
        carries = np.cumsum(totals.copy_to_host()[:-1]).astype(np.float32)
        add_carries[tiles - 1, BLOCK](out, cuda.to_device(carries), n)
    return out


@cuda.jit
def add_carries(out, carries, n):
    i = (cuda.blockIdx.x + 1) * BLOCK + cuda.threadIdx.x
    if i < n:
        out[i] += carries[cuda.blockIdx.x]


def variant(fn, name, *edits, device=False, namespace=None):
    """``fn`` with a mistake made in its source, compiled as ``name``: how the mutants are made.

    Parameters
    ----------
    fn : numba kernel or device function
        The correct code (its ``py_func`` is read).
    name : str
        The variant's name (its kernel's name in the checker's messages).
    *edits : (str, str)
        Replacements applied in order to ``fn``'s source, as a
        :class:`~prefixsum.classroom.mistakes.Mistake`'s are (each ``old`` must occur).
    device : bool
        Compile a device function rather than a kernel.
    namespace : dict, optional
        Globals that replace ``fn``'s (another device function it calls, for instance).

    Returns
    -------
    numba kernel or device function
        Its source is kept by linecache, so the tracer, the checker and ``inspect.getsource``
        show the mutant as it runs.
    """
    original = fn.py_func
    source = textwrap.dedent(inspect.getsource(original))
    source = source[re.search(r"^def ", source, re.MULTILINE).start() :]  # without the decorator
    source = source.replace(f"def {original.__name__}(", f"def {name}(", 1)
    defined = fields.define(mistakes.edited(source, edits, name), name, {**original.__globals__, **(namespace or {})})
    return cuda.jit(device=device)(defined)


@cuda.jit(device=True)
def ladder_in_shared(rungs, x, i, n, t):
    """The ladder scan of one tile into ``rungs``, by thread ``t`` of the tile's ``BLOCK``."""
    rungs[t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    phase = 1
    while phase < BLOCK:
        if t & phase:
            rungs[t] += rungs[(t & ~(phase - 1)) - 1]
        cuda.syncthreads()
        phase <<= 1


@cuda.jit
def correct_tile(x, out, totals, n):
    rungs = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * BLOCK + t
    ladder_in_shared(rungs, x, i, n, t)
    if i < n:
        out[i] = rungs[t]
    if t == BLOCK - 1:
        totals[cuda.blockIdx.x] = rungs[t]


def _ladder_mutant(name, *edits):
    """:func:`correct_tile` with a mistake in its ladder: ``edits`` of :func:`ladder_in_shared`."""
    ladder = variant(ladder_in_shared, f"{name.removesuffix('_tile')}_ladder", *edits, device=True)
    return variant(correct_tile, name, namespace={"ladder_in_shared": ladder})


_STEP_END = "        cuda.syncthreads()\n        phase <<= 1\n"
_STORE = "        out[i] = rungs[t]\n"

missing_barrier_tile = _ladder_mutant(
    "missing_barrier_tile",
    (
        _STEP_END,
        "        phase <<= 1  # no barrier: the next phase reads cells this one is still writing\n    "
        "cuda.syncthreads()\n",
    ),
)
off_by_one_bound_tile = _ladder_mutant(
    "off_by_one_bound_tile",
    ("x[i] if i < n else", "x[i] if i <= n else"),
    ("float32(0)\n", "float32(0)  # <= reads one past the end\n"),
)
uninitialized_shared_tile = _ladder_mutant(
    "uninitialized_shared_tile",
    (
        "    rungs[t] = x[i] if i < n else float32(0)\n",
        "    if i < n:  # lanes past n are left as whatever shared memory held\n        rungs[t] = x[i]\n",
    ),
)
barrier_in_branch_tile = _ladder_mutant(
    "barrier_in_branch_tile",
    (
        _STEP_END,
        "            cuda.syncthreads()  # only the threads that worked wait here\n        phase <<= 1\n    "
        "cuda.syncthreads()\n",
    ),
)
# A wrong answer seen in class, for the stepper: each element adds the first cell of its own run,
# not the last cell of the run before.
wrong_partner_ladder = variant(
    ladder_in_shared,
    "wrong_partner_ladder",
    ("rungs[(t & ~(phase - 1)) - 1]", "rungs[t & ~(phase - 1)]  # the first cell of its own run"),
    device=True,
)
wrong_partner_tile = variant(correct_tile, "wrong_partner_tile", namespace={"ladder_in_shared": wrong_partner_ladder})
negative_index_tile = variant(
    correct_tile,
    "negative_index_tile",
    (_STORE, "        out[i] = rungs[t - 1]  # exclusive by shifting, but lane 0 reads rungs[-1]\n"),
)
write_past_n_tile = variant(
    correct_tile,
    "write_past_n_tile",
    ("    if i < n:\n" + _STORE, "    out[i] = rungs[t]  # the last tile writes past n\n"),
)
unwritten_last_element_tile = variant(
    correct_tile,
    "unwritten_last_element_tile",
    ("    if i < n:\n", "    if i < n - 1:  # off by one: the last element is never stored\n"),
)
shared_total_tile = variant(
    correct_tile,
    "shared_total_tile",
    (
        "        totals[cuda.blockIdx.x]",
        "        totals[0] = rungs[t]  # every block writes the same cell\n        totals[cuda.blockIdx.x]",
    ),
)
exclusive_wrong_identity_tile = variant(
    correct_tile,
    "exclusive_wrong_identity_tile",
    (_STORE, "        out[i] = rungs[t - 1] if t > 0 else float32(1)  # the identity of add is 0, not 1\n"),
)


@cuda.jit
def folding_power_of_two_tile(x, out, totals, n):
    cells = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * BLOCK + t
    cells[t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    m = min(BLOCK, n - cuda.blockIdx.x * BLOCK)
    stride = 1
    while 2 * stride <= m:  # stops early when the tile's length is not a power of two
        value = cells[t - stride] if t >= stride else float32(0)
        cuda.syncthreads()
        cells[t] += value
        cuda.syncthreads()
        stride <<= 1
    if i < n:
        out[i] = cells[t]
    if t == BLOCK - 1:
        totals[cuda.blockIdx.x] = cells[t]


@cuda.jit(device=True)
def hand_off(prefixes, flags, b, total):
    """Tile ``b``'s hand-off, by its last thread: wait until tile ``b - 1`` has published, publish
    the inclusive prefix of tiles ``0..b`` (``total`` is tile ``b``'s own sum) and return the sum
    of the tiles before ``b``."""
    before = float32(0)
    if b > 0:
        while cuda.atomic.add(flags, b - 1, 0) == 0:  # acquire: an atomic read of the flag
            pass
        before = prefixes[b - 1]
    prefixes[b] = before + total
    cuda.threadfence()  # the prefix reaches memory before the flag does
    cuda.atomic.add(flags, b, 1)  # release
    return before


@cuda.jit
def chained_tile(x, out, prefixes, flags, counter, n):
    rungs = cuda.shared.array(BLOCK, float32)
    tile = cuda.shared.array(1, int32)
    carry = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    if t == 0:  # tiles in the order blocks start: a tile's predecessor has started already
        tile[0] = cuda.atomic.add(counter, 0, 1)
    cuda.syncthreads()
    b = tile[0]
    i = b * BLOCK + t
    ladder_in_shared(rungs, x, i, n, t)
    if t == BLOCK - 1:
        carry[0] = hand_off(prefixes, flags, b, rungs[t])
    cuda.syncthreads()
    if i < n:
        out[i] = rungs[t] + carry[0]


@functools.lru_cache(maxsize=None)
def chained_tile_with(handing_off, name="chained_tile"):
    """:func:`chained_tile` with another hand-off (a device function
    ``(prefixes, flags, b, total) -> before``, as :func:`hand_off`), compiled as kernel ``name``."""
    return variant(chained_tile, name, namespace={"hand_off": handing_off})


@cuda.jit
def chained_without_flags_tile(x, out, prefixes, flags, counter, n):
    rungs = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    i = b * BLOCK + t
    ladder_in_shared(rungs, x, i, n, t)
    # the last element of the tile before, which block b - 1 stores in this same launch
    before = out[b * BLOCK - 1] if b > 0 else float32(0)
    if i < n:
        out[i] = rungs[t] + before


_RELEASE = (
    "    cuda.threadfence()  # the prefix reaches memory before the flag does\n"
    "    cuda.atomic.add(flags, b, 1)  # release\n"
)
hand_off_without_fence = variant(
    hand_off,
    "hand_off_without_fence",
    (_RELEASE, "    cuda.atomic.add(flags, b, 1)  # no threadfence: the flag may arrive before the prefix\n"),
    device=True,
)
hand_off_plain_poll = variant(
    hand_off,
    "hand_off_plain_poll",
    (
        "while cuda.atomic.add(flags, b - 1, 0) == 0:  # acquire: an atomic read of the flag",
        "while flags[b - 1] == 0:  # a plain load: compiled, it may be read once, and hang",
    ),
    device=True,
)
chained_without_fence_tile = chained_tile_with(hand_off_without_fence, "chained_without_fence_tile")
chained_plain_poll_tile = chained_tile_with(hand_off_plain_poll, "chained_plain_poll_tile")
chained_waits_for_later_block_tile = variant(
    chained_tile,
    "chained_waits_for_later_block_tile",
    (
        "    if t == 0:  # tiles in the order blocks start: a tile's predecessor has started already\n"
        "        tile[0] = cuda.atomic.add(counter, 0, 1)\n    cuda.syncthreads()\n    b = tile[0]\n",
        "    b = cuda.gridDim.x - 1 - cuda.blockIdx.x  # tile b - 1 belongs to a block dispatched later\n",
    ),
)


def chained_scan(kernel, x):
    """Run a chained tile ``kernel`` (:func:`chained_tile` or a mutant) on ``x`` in one launch.

    Returns the device array of the inclusive sum scan.
    """
    n = len(x)
    tiles = math.ceil(n / BLOCK)
    out = cuda.device_array(n, np.float32)
    prefixes = cuda.device_array(tiles, np.float32)
    flags = cuda.to_device(np.zeros(tiles, np.int32))
    counter = cuda.to_device(np.zeros(1, np.int32))
    kernel[tiles, BLOCK](cuda.to_device(x), out, prefixes, flags, counter, n)
    return out


@dataclass(frozen=True)
class Mutant:
    """A broken scan: ``run(x)`` returns its result; ``diagnosis`` is what the checker must say."""

    name: str
    mistake: str
    diagnosis: str
    run: Callable
    inclusive: bool = True
    hangs_stock: bool = False
    """Whether it never ends on numba's stock simulator (which runs blocks one after another)
    when it has more than one block."""


def _tiles(kernel, **kw):
    return lambda x: _ladder_scan_tiles(kernel, x, **kw)


hillis_steele_in_place_tile = lessons.hillis_steele_in_place_tile_kernel("add", np.float32, True, False, BLOCK)


def _chained(kernel):
    return lambda x: chained_scan(kernel, x)


MUTANTS = (
    Mutant("missing_barrier", "no barrier between phases", "race", _tiles(missing_barrier_tile)),
    Mutant("off_by_one_bound", "loads x[i] for i <= n", "out-of-bounds", _tiles(off_by_one_bound_tile)),
    Mutant(
        "negative_index",
        "exclusive shift reads rungs[t - 1] at t = 0",
        "out-of-bounds",
        _tiles(negative_index_tile),
        inclusive=False,
    ),
    Mutant(
        "uninitialized_shared",
        "lanes past n not filled with the identity",
        "uninitialized-read",
        _tiles(uninitialized_shared_tile),
    ),
    Mutant("hillis_steele_in_place", "Hillis-Steele in one buffer", "race", _tiles(hillis_steele_in_place_tile)),
    Mutant("missing_carry", "tile totals never carried", "wrong-result", _tiles(correct_tile, carry=False)),
    Mutant(
        "wrong_exclusive_identity",
        "exclusive scan starts from 1",
        "wrong-result",
        _tiles(exclusive_wrong_identity_tile),
        inclusive=False,
    ),
    Mutant("barrier_in_branch", "syncthreads inside the if", "barrier-divergence", _tiles(barrier_in_branch_tile)),
    Mutant("write_past_n", "stores out[i] without i < n", "out-of-bounds", _tiles(write_past_n_tile)),
    Mutant(
        "powers_of_two_only",
        "stride loop bounded by the tile length",
        "wrong-result",
        _tiles(folding_power_of_two_tile),
    ),
    Mutant("one_block_only", "launches a single block", "unwritten-output", _tiles(correct_tile, grid=1, carry=False)),
    Mutant("unwritten_last_element", "stores only i < n - 1", "unwritten-output", _tiles(unwritten_last_element_tile)),
    Mutant("blocks_share_a_total", "every block writes totals[0]", "race", _tiles(shared_total_tile)),
    Mutant(
        "chained_without_flags",
        "reads the tile before's last output with no flag",
        "race-between-blocks",
        _chained(chained_without_flags_tile),
    ),
    Mutant(
        "chained_without_fence",
        "raises the flag with no fence after the prefix",
        "stale-read",
        _chained(chained_without_fence_tile),
    ),
    Mutant(
        "chained_waits_for_later_block",
        "tiles numbered from the last block",
        "deadlock",
        _chained(chained_waits_for_later_block_tile),
        hangs_stock=True,
    ),
    Mutant(
        "chained_plain_poll", "polls the flag with a plain load", "plain-load-poll", _chained(chained_plain_poll_tile)
    ),
)

CORRECT = Mutant("ladder_tiles", "none", "pass", _tiles(correct_tile))
CORRECT_CHAINED = Mutant("chained", "none", "pass", _chained(chained_tile))


def allclose_catches(mutants=MUTANTS, n=BLOCK * 2, seed=0):
    """See :func:`_allclose_catches_here`; on a GPU machine it runs in a simulating child process.

    Two blocks by default: the fewest that show what one block hides (four catch the same
    mutants, in five times the time: the stock simulator runs a thread per GPU thread).
    """
    return _child.on_simulator(_allclose_catches_here, mutants, n, seed)


def _allclose_catches_here(mutants, n, seed):
    """How many mutants one ``allclose`` on one power-of-two input catches, on the stock simulator.

    That is the check of the puzzle collections: run once, compare with ``numpy.allclose``. A
    mutant counts as caught if the result differs or the run raises; one that never ends there
    (``hangs_stock``, on more than one block) is not run, and counts as caught: a student notices
    a hang, if not why.

    Returns
    -------
    dict
        ``{mutant name: caught (bool)}``.
    """
    from . import sim

    x = np.random.default_rng(seed).normal(size=n).astype(np.float32)
    caught = {}
    with sim.enabled(False), np.errstate(all="ignore"):
        for mutant in mutants:
            if mutant.hangs_stock and n > BLOCK:
                caught[mutant.name] = True
                continue
            expected = np.cumsum(x.astype(np.float64))
            if not mutant.inclusive:
                expected = np.concatenate([[0.0], expected[:-1]])
            try:
                result = mutant.run(x.copy())
                result = result.copy_to_host() if hasattr(result, "copy_to_host") else result
                caught[mutant.name] = not np.allclose(result, expected, rtol=1e-4, atol=1e-4)
            except Exception:
                caught[mutant.name] = True
    return caught
