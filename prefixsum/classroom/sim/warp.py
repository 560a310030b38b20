"""Warp-level calls: shuffles, votes, ``syncwarp`` and ``activemask``, as rendezvous of lanes.

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
  of the access hook (:mod:`.hooks`). Shuffles and votes exchange registers only: they order no
  memory accesses, on a GPU either, and leave the phase alone.
"""

import numpy as np

from ...core.hardware import WARP_SIZE
from ...core.poison import poison_value
from .errors import WarpDivergenceError, runs, warp_divergence
from .thread import synchronize

_SHUFFLED_TYPES = (np.int32, np.int64, np.float32, np.float64)


def shuffle_operand(kind, value):
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


def match_key(value):
    """What match_any/match_all compare: the bits of the value in its type."""
    return np.asarray(value).tobytes()


def integer_operand(kind, what, value):
    """``value`` as an int, if it is an integer operand of ``kind``."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise TypeError(f"cuda.{kind}(): the {what} must be an integer, not {type(value).__name__}")


def predicate_operand(kind, value):
    """``value`` as a bool, if it is a predicate numba's votes take."""
    if isinstance(value, (int, bool, np.integer, np.bool_)):
        return bool(value)
    raise TypeError(f"cuda.{kind}(): the predicate must be an integer or a boolean, not {type(value).__name__}")


def _lane(thread):
    return thread.linear % WARP_SIZE


def _lanes(mask):
    return [lane for lane in range(WARP_SIZE) if mask >> lane & 1]


def _as_int32(mask):
    """A 32-bit lane mask as numba's ballot and match functions return it: a signed int32."""
    return np.array(mask & 0xFFFFFFFF, np.uint32).view(np.int32)[()]


def _shuffle(source):
    """The resolver of a shuffle whose PTX source lane is ``source(lane, b)`` (b = b[4:0]).

    ``source`` returns None where PTX's range check fails: the lane then gets its own value.
    A source lane outside the mask gives an undefined value on a GPU; here it is the poison of
    the value's type, so that a result depending on it shows.
    """

    def resolve(members):
        values = {_lane(m): m.value[0] for m in members}
        results = []
        for m in members:
            value, b = m.value
            j = source(_lane(m), b % WARP_SIZE)
            if j is None:
                results.append(value)
            elif j in values:
                results.append(values[j])
            else:
                results.append(poison_value(np.asarray(value).dtype))
        return results

    return resolve


def _syncwarp(members):
    synchronize(members)
    return [None] * len(members)


def _ballot(members):
    mask = sum(1 << _lane(m) for m in members if m.value)
    return [_as_int32(mask)] * len(members)


def _match_any(members):
    masks = {}
    for m in members:
        masks[m.value] = masks.get(m.value, 0) | 1 << _lane(m)
    return [_as_int32(masks[m.value]) for m in members]


def _match_all(members):
    same = len({m.value for m in members}) == 1
    result = (_as_int32(sum(1 << _lane(m) for m in members) if same else 0), same)
    return [result] * len(members)


# What each warp-level call returns to the lanes that meet there (in lane order); activemask()
# meets no mask and is resolved by the rendezvous itself.
WARP_CALLS = {
    "syncwarp": _syncwarp,
    "shfl_sync": _shuffle(lambda lane, b: b),
    "shfl_up_sync": _shuffle(lambda lane, b: lane - b if lane >= b else None),
    "shfl_down_sync": _shuffle(lambda lane, b: lane + b if lane + b < WARP_SIZE else None),
    "shfl_xor_sync": _shuffle(lambda lane, b: lane ^ b),
    "ballot_sync": _ballot,
    "all_sync": lambda members: [all(m.value for m in members)] * len(members),
    "any_sync": lambda members: [any(m.value for m in members)] * len(members),
    "eq_sync": lambda members: [len({m.value for m in members}) == 1] * len(members),
    "match_any_sync": _match_any,
    "match_all_sync": _match_all,
    "activemask": None,
}


class Rendezvous:
    """Releases the threads of one block that wait at warp-level calls.

    Parameters
    ----------
    kernel : str
        The kernel's name, for messages.
    block : tuple
        The block's index, for messages.
    threads : list
        The block's threads in linear order.
    """

    def __init__(self, kernel, block, threads):
        self._kernel = kernel
        self._block = block
        self._warps = [threads[w : w + WARP_SIZE] for w in range(0, len(threads), WARP_SIZE)]

    def release(self, at_warp):
        """The threads of ``at_warp`` (all waiting at warp-level calls) that may run on now.

        Calls whose lanes have all arrived go first, then ``activemask()`` (only when nothing
        else can move, so that every lane that can converge there has). Raises
        WarpDivergenceError when neither can release any thread.
        """
        return self._release_calls(at_warp) or self._release_activemask(at_warp) or self._deadlock(at_warp)

    def release_met(self, at_warp):
        """The threads of ``at_warp`` whose calls' lanes have all arrived, released; [] if none.

        For a block some of whose threads still run (they yielded), so that others may yet
        arrive: neither ``activemask()`` nor a divergence can be decided yet.
        """
        return self._release_calls(at_warp)

    def _release_calls(self, at_warp):
        ready = []
        released = set()
        for t in at_warp:
            if t.mask is None or t.linear in released:  # activemask(), or met with a lower lane
                continue
            members = self._meeting(t)
            if members is None:
                continue
            for m, result in zip(members, WARP_CALLS[t.site[2]](members)):
                m.resume = (result,)
                released.add(m.linear)
            ready.extend(members)
        return sorted(ready, key=lambda t: t.linear)

    def _meeting(self, t):
        """The lanes named in ``t``'s mask if all wait at ``t``'s call; None if some are elsewhere.

        Raises WarpDivergenceError when they never can all arrive: a named lane does not exist or
        has returned, or waits at the same call with another mask.
        """
        warp = self._warp(t)
        lanes = _lanes(t.mask)
        absent = [lane for lane in lanes if lane >= len(warp)]
        if absent:
            threads = sum(len(w) for w in self._warps)
            raise self._divergence(
                t,
                f"its mask names lanes {runs(absent)}, which this block of {threads} threads "
                "does not have (pass the mask of the lanes that exist)",
            )
        named = [warp[lane] for lane in lanes]
        exited = [_lane(m) for m in named if m.greenlet.dead]
        if exited:
            raise self._divergence(t, f"its mask names lanes {runs(exited)}, which have returned from the kernel")
        for m in named:
            if m.site == t.site and m.mask != t.mask:
                raise self._divergence(t, f"lane {_lane(m)} makes the same call with mask 0x{m.mask:08x}")
        if any(m.site != t.site for m in named):
            return None
        return named

    def _release_activemask(self, at_warp):
        """In each warp, the lanes at the ``activemask()`` call earliest in the source.

        Lanes waiting at a later call stay, so that lanes that went around a branch catch up
        with them there, as a GPU reconverges a warp after a branch.
        """
        earliest = {}  # warp -> (source position, site, lanes there)
        for t in at_warp:
            if t.site[2] == "activemask":
                w = t.linear // WARP_SIZE
                position = (t.line, t.site[1])
                if w not in earliest or position < earliest[w][0]:
                    earliest[w] = (position, t.site, [])
                if t.site == earliest[w][1]:
                    earliest[w][2].append(t)
        ready = []
        for _, _, members in earliest.values():
            active = np.uint32(sum(1 << _lane(m) for m in members))
            for m in members:
                m.resume = (active,)
            ready.extend(members)
        return sorted(ready, key=lambda t: t.linear)

    def _deadlock(self, at_warp):
        """Raise for a warp-level call that waits for lanes that wait elsewhere, where no
        thread of the block can move on."""
        t = next(t for t in at_warp if t.mask is not None)
        warp = self._warp(t)
        elsewhere = [lane for lane in _lanes(t.mask) if warp[lane].site != t.site]
        raise self._divergence(t, f"lanes {runs(elsewhere)}, named in its mask, wait elsewhere")

    def _warp(self, t):
        return self._warps[t.linear // WARP_SIZE]

    def _divergence(self, t, problem):
        return WarpDivergenceError(warp_divergence(self._kernel, self._block, t, problem, self._warp(t)))
