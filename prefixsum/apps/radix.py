"""The readable radix sort: one split by a scan of flags per bit (Blelloch 1990; Sengupta et al. 2007).

A *split* by bit k moves the elements whose bit k is 0 to the front and those whose bit is 1
behind them, each group in its old order. The exclusive scan (add) of the zero-flags gives a
zero its place; a one goes after all the zeros, at ``zeros + i - (zeros before i)``. Being
stable, splits by bit 0, 1, ..., w - 1 in turn sort w-bit unsigned keys (least significant
digit first: after pass k the keys are sorted by their k + 1 lowest bits).

Signed integers and floats are first mapped to unsigned keys that sort in the same order:
a signed integer with its sign bit flipped; a float with its sign bit flipped when positive and
all bits flipped when negative (IEEE 754 orders positive floats like their bit patterns, and
negative ones the other way round). -0.0 sorts before 0.0; NaN with the sign bit clear sorts
after +inf, as numpy puts NaN last.

One bit per pass keeps every pass a single scan, w passes for w-bit keys; libraries take 4 to
8 bits per pass with a histogram of digits per tile, which is faster but more than a scan
(:mod:`.onesweep`, :func:`prefixsum.apps.radix_sort`). A
pass by a bit that all keys share moves nothing, so the sort first finds the bits in which keys
differ (OR ^ AND of all keys: a scan of (or, and) pairs with a user operator) and splits by
those only: small or clustered keys take fewer passes.
"""

import numpy as np
from numba import cuda

from ..core.inputs import as_input, same_length
from ..core.streams import as_stream, launch_stream
from ..scans.api import exclusive_scan, scan
from ._arrays import back, device_copy, grid

_UNSIGNED = {4: np.uint32, 8: np.uint64}
KEY_DTYPES = tuple(np.dtype(t) for t in ("int32", "uint32", "int64", "uint64", "float32", "float64"))


@cuda.jit
def zero_flags(keys, bit, flags):
    """``flags[i] = 1`` where bit ``bit`` of ``keys[i]`` is 0."""
    i = cuda.grid(1)
    if i < keys.shape[0]:
        flags[i] = 1 - ((keys[i] >> bit) & 1)


@cuda.jit
def split_scatter(keys, values, flags, zeros_before, out_keys, out_values):
    """Element i goes to ``zeros_before[i]`` if its flag is set, else after all zeros, in order."""
    i = cuda.grid(1)
    n = keys.shape[0]
    if i < n:
        zeros = zeros_before[n - 1] + flags[n - 1]
        place = zeros_before[i] if flags[i] else zeros + i - zeros_before[i]
        out_keys[place] = keys[i]
        if values.shape[0]:
            out_values[place] = values[i]


@cuda.jit
def order_preserving(bits, sign, negative_flip):
    """Map key bit patterns in place to unsigned keys of the same order (see the module's docstring).

    Signed integers: ``negative_flip`` is ``sign``, so every key has its sign bit flipped. Floats:
    ``negative_flip`` is all ones, so negative keys have every bit flipped, others the sign bit.
    """
    i = cuda.grid(1)
    if i < bits.shape[0]:
        b = bits[i]
        bits[i] = b ^ (negative_flip if b & sign else sign)


@cuda.jit(device=True)
def or_and(p, q):
    """(OR, AND) of two pairs: associative and commutative, as | and & each are."""
    return (p[0] | q[0], p[1] & q[1])


def differing_bits(bits, stream=None):
    """The bits in which some of the unsigned device keys ``bits`` differ (n >= 1): OR ^ AND of
    them all, queued on ``stream`` (a :class:`~prefixsum.core.streams.Stream`) and waited for."""
    n = bits.shape[0]
    where = as_stream(stream)
    ones = np.iinfo(bits.dtype).max
    ors, ands = scan((bits, bits), or_and, identity=(0, ones), stream=where)
    ends = np.empty(2, bits.dtype)
    ors[n - 1 :].copy_to_host(ends[:1], stream=launch_stream(where))
    ands[n - 1 :].copy_to_host(ends[1:], stream=launch_stream(where))
    where.synchronize()
    return int(ends[0]) ^ int(ends[1])


def split_by_bit(keys, bit, values=None, *, stream=None):
    """One pass of the radix sort: a stable split of unsigned ``keys`` by bit ``bit``, zeros first.

    Parameters
    ----------
    keys : device array of uint32 or uint64
    bit : int
    values : device array, optional
        Moved with the keys.
    stream : optional
        The stream the launches are queued on (any form :func:`prefixsum.scan` takes).

    Returns
    -------
    (device array, device array or None)
        The split keys and values.
    """
    n = keys.shape[0]
    where = as_stream(stream)
    blocks, threads = grid(n)
    flags = cuda.device_array(n, np.int32 if n < 2**31 else np.int64)
    zero_flags[blocks, threads, launch_stream(where)](keys, keys.dtype.type(bit), flags)
    zeros_before = exclusive_scan(flags, stream=where)
    out_keys = cuda.device_array_like(keys)
    carried = values if values is not None else cuda.device_array(0, np.int32)
    out_values = cuda.device_array_like(carried)
    split_scatter[blocks, threads, launch_stream(where)](keys, carried, flags, zeros_before, out_keys, out_values)
    return out_keys, (out_values if values is not None else None)


def radix_sort_one_bit(keys, values=None, *, stream=None):
    """Sort ``keys`` (and ``values`` with them) by a stable LSD radix sort, one bit per pass: the readable version.

    :func:`prefixsum.apps.radix_sort` (onesweep, :mod:`.onesweep`) is the fast one; it was this
    function until onesweep came, and differs in two places only: here -0.0 sorts before 0.0
    and a NaN with its sign bit set before -inf.

    Parameters
    ----------
    keys : numpy.ndarray or device array, 1-D
        int32, uint32, int64, uint64, float32 or float64. Never modified.
    values : numpy.ndarray or device array, 1-D, optional
        Same length, any numeric dtype; reordered as the keys are. Equal keys keep their order
        (stable), as ``np.argsort(keys, kind="stable")``.
    stream : optional
        The stream the launches are queued on (any form :func:`prefixsum.scan` takes). None:
        numba's default stream.

    Returns
    -------
    keys or (keys, values)
        Sorted, as numpy arrays for numpy ``keys`` (device arrays otherwise).

    Examples
    --------
    >>> import numpy as np
    >>> radix_sort_one_bit(np.array([3, -1, 2, -7], np.int32))
    array([-7, -1,  2,  3], dtype=int32)
    """
    keys, on_device = as_input(keys, "keys", check=_check_key_dtype)
    dtype = np.dtype(keys.dtype)
    where = as_stream(stream)
    keys = device_copy(keys, on_device, where)
    n = keys.shape[0]
    if values is not None:
        values, values_on_device = as_input(values, "values")
        same_length([keys, values], ["keys", "values"])
        values = device_copy(values, values_on_device, where)
    unsigned = np.dtype(_UNSIGNED[dtype.itemsize])
    bits = cuda.device_array(n, unsigned)
    if n:
        bits.copy_to_device(keys.view(unsigned), stream=launch_stream(where))
    if dtype.kind != "u" and n:
        sign = unsigned.type(1 << (8 * dtype.itemsize - 1))
        flip_negative = unsigned.type(np.iinfo(unsigned).max if dtype.kind == "f" else sign)
        order_preserving[grid(n) + (launch_stream(where),)](bits, sign, flip_negative)
    order = values
    differing = differing_bits(bits, where) if n else 0
    for bit in range(8 * dtype.itemsize):
        if differing >> bit & 1:
            bits, order = split_by_bit(bits, bit, order, stream=where)
    if dtype.kind != "u" and n:
        order_preserving_inverse(bits, dtype, unsigned, where)
    result = back(bits.view(dtype), on_device, where)
    return result if values is None else (result, back(order, on_device, where))


def _check_key_dtype(dtype):
    if np.dtype(dtype) not in KEY_DTYPES:
        raise TypeError(
            f"unsupported key dtype {np.dtype(dtype).name!r}; allowed: {', '.join(d.name for d in KEY_DTYPES)}"
        )
    return dtype


@cuda.jit
def restore_keys(bits, sign, flip_all):
    """Undo :func:`order_preserving` in place: ``flip_all`` is all ones for floats, ``sign`` for integers."""
    i = cuda.grid(1)
    if i < bits.shape[0]:
        b = bits[i]
        # A mapped float key has its sign bit set exactly when the float was positive.
        bits[i] = b ^ (sign if b & sign else flip_all)


def order_preserving_inverse(bits, dtype, unsigned, stream=None):
    """Undo :func:`order_preserving` in place on the sorted keys, queued on ``stream``."""
    n = bits.shape[0]
    sign = unsigned.type(1 << (8 * dtype.itemsize - 1))
    flip_all = unsigned.type(np.iinfo(unsigned).max if dtype.kind == "f" else sign)
    restore_keys[grid(n) + (launch_stream(stream),)](bits, sign, flip_all)
