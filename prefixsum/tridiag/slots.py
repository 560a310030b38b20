"""Where :mod:`.chunked`'s kernels keep a chunk's pairs and pivot rows: the shared-memory layouts, as device functions.

A block's shared memory holds *planes* of ``slots`` values each: the four planes ``a, b, c, d``
of the rows of the system (:func:`prefixsum.primitives.chunk.chunk_loaders`; thread ``t``'s
``2R`` rows from slot ``t (2R + 1)``), or the :data:`FIELDS` planes of the pairs of a reduced
system (:func:`pair_loader`; thread ``t``'s ``R`` pairs from slot ``t (R + 1)``): a pair is its
upper row's ``(w0, w1, w2, w3, r)`` (window coefficients and right-hand side,
:mod:`.elimination`), then its lower row's. One elimination (:func:`chunk_pass`) serves every
layout: a *getter* reads pair ``j`` of a chunk (:func:`row_pair`, :func:`pair_at`), a *keeper*
writes the pivot rows of its two columns over the slots the pair came from (:func:`keep_nothing`
for a reduce pass, :func:`keep_over_rows`, :func:`keep_over_pairs` for a substitution, the
chunk's first and last unknowns known, and :func:`keep_with_spike` for a system's top, whose
first unknown is not), and a back substitution reads them back (``back_*``), leaving the
unknowns where the store that follows takes them.
"""

import functools

from numba import cuda

from .elimination import folded, opening, pair_step

FIELDS = 10
"""Values of a pair in memory: the upper row's ``(w0, w1, w2, w3, r)``, then the lower's."""


@cuda.jit(device=True)
def row_pair(buf, slots, base, j, zero):
    """Pair ``j`` of the chunk whose rows start at slot ``base`` of the four planes ``a, b, c, d``."""
    r = base + 2 * j
    return (
        (buf[r], buf[slots + r], buf[2 * slots + r], zero, buf[3 * slots + r]),
        (zero, buf[r + 1], buf[slots + r + 1], buf[2 * slots + r + 1], buf[3 * slots + r + 1]),
    )


@cuda.jit(device=True)
def pair_at(buf, slots, base, j, zero):
    """Pair ``j`` of the chunk whose pairs start at slot ``base`` of the :data:`FIELDS` planes."""
    s = base + j
    return (
        (buf[s], buf[slots + s], buf[2 * slots + s], buf[3 * slots + s], buf[4 * slots + s]),
        (buf[5 * slots + s], buf[6 * slots + s], buf[7 * slots + s], buf[8 * slots + s], buf[9 * slots + s]),
    )


@cuda.jit(device=True)
def keep_nothing(buf, slots, base, j, first, second):
    """The reduce pass keeps no pivot rows."""


@cuda.jit(device=True)
def keep_over_rows(buf, slots, base, j, first, second):
    """Pair ``j``'s pivot rows (spikes folded) over its two rows: ``(u1, u2, u3, r)`` over row
    ``2j``'s ``a, b, c, d``, ``(u1, u2, r)`` over row ``2j + 1``'s ``a, b, c``."""
    r = base + 2 * j
    buf[r], buf[slots + r], buf[2 * slots + r], buf[3 * slots + r] = first[0], first[1], first[2], first[5]
    buf[r + 1], buf[slots + r + 1], buf[2 * slots + r + 1] = second[0], second[1], second[4]


@cuda.jit(device=True)
def keep_over_pairs(buf, slots, base, j, first, second):
    """Pair ``j``'s pivot rows (spikes folded) over planes 0-3 and 4-6 of its slot."""
    s = base + j
    buf[s], buf[slots + s], buf[2 * slots + s], buf[3 * slots + s] = first[0], first[1], first[2], first[5]
    buf[4 * slots + s], buf[5 * slots + s], buf[6 * slots + s] = second[0], second[1], second[4]


@cuda.jit(device=True)
def keep_with_spike(buf, slots, base, j, first, second):
    """The top's pivot rows, which keep their spike on the system's first unknown: ``(u1, u2,
    u3, s0, r)`` over planes 0-4, ``(u1, u2, s0, r)`` over planes 5-8."""
    s = base + j
    buf[s], buf[slots + s], buf[2 * slots + s], buf[3 * slots + s], buf[4 * slots + s] = (
        first[0],
        first[1],
        first[2],
        first[4],
        first[5],
    )
    buf[5 * slots + s], buf[6 * slots + s] = second[0], second[1]
    buf[7 * slots + s], buf[8 * slots + s] = second[3], second[4]


@functools.lru_cache(maxsize=None)
def chunk_pass(get, keep):
    """Device function ``eliminate(buf, slots, base, count, x_before, x_first, fold, zero, one)``:
    the :func:`.elimination.pair_step` of pairs ``1 .. count - 1`` of the chunk at ``base`` (its
    pairs read by ``get``, its pivot rows kept by ``keep``), from the rows of its pair 0, their
    spikes moved to the right-hand side where ``fold`` (the chunk's columns -1 and 0 known:
    ``x_before``, ``x_first``). Returns the two rows left and False if A is singular."""

    @cuda.jit(device=True)
    def eliminate(buf, slots, base, count, x_before, x_first, fold, zero, one):
        upper, lower = get(buf, slots, base, 0, zero)
        k, l = opening(upper, lower, zero)
        if fold:
            k, l = folded(k, x_before, x_first, zero), folded(l, x_before, x_first, zero)
        ok = True
        for j in range(1, count):
            upper, lower = get(buf, slots, base, j, zero)
            k, l, first, second, good = pair_step(k, l, upper, lower, zero, one)
            ok = ok and good
            keep(buf, slots, base, j, first, second)
        return k, l, ok

    return eliminate


@cuda.jit(device=True)
def back_over_rows(buf, slots, base, count, x_first, x_last, x_after):
    """Back substitution from :func:`keep_over_rows`' pivot rows: ``x_i`` into row ``i``'s ``d``."""
    d = 3 * slots
    x1, x2 = x_last, x_after  # x_{2j+1}, x_{2j+2}
    for j in range(count - 1, 0, -1):
        r = base + 2 * j
        x0 = buf[2 * slots + r + 1] - buf[r + 1] * x1 - buf[slots + r + 1] * x2
        xm = buf[d + r] - buf[r] * x0 - buf[slots + r] * x1 - buf[2 * slots + r] * x2
        buf[d + r], buf[d + r - 1] = x0, xm
        x1, x2 = xm, x0
    buf[d + base], buf[d + base + 2 * count - 1] = x_first, x_last


@cuda.jit(device=True)
def back_over_pairs(buf, slots, base, count, x_first, x_last, x_after):
    """Back substitution from :func:`keep_over_pairs`' pivot rows: pair ``j``'s unknowns into its
    planes 7 and 8."""
    x1, x2 = x_last, x_after
    for j in range(count - 1, 0, -1):
        s = base + j
        x0 = buf[6 * slots + s] - buf[4 * slots + s] * x1 - buf[5 * slots + s] * x2
        xm = buf[3 * slots + s] - buf[s] * x0 - buf[slots + s] * x1 - buf[2 * slots + s] * x2
        buf[7 * slots + s], buf[8 * slots + s - 1] = x0, xm
        x1, x2 = xm, x0
    buf[7 * slots + base], buf[8 * slots + base + count - 1] = x_first, x_last


@cuda.jit(device=True)
def back_with_spike(buf, slots, base, count, x_first, x_last, zero):
    """The top's back substitution from :func:`keep_with_spike`' pivot rows: unknown ``2j`` into
    pair ``j``'s plane 0, ``2j + 1`` into its plane 9."""
    x1, x2 = x_last, zero  # x_{2j+1}, x_{2j+2}: nothing beyond the system's last
    for j in range(count - 1, 0, -1):
        s = base + j
        x0 = buf[8 * slots + s] - buf[5 * slots + s] * x1 - buf[6 * slots + s] * x2 - buf[7 * slots + s] * x_first
        xm = (
            buf[4 * slots + s]
            - buf[s] * x0
            - buf[slots + s] * x1
            - buf[2 * slots + s] * x2
            - buf[3 * slots + s] * x_first
        )
        buf[s], buf[9 * slots + s - 1] = x0, xm
        x1, x2 = xm, x0
    buf[base], buf[9 * slots + base + count - 1] = x_first, x_last


@cuda.jit(device=True)
def write_pair(out, system, k, upper, lower):
    out[0, system, k], out[1, system, k], out[2, system, k], out[3, system, k], out[4, system, k] = upper
    out[5, system, k], out[6, system, k], out[7, system, k], out[8, system, k], out[9, system, k] = lower


@functools.lru_cache(maxsize=None)
def pair_loader(pairs):
    """``(load_pairs, store_pairs)`` for chunks of ``pairs`` pairs (a power of two): a block's
    chunks of a reduced system into the :data:`FIELDS` shared planes of ``blockDim.x * (pairs +
    1)`` slots (a slot of padding every ``pairs``: each thread's chunk starts at an odd stride),
    identity pairs past a system's end; and a level's solution from planes 7 and 8 back out.
    Both step through ``(system, pair)`` without a division per pair, neighbouring threads on
    neighbouring addresses."""
    shift = pairs.bit_length() - 1

    @cuda.jit(device=True)
    def load_pairs(p, buf, slots, padded, first):
        """Chunks ``first ..`` of the ``(FIELDS, batch, count)`` pairs ``p``, each system padded to ``padded`` pairs."""
        batch, count = p.shape[1], p.shape[2]
        zero, one = p.dtype.type(0), p.dtype.type(1)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        start = first * pairs + tid
        s, i = start // padded, start % padded
        step_s, step_i = threads // padded, threads % padded
        for j in range(tid, threads * pairs, threads):
            k = j + (j >> shift)
            if s < batch and i < count:
                for f in range(FIELDS):
                    buf[f * slots + k] = p[f, s, i]
            else:  # unknowns 2i and 2i + 1 alone, both 0
                for f in range(FIELDS):
                    buf[f * slots + k] = one if f == 1 or f == 7 else zero
            s += step_s
            i += step_i
            if i >= padded:
                i -= padded
                s += 1
        cuda.syncthreads()

    @cuda.jit(device=True)
    def store_pairs(sol, buf, slots, padded, first, route, call):
        """The unknowns of the block's pairs (planes 7 and 8) into ``sol`` (batch, 2 count), for
        the systems this call solves."""
        batch, count = sol.shape[0], sol.shape[1] // 2
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        start = first * pairs + tid
        s, i = start // padded, start % padded
        step_s, step_i = threads // padded, threads % padded
        for j in range(tid, threads * pairs, threads):
            k = j + (j >> shift)
            if i < count and s < batch and (call == 0 or route[s] == call):  # .chunked.routed
                sol[s, 2 * i], sol[s, 2 * i + 1] = buf[7 * slots + k], buf[8 * slots + k]
            s += step_s
            i += step_i
            if i >= padded:
                i -= padded
                s += 1

    return load_pairs, store_pairs


@cuda.jit(device=True)
def put_pair(buf, slots, s, upper, lower):
    """A pair into slot ``s`` of the :data:`FIELDS` planes."""
    buf[s], buf[slots + s], buf[2 * slots + s], buf[3 * slots + s], buf[4 * slots + s] = upper
    buf[5 * slots + s], buf[6 * slots + s], buf[7 * slots + s], buf[8 * slots + s], buf[9 * slots + s] = lower
