"""The inputs and the model of ``benchmarks/warp_semantics.py``'s warp-level cases (no script of its own):
the member masks and the lanes' values the kernels get, and what PTX's ``shfl.sync``, ``vote.sync``
and ``match.sync`` return for them, in plain Python, with numba's clamps and its int32 results.
A shuffle's lane that reads a source lane outside the mask is marked undefined.
"""

import numpy as np

MASKS = {"full": 0xFFFFFFFF, "low16": 0x0000FFFF, "odd": 0xAAAAAAAA, "mixed": 0x0F0F00FF, "one": 0x00000010}


def lane_values(dtype, threads):
    """Distinct values per lane, with both 32-bit halves busy for 64-bit types, sign bits set."""
    lane = np.arange(threads, dtype=np.int64)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        fraction = 2.0**-40 if dt.itemsize == 8 else 2.0**-10
        return (lane * 1.25 - 20.0 + lane * fraction).astype(dt)
    if dt.itemsize == 4:
        bits = (lane * 0x01000193 + 0xF0001234) & 0xFFFFFFFF
        return bits.astype(np.uint32).view(dt)
    bits = (lane.astype(np.uint64) * np.uint64(0x0000010000000193)) + np.uint64(0xF000000012345678)
    return bits.view(dt)


def warp_masks(pattern, threads):
    """Per thread: the mask of its warp, restricted to the lanes the warp has."""
    masks = np.zeros(threads, np.int64)
    for first in range(0, threads, 32):
        lanes = min(32, threads - first)
        masks[first : first + lanes] = MASKS[pattern] & ((1 << lanes) - 1)
    return masks


def shuffle_model(mode, values, masks, operands, seg):
    """Expected results and definedness, from PTX's shfl.sync pseudo-code with numba's clamps."""
    threads = len(values)
    expected, defined = values.copy(), np.ones(threads, bool)
    for t in range(threads):
        lane, first, mask = t & 31, t - (t & 31), int(masks[t])
        if not mask >> lane & 1:
            continue
        b = int(operands[t]) & 31
        j = {"shfl_sync": b, "shfl_up_sync": lane - b, "shfl_down_sync": lane + b, "shfl_xor_sync": lane ^ b}
        j = j[mode]
        in_range = {"shfl_up_sync": j >= 0, "shfl_down_sync": j <= 31}.get(mode, True)
        raw = int(operands[t])
        guarded = seg < 32 and (
            (mode == "shfl_up_sync" and lane % seg < raw) or (mode == "shfl_down_sync" and lane % seg + raw >= seg)
        )
        if guarded or not in_range:
            continue  # own value
        if mask >> j & 1 and first + j < threads:
            expected[t] = values[first + j]
        else:
            defined[t] = False
    return expected, defined


def vote_model(mode, masks, predicates):
    threads = len(masks)
    expected = np.full(threads, -7, np.int64)
    for t in range(threads):
        lane, first, mask = t & 31, t - (t & 31), int(masks[t])
        if not mask >> lane & 1:
            continue
        members = [first + j for j in range(32) if mask >> j & 1]
        bits = [bool(predicates[m]) for m in members]
        if mode == "ballot_sync":
            ballot = sum(1 << (m - first) for m, p in zip(members, bits) if p)
            expected[t] = ballot - (1 << 32) if ballot >> 31 else ballot  # numba returns an int32
        else:
            expected[t] = {"all_sync": all(bits), "any_sync": any(bits), "eq_sync": len(set(bits)) == 1}[mode]
    return expected


def match_model(values, masks):
    threads = len(values)
    expected = np.full((threads, 3), -7, np.int64)
    for t in range(threads):
        lane, first, mask = t & 31, t - (t & 31), int(masks[t])
        if not mask >> lane & 1:
            continue
        members = [first + j for j in range(32) if mask >> j & 1]
        same = sum(1 << (m - first) for m in members if values[m].tobytes() == values[t].tobytes())
        everyone = len({values[m].tobytes() for m in members}) == 1
        signed = lambda bits: bits - (1 << 32) if bits >> 31 else bits  # noqa: E731
        expected[t] = (signed(same), signed(same) if everyone else 0, int(everyone))
    return expected
