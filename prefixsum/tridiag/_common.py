"""Pieces shared by the tridiagonal kernels: the row algebra, the block layout, failure flags.

A system row is the 4-tuple ``(a_i, b_i, c_i, d_i)`` of ``a_i x_{i-s} + b_i x_i + c_i x_{i+s} = d_i``
at the current stride ``s``. Rows outside the system are identity rows ``(0, 1, 0, 0)``
(``x = 0``): they let every row be treated alike, at the boundaries and in the padding of a block.

Shared-memory layout (PCR and CR): a block solves ``per_block`` subsystems of ``m`` slots each;
slot ``j`` belongs to subsystem ``j // m`` of the block and is its row ``j % m`` (the notes'
``system = threadIdx.x / n``, ``tidx = threadIdx.x % n``, with a loop when there are more slots
than threads). Subsystem ``g`` of a launch at stride ``s`` is the interleaved set of columns
``g % s, g % s + s, g % s + 2s, ...`` of system ``g // s``: with ``s = 1`` these are the
systems themselves; after global PCR steps up to stride ``s`` they are the ``s`` independent
subsystems that PCR has split each system into.
"""

import functools
import math

import numpy as np
from numba import cuda

from ..core.hardware import MAX_SHARED_BYTES_PER_BLOCK, WARP_SIZE
from ..core.launch import Launcher
from ..core.workspace import reused  # noqa: F401  (the solvers' own buffers, by the name they import)

# The coefficient axis of a shared buffer: buf[A, j] is a_j, and so on.
A, B, C, D = 0, 1, 2, 3

# Failure codes in ``info``; a larger code wins (atomic max), so the report does not depend on
# which thread failed first.
NOT_FINITE = 1
ZERO_PIVOT = 2
SINGULAR = 3  # only the pivoting method can tell: no nonzero pivot in a column

SHARED_BYTES = MAX_SHARED_BYTES_PER_BLOCK  # a block's shared-memory budget (tests shrink it)
TARGET_ROWS = 256  # slots per block when systems are small: several systems share a block
MAX_THREADS = 256
GLOBAL_THREADS = 256


@cuda.jit(device=True)
def fail(info, system, code):
    """Record failure ``code`` for ``system`` (writes race harmlessly: all go through atomic max)."""
    cuda.atomic.max(info, system, code)


@cuda.jit(device=True)
def dominant_row(a, b, c):
    """Whether a row is strictly diagonally dominant, ``|b| > |a| + |c|`` (False for NaN): the
    rows on which the non-pivoting methods are backward stable (:mod:`.auto` routes a system with
    any other row to the pivoting solver)."""
    return abs(b) > abs(a) + abs(c)


@cuda.jit(device=True)
def store(x, info, system, i, value):
    """Write one solution value, reporting it if it is NaN or infinite."""
    x[system, i] = value
    if not math.isfinite(value):
        fail(info, system, NOT_FINITE)


@cuda.jit(device=True)
def reduce_row(left, row, right):
    """Eliminate ``x_{i-s}`` and ``x_{i+s}`` from ``row`` with its neighbours at stride ``s``.

    The result couples ``x_{i-2s}, x_i, x_{i+2s}``. Returns ``(new_row, ok)``; on a zero pivot
    ``ok`` is False and ``row`` comes back unchanged, so no thread divides by zero (the simulator
    would warn, and the caller reports the failure anyway).
    """
    al, bl, cl, dl = left
    ai, bi, ci, di = row
    ar, br, cr, dr = right
    if bl == 0 or br == 0:
        return row, False
    k1 = ai / bl
    k2 = ci / br
    return (-al * k1, bi - cl * k1 - ar * k2, -cr * k2, di - dl * k1 - dr * k2), True


@cuda.jit(device=True)
def slot(buf, j):
    """Row ``j`` of a shared buffer laid out as ``buf[coefficient, j]``."""
    return buf[A, j], buf[B, j], buf[C, j], buf[D, j]


@cuda.jit(device=True)
def put(buf, j, row):
    buf[A, j], buf[B, j], buf[C, j], buf[D, j] = row


@cuda.jit(device=True)
def locate(j, m, per_block, stride, n, subsystems):
    """Where slot ``j`` of this block lives: ``(system, column, row, real)``.

    ``row`` is the slot's row within its subsystem, ``column`` its index in the system's arrays,
    and ``real`` is False for padding (past the end of a short subsystem or of the last block).
    """
    g = cuda.blockIdx.x * per_block + j // m
    row = j % m
    column = g % stride + row * stride
    return g // stride, column, row, g < subsystems and column < n


@cuda.jit(device=True)
def load(a, b, c, d, buf, j, m, per_block, stride, n, subsystems):
    """Fill slot ``j`` from global memory, identity rows for padding.

    ``a`` of a subsystem's first row and ``c`` of its last are set to 0, whatever the arrays hold:
    that is how ``a[..., 0]`` and ``c[..., -1]`` are ignored.
    """
    system, i, row, real = locate(j, m, per_block, stride, n, subsystems)
    load_row(a, b, c, d, buf, j, system, i, row, real, stride)


@cuda.jit(device=True)
def load_row(a, b, c, d, buf, j, system, i, row, real, stride):
    """Fill slot ``j`` with row ``row`` (column ``i`` of ``system``) of its subsystem at
    ``stride``, or with the identity row if it is padding (``real`` False); see :func:`load`."""
    zero = b.dtype.type(0)
    if real:
        put(
            buf,
            j,
            (
                a[system, i] if row > 0 else zero,
                b[system, i],
                c[system, i] if i + stride < b.shape[1] else zero,
                d[system, i],
            ),
        )
    else:
        put(buf, j, (zero, b.dtype.type(1), zero, zero))


def shared_launch(launcher, arrays, x, info, stride, buffers, stream=None):
    """Launch a shared-memory kernel (through its :class:`~prefixsum.core.launch.Launcher`) over
    all subsystems at ``stride``.

    ``arrays`` are the (batch, n) device arrays a, b, c, d; ``buffers`` is how many four-row
    buffers the kernel keeps per slot (2 for PCR's ping-pong, 1 for CR's in-place reduction);
    ``stream``: a :class:`~prefixsum.core.streams.Stream`, or None for numba's default stream.
    """
    batch, n = x.shape
    m = -(-n // stride)
    subsystems = batch * stride
    per_block = max(1, min(TARGET_ROWS // m, subsystems))
    rows = per_block * m
    threads = min(-(-rows // WARP_SIZE) * WARP_SIZE, MAX_THREADS)
    blocks = -(-subsystems // per_block)
    shared = buffers * 4 * rows * x.dtype.itemsize
    launcher(blocks, threads, *arrays, x, info, stride, m, per_block, shared=shared, stream=stream)


@functools.lru_cache(maxsize=None)
def launchers(kernels, dtype):
    """``{kernel: Launcher}`` for every kernel that a method's ``kernels(dtype)`` yields, made once
    per method and dtype: every launch of every method skips numba's dispatcher, whose host time
    (``benchmarks/tridiag_call_profile.py``) would otherwise be most of a batch's whole call."""
    return {kernel: Launcher(kernel, argtypes) for kernel, argtypes in kernels(dtype)}


def no_route():
    """The ``route`` of a call without :mod:`.auto`'s dominance test (``call`` 0: never read)."""
    return reused(("no route",), lambda: cuda.to_device(np.zeros(1, np.int32)))


def work_rows(batch, n, dtype, stream=None):
    """Two (4, batch, n) work arrays for global steps, each with its rows ``(a, b, c, d)`` as
    (batch, n) views: made once per thread, stream and shape (:func:`prefixsum.core.workspace.reused`),
    views included, since slicing a numba device array costs host time of the order of a launch."""

    def make():
        work = [cuda.device_array((4, batch, n), dtype) for _ in range(2)]
        return [(out, (out[A], out[B], out[C], out[D])) for out in work]

    return reused(("work", batch, n, dtype), make, stream)


def max_rows(dtype, buffers):
    """The most slots a block can hold in ``SHARED_BYTES`` with ``buffers`` four-row buffers."""
    return SHARED_BYTES // (buffers * 4 * dtype.itemsize)
