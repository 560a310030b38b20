"""What the blocks of a chained scan or a decoupled look-back published and read, from a trace.

Chapter 10's kernels hand a tile's sum to the tiles after it through global memory: the chained
scan by ``prefixes[b]`` and an atomic flag ``flags[b]``, the look-back by a tile state
``status[tile]``, one 64-bit word, the flag ``2 * epoch + kind`` (kind 0 AGGREGATE, 1 PREFIX) in
its high half, the bits of the float32 value in the low half. A hand-off that goes wrong shows
in the trace as a state nobody published, a word whose halves are not a flag of this call and a
value, a tile that used a state of an earlier call, or a window that reads the wrong tiles.
:func:`wrong_sum`, :func:`hang` and :func:`idle` name the first such thing they find, with the
values seen; the checker (:mod:`prefixsum.classroom.check.diagnosis`) asks them when a run with
these arrays sums wrong, waits without end, or goes round a loop that reads nothing. A run whose
hand-off shows nothing wrong gets None (the checker's own verdict stands).
"""

import collections
from typing import NamedTuple

import numpy as np

from ..core.hardware import WARP_SIZE
from ..primitives.tile_state import AGGREGATE, PREFIX

STATES = "status"
"""The look-back's array of tile states (:func:`prefixsum.primitives.tile_state.state_access`'s packed words)."""

_LOW = 0xFFFFFFFF


class Access(NamedTuple):
    """One access of a tile's block to a state, in trace order."""

    position: int
    block: int
    thread: int
    index: int
    word: int
    """The word read, or the word after a publish."""
    publish: bool
    line: int


class Look(NamedTuple):
    """The look-back of one launch, as the trace shows it."""

    launch: int
    published: int
    """``2 * epoch``: this call's AGGREGATE flag; its PREFIX is one more."""
    tiles: dict
    """``{block: tile}``: each block's own tile (the highest state it touched)."""
    accesses: list
    """Every :class:`Access` to the states, in trace order."""


def _float(bits):
    return float(np.array(bits & _LOW, np.uint32).view(np.float32))


def describe(word, published):
    """A state word as a verdict shows it: ``0x0000000440a00000 (flag 4: this call's AGGREGATE, value 5.0)``."""
    flag, low = word >> 32, word & _LOW
    if flag == published + PREFIX:
        kind = "this call's PREFIX"
    elif flag == published + AGGREGATE:
        kind = "this call's AGGREGATE"
    elif flag < published:
        kind = "below this call's flags: no state of this call"
    else:
        kind = f"neither this call's AGGREGATE ({published}) nor its PREFIX ({published + 1})"
    return f"{word:#018x} (flag {flag}: {kind}, value {_float(low):.6g})"


def _states(run):
    """The records of the states array, ``(launch, [(position, record)])`` of the last launch that has them; None if
    none."""
    found = [(p, r) for p, r in enumerate(run.records) if r.array == STATES and r.space == "global"]
    if not found:
        return None
    launch = found[-1][1].launch
    return launch, [(p, r) for p, r in found if r.launch == launch and r.itemsize == 8]


def look(run):
    """The :class:`Look` of the last look-back launch of ``run`` (a :class:`prefixsum.trace.Trace`), or None."""
    states = _states(run)
    if not states or not states[1]:
        return None
    launch, records = states
    tiles = collections.defaultdict(int)
    for _, r in records:
        tiles[r.block] = max(tiles[r.block], r.index)
    known, accesses = {}, []
    for p, r in records:
        word = int(r.value) & ((1 << 64) - 1)
        before = known.get(r.index)
        publish = (
            r.write
            and not r.atomic
            or (r.atomic and (word != before if before is not None else r.index == tiles[r.block]))
        )
        known[r.index] = word
        accesses.append(Access(p, r.block, r.thread, r.index, word, publish, r.line))
    return Look(launch, _published(run, launch, accesses), dict(tiles), accesses)


def _published(run, launch, accesses):
    """``2 * epoch`` of the launch: from its ``epoch`` argument, else the commonest even part of its flags."""
    epoch = run.scalars.get(launch, {}).get("epoch")
    if epoch is not None:
        return 2 * int(epoch)
    flags = collections.Counter((a.word >> 32) & ~1 for a in accesses if a.publish)
    return flags.most_common(1)[0][0] if flags else 0


def wrong_sum(run):
    """The hint naming why the hand-off of ``run`` (a :class:`prefixsum.trace.Trace` whose result is
    wrong) summed wrong, with the values seen; None if its hand-off shows nothing wrong.

    Looked for in this order: a look-back's published words (swapped halves, two states added
    together, flags without the epoch, a flag lost), tile 0 never publishing, a tile's first state
    a PREFIX, a window reading the wrong tiles, a state of an earlier call used without waiting;
    a chained scan's hand-off that takes its tile from ``blockIdx.x`` rather than from the counter.
    """
    found = look(run)
    if found is not None:
        for rule in (_words, _tile_zero, _first_state, _window, _not_waited):
            hint = rule(found)
            if hint:
                return hint
    return _chained_by_block_index(run)


def hang(run):
    """The hint naming why the hand-off of ``run`` (a run that stopped waiting) cannot go on, or None:
    a published word that is no state of this call, tile 0 never publishing, a chained hand-off
    by ``blockIdx.x``."""
    found = look(run)
    if found is not None:
        for rule in (_words, _tile_zero):
            hint = rule(found)
            if hint:
                return hint
    return _chained_by_block_index(run)


def idle(run, threshold):
    """The hint for a look-back warp that goes round its loop without reading a state, or None.

    ``run.idle`` counts each thread's barriers and warp-level calls since its last memory access;
    a lane of a look-back with more than ``threshold`` of them walks windows that hold no tile.
    """
    found = look(run)
    if found is None:
        return None
    spinning = [
        (key, calls)
        for key, calls in run.idle.items()
        if key[0] == found.launch and calls[0] > threshold and key[2] < WARP_SIZE
    ]
    if not spinning:
        return None
    (_, block, thread), (calls, _, _) = max(spinning, key=lambda item: item[1][0])
    tile = found.tiles.get(block)
    reads = [a for a in found.accesses if a.block == block and not a.publish]
    last = (
        f"its last read was status[{reads[-1].index}] = {describe(reads[-1].word, found.published)}"
        if reads
        else "it read no state at all"
    )
    who = f"tile {tile} (block {block})" if tile is not None else f"block {block}"
    return (
        f"{who} made {calls} warp-level calls in lane {thread} since it last touched a "
        f"state, and {last}: its loop goes on without reading anything. Its window has moved below tile 0, "
        "where there is no state to read, and no lane ever found a PREFIX there. The walk must end at tile 0: "
        "positions below 0 count as a PREFIX of nothing (the identity), or the loop runs only while end > 0."
    )


def _publishes(found):
    return [a for a in found.accesses if a.publish]


def _words(found):
    """Published words that are not ``flag << 32 | value bits`` of this call."""
    p = found.published
    flags = {p + AGGREGATE, p + PREFIX}
    previous = {}
    for a in found.accesses:
        before = previous.get(a.index)
        previous[a.index] = a.word
        if not a.publish:
            continue
        high, low = a.word >> 32, a.word & _LOW
        if high in flags:
            continue
        shown = f"tile {a.index} published status[{a.index}] = {describe(a.word, p)} (line {a.line})"
        if low in flags:
            return (
                f"{shown}: the flag {low} is in the low half and the value's bits ({high:#010x}, "
                f"{_float(high):.6g} as float32) in the high half. The flag goes in the high 32 bits, the value's "
                "bits in the low 32: (np.uint64(flag) << np.uint64(32)) | np.uint64(to_bits(value))."
            )
        added = before is not None and ((a.word - before) % (1 << 64)) >> 32 in flags
        if added or p + 1 < high < 2 * p + 4:
            was = (
                f"the word before was {before:#018x}, and the new one is their sum"
                if added
                else "its flag is above this call's PREFIX, a sum of flags"
            )
            return (
                f"{shown}: {was}: the state was added to the old one (cuda.atomic.add), not put in its place. "
                "Publish with cuda.atomic.exch, which replaces the whole word at once."
            )
        if high in (AGGREGATE, PREFIX) and p >= 2 and any((b.word >> 32) == PREFIX for b in _publishes(found)):
            return (
                f"{shown}: its flag is the bare {('AGGREGATE', 'PREFIX')[high]} ({high}), without the epoch: this "
                f"call's flags are 2 * epoch + AGGREGATE = {p} and 2 * epoch + PREFIX = {p + 1}, and a flag below "
                "2 * epoch is a state an earlier call left behind. Publish 2 * epoch + kind and compare flags "
                "with "
                "it, so that no call takes another call's states for its own."
            )
        if high == 0:
            return (
                f"{shown}: its high half, where the flag goes, is 0 although the value's bits are there: the flag "
                "was lost on the way into the word. A value of 32 bits shifted left by 32 is 0 "
                "(np.uint32(flag << 32), or a shift done in a 32-bit type); shift it as a 64-bit word: "
                "np.uint64(flag) << np.uint64(32)."
            )
        return (
            f"{shown}: every published flag is this call's AGGREGATE ({p}) or PREFIX ({p + 1}), in the high half "
            "of the word, the value's bits in the low half."
        )
    return None


def _tile_zero(found):
    """Tile 0 read by others, never published in this launch."""
    if any(a.publish and a.index == 0 for a in found.accesses):
        return None
    waits = [a for a in found.accesses if a.index == 0 and not a.publish and found.tiles.get(a.block, 0) > 0]
    if not waits:
        return None
    a = waits[-1]
    polls = sum(1 for b in waits if b.block == a.block)
    return (
        f"tile 0 never published a state in this call: tile {found.tiles[a.block]} (block {a.block}) read "
        f"status[0] {polls} times and found {describe(a.word, found.published)}. Tile 0 has nothing before it: "
        "it publishes its aggregate as its PREFIX at once (flag 2 * epoch + PREFIX), and every later tile's "
        "walk can end there."
    )


def _first_state(found):
    """A tile after 0 whose first state is a PREFIX: its aggregate, flagged as if it held everything before."""
    p, seen = found.published, set()
    for a in _publishes(found):
        if a.index in seen:
            continue
        seen.add(a.index)
        if a.index > 0 and a.word >> 32 == p + PREFIX:
            return (
                f"tile {a.index} published its first state as a PREFIX: status[{a.index}] = {describe(a.word, p)} "
                f"(line {a.line}), its own aggregate, before it had looked back. A later tile stops at a PREFIX "
                "and "
                "adds nothing before it, so the tiles before this one are lost. A tile's first state is its "
                "AGGREGATE (only tile 0's aggregate is a prefix); the PREFIX comes at the end, aggregate plus "
                "everything before."
            )
    return None


def _window(found):
    """A tile whose first window is not the 32 tiles before it."""
    first = {}
    for a in found.accesses:
        tile = found.tiles.get(a.block, 0)
        if a.publish or tile == 0 or a.thread >= WARP_SIZE:
            continue
        first.setdefault((a.block, a.thread), a.index)
    windows = collections.defaultdict(set)
    for (block, _), index in first.items():
        windows[block].add(index)
    for block, read in sorted(windows.items(), key=lambda item: found.tiles[item[0]]):
        tile = found.tiles[block]
        expected = set(range(max(0, tile - WARP_SIZE), tile))
        if read != expected:
            extra = sorted(read - expected)
            missing = sorted(expected - read)
            what = (
                f"its own state, status[{tile}]"
                if tile in read
                else f"status[{extra[0]}]"
                if extra
                else f"not status[{missing[-1]}]"
            )
            return (
                f"tile {tile} (block {block}) read first the states of tiles {min(read)} to {max(read)}, "
                f"{what}: the window before tile {tile} is tiles {max(0, tile - WARP_SIZE)} to {tile - 1}, lane l "
                f"reading tile end - {WARP_SIZE} + l with end = {tile} (lane 31 the tile just before). The window "
                "is off by one."
            )
    return None


def _not_waited(found):
    """A thread that used a state of an earlier call: its last read of a predecessor found a flag below this call's."""
    last = {}
    for a in found.accesses:
        if not a.publish and a.index < found.tiles.get(a.block, 0):
            last[(a.block, a.thread, a.index)] = a
    for (block, thread, index), a in sorted(last.items(), key=lambda item: item[1].position):
        if a.word >> 32 < found.published:
            return (
                f"tile {found.tiles[block]} (block {block}, lane {thread}) read status[{index}] = "
                f"{describe(a.word, found.published)} (line {a.line}) and went on with it: tile {index} had not "
                "published in this call yet, and what it found is 0 or a state an earlier call left. A lane must "
                "read the state again while its flag is below 2 * epoch (an AGGREGATE or a PREFIX of this call "
                "lets it go on)."
            )
    return None


def _chained_by_block_index(run):
    """A chained scan's block that scans tile b (drawn from the counter) but hands off by its blockIdx.x."""
    drawn = {}
    for r in run.records:
        if r.array == "counter" and r.atomic:
            drawn.setdefault((r.launch, r.block), int(r.value) - 1)
    if not drawn:
        return None
    for r in run.records:
        tile = drawn.get((r.launch, r.block))
        if tile is None or r.array not in ("flags", "prefixes") or r.write:
            continue
        if r.index != tile - 1 and r.index == r.block - 1 and tile != r.block:
            return (
                f"block {r.block} drew tile {tile} from the counter but read {r.array}[{r.index}] (line {r.line}), "
                f"the state of tile blockIdx.x - 1 = {r.block - 1}, not of tile {tile - 1}, the one before its "
                "own. "
                "Blocks draw tile ids in the order they start, which is not blockIdx order: every index of the "
                "hand-off is the drawn tile's, b - 1 and b."
            )
    return None


def negative_index_verdict(run, text):
    """The hint for a negative index of a chained scan's hand-off (``flags[-1]``) that ``blockIdx.x`` caused, else
    None."""
    if "flags[-1]" not in text and "prefixes[-1]" not in text:
        return None
    drawn = {}
    for r in run.records:
        if r.array == "counter" and r.atomic:
            drawn[(r.launch, r.block)] = int(r.value) - 1
    zero = [(launch, block) for (launch, block), tile in drawn.items() if block == 0 and tile != 0]
    if not zero:
        return None
    launch, block = zero[-1]
    tile = drawn[(launch, block)]
    return (
        f"block 0 drew tile {tile} from the counter, so it waits for tile {tile - 1}, but its hand-off read "
        "index blockIdx.x - 1 = -1. Blocks draw tile ids in the order they start, which is not blockIdx order: "
        "every index of the hand-off is the drawn tile's, b - 1 and b."
    )


__all__ = ["Access", "Look", "STATES", "describe", "hang", "idle", "look", "negative_index_verdict", "wrong_sum"]
