"""The integer half of ``benchmarks/warp_semantics.py``: the kernels that record how a device computes
``popc``, ``clz``, ``ffs`` and ``brev`` of every integer type and of votes and matches, shifts by 0 to
64, int32 and uint32 overflow and casts as numba types them, and the plain-Python model of each
(PTX's bit instructions; numba's 64-bit integer arithmetic, signed if either operand is).
``warp_semantics.py`` runs them with the warp-level cases and writes one file per device.
"""

import sys
from pathlib import Path

# Runs from a checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import prefixsum  # noqa: E402, F401  (chooses the device before numba.cuda is imported)

# isort: split
from numba import cuda  # noqa: E402


@cuda.jit
def bit_counts(values, mode, out):
    """out[t] = popc, clz, ffs or brev (``mode`` 0..3) of values[t], in the type numba gives it."""
    t = cuda.threadIdx.x
    v = values[t]
    if mode == 0:
        out[t] = cuda.popc(v)
    elif mode == 1:
        out[t] = cuda.clz(v)
    elif mode == 2:
        out[t] = cuda.ffs(v)
    else:
        out[t] = cuda.brev(v)


@cuda.jit
def vote_bits(predicates, values, out):
    """The bits of a warp's votes as the chapters use them (block c: predicate pattern c)."""
    c = cuda.blockIdx.x
    t = cuda.threadIdx.x
    votes = cuda.ballot_sync(0xFFFFFFFF, predicates[c, t] != 0)
    peers = cuda.match_any_sync(0xFFFFFFFF, values[c, t])
    below = cuda.lanemask_lt()
    out[c, t, 0] = votes
    out[c, t, 1] = cuda.popc(votes)
    out[c, t, 2] = cuda.clz(votes)
    out[c, t, 3] = cuda.ffs(votes)
    out[c, t, 4] = cuda.brev(votes)
    out[c, t, 5] = votes >> 31
    out[c, t, 6] = cuda.popc(votes & below)
    out[c, t, 7] = cuda.popc(votes & ~below)
    out[c, t, 8] = 31 - cuda.clz(peers)
    out[c, t, 9] = cuda.popc(peers & below)
    out[c, t, 10] = cuda.popc(np.uint32(votes))


@cuda.jit
def integer_arithmetic(a, counts, u, v, out):
    """One column per operation of :data:`ARITHMETIC` (a, counts: int32; u, v: uint32)."""
    t = cuda.threadIdx.x
    x, s, p, q = a[t], counts[t], u[t], v[t]
    out[t, 0] = x << s
    out[t, 1] = x >> s
    out[t, 2] = p << np.uint32(s)
    out[t, 3] = p >> np.uint32(s)
    out[t, 4] = x + x
    out[t, 5] = p - q
    out[t, 6] = x * x
    out[t, 7] = np.int32(x + x)
    out[t, 8] = np.uint32(x)
    out[t, 9] = ~p
    out[t, 10] = -p
    out[t, 11] = (p << 32) | q
    out[t, 12] = x << 32
    out[t, 13] = p >> 31
    out[t, 14] = np.int32(x << 31)


# Integer operands: zero, one, all bits, the sign bit alone, patterns; and shift counts past the width.
INT_VALUES = {
    "int32": [0, 1, -1, 2**31 - 1, -(2**31), 0x12345678, -5, 0x55555555],
    "uint32": [0, 1, 2**32 - 1, 2**31, 0xAAAAAAAA, 0x12345678, 40, 0x0000FFFF],
    "int64": [0, 1, -1, 2**63 - 1, -(2**63), 0x123456789ABCDEF, -5, 2**32],
    "uint64": [0, 1, 2**64 - 1, 2**63, 0xAAAAAAAAAAAAAAAA, 0x123456789ABCDEF, 40, 2**32],
}
COUNTS = [0, 1, 5, 31, 32, 33, 63, 64]
BIT_OPS = ("popc", "clz", "ffs", "brev")
ARITHMETIC = (
    "int32 << int32",
    "int32 >> int32",
    "uint32 << uint32",
    "uint32 >> uint32",
    "int32 + int32",
    "uint32 - uint32",
    "int32 * int32",
    "np.int32(int32 + int32)",
    "np.uint32(int32)",
    "~uint32",
    "-uint32",
    "(uint32 << 32) | uint32",
    "int32 << 32",
    "uint32 >> 31",
    "np.int32(int32 << 31)",
)
VOTE_PREDICATES = {
    "all": lambda lane: True,
    "none": lambda lane: False,
    "lane%3==0": lambda lane: lane % 3 == 0,
    "lane==31": lambda lane: lane == 31,
    "lane<5": lambda lane: lane < 5,
}
VOTE_COLUMNS = (
    "ballot",
    "popc(ballot)",
    "clz(ballot)",
    "ffs(ballot)",
    "brev(ballot)",
    "ballot >> 31",
    "popc(ballot & lanemask_lt)",
    "popc(ballot & ~lanemask_lt)",
    "31 - clz(match_any)",
    "popc(match_any & lanemask_lt)",
    "popc(np.uint32(ballot))",
)


def _signed64(value):
    """An integer's low 64 bits as an int64 (what an int64 output array holds)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def _bits(value, width):
    return value & ((1 << width) - 1)


def bit_model(op, dtype, value):
    """PTX's popc, clz (from bfind) and numba's ffs and brev on ``value`` of ``dtype``: the bits of
    its own width (brev: 32 bits unless uint64; numba converts the others to uint32 first)."""
    width = np.dtype(dtype).itemsize * 8
    bits = _bits(value, width)
    if op == "popc":
        return bin(bits).count("1")
    if op == "clz":
        return width - bits.bit_length()
    if op == "ffs":
        return (bits & -bits).bit_length()
    width = 64 if dtype == "uint64" else 32
    return int(format(_bits(bits, width), f"0{width}b")[::-1], 2)


def arithmetic_model(op, x, s, p, q):
    """``(value as int64, defined)`` of one column of :func:`integer_arithmetic`: numba computes
    integer operators in 64 bits (signed if either operand is), shifts with the left operand's
    signedness, but ``~`` and unary ``-`` in the operand's own width (``-uint32`` wraps to a uint32);
    LLVM leaves a shift by 64 or more undefined; a cast keeps the low bits."""
    int32 = lambda v: _bits(v, 32) - (1 << 32) if _bits(v, 32) >> 31 else _bits(v, 32)  # noqa: E731
    shifts = {0: lambda: x << s, 1: lambda: x >> s, 2: lambda: p << s, 3: lambda: p >> s}
    if op in shifts:
        return (_signed64(shifts[op]()), True) if s < 64 else (0, False)
    return _signed64(
        {
            4: x + x,
            5: p - q,
            6: x * x,
            7: int32(x + x),
            8: _bits(x, 32),
            9: _bits(~p, 32),
            10: _bits(-p, 32),
            11: (p << 32) | q,
            12: x << 32,
            13: p >> 31,
            14: int32(x << 31),
        }[op]
    ), True


def vote_bits_model(pattern, values):
    """The columns of :func:`vote_bits` for one warp: ``[lane][column]``."""
    ballot = sum(1 << lane for lane in range(32) if VOTE_PREDICATES[pattern](lane))
    rows = []
    for lane in range(32):
        below = (1 << lane) - 1
        peers = sum(1 << k for k in range(32) if values[k] == values[lane])
        signed = ballot - (1 << 32) if ballot >> 31 else ballot
        rows.append(
            [
                signed,
                bin(ballot).count("1"),
                32 - ballot.bit_length(),
                (ballot & -ballot).bit_length(),
                int(format(ballot, "032b")[::-1], 2),
                -1 if ballot >> 31 else 0,
                bin(ballot & below).count("1"),
                bin(ballot & ~below & 0xFFFFFFFF).count("1"),
                peers.bit_length() - 1,
                bin(peers & below).count("1"),
                bin(ballot).count("1"),
            ]
        )
    return rows


def integer_results():
    """``(name, got, expected, defined)`` of every integer case, int64 values: popc, clz, ffs and brev of
    every integer type, of votes and matches; integer operators as numba types them."""
    cases = []
    for dtype, values in INT_VALUES.items():
        for mode, op in enumerate(BIT_OPS):
            out = np.zeros(len(values), np.int64)
            bit_counts[1, len(values)](
                np.array(values, dtype=np.uint64).astype(dtype) if dtype[0] == "u" else np.array(values, dtype=dtype),
                mode,
                out,
            )
            expected = [_signed64(bit_model(op, dtype, v)) for v in values]
            cases.append((f"integer {op}({dtype}) of {values}", out, expected, np.ones(len(values))))
    for pattern in VOTE_PREDICATES:
        lanes = np.arange(32)
        values = (lanes // 3 % 4).astype(np.int32)
        predicates = np.array([[VOTE_PREDICATES[pattern](lane) for lane in lanes]], np.int64)
        out = np.zeros((1, 32, len(VOTE_COLUMNS)), np.int64)
        vote_bits[1, 32](predicates, values[None, :], out)
        expected = np.array(vote_bits_model(pattern, values))
        for k, column in enumerate(VOTE_COLUMNS):
            cases.append((f"integer {column}, predicate={pattern}", out[0, :, k], expected[:, k], np.ones(32)))
    a = np.repeat(np.array(INT_VALUES["int32"], np.int32), len(COUNTS))
    counts = np.tile(np.array(COUNTS, np.int32), len(INT_VALUES["int32"]))
    u = np.repeat(np.array(INT_VALUES["uint32"], np.uint32), len(COUNTS))
    v = np.tile(np.array(INT_VALUES["uint32"], np.uint32), len(COUNTS))[: len(u)]
    out = np.zeros((len(a), len(ARITHMETIC)), np.int64)
    integer_arithmetic[1, len(a)](a, counts, u, v, out)
    for k, name in enumerate(ARITHMETIC):
        modelled = [arithmetic_model(k, int(x), int(s), int(p), int(q)) for x, s, p, q in zip(a, counts, u, v)]
        cases.append((f"integer {name}", out[:, k], [m[0] for m in modelled], [m[1] for m in modelled]))
    return cases
