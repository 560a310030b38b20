"""The classroom CUDA simulator: numba's simulator, made faster and stricter.

numba's CUDA simulator runs every CUDA thread as an OS thread, so a kernel with barriers spends
most of its time handing the GIL from thread to thread, and it quietly accepts code that fails or
misbehaves on a GPU. This module replaces how a simulated kernel *runs* while keeping everything
else of numba's simulator (``cuda.jit``, device arrays, copies, streams); kernel code needs no
change.

Activation
----------
``install()`` patches numba's simulator in place and returns True; it is idempotent, and does
nothing (returning False) unless numba's simulator is selected (``numba.config.ENABLE_CUDASIM``).
``prefixsum`` calls it on import. Afterwards::

    with prefixsum.sim.enabled(False):   # numba's stock simulator, e.g. to compare
        kernel[blocks, threads](x)
    prefixsum.sim.is_enabled()           # True when the next launch runs here

``enabled(flag)`` takes effect when called; used in a ``with`` statement it restores the previous
setting on exit (``allow_negative_indices`` and ``access_hook`` work the same way).

How a launch runs
-----------------
Blocks run one after another, in CUDA's linear order (x fastest). Each thread of a block is a
greenlet on the launching OS thread: threads run in turn, in linear order, each until it reaches a
barrier (``cuda.syncthreads`` and its ``_count``/``_and``/``_or`` variants) or returns; when every
thread of the block waits at the same barrier, all are released. Scheduling is therefore
deterministic: a run gives the same results, the same errors and the same error messages every
time. Two threads never interleave between two barriers, so a data race inside one barrier phase
is not randomly exposed; the access hook below lets a tracer find such races instead. A thread
also stops at a warp-level call (``shfl_*_sync``, ``syncwarp``, votes; see below) until the lanes
its mask names have all arrived there.

Strictness (all launches; each rule names the kernel, the block and the thread)
--------------------------------------------------------------------------------
* Shared memory is filled with a poison value at the start of every block: NaN for floating-point
  types, True for booleans, and the byte 0x5A repeated for everything else (``0x5A5A5A5A`` =
  1515870810 for ``int32``); see :func:`poison_value`. Local arrays (``cuda.local.array``) are
  poisoned too. Every ``cuda.shared.array`` call site gets its own array, also when two are on one
  source line (numba's simulator makes those alias).
* A negative index into a global, shared or local array raises :class:`NegativeIndexError`.
  numba wraps it as Python does, on a GPU as well, so ``x[i - 1]`` at ``i = 0`` silently reads
  the last element. ``allow_negative_indices()`` (or ``with allow_negative_indices(): ...``)
  permits it; ``allow_negative_indices(False)`` restores the check.
* A barrier that not every thread of the block reaches -- some threads have returned while others
  wait, or threads wait at different ``syncthreads`` call sites -- raises
  :class:`BarrierDivergenceError`, listing which threads are where.
* A launch a GPU refuses raises :class:`LaunchError`: more than 1024 threads per block, a block
  dimension over its limit (x, y <= 1024, z <= 64), a zero dimension, a grid over its limit, or
  more than 48 KiB of shared memory per block. ``cuda.cg.this_grid().sync()`` in a grid of more
  than one block raises NotImplementedError (blocks run one after another here).
* Overflow in numpy scalar arithmetic wraps silently, as GPU arithmetic does: numpy's
  RuntimeWarning is off inside simulated threads, and an integer too large for the element type
  is stored wrapped to its width instead of raising OverflowError.

Error messages
--------------
An exception raised in a simulated thread keeps its type and gets the context added below its
message: the kernel, the block and thread, and every kernel-source frame (file, line and the
line's text), for example::

    NegativeIndexError: negative index x[-1] into global array 'x' (float32, shape (8,)); ...
      in kernel 'shift', block (0, 0, 0) thread (0, 0, 0)
      at /home/me/kernels.py:12 in shift
          out[i] = x[i - 1]

Indices always print as ``block (3, 0, 0) thread (17, 0, 0)``; to sanitize them (nbval), match
``block \\(\\d+, \\d+, \\d+\\) thread \\(\\d+, \\d+, \\d+\\)``. An index outside an array raises
IndexError naming the array; an exception type that cannot be rebuilt with a message becomes
:class:`KernelError`.

The access hook (for tracers)
-----------------------------
``with access_hook(callback): kernel[...](...)`` calls ``callback(access)`` for every element
read, write and atomic operation on a global, shared or local array in a launch started inside the
``with``. ``access`` is an :class:`Access` named tuple: kernel name, block and thread (tuples),
array name (the kernel parameter's name for a global array, the assigned variable's name for a
shared or local one), memory space, the element's index in that array (views and records are
mapped back to the array), kind (``"read"``, ``"write"`` or ``"atomic"``), the value read or
stored, the thread's barrier phase, the kernel source file and line, and the array's shape and
dtype::

    accesses = []
    with prefixsum.sim.access_hook(accesses.append):
        kernel[blocks, threads](x, out)
    shared_writes = [a for a in accesses if a.space == "shared" and a.kind == "write"]

The phase is a Lamport clock of synchronisation: 0 at the start, and at every barrier (and at a
``syncwarp``, for the lanes meeting there) the threads that meet leave with one more than the
highest phase among them. Where threads pass only barriers, it is the number of barriers passed.
Two accesses of two threads of a block with equal phases are never ordered by a barrier or a
``syncwarp``, so a tracer flagging equal phases reports no false races; it can miss a race
between two warps when one of them has passed a ``syncwarp`` since the last barrier.

Launches started without a hook use arrays without the reporting code, so the hook costs nothing
when unused. A nested ``access_hook`` replaces the outer one until it exits; an exception raised
by the callback aborts the launch like one raised by the kernel.

Warp-level calls
----------------
numba's simulator has none; here ``cuda.syncwarp``, ``shfl_sync``, ``shfl_up_sync``,
``shfl_down_sync``, ``shfl_xor_sync``, ``ballot_sync``, ``all_sync``, ``any_sync``,
``eq_sync``, ``match_any_sync``, ``match_all_sync``, ``activemask`` and ``lanemask_lt`` work as
on a GPU, with numba-cuda's signatures and operand types: the shuffles have no ``width``
argument (numba always shuffles across the whole warp: sub-warp segments are index arithmetic
in the kernel), and they take int32, int64, float32 and float64 values only, as numba's
compiler does (an unsigned value raises TypeError here and is a TypingError on a GPU; shuffle
its bits as the signed type of its width). Warps are 32 consecutive threads in linear order.

* A call with a mask is a rendezvous: the calling lane waits until every lane named in its mask
  waits at the same call (the same source line and instruction) with the same mask; then all
  get their results and run on. :class:`WarpDivergenceError` (a BarrierDivergenceError) names
  the lanes and where each waits when that cannot happen: the caller is not in its own mask; the
  mask names a lane that has returned, or that the block does not have (a partial last warp:
  pass the mask of the lanes that exist); a named lane makes the same call with another mask, or
  waits elsewhere while nothing else in the block can move. (A GPU of compute capability 7.0 or
  later lets lanes meet at different ``syncwarp`` or shuffle call sites, and ignores exited
  lanes; portable code does neither, so the simulator refuses both.)
* Shuffles follow PTX's ``shfl.sync`` with the clamp values numba passes: the lane or delta
  operand is taken modulo 32 (bits 4..0; a delta of 33 is a delta of 1); ``shfl_sync`` reads
  lane ``src_lane % 32``; ``shfl_up_sync`` and ``shfl_down_sync`` return the caller's own value
  when ``lane - delta < 0`` or ``lane + delta > 31``; ``shfl_xor_sync`` reads ``lane ^ mask``.
  A 64-bit value moves whole. Reading a lane outside the mask is undefined on a GPU; here it
  returns the poison of the value's type (:func:`poison_value`: NaN, or 0x5A5A... for integers),
  so a result that depends on it shows.
* ``ballot_sync`` and ``match_any_sync`` return the lane mask as numba types it, a signed int32
  (lane 31 set makes it negative); ``match_all_sync`` returns ``(mask or 0, bool)``;
  ``all_sync``, ``any_sync`` and ``eq_sync`` return a bool, over the lanes of the mask only.
  ``activemask()`` and ``lanemask_lt()`` return uint32.
* ``activemask()`` has no mask to wait for. On a GPU it returns the lanes that happen to execute
  it together, which the hardware does not promise; here it waits until no thread of the block
  can move without it, then returns, in each warp, the lanes waiting at the call earliest in the
  source (lanes at a later call wait on, so that lanes that went around a branch catch up with
  them, as a GPU reconverges a warp): inside ``if lane < 10`` that is 0x3FF, as on GPUs in
  practice, and in uniform code every lane that has not returned.
* ``syncwarp(mask)`` orders memory among the lanes of its mask, so it counts in the ``phase``
  of the access hook (below). Shuffles and votes exchange registers only: they order no memory
  accesses, on a GPU either, and leave the phase alone.

Limits: one launch at a time, as in numba's simulator.
"""
import contextlib
import contextvars
import linecache
import os
import re
import sys
from typing import NamedTuple

import greenlet
import numba
import numpy as np
from numba.cuda.simulator import kernel as _stock_kernel
from numba.cuda.simulator import kernelapi as _stock_api
from numba.cuda.simulator.cudadrv.devicearray import FakeShape

from ..core import device

__all__ = [
    "Access", "BarrierDivergenceError", "KernelError", "LaunchError", "NegativeIndexError",
    "POISON_BYTE", "SimError", "WarpDivergenceError", "access_hook", "allow_negative_indices",
    "enabled", "install", "is_enabled", "poison_value",
]

POISON_BYTE = 0x5A
"""The byte that fills unwritten shared and local memory of non-floating, non-boolean types."""
_MAX_THREADS_PER_BLOCK = 1024
_MAX_BLOCK_DIM = (1024, 1024, 64)
_MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
_MAX_SHARED_BYTES = 48 * 1024

_stock_call = None  # FakeCUDAKernel.__call__ as numba defines it; set by install()
_enabled = True
_allow_negative = False
_hook = None
_launch = None  # the _Launch running now, if any

_THIS_FILE = __file__
# Frames from these files are the simulator's, not the student's: error messages skip them.
_LIBRARY_FILES = (
    _THIS_FILE,
    contextlib.__file__,
    os.path.dirname(numba.__file__) + os.sep,
    os.path.dirname(os.path.dirname(_stock_kernel.__file__)) + os.sep,
    os.path.dirname(np.__file__) + os.sep,
    os.path.dirname(greenlet.__file__) + os.sep,
)
_STOCK_LOCAL = _stock_api.FakeCUDALocal()  # numba's allocator: converts numba types to dtypes
_STOCK_ATOMIC = _stock_api.FakeCUDAAtomic()
# numba-cuda's simulator and numba's built-in one (macOS) keep wrap_arg in different modules,
# each next to the ArgHint its kernel module uses.
_wrap_arg = sys.modules[_stock_kernel.ArgHint.__module__].wrap_arg


class SimError(Exception):
    """Base class of the errors this simulator adds to numba's."""


class NegativeIndexError(SimError, IndexError):
    """A negative index into a device array (see :func:`allow_negative_indices`)."""


class BarrierDivergenceError(SimError, RuntimeError):
    """Not every thread of a block reached the same barrier."""


class LaunchError(SimError, ValueError):
    """A launch configuration or resource use that a GPU refuses."""


class WarpDivergenceError(BarrierDivergenceError):
    """The lanes named in the mask of a warp-level call did not all make that call."""


class KernelError(SimError, RuntimeError):
    """An exception from a simulated thread whose own type cannot carry the added context."""


class Access(NamedTuple):
    """One element access in a simulated launch, as passed to an :func:`access_hook` callback."""

    kernel: str
    """Name of the kernel function."""
    block: tuple
    """``(x, y, z)`` of the block."""
    thread: tuple
    """``(x, y, z)`` of the thread within its block."""
    array: str
    """Name of the array: a kernel parameter, or the variable a shared/local array is bound to."""
    space: str
    """``"global"``, ``"shared"`` or ``"local"``."""
    index: tuple
    """Index of the element in the array (for a record field, the field name comes last)."""
    kind: str
    """``"read"``, ``"write"`` or ``"atomic"``."""
    value: object
    """The value read, the value stored, or for an atomic the value after the operation."""
    phase: int
    """The thread's synchronisation clock: the barriers it has passed, when it used no ``syncwarp``
    (see the module's docstring)."""
    file: str
    """Source file of the kernel (or device function) line that made the access."""
    line: int
    """Line number in ``file``."""
    shape: tuple
    """Shape of the array (``index`` is an index into this shape)."""
    dtype: np.dtype
    """Element type of the array."""


class _Setting:
    """Set a module setting now; as a context manager, restore the previous value on exit."""

    def __init__(self, name, value):
        self._name = name
        self._previous = globals()[name]
        globals()[name] = value

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        globals()[self._name] = self._previous


def install():
    """Make this simulator run kernel launches of numba's simulator.

    Returns
    -------
    bool
        True when installed (now or before); False when numba's simulator is not selected, in
        which case nothing is changed.
    """
    global _stock_call
    if not numba.config.ENABLE_CUDASIM:
        return False
    if _stock_call is None:
        _stock_call = _stock_kernel.FakeCUDAKernel.__call__
        _stock_kernel.FakeCUDAKernel.__call__ = _call
        device.set_classroom_probe(is_enabled)
    return True


def enabled(flag=True):
    """Run launches here (True) or in numba's stock simulator (False).

    Parameters
    ----------
    flag : bool, default True

    Returns
    -------
    context manager
        The setting takes effect at once; used in a ``with`` statement, the previous setting is
        restored on exit.
    """
    return _Setting("_enabled", bool(flag))


def in_launch():
    """Whether a simulated launch is running now (a call from kernel code, not from the host)."""
    return _launch is not None


def is_enabled():
    """Whether the next kernel launch runs in this simulator (installed and enabled).

    Returns
    -------
    bool
    """
    return _stock_call is not None and _enabled


def allow_negative_indices(allow=True):
    """Permit (True) or refuse (the default) negative indices into device arrays.

    Parameters
    ----------
    allow : bool, default True

    Returns
    -------
    context manager
        The setting takes effect at once; used in a ``with`` statement, the previous setting is
        restored on exit.
    """
    return _Setting("_allow_negative", bool(allow))


def access_hook(callback):
    """Call ``callback(access)`` with an :class:`Access` for every array element access.

    Parameters
    ----------
    callback : callable or None
        Called in the simulated thread that makes the access, for launches started while the
        hook is set; None removes the hook.

    Returns
    -------
    context manager
        The hook is set at once; used in a ``with`` statement (the intended use), the previous
        hook is restored on exit.
    """
    return _Setting("_hook", callback)


def poison_value(dtype):
    """The value an unwritten shared or local array element of ``dtype`` reads as.

    Parameters
    ----------
    dtype : numpy dtype or anything ``np.dtype`` accepts

    Returns
    -------
    numpy scalar
        NaN for floating-point types, True for booleans, else :data:`POISON_BYTE` in every byte.
    """
    cell = np.empty(1, np.dtype(dtype))
    _poison(cell)
    return cell[0]


def _poison(ary):
    kind = ary.dtype.kind
    if kind in "fc":
        ary.fill(np.nan)
    elif kind == "b":
        ary.fill(True)
    else:
        ary.reshape(-1).view(np.uint8).fill(POISON_BYTE)


def _call(kernel, *args):
    """FakeCUDAKernel.__call__ once installed: a launch or, inside one, a device function call."""
    launch = _launch
    if launch is not None:
        launch.swap_cuda(kernel.fn)
        return kernel.fn(*args)
    if _enabled and not kernel._device and _stock_kernel._kernel_context is None:
        return _run(kernel, args)
    return _stock_call(kernel, *args)


def _run(kernel, args):
    global _launch
    grid_dim, block_dim = _stock_kernel.normalize_kernel_dimensions(
        kernel.grid_dim, kernel.block_dim
    )
    _check_launch(kernel, grid_dim, block_dim)
    launch = _Launch(kernel, grid_dim, block_dim, _Array if _hook is None else _TracedArray)
    write_back = []
    code = kernel.fn.__code__
    names = code.co_varnames[: code.co_argcount]
    kernel_args = [
        launch.argument(arg, names[i] if i < len(names) else f"arg{i}", write_back)
        for i, arg in enumerate(args)
    ]
    _launch = launch
    try:
        launch.run(kernel_args)
    finally:
        _launch = None
    for copy_back in write_back:
        copy_back()


def _check_launch(kernel, grid_dim, block_dim):
    problems = []
    threads = block_dim[0] * block_dim[1] * block_dim[2]
    if min(block_dim) < 1 or min(grid_dim) < 1:
        problems.append("every grid and block dimension must be at least 1")
    if threads > _MAX_THREADS_PER_BLOCK:
        problems.append(
            f"{threads} threads per block, but a block has at most {_MAX_THREADS_PER_BLOCK}"
        )
    if any(d > m for d, m in zip(block_dim, _MAX_BLOCK_DIM)):
        problems.append("blockDim is limited to x <= 1024, y <= 1024, z <= 64")
    if any(d > m for d, m in zip(grid_dim, _MAX_GRID_DIM)):
        problems.append("gridDim is limited to x <= 2**31 - 1, y <= 65535, z <= 65535")
    if kernel.dynshared_size > _MAX_SHARED_BYTES:
        problems.append(
            f"{kernel.dynshared_size} bytes of dynamic shared memory, but a block has at most "
            f"{_MAX_SHARED_BYTES}"
        )
    if problems:
        raise LaunchError(
            f"kernel '{kernel.fn.__name__}' cannot be launched with gridDim {_dim(grid_dim)}, "
            f"blockDim {_dim(block_dim)}: {'; '.join(problems)}. A GPU refuses this launch."
        )


def _dim(dims):
    return "(" + ", ".join(str(int(d)) for d in dims) + ")"


def _cuda_order(dims):
    """All (x, y, z) points of ``dims`` in CUDA's linear order (x fastest)."""
    nx, ny, nz = dims
    return [(x, y, z) for z in range(nz) for y in range(ny) for x in range(nx)]


class _Thread:
    """A simulated CUDA thread: its greenlet, and where it waits when at a barrier or warp call."""

    __slots__ = (
        "greenlet", "index", "linear", "dim3", "phase", "site", "line", "value", "mask", "resume",
    )

    def __init__(self, run, parent, index, linear):
        self.greenlet = greenlet.greenlet(run, parent)
        self.index = index
        self.linear = linear
        self.dim3 = _stock_api.Dim3(*index)
        self.phase = 0
        self.site = None  # (code, instruction offset, kind) of the barrier or warp call it waits at
        self.line = None
        self.value = None  # its operand: syncthreads_count/_and/_or's predicate, a warp call's
        self.mask = None  # a warp call's member mask (None at a block barrier and activemask)
        self.resume = None  # the arguments of its next switch: the kernel's, then a call's result


_REDUCE_BARRIER = {
    "syncthreads": lambda values: None,
    "syncthreads_count": lambda values: sum(1 for v in values if v),
    "syncthreads_and": lambda values: int(all(values)),
    "syncthreads_or": lambda values: int(any(values)),
    "grid.sync": lambda values: None,
}


def _synchronize(threads):
    """Advance the phases of ``threads`` meeting at a barrier or ``syncwarp``, as a Lamport clock.

    All leave with one more than the highest phase among them, so an access made after the
    meeting has a higher phase than any access made before it by any of them: two threads that
    touch one address with equal phases are not ordered by any barrier or ``syncwarp``.
    """
    phase = max(t.phase for t in threads) + 1
    for t in threads:
        t.phase = phase


def _lanes(mask):
    return [lane for lane in range(32) if mask >> lane & 1]


def _runs(numbers):
    """Sorted ``numbers`` as runs, e.g. ``0..3, 7``."""
    runs = []
    for k in numbers:
        if runs and runs[-1][1] == k - 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs)


def _as_int32(bits):
    """A 32-bit lane mask as numba's ballot and match functions return it: a signed int32."""
    return np.array(bits & 0xFFFFFFFF, np.uint32).view(np.int32)[()]


def _shuffle(source):
    """The resolver of a shuffle whose PTX source lane is ``source(lane, b)`` (b = b[4:0]).

    ``source`` returns None where PTX's range check fails: the lane then gets its own value.
    A source lane outside the mask gives an undefined value on a GPU; here it is the poison of
    the value's type, so that a result depending on it shows.
    """

    def resolve(members):
        values = {m.linear & 31: m.value[0] for m in members}
        results = []
        for m in members:
            value, b = m.value
            j = source(m.linear & 31, b & 31)
            if j is None:
                results.append(value)
            elif j in values:
                results.append(values[j])
            else:
                results.append(poison_value(np.asarray(value).dtype))
        return results

    return resolve


def _syncwarp(members):
    _synchronize(members)
    return [None] * len(members)


def _ballot(members):
    bits = sum(1 << (m.linear & 31) for m in members if m.value)
    return [_as_int32(bits)] * len(members)


def _match_any(members):
    bits = {}
    for m in members:
        bits[m.value] = bits.get(m.value, 0) | 1 << (m.linear & 31)
    return [_as_int32(bits[m.value]) for m in members]


def _match_all(members):
    same = len({m.value for m in members}) == 1
    result = (_as_int32(sum(1 << (m.linear & 31) for m in members) if same else 0), same)
    return [result] * len(members)


# What each warp-level call returns to the lanes that meet there (in lane order); activemask()
# meets no mask and is resolved by the scheduler itself.
_WARP_CALLS = {
    "syncwarp": _syncwarp,
    "shfl_sync": _shuffle(lambda lane, b: b),
    "shfl_up_sync": _shuffle(lambda lane, b: lane - b if lane >= b else None),
    "shfl_down_sync": _shuffle(lambda lane, b: lane + b if lane + b < 32 else None),
    "shfl_xor_sync": _shuffle(lambda lane, b: lane ^ b),
    "ballot_sync": _ballot,
    "all_sync": lambda members: [all(m.value for m in members)] * len(members),
    "any_sync": lambda members: [any(m.value for m in members)] * len(members),
    "eq_sync": lambda members: [len({m.value for m in members}) == 1] * len(members),
    "match_any_sync": _match_any,
    "match_all_sync": _match_all,
    "activemask": None,
}


class _Launch:
    """One kernel launch: runs the blocks and schedules the threads of each."""

    def __init__(self, kernel, grid_dim, block_dim, array_class):
        self.kernel = kernel
        self.name = kernel.fn.__name__
        self.grid_dim = grid_dim
        self.block_dim = block_dim
        self.array_class = array_class
        self.shared = _Shared(self, kernel.dynshared_size)
        self.module = _Module(self, grid_dim, block_dim, kernel.dynshared_size)
        self.block = None
        self.thread = None
        self._main = None
        self._aborting = False
        self._swapped = {}  # id(globals) -> (globals, the entries that held numba.cuda)

    def argument(self, arg, name, write_back):
        """A kernel argument as the threads see it; mirrors numba's simulator."""
        ty = None
        for extension in self.kernel.extensions:
            ty, arg = extension.prepare_args(ty, arg, stream=0, retr=write_back)
        if isinstance(arg, np.ndarray) and arg.ndim > 0:
            arg = _wrap_arg(arg).to_device(write_back)
        elif isinstance(arg, _stock_kernel.ArgHint):
            arg = arg.to_device(write_back)
        elif isinstance(arg, np.void):
            arg = _stock_kernel.FakeCUDAArray(arg)
        if isinstance(arg, _stock_kernel.FakeCUDAArray):
            ary = arg._ary
            record = () if isinstance(ary, np.void) else None
            return self.array_class(ary, name, "global", rec=record)
        return arg

    def swap_cuda(self, fn):
        """Point ``cuda`` in ``fn``'s module at the simulated module until the launch ends.

        numba's simulator swaps and restores the module's globals on every device function call;
        once per launch is enough and much cheaper.
        """
        key = id(fn.__globals__)
        if key not in self._swapped:
            from numba import cuda

            globs = fn.__globals__
            saved = {k: v for k, v in globs.items() if v is cuda}
            self._swapped[key] = (globs, saved)
            for k in saved:
                globs[k] = self.module

    def run(self, args):
        errstate = {"over": "ignore"}
        if self.kernel._debug:
            errstate["divide"] = "raise"  # as numba's simulator does for debug=True kernels
        with np.errstate(**errstate):
            context = contextvars.copy_context()
        self._main = greenlet.getcurrent()
        self.swap_cuda(self.kernel.fn)
        try:
            with _stock_kernel._push_kernel_context(self.module):
                for block in _cuda_order(self.grid_dim):
                    self._run_block(block, args, context)
        finally:
            for globs, saved in self._swapped.values():
                globs.update(saved)

    def _run_block(self, block, args, context):
        self.block = block
        self.module.blockIdx = _stock_api.Dim3(*block)
        self.shared.new_block()
        threads = [
            _Thread(self.kernel.fn, self._main, index, linear)
            for linear, index in enumerate(_cuda_order(self.block_dim))
        ]
        for t in threads:
            t.greenlet.gr_context = context.copy()
            t.resume = args
        self.warps = [threads[w:w + 32] for w in range(0, len(threads), 32)]
        ready = threads
        while ready:
            for t in ready:
                self.thread = t
                self.module.threadIdx = t.dim3
                try:
                    t.greenlet.switch(*t.resume)
                except Exception as exc:
                    self._abort(threads)
                    raise self._with_context(exc, t)
                except BaseException:
                    self._abort(threads)
                    raise
            try:
                ready = self._release(threads)
            except SimError:  # raised with its message built while the threads still wait
                self._abort(threads)
                raise

    def _release(self, threads):
        """The threads that may run on now that every live thread waits; [] when all returned.

        Warp-level calls whose lanes have all arrived go first, then ``activemask()`` (only
        when nothing else can move, so that every lane that can converge there has), then a
        block barrier, which needs every thread of the block.
        """
        live = [t for t in threads if not t.greenlet.dead]
        if not live:
            return []
        at_warp = [t for t in live if t.site[2] in _WARP_CALLS]
        if at_warp:
            return (self._release_warp_calls(at_warp) or self._release_activemask(at_warp)
                    or self._warp_deadlock(at_warp))
        if len(live) < len(threads) or len({t.site for t in live}) > 1:
            raise BarrierDivergenceError(self._divergence_message(threads))
        result = _REDUCE_BARRIER[live[0].site[2]]([t.value for t in live])
        _synchronize(live)
        for t in live:
            t.resume = (result,)
        return live

    def _release_warp_calls(self, at_warp):
        ready = []
        released = set()
        for t in at_warp:
            if t.mask is None or t.linear in released:  # activemask(), or met with a lower lane
                continue
            members = self._meeting(t)
            if members is None:
                continue
            for m, result in zip(members, _WARP_CALLS[t.site[2]](members)):
                m.resume = (result,)
                released.add(m.linear)
            ready.extend(members)
        return sorted(ready, key=lambda t: t.linear)

    def _meeting(self, t):
        """The lanes named in ``t``'s mask if all wait at ``t``'s call; None if some are elsewhere.

        Raises WarpDivergenceError when they never can all arrive: a named lane does not exist or
        has returned, or waits at the same call with another mask.
        """
        warp = self.warps[t.linear >> 5]
        lanes = _lanes(t.mask)
        absent = [lane for lane in lanes if lane >= len(warp)]
        if absent:
            threads = sum(len(w) for w in self.warps)
            raise WarpDivergenceError(self._warp_message(
                t, f"its mask names lanes {_runs(absent)}, which this block of {threads} threads "
                "does not have (pass the mask of the lanes that exist)"))
        named = [warp[lane] for lane in lanes]
        exited = [m.linear & 31 for m in named if m.greenlet.dead]
        if exited:
            raise WarpDivergenceError(self._warp_message(
                t, f"its mask names lanes {_runs(exited)}, which have returned from the kernel"))
        for m in named:
            if m.site == t.site and m.mask != t.mask:
                raise WarpDivergenceError(self._warp_message(
                    t, f"lane {m.linear & 31} makes the same call with mask 0x{m.mask:08x}"))
        if any(m.site != t.site for m in named):
            return None
        return named

    def _warp_deadlock(self, at_warp):
        """Raise for a warp-level call that waits for lanes that wait elsewhere, where no
        thread of the block can move on."""
        t = next(t for t in at_warp if t.mask is not None)
        warp = self.warps[t.linear >> 5]
        elsewhere = [lane for lane in _lanes(t.mask) if warp[lane].site != t.site]
        raise WarpDivergenceError(self._warp_message(
            t, f"lanes {_runs(elsewhere)}, named in its mask, wait elsewhere"))

    def _warp_message(self, t, problem):
        w = t.linear >> 5
        lines = [
            f"warp divergence in kernel '{self.name}', block {_dim(self.block)}, warp {w}: lane "
            f"{t.linear & 31} calls {t.site[2]}() with mask 0x{t.mask:08x}, and {problem}. Every "
            "lane named in the mask of a warp-level call must make the same call with the same "
            "mask (a GPU hangs or returns undefined values otherwise)"
        ]
        return "\n".join(lines + self._whereabouts(self.warps[w]))

    def _release_activemask(self, at_warp):
        """In each warp, the lanes at the ``activemask()`` call earliest in the source.

        Lanes waiting at a later call stay, so that lanes that went around a branch catch up
        with them there, as a GPU reconverges a warp after a branch.
        """
        earliest = {}  # warp -> (source position, site, lanes there)
        for t in at_warp:
            if t.site[2] == "activemask":
                w = t.linear >> 5
                position = (t.line, t.site[1])
                if w not in earliest or position < earliest[w][0]:
                    earliest[w] = (position, t.site, [])
                if t.site == earliest[w][1]:
                    earliest[w][2].append(t)
        ready = []
        for _, _, members in earliest.values():
            active = np.uint32(sum(1 << (m.linear & 31) for m in members))
            for m in members:
                m.resume = (active,)
            ready.extend(members)
        return sorted(ready, key=lambda t: t.linear)

    def wait(self, kind, value, mask, frame):
        """Called by a thread at a barrier or warp-level call: wait until it is released there."""
        if self._aborting:
            raise greenlet.GreenletExit
        t = self.thread
        t.site = (frame.f_code, frame.f_lasti, kind)
        t.line = frame.f_lineno
        t.value = value
        t.mask = mask
        return self._main.switch()

    def barrier(self, kind, value, frame):
        """Called by a thread at a block barrier: wait until the block is released there."""
        return self.wait(kind, value, None, frame)

    def _abort(self, threads):
        """Unwind every started thread, so that their ``finally`` blocks run now."""
        self._aborting = True
        for t in threads:
            if t.greenlet:
                with contextlib.suppress(Exception):
                    t.greenlet.throw()

    def _where(self, thread):
        return f"in kernel '{self.name}', block {_dim(self.block)} thread {_dim(thread.index)}"

    def _with_context(self, exc, thread):
        """``exc`` with the kernel, block, thread and source lines added to its message."""
        frames = [
            (frame.f_code.co_filename, lineno, frame.f_code.co_name)
            for frame, lineno in _walk_tb(exc.__traceback__)
            if not frame.f_code.co_filename.startswith(_LIBRARY_FILES)
        ]
        context = "  " + self._where(thread) + "".join(_source(*f) for f in frames)
        message = f"{exc}\n{context}" if str(exc) else context
        new = None
        if not isinstance(exc, KeyError):  # KeyError prints its message as a repr
            with contextlib.suppress(Exception):
                new = type(exc)(message)
        if new is None:
            new = KernelError(f"{type(exc).__name__}: {message}")
            new.__cause__ = exc
        new.__suppress_context__ = True
        return new.with_traceback(exc.__traceback__)

    def _divergence_message(self, threads):
        lines = [
            f"barrier divergence in kernel '{self.name}', block {_dim(self.block)}: every thread "
            "of a block must reach the same cuda.syncthreads() (a GPU hangs or computes garbage "
            "otherwise)"
        ]
        return "\n".join(lines + self._whereabouts(threads))

    @staticmethod
    def _whereabouts(threads):
        """One line (plus source) per place where some of ``threads`` wait or have returned."""
        groups = {}
        for t in threads:
            groups.setdefault(None if t.greenlet.dead else (t.site, t.mask), []).append(t)
        lines = []
        for where, members in groups.items():
            who = f"  {_thread_ranges(members)} ({len(members)} thread{'s' * (len(members) > 1)})"
            if where is None:
                lines.append(f"{who} returned from the kernel")
                continue
            (code, _, kind), mask = where
            at = _source(code.co_filename, members[0].line, code.co_name, "    ")
            call = f"{kind}()" if mask is None else f"{kind}() with mask 0x{mask:08x}"
            lines.append(f"{who} wait at {call}{at}")
        return lines


def _walk_tb(tb):
    while tb is not None:
        yield tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next


def _source(filename, lineno, function, indent="  "):
    text = linecache.getline(filename, lineno).strip()
    at = f"\n{indent}at {filename}:{lineno} in {function}"
    return at + f"\n{indent}    {text}" if text else at


def _thread_ranges(threads, most=6):
    """``threads`` (in linear order) as runs, e.g. ``threads (0, 0, 0)..(7, 0, 0), (9, 0, 0)``."""
    runs = []
    for t in threads:
        if runs and runs[-1][2] == t.linear - 1:
            runs[-1][1:] = [t.index, t.linear]
        else:
            runs.append([t.index, t.index, t.linear])
    parts = [_dim(a) if a == b else f"{_dim(a)}..{_dim(b)}" for a, b, _ in runs[:most]]
    if len(runs) > most:
        parts.append(f"and {len(runs) - most} more runs")
    word = "thread" if len(threads) == 1 else "threads"
    return f"{word} {', '.join(parts)}"


class _Module(_stock_api.FakeCUDAModule):
    """The ``cuda`` module as simulated threads see it."""

    # Plain attributes shadow the base class's properties: the scheduler sets them per thread
    # and per block, so reading ``cuda.threadIdx`` costs no lookup of the current thread.
    threadIdx = None
    blockIdx = None

    def __init__(self, launch, grid_dim, block_dim, dynshared_size):
        super().__init__(grid_dim, block_dim, dynshared_size)
        self._launch = launch
        self._shared = launch.shared
        self._local = _Local(launch)
        self._atomic = _Atomic()
        self._cg = _CooperativeGroups(launch)

    def __getattr__(self, name):
        raise AttributeError(f"cuda.{name} is not available in the CUDA simulator")

    @property
    def laneid(self):
        return self._launch.thread.linear % 32

    def syncthreads(self):
        self._launch.barrier("syncthreads", None, sys._getframe(1))

    def syncthreads_count(self, value):
        return self._launch.barrier("syncthreads_count", value, sys._getframe(1))

    def syncthreads_and(self, value):
        return self._launch.barrier("syncthreads_and", value, sys._getframe(1))

    def syncthreads_or(self, value):
        return self._launch.barrier("syncthreads_or", value, sys._getframe(1))

    # Warp-level calls, with numba's signatures (no ``width``: numba's shuffles always use the
    # whole warp) and the operand types its compiler accepts.

    def syncwarp(self, mask=0xFFFFFFFF):
        self._warp("syncwarp", mask, None)

    def shfl_sync(self, mask, value, src_lane):
        return self._shuffle("shfl_sync", mask, value, src_lane)

    def shfl_up_sync(self, mask, value, delta):
        return self._shuffle("shfl_up_sync", mask, value, delta)

    def shfl_down_sync(self, mask, value, delta):
        return self._shuffle("shfl_down_sync", mask, value, delta)

    def shfl_xor_sync(self, mask, value, lane_mask):
        return self._shuffle("shfl_xor_sync", mask, value, lane_mask)

    def ballot_sync(self, mask, predicate):
        return self._warp("ballot_sync", mask, _predicate("ballot_sync", predicate))

    def all_sync(self, mask, predicate):
        return self._warp("all_sync", mask, _predicate("all_sync", predicate))

    def any_sync(self, mask, predicate):
        return self._warp("any_sync", mask, _predicate("any_sync", predicate))

    def eq_sync(self, mask, predicate):
        return self._warp("eq_sync", mask, _predicate("eq_sync", predicate))

    def match_any_sync(self, mask, value):
        return self._warp("match_any_sync", mask, _bits(_shuffled("match_any_sync", value)))

    def match_all_sync(self, mask, value):
        return self._warp("match_all_sync", mask, _bits(_shuffled("match_all_sync", value)))

    def activemask(self):
        return self._launch.wait("activemask", None, None, sys._getframe(1))

    def lanemask_lt(self):
        return np.uint32((1 << self.laneid) - 1)

    def _shuffle(self, kind, mask, value, operand):
        operand = _integer(kind, "lane or delta", operand)
        return self._warp(kind, mask, (_shuffled(kind, value), operand), frames_up=3)

    def _warp(self, kind, mask, value, frames_up=2):
        mask = _integer(kind, "mask", mask) & 0xFFFFFFFF
        lane = self.laneid
        if not mask >> lane & 1:
            raise WarpDivergenceError(
                f"cuda.{kind}(): the calling lane {lane} is not in its mask 0x{mask:08x} (the "
                "result is undefined on a GPU)"
            )
        return self._launch.wait(kind, value, mask, sys._getframe(frames_up))


_SHUFFLED_TYPES = (np.int32, np.int64, np.float32, np.float64)


def _shuffled(kind, value):
    """``value`` if numba's compiler lets ``kind`` take it; its shuffles and matches take 32- and
    64-bit signed integers and floats (a Python int is an int64, a float a float64)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, *_SHUFFLED_TYPES)):
        name = getattr(getattr(value, "dtype", None), "name", type(value).__name__)
        raise TypeError(
            f"cuda.{kind}() takes int32, int64, float32 or float64 values, not {name}: numba's "
            "compiler rejects it (for an unsigned value, shuffle its bits as the signed type "
            "of its width, e.g. uint32(cuda.shfl_sync(mask, int32(v), lane)))"
        )
    return value


def _bits(value):
    """What match_any/match_all compare: the bits of the value in its type."""
    return np.asarray(value).tobytes()


def _integer(kind, what, value):
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise TypeError(f"cuda.{kind}(): the {what} must be an integer, not {type(value).__name__}")


def _predicate(kind, value):
    if isinstance(value, (int, bool, np.integer, np.bool_)):
        return bool(value)
    raise TypeError(
        f"cuda.{kind}(): the predicate must be an integer or a boolean, not {type(value).__name__}"
    )


class _CooperativeGroups:
    def __init__(self, launch):
        self._launch = launch

    def this_grid(self):
        return _GridGroup(self._launch)


class _GridGroup:
    def __init__(self, launch):
        self._launch = launch

    def sync(self):
        launch = self._launch
        blocks = launch.grid_dim[0] * launch.grid_dim[1] * launch.grid_dim[2]
        if blocks > 1:
            raise NotImplementedError(
                f"cuda.cg.this_grid().sync() in a grid of {blocks} blocks cannot be simulated: "
                "the simulator runs blocks one after another"
            )
        launch.barrier("grid.sync", None, sys._getframe(1))


_site_names = {}  # (code, instruction offset) of an allocation -> (line number, array name)
_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][\w\s,]*?)\s*=[^=]")


def _site_name(frame, space):
    """The name of the array allocated at ``frame``'s current call: the variable it is bound to.

    With several allocations on one line (``a, b = cuda.shared.array(...), ...``) the n-th call
    site met on the line gets the n-th target; the first thread meets them in source order.
    """
    site = (frame.f_code, frame.f_lasti)
    known = _site_names.get(site)
    if known is None:
        lineno = frame.f_lineno
        nth = sum(
            1 for (code, _), (line, _) in _site_names.items()
            if code is frame.f_code and line == lineno
        )
        text = linecache.getline(frame.f_code.co_filename, lineno)
        match = _ASSIGNMENT.match(text)
        targets = [t.strip() for t in match.group(1).split(",")] if match else []
        if len(targets) == text.count(f"{space}.array(") and nth < len(targets):
            name = targets[nth]
        else:
            name = f"{space}@line{lineno}" + (f"#{nth + 1}" if nth else "")
        known = _site_names[site] = (lineno, name)
    return known[1]


class _Shared:
    """``cuda.shared``: one array per call site and block, poisoned at the start of the block."""

    def __init__(self, launch, dynamic_bytes):
        self._launch = launch
        self._dynamic_bytes = dynamic_bytes
        self.new_block()

    def new_block(self):
        self._arrays = {}
        self._names = set()
        self._dynamic = None
        self._bytes = self._dynamic_bytes

    def array(self, shape, dtype, alignment=None):
        """The block's shared array allocated at the caller's call site (``alignment`` is moot)."""
        frame = sys._getframe(1)
        array = self._arrays.get((frame.f_code, frame.f_lasti))
        if array is None:
            array = self._allocate(shape, dtype, frame)
        return array

    def _allocate(self, shape, dtype, frame):
        if shape == 0:  # dynamic shared memory: every such array starts at the same byte
            dtype = _STOCK_LOCAL.array(0, dtype).dtype
            fresh = self._dynamic is None
            if fresh:
                self._dynamic = np.empty(self._dynamic_bytes, np.uint8)
            count = self._dynamic_bytes // dtype.itemsize
            ary = self._dynamic[: count * dtype.itemsize].view(dtype)
            if fresh:  # poisoned as the first dtype asked for; others see its bytes
                _poison(ary)
        else:
            ary = _STOCK_LOCAL.array(shape, dtype)
            self._bytes += ary.nbytes
            if self._bytes > _MAX_SHARED_BYTES:
                raise LaunchError(
                    f"this block uses {self._bytes} bytes of shared memory, but a block has at "
                    f"most {_MAX_SHARED_BYTES}; a GPU refuses to compile or launch the kernel"
                )
            _poison(ary)
        name = _site_name(frame, "shared")
        if name in self._names:  # two call sites bind the same name: keep names unique
            name = f"{name}@{frame.f_lineno}"
        self._names.add(name)
        array = self._launch.array_class(ary, name, "shared")
        self._arrays[(frame.f_code, frame.f_lasti)] = array
        return array


class _Local:
    """``cuda.local.array``: a fresh poisoned array per call."""

    def __init__(self, launch):
        self._launch = launch

    def array(self, shape, dtype, alignment=None):
        ary = _STOCK_LOCAL.array(shape, dtype)
        _poison(ary)
        return self._launch.array_class(ary, _site_name(sys._getframe(1), "local"), "local")


class _Array:
    """A device array inside a simulated kernel: refuses negative indices, names itself in errors.

    ``_root`` is the array a view was taken from (None for that array itself) and ``_rec`` the
    index in the root of a record (a structured array's element), so that the access hook can
    report every access against the root.
    """

    __slots__ = ("_ary", "_name", "_space", "_root", "_rec")

    def __init__(self, ary, name, space, root=None, rec=None):
        init = object.__setattr__  # __setattr__ writes record fields
        init(self, "_ary", ary)
        init(self, "_name", name)
        init(self, "_space", space)
        init(self, "_root", root)
        init(self, "_rec", rec)

    def __getitem__(self, key):
        if key.__class__ is not int or key < 0:
            self._check_negative(key)
        try:
            value = self._ary[key]
        except IndexError as exc:
            raise self._bad_index(key, exc) from None
        if value.__class__ is np.ndarray or value.__class__ is np.void:
            return self._view(value, key)
        return value

    def __setitem__(self, key, value):
        if key.__class__ is not int or key < 0:
            self._check_negative(key)
        try:
            self._ary[key] = value
        except IndexError as exc:
            raise self._bad_index(key, exc) from None
        except OverflowError:  # numpy refuses a Python int out of range; a GPU keeps the low bits
            self._ary[key] = _wrap_to(self._ary.dtype, value)

    def _check_negative(self, key):
        if not _allow_negative:
            for k in key if key.__class__ is tuple else (key,):
                if (k.__class__ is int or isinstance(k, (int, np.integer))) and k < 0:
                    raise NegativeIndexError(self._negative_message(key))

    def _negative_message(self, key):
        message = f"negative index {self._show(key)} into {self._describe()}; "
        try:
            cell = self._cell(key)
        except (IndexError, TypeError):
            return message + "it is outside the array even when wrapped as Python does"
        return message + (
            f"numba wraps it as Python does, to {self._name}[{', '.join(map(str, cell))}], on a "
            "GPU as well: that is almost never intended (call "
            "prefixsum.sim.allow_negative_indices() if it is)"
        )

    def _bad_index(self, key, exc):
        return IndexError(f"{exc}: {self._show(key)} in {self._describe()}")

    def _show(self, key):
        parts = key if key.__class__ is tuple else (key,)
        return f"{self._name}[{', '.join(str(k) for k in parts)}]"

    def _describe(self):
        shape = tuple(int(d) for d in np.shape(self._ary))
        return f"{self._space} array '{self._name}' ({self._ary.dtype}, shape {shape})"

    def _view(self, value, key):
        rec = self._cell(key) if value.__class__ is np.void else None
        return self.__class__(value, self._name, self._space, root=self._root_array(), rec=rec)

    def _root_array(self):
        return self._ary if self._root is None else self._root

    def _cell(self, key):
        """The index in the root array of the element ``self[key]``."""
        if self._rec is not None:
            return self._rec + (key,)
        ary = self._ary
        parts = key if key.__class__ is tuple else (key,)
        if len(parts) != ary.ndim:
            raise IndexError(f"{len(parts)} indices for a {ary.ndim}-dimensional array")
        wrapped = [int(k) + d if k < 0 else int(k) for k, d in zip(parts, ary.shape)]
        if not all(0 <= k < d for k, d in zip(wrapped, ary.shape)):
            raise IndexError("index out of bounds")
        if self._root is None:
            return tuple(wrapped)
        root = self._root
        offset = ary.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        offset += sum(k * s for k, s in zip(wrapped, ary.strides))
        order = "F" if root.flags.f_contiguous and not root.flags.c_contiguous else "C"
        cell = np.unravel_index(offset // root.itemsize, root.shape, order=order)
        return tuple(int(i) for i in cell)

    def __getattr__(self, attr):
        if attr in _Array.__slots__:
            raise AttributeError(attr)
        try:
            value = getattr(self._ary, attr)
        except AttributeError:
            return self[attr]  # record field as attribute, as numba's simulator allows
        if value.__class__ is np.ndarray:
            return self._wrap_view(value)
        if callable(value):
            # Methods such as reshape, view or swapaxes return views of this memory: wrap them
            # too, or accesses through them would escape the checks and the access hook.
            def method(*args, **kwargs):
                result = value(*args, **kwargs)
                return self._wrap_view(result) if result.__class__ is np.ndarray else result

            return method
        return value

    def _wrap_view(self, value):
        """``value`` as an array of this class if it views this memory; a copy stays plain."""
        if not np.may_share_memory(value, self._root_array()):
            return value
        return self.__class__(value, self._name, self._space, root=self._root_array())

    def __setattr__(self, attr, value):
        self[attr] = value

    @property
    def shape(self):
        return FakeShape(self._ary.shape)

    def __len__(self):
        return len(self._ary)

    def __iter__(self):
        for i in range(len(self._ary)):
            yield self[i]

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._ary, dtype)

    def __repr__(self):
        return repr(self._ary)

    def __str__(self):
        return str(self._ary)


class _TracedArray(_Array):
    """An :class:`_Array` that reports every element access to the access hook."""

    __slots__ = ()

    def __getitem__(self, key):
        value = _Array.__getitem__(self, key)
        if not isinstance(value, _Array):
            _report(self, key, "read", value)
        return value

    def __setitem__(self, key, value):
        _Array.__setitem__(self, key, value)
        stored = self._ary[key]
        if stored.__class__ is np.ndarray:  # a slice assignment writes every element of a view
            view = self._view(stored, key)
            for index in np.ndindex(stored.shape):
                _report(view, index, "write", stored[index])
        else:
            _report(self, key, "write", stored)


def _report(array, key, kind, value):
    launch = _launch
    thread = launch.thread
    frame = sys._getframe(2)
    while frame.f_code.co_filename == _THIS_FILE:
        frame = frame.f_back
    root = array._root_array()
    _hook(Access(
        launch.name, launch.block, thread.index, array._name, array._space, array._cell(key),
        kind, value, thread.phase, frame.f_code.co_filename, frame.f_lineno, root.shape, root.dtype,
    ))


def _wrap_to(dtype, value):
    """``value`` wrapped to the width of integer ``dtype``, as a GPU stores it."""
    if dtype.kind not in "iu" or not isinstance(value, (int, np.integer)):
        raise OverflowError(f"{value} does not fit {dtype}")
    bits = dtype.itemsize * 8
    return np.array(int(value) & ((1 << bits) - 1), dtype=f"u{dtype.itemsize}").view(dtype)[()]


class _Atomic:
    """``cuda.atomic``: numba's operations, on checked indices, reported as one access."""

    def compare_and_swap(self, array, old, val):
        index = (0,) * np.ndim(array._ary if isinstance(array, _Array) else array)
        return _atomic(array, index, lambda raw: _STOCK_ATOMIC.compare_and_swap(raw, old, val))


def _atomic_method(name):
    operation = getattr(_STOCK_ATOMIC, name)

    def method(self, array, index, *values):
        return _atomic(array, index, lambda raw: operation(raw, index, *values))

    method.__name__ = name
    return method


# Every operation numba's simulator has (the set varies between numba versions).
for _name in dir(_stock_api.FakeCUDAAtomic):
    if not _name.startswith("_") and _name != "compare_and_swap":
        setattr(_Atomic, _name, _atomic_method(_name))
del _name


def _atomic(array, index, operation):
    if not isinstance(array, _Array):
        return operation(array)
    if index.__class__ is not int or index < 0:
        array._check_negative(index)
    try:
        old = operation(array._ary)
    except IndexError as exc:
        raise array._bad_index(index, exc) from None
    if isinstance(array, _TracedArray):
        _report(array, index, "atomic", array._ary[index])
    return old
