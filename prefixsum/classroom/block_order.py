"""What orders the accesses of different blocks, and the kind of race where nothing does.

Between blocks only a release and an acquire order two accesses (:mod:`.trace`'s docstring says
which): :class:`Order` indexes a run's fences and atomics, :func:`race_between_blocks` finds the
most telling unordered pair among the accesses of one global element. Kept apart from the
recorder so that the memory model reads in one place.
"""

import collections

DESCRIPTIONS = {  # a race's kind -> what the blocks do, for its message
    "both-write": "write it",
    "read-write": "write and read it with no flag between them",
    "unfenced": "write and read it; the reader waited for a flag raised with no fence after the write",
    "plain-poll": "write it and poll it with plain loads",
}
# The most telling kind first: a plain poll hangs, a missing fence reads stale data.
KIND_ORDER = ("plain-poll", "unfenced", "read-write", "both-write")


class Order:
    """What orders accesses of different blocks: the fences and atomics of a run, indexed."""

    def __init__(self, records, fences):
        self.fences = collections.defaultdict(list)  # (launch, block) -> [(position, thread, phase)]
        for f in fences:
            self.fences[(f.launch, f.block)].append((f.position, f.thread, f.phase))
        self.by_thread = collections.defaultdict(list)  # (launch, block, thread) -> [(position, cell)]
        self.by_cell = collections.defaultdict(list)  # cell -> [(position, block, thread, phase)]
        for position, r in enumerate(records):
            if r.atomic and r.space == "global":
                cell = (r.launch, r.array, r.index)
                self.by_thread[(r.launch, r.block, r.thread)].append((position, cell))
                self.by_cell[cell].append((position, r.block, r.thread, r.phase))

    def releases(self, position, r):
        """``(position, flag)`` of each atomic that releases access ``r`` (at ``position``)."""
        found = [(position, (r.launch, r.array, r.index))] if r.atomic else []
        fenced = set()
        for at, thread, phase in self.fences.get((r.launch, r.block), ()):
            if at > position and thread not in fenced and (thread == r.thread or phase > r.phase):
                fenced.add(thread)
                found.extend(a for a in self.by_thread.get((r.launch, r.block, thread), ()) if a[0] >= at)
        return found

    def acquired(self, releases, position, r):
        """Whether ``r`` (at ``position``) follows, in its block, an atomic on the flag of one of
        ``releases`` made after that release."""
        for released, flag in releases:
            for at, block, thread, phase in self.by_cell.get(flag, ()):
                if block == r.block and released < at < position and (thread == r.thread or phase < r.phase):
                    return True
        return False

    def raised_after(self, position, r):
        """``(position, flag)`` of every atomic of ``r``'s block after ``r`` (at ``position``)."""
        return [
            (at, cell)
            for (launch, block, _), atomics in self.by_thread.items()
            if launch == r.launch and block == r.block
            for at, cell in atomics
            if at > position
        ]


def race_between_blocks(accesses, order):
    """``(kind, blocks, line)`` of the most telling unordered pair among ``accesses`` (position,
    record) of one global element by different blocks, or None."""
    if len({r.block for _, r in accesses}) < 2 or not any(r.write for _, r in accesses):
        return None
    if all(r.atomic for _, r in accesses):
        return None
    polled = collections.Counter((r.block, r.thread) for _, r in accesses if not r.write)
    best = None
    releases = {}
    flagged = {}
    for j, (p2, r2) in enumerate(accesses):
        for p1, r1 in accesses[:j]:
            if r1.block == r2.block or not (r1.write or r2.write) or (r1.atomic and r2.atomic):
                continue
            if p1 not in releases:
                releases[p1] = order.releases(p1, r1)
            if order.acquired(releases[p1], p2, r2):
                continue
            reader = r2 if not r2.write else r1 if not r1.write else None
            if reader is None:
                kind = "both-write"
            elif polled[(reader.block, reader.thread)] > 1 or (r2 if reader is r1 else r1).atomic:
                kind = "plain-poll"
            elif reader is r2 and not r1.atomic and flagged_without_fence(order, flagged, p1, r1, p2, r2):
                kind = "unfenced"
            else:
                kind = "read-write"
            rank = KIND_ORDER.index(kind)
            if best is None or rank < best[0]:
                best = (rank, kind, (r1.block, r2.block), r2.line)
            if rank == 0:
                break
    return None if best is None else best[1:]


def flagged_without_fence(order, cache, p1, r1, p2, r2):
    """Whether ``r2`` acquired a flag that ``r1``'s block raised after ``r1``: the two blocks
    synchronise, but no fence keeps ``r1`` ahead of the flag."""
    if p1 not in cache:
        cache[p1] = order.raised_after(p1, r1)
    return order.acquired(cache[p1], p2, r2)
