"""Integer arithmetic as numba compiles it for a GPU, not as numpy computes it.

A simulated kernel is Python, and numpy scalars follow numpy's promotion rules: ``np.int32(a) <<
32`` is an int32 (so 0), ``np.uint32(x) + 1`` an uint32, ``np.int32(2**31)`` raises
OverflowError. numba types integer arithmetic otherwise (its integer typing, measured on the PTX
it emits: ``shl.b64`` for a shift of an int32):

* ``+ - * // % & | ^`` on two integers compute in 64 bits: int64 if either operand is signed,
  else uint64 (a Python int, a literal or a loop index, is an int64);
* ``<< >>`` compute in 64 bits with the signedness of the left operand; PTX clamps the count, so
  a count of 64 or more (or negative, as unsigned) gives 0, or the sign for ``>>`` of a signed
  value;
* ``-x`` and ``~x`` give a 64-bit result of ``x``'s signedness, computed in ``x``'s own width
  first (numba negates and inverts before it widens: ``-uint32(1)`` is 2**32 - 1);
* a cast to a narrower type (``np.int32(v)``, ``uint32(v)``) keeps the low bits, never raises;
* ``cuda.popc``, ``cuda.clz``, ``cuda.ffs`` and ``cuda.brev`` count and reverse the bits of the
  operand's own width, two's complement: ``popc`` of an int32 -1 (the ballot of 32 lanes) is 32,
  ``clz`` of 0 is the width, ``ffs`` of 0 is 0, ``brev`` takes 32 bits (64 for a uint64).

These functions are what :mod:`.numba_typing` puts in place of the operators of a student's
kernel; values that are not integers (floats, arrays, booleans) go through the operator as
they are. ``tests/test_sim_integers.py`` compares them with PTX's semantics, and
``benchmarks/warp_semantics.py`` with a GPU.
"""

import operator

import numba
import numpy as np

_INTEGER_SCALARS = frozenset(
    (
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.intc,
        np.uintc,
        np.longlong,
        np.ulonglong,
    )
)
_MASK64 = (1 << 64) - 1


def _is_integer(value):
    """Whether ``value`` is an integer of a kernel: a numpy integer scalar or a Python int (not a bool)."""
    kind = type(value)
    return kind in _INTEGER_SCALARS or kind is int


def _signed(value):
    """Whether an integer operand counts as signed (a Python int is numba's int64)."""
    return type(value) is int or value.dtype.kind == "i"


def _width(value):
    """The operand's bits: its dtype's, 64 for a Python int."""
    return 64 if type(value) is int else value.dtype.itemsize * 8


def _in64(value, signed):
    """``value`` (an int) as a 64-bit numpy scalar, its bits kept, signed or not."""
    bits = int(value) & _MASK64
    if signed:
        return np.int64(bits - (1 << 64) if bits >> 63 else bits)
    return np.uint64(bits)


def _arithmetic(op, otherwise=None):
    """``op`` (``+ - * // % & | ^``) as numba types it: two integers, one of them numpy's, computed in
    64 bits (int64 if either is signed, else uint64); anything else as Python does (by ``otherwise``,
    an augmented assignment's in-place operator, if given)."""
    otherwise = otherwise or op

    def apply(a, b):
        if (type(a) in _INTEGER_SCALARS or type(b) in _INTEGER_SCALARS) and _is_integer(a) and _is_integer(b):
            signed = _signed(a) or _signed(b)
            x, y = int(_in64(a, signed)), int(_in64(b, signed))
            if y == 0 and op in (operator.floordiv, operator.mod):
                return _in64(0, signed)  # a GPU does not trap; numpy gives 0 as well
            return _in64(op(x, y), signed)
        return otherwise(a, b)

    apply.__name__ = otherwise.__name__
    return apply


def _shift(op, otherwise=None):
    """``<<`` or ``>>`` as numba types it and PTX computes it: 64 bits of the left operand's
    signedness, the count clamped (64 or more, or negative, shifts every bit out); anything else as
    Python does (by ``otherwise``, if given)."""
    otherwise = otherwise or op

    def apply(a, b):
        if (type(a) in _INTEGER_SCALARS or type(b) in _INTEGER_SCALARS) and _is_integer(a) and _is_integer(b):
            signed = _signed(a)
            count = int(b) & _MASK64
            value = _in64(a, signed)
            if count >= 64:
                fill = -1 if signed and op is operator.rshift and value < 0 else 0
                return np.int64(fill) if signed else np.uint64(0)
            return _in64(op(int(value), count), signed)
        return otherwise(a, b)

    apply.__name__ = otherwise.__name__
    return apply


add, sub, mul, floordiv, mod = (
    _arithmetic(op) for op in (operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod)
)
and_, or_, xor = (_arithmetic(op) for op in (operator.and_, operator.or_, operator.xor))
lshift, rshift = _shift(operator.lshift), _shift(operator.rshift)
# Augmented assignments: the same on integers, in place on anything else (an array stays the same object).
iadd, isub, imul, ifloordiv, imod = (
    _arithmetic(op, inplace)
    for op, inplace in (
        (operator.add, operator.iadd),
        (operator.sub, operator.isub),
        (operator.mul, operator.imul),
        (operator.floordiv, operator.ifloordiv),
        (operator.mod, operator.imod),
    )
)
iand, ior, ixor = (
    _arithmetic(op, inplace)
    for op, inplace in ((operator.and_, operator.iand), (operator.or_, operator.ior), (operator.xor, operator.ixor))
)
ilshift, irshift = _shift(operator.lshift, operator.ilshift), _shift(operator.rshift, operator.irshift)


def negative(a):
    """``-a``: a numpy integer negated in its own width, then widened to 64 bits of its signedness
    (numba negates before it widens: ``-uint32(1)`` is 2**32 - 1, ``-int32(-2**31)`` is -2**31)."""
    if type(a) in _INTEGER_SCALARS:
        return _in64(_in_width(-int(a), a), _signed(a))
    return -a


def inverted(a):
    """``~a``: a numpy integer inverted in its own width, then widened to 64 bits of its signedness."""
    if type(a) in _INTEGER_SCALARS:
        return _in64(_in_width(~int(a), a), _signed(a))
    return ~a


def _in_width(bits, like):
    """``bits`` cut to the width of ``like`` (a numpy integer), as its type holds them."""
    width = like.dtype.itemsize * 8
    bits &= (1 << width) - 1
    return bits - (1 << width) if like.dtype.kind == "i" and bits >> (width - 1) else bits


def cast(kind, value):
    """``kind(value)`` for a numpy integer type ``kind`` (or numba's): an integer keeps its low bits,
    as a GPU's conversion does, where numpy raises OverflowError; anything else as ``kind`` makes it."""
    dtype = _integer_dtype(kind)
    if dtype is not None and _is_integer(value):
        width = dtype.itemsize * 8
        bits = int(value) & ((1 << width) - 1)
        if dtype.kind == "i" and bits >> (width - 1):
            bits -= 1 << width
        return dtype.type(bits)
    return kind(value)


def _integer_dtype(kind):
    """The numpy integer dtype of ``kind`` (a numpy scalar type or a numba integer type), else None."""
    if kind in _INTEGER_SCALARS:
        return np.dtype(kind)
    if isinstance(kind, numba.types.Integer):
        return np.dtype(kind.name)
    return None


def _bits(value, what):
    """``(bits, width, dtype)`` of an integer operand of an intrinsic: its two's complement in its width."""
    if isinstance(value, (bool, np.bool_)) or not _is_integer(value):
        raise TypeError(f"cuda.{what}() takes an integer, not {type(value).__name__}")
    width = _width(value)
    dtype = np.dtype(np.int64) if type(value) is int else value.dtype
    return int(value) & ((1 << width) - 1), width, dtype


def popc(value):
    """``cuda.popc``: the set bits of ``value`` in its own width, in its type."""
    bits, _, dtype = _bits(value, "popc")
    return dtype.type(bin(bits).count("1"))


def clz(value):
    """``cuda.clz``: the zero bits above the highest set bit (the width for 0), in ``value``'s type."""
    bits, width, dtype = _bits(value, "clz")
    return dtype.type(width - bits.bit_length())


def ffs(value):
    """``cuda.ffs``: the place of the lowest set bit, counting from 1 (0 for 0), a uint32."""
    bits, _, _ = _bits(value, "ffs")
    return np.uint32((bits & -bits).bit_length())


def brev(value):
    """``cuda.brev``: the bits reversed, 64 of a uint64, else 32 (numba converts other integers to
    uint32 first, an int64 losing its high half), as a uint32 or uint64."""
    bits, width, dtype = _bits(value, "brev")
    width = 64 if dtype == np.uint64 else 32
    bits &= (1 << width) - 1
    reversed_bits = int(f"{bits:0{width}b}"[::-1], 2)
    return np.uint64(reversed_bits) if width == 64 else np.uint32(reversed_bits)


__all__ = [
    "add",
    "and_",
    "brev",
    "cast",
    "clz",
    "ffs",
    "floordiv",
    "iadd",
    "iand",
    "ifloordiv",
    "ilshift",
    "imod",
    "imul",
    "inverted",
    "ior",
    "irshift",
    "isub",
    "ixor",
    "lshift",
    "mod",
    "mul",
    "negative",
    "or_",
    "popc",
    "rshift",
    "sub",
    "xor",
]
