"""Check a student's scan kernel: many sizes, poisoned memory, every launch traced.

The puzzle collections check a kernel with one ``allclose`` on one input, so a missing barrier,
an off-by-one bound or a race passes. :func:`scan` runs the student's function on random inputs
of many sizes (one element, a warp and its neighbours, one block and several), with every new
device array and all shared memory poisoned, records every memory access with
:mod:`prefixsum.trace`, and names the first thing that went wrong, with a hint.

Diagnoses, in the order they are looked for at each size:

``exception``, ``timeout``, ``out-of-bounds``, ``barrier-divergence`` (the run stopped),
``race``, ``uninitialized-read`` (the trace shows it, even when the numbers came out right),
``unwritten-output``, ``wrong-result`` (the numbers), and ``pass``.
"""
import contextlib
from dataclasses import dataclass

import numpy as np

from . import sim, trace as tracing
from .ops import check_dtype, check_op
from .testing import mismatches, poison_value, random_input

DEFAULT_SIZES = (1, 2, 31, 32, 33, 100, 255, 256, 257, 1000, 2049)
DIAGNOSES = ("pass", "wrong-result", "unwritten-output", "race", "out-of-bounds", "uninitialized-read",
             "barrier-divergence", "exception", "timeout")
_SEED = 20261121


@dataclass(frozen=True)
class CheckResult:
    """The verdict of a check; ``str()`` is one deterministic line (safe for nbval)."""

    passed: bool
    diagnosis: str
    name: str
    sizes: tuple
    size: int = None
    index: int = None
    hint: str = ""

    def __str__(self):
        if self.passed:
            return f"PASS {self.name}: {len(self.sizes)} sizes from {min(self.sizes)} to {max(self.sizes)}"
        where = f"n={self.size}" + ("" if self.index is None else f", index {self.index}")
        return f"FAIL {self.name}: {self.diagnosis} at {where}. {self.hint}".rstrip()

    __repr__ = __str__

    def __bool__(self):
        return self.passed


@contextlib.contextmanager
def _poisoned_allocations():
    """Fill every device array allocated inside with poison, as a GPU leaves garbage there."""
    from numba import cuda

    originals = {name: getattr(cuda, name) for name in ("device_array", "device_array_like")}

    def poisoning(allocate):
        def allocate_poisoned(*args, **kwargs):
            array = allocate(*args, **kwargs)
            if array.size:
                array.copy_to_device(np.full(array.shape, poison_value(array.dtype) if array.dtype in _POISONABLE else 0, array.dtype))
            return array
        return allocate_poisoned

    for name, allocate in originals.items():
        setattr(cuda, name, poisoning(allocate))
    try:
        yield
    finally:
        for name, allocate in originals.items():
            setattr(cuda, name, allocate)


_POISONABLE = {np.dtype(t) for t in ("int32", "uint32", "int64", "uint64", "float32", "float64")}


def _hint_for_error(error):
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    if isinstance(error, TimeoutError):
        return "timeout", "Stopped at the time limit: does every loop advance (phase <<= 1, stride *= 2)?"
    if isinstance(error, sim.BarrierDivergenceError):
        return "barrier-divergence", ("Not every thread reached the same cuda.syncthreads(): "
                                      "a barrier inside an if, or threads returning early. Move the barrier out of the branch.")
    if isinstance(error, IndexError):
        return "out-of-bounds", f"{text} Guard every access with i < n; x[i - 1] at i = 0 reads index -1."
    return "exception", f"{type(error).__name__}: {text}"


def _diagnose(run, x, op, inclusive, reverse):
    """``(diagnosis, index, hint)`` for one traced run of the student's function."""
    if run.error is not None:
        diagnosis, hint = _hint_for_error(run.error)
        return diagnosis, None, hint
    races = run.races()
    if races:
        race = races[0]
        if race.between_blocks:
            return "race", None, (f"{race.array}[{race.index}] in kernel '{race.kernel}': blocks {race.threads[0]} and "
                                  f"{race.threads[1]} both write it. No barrier orders blocks: give each block its own cells.")
        return "race", None, (f"{race.array}[{race.index}] in kernel '{race.kernel}': threads {race.threads[0]} and "
                              f"{race.threads[1]} of block {race.block} touch it in one barrier phase. "
                              "A cuda.syncthreads() is missing between a read and a write (or use two buffers).")
    uninitialized = run.uninitialized_reads()
    if uninitialized:
        r = uninitialized[0]
        return "uninitialized-read", None, (f"{r.array}[{r.index}] is read in block {r.block} before any thread wrote it: "
                                            "fill every cell (with the identity past n) before the barrier.")
    result = run.result
    if hasattr(result, "copy_to_host"):
        result = result.copy_to_host()
    if result is None or np.shape(result) != x.shape:
        return "exception", None, f"the function must return the scan of x, of shape {x.shape}; it returned {type(result).__name__} {np.shape(result)}"
    result = np.asarray(result)
    unwritten = np.flatnonzero(_is_poison(result))
    if unwritten.size:
        return "unwritten-output", int(unwritten[0]), "This element was never written: check the bound of the store and the last lanes and blocks."
    bad, _ = mismatches(result.astype(x.dtype, copy=False), x, op, inclusive=inclusive, reverse=reverse)
    if bad.size:
        return "wrong-result", int(bad[0]), ""
    return "pass", None, ""


def _is_poison(result):
    if result.dtype.kind == "f":
        return np.isnan(result)
    if result.dtype in _POISONABLE:
        return result == poison_value(result.dtype)
    return np.zeros(result.shape, bool)


def _wrong_result_hint(index, n, passed_sizes, exclusive):
    if index == 0 and exclusive:
        return "Element 0 of an exclusive scan is the identity of the operator."
    if passed_sizes and index >= 32 and index & (index - 1) == 0 and index >= max(s for s in passed_sizes if s <= index) // 2:
        return (f"Right below index {index}, wrong from it on: index {index} starts a new block. "
                "Is the carry (the total of the blocks before) missing?")
    if n & (n - 1) and any(s & (s - 1) == 0 for s in passed_sizes):
        return "Powers of two pass but this size does not: pad the last tile with the identity and guard i < n."
    return "Compare one phase of your update with the loop invariant on a small n."


def scan(fn, *, op="add", inclusive=True, reverse=False, dtype=np.float32, sizes=None, timeout=20.0, name=None):
    """Check ``fn``, a student's scan, against the reference.

    Parameters
    ----------
    fn : callable
        ``fn(x)`` takes a 1-D numpy array and returns its scan (numpy or device array),
        computed by the student's kernel(s).
    op, inclusive, reverse :
        Which scan ``fn`` computes (see :func:`prefixsum.scan`).
    dtype : numpy dtype
        Element type of the random inputs.
    sizes : sequence of int, optional
        Input lengths, smallest first (default :data:`DEFAULT_SIZES`).
    timeout : float
        Seconds before a run is stopped as hanging.
    name : str, optional
        Shown in the verdict (default: ``fn``'s name).

    Returns
    -------
    CheckResult
        ``passed``, ``diagnosis`` (one of :data:`DIAGNOSES`), the first failing ``size`` and
        ``index``, and a ``hint``; printed, one deterministic line.
    """
    check_op(op)
    dtype = check_dtype(dtype)
    sizes = tuple(sorted(sizes or DEFAULT_SIZES))
    name = name or getattr(fn, "__name__", "scan")
    if name == "<lambda>":
        name = "scan"
    passed_sizes = []
    for n in sizes:
        x = random_input(n, op, dtype, np.random.default_rng(_SEED + n))
        with _poisoned_allocations():
            run = tracing.record(fn, x.copy(), timeout=timeout)
        diagnosis, index, hint = _diagnose(run, x, op, inclusive, reverse)
        if diagnosis == "wrong-result":
            hint = _wrong_result_hint(index, n, passed_sizes, not inclusive)
        if diagnosis != "pass":
            return CheckResult(False, diagnosis, name, sizes, n, index, hint)
        passed_sizes.append(n)
    return CheckResult(True, "pass", name, sizes)


def tiled(tile_kernel, *, block_size, threads=None, op="add", dtype=np.float32, sizes=None, **kw):
    """Check a student's tile kernel ``(x, out, totals, n)`` run on every tile, with carries.

    The kernel scans tile b (``block_size`` elements) into ``out`` and writes its total to
    ``totals[b]``; the package scans the totals and carries them, as :func:`prefixsum.tiles.scan_tiles`
    does for every algorithm. Inclusive forward scans only.
    """
    from numba import cuda

    from .ladder import run as ladder_run
    from .tiles import scan_tiles

    def run_tiles(x):
        source = cuda.to_device(x)
        out = cuda.device_array(len(x), x.dtype)

        scan_tiles(source, out, tile_kernel, tile=block_size, threads=threads or block_size, op=op, reverse=False,
                   scan_totals=lambda totals, carries: ladder_run(totals, carries, op, True, False, 256))
        return out

    name = getattr(getattr(tile_kernel, "py_func", tile_kernel), "__name__", "tile kernel")
    return scan(run_tiles, op=op, dtype=dtype, sizes=sizes, name=name, **kw)
