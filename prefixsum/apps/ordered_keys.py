"""Keys as unsigned integers of the same order: what the onesweep sort (:mod:`.onesweep`) ranks by.

The kernels see a key's bits as the unsigned integer of its width and sort by the
order-preserving map of chapter 10 (:func:`order_map`): signed integers have their sign bit
flipped; floats, the sign bit when positive and every bit when negative (IEEE 754 orders positive
floats like their bit patterns, negative ones the other way round). Two more rules give numpy's
order: every NaN maps above +inf, all NaNs equal (numpy puts them last, in their order), and -0.0
maps as +0.0 (numpy compares them equal, so a stable sort keeps their order).
"""

import functools

import numpy as np
from numba import cuda

RADIX_BITS = 8
RADIX = 1 << RADIX_BITS
"""Digits per pass of the sort."""


def unsigned_of(itemsize):
    """The unsigned integer dtype of ``itemsize`` bytes."""
    return np.dtype(f"u{itemsize}")


def _register(itemsize):
    """The unsigned type the kernels compute the map in: 32 bits for keys of up to 4 bytes."""
    return np.uint64 if itemsize == 8 else np.uint32


def padding_bits(dtype):
    """Bits of a key that :func:`order_map` sends to the top (all ones): the last tile's padding."""
    dtype = np.dtype(dtype)
    ones = (1 << 8 * dtype.itemsize) - 1
    return ones if dtype.kind == "u" else ones >> 1


@functools.lru_cache(maxsize=None)
def order_map(dtype):
    """Device function ``ordered(bits)``: the key's bits as an unsigned integer of the same order.

    See the module's docstring; ``bits`` is the key viewed as the unsigned integer of its width.
    """
    dtype = np.dtype(dtype)
    width = 8 * dtype.itemsize
    U = _register(dtype.itemsize)
    ones, sign = U((1 << width) - 1), U(1 << (width - 1))
    magnitude = U(ones ^ sign)
    zero = U(0)
    if dtype.kind == "u":
        return cuda.jit(device=True)(lambda bits: U(bits))
    if dtype.kind == "i":
        return cuda.jit(device=True)(lambda bits: U(bits) ^ sign)
    infinity = U(np.array(np.inf, dtype).view(unsigned_of(dtype.itemsize))[()])

    def ordered(bits):
        b = U(bits)
        if b & magnitude > infinity:
            return ones  # NaN, whatever its sign and payload: after +inf
        if b == sign:
            b = zero  # -0.0 sorts as +0.0
        return b ^ (ones if b & sign else sign)

    return cuda.jit(device=True)(ordered)


@functools.lru_cache(maxsize=None)
def digit_of(dtype):
    """Device function ``digit(bits, shift)``: the 8-bit digit of the mapped key from bit ``shift`` on."""
    ordered = order_map(dtype)
    U = _register(np.dtype(dtype).itemsize)
    low = U(RADIX - 1)

    def digit(bits, shift):
        return np.int32((ordered(bits) >> U(shift)) & low)

    return cuda.jit(device=True)(digit)
