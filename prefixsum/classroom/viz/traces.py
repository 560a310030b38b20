"""Pictures of traces: who reads whom, which block writes where, bank conflicts."""

import collections

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.ticker import MaxNLocator

WARP_COLOURS = plt.get_cmap("tab10")


def _pick_launch(trace, array, launch):
    if launch is not None:
        return launch
    for r in trace.records:
        if r.array == array and r.write:
            return r.launch
    raise ValueError(
        f"the trace has no writes to an array called {array!r}; arrays: "
        f"{', '.join(sorted({r.array for r in trace.records}))}"
    )


def _by_thread(records):
    threads = collections.defaultdict(list)
    for r in records:
        threads[r.thread].append(r)
    return threads


def _rounds(accesses):
    """``(phase, cells read, cells written)`` for each barrier phase in which a thread wrote.

    Values also flow through registers: a thread may read a cell, wait at a barrier, then write
    (folding), or write two cells from what it read (Blelloch's down-sweep). So every write of a
    phase is drawn from every cell the thread read since its previous writing phase: all who
    may have influenced the value, never fewer.
    """
    rounds, reads, current = [], set(), None
    for r in accesses:
        if r.write:
            if current is None or current[0] != r.phase:
                current = (r.phase, reads, set())
                rounds.append(current)
                reads = set()
            current[2].add(r.index)
        else:
            (current[1] if current is not None and current[0] == r.phase else reads).add(r.index)
    return rounds


def dataflow(trace, array, *, launch=None, block=0, title=None, ax=None, max_cells=128):
    """Draw who reads whom in ``array`` of one block, one row per barrier phase.

    Row 0 is the array after its first writes (the load); each later row is the array after one
    more phase that wrote it. An arrow goes from every cell a thread read (in ``array``) since it
    last wrote to each cell it writes, coloured by the thread's warp (values pass through
    registers too, so this shows all cells that may have influenced a write); cells that did not
    change are grey dots.

    Parameters
    ----------
    trace : prefixsum.trace.Trace
    array : str
        The array's name in the kernel (a shared array's variable, or a kernel parameter).
    launch : int, optional
        Which launch (default: the first that writes ``array``).
    block : int
        Linear block index.
    """
    launch = _pick_launch(trace, array, launch)
    records = [r for r in trace.select(launch=launch, array=array, block=block) if r.index < max_cells]
    phases = sorted({r.phase for r in records if r.write})
    size = max(r.index for r in records) + 1
    if ax is None:
        _, ax = plt.subplots(figsize=(min(14, 2 + size * 0.22), 1 + 0.7 * len(phases)))
    segments, colours = [], []
    written_rows = [set() for _ in phases]
    row_of = {phase: row for row, phase in enumerate(phases)}
    for thread, accesses in _by_thread(records).items():
        for phase, sources, written in _rounds(accesses):
            row = row_of[phase]
            written_rows[row] |= written
            if row == 0:
                continue
            for target in written:
                for source in sources:
                    segments.append([(source, row - 1), (target, row)])
                    colours.append(WARP_COLOURS((thread // 32) % 10))
    ax.add_collection(LineCollection(segments, colors=colours, linewidths=0.9, alpha=0.8))
    for row, written in enumerate(written_rows):
        cells = np.arange(size)
        changed = np.isin(cells, sorted(written))
        ax.scatter(cells[changed], np.full(changed.sum(), row), s=14, c="black", zorder=3)
        ax.scatter(cells[~changed], np.full((~changed).sum(), row), s=6, c="lightgrey", zorder=3)
    ax.set_xlim(-1, size)
    ax.set_ylim(len(phases) - 0.5, -0.5)
    ax.set_yticks(range(len(phases)))
    ax.set_yticklabels(["load"] + [f"phase {p}" for p in phases[1:]])
    ax.set_xlabel(f"{array}[i]")
    ax.set_title(title or f"{trace.kernel(launch)}: {array}, block {block}")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return ax


def launches(trace, *, ax=None, max_cells=512):
    """Draw, launch by launch, which block wrote each cell of each global array.

    One row per (launch, array written); cells coloured by the writing block, cells read but not
    written in that launch light grey.
    """
    rows = []
    for launch in trace.launches:
        arrays = sorted({r.array for r in trace.select(launch=launch.number, space="global")})
        for array in arrays:
            rs = [r for r in trace.select(launch=launch.number, array=array, space="global") if r.index < max_cells]
            if any(r.write for r in rs):
                rows.append((f"{launch.number}: {launch.kernel} -> {array}", rs))
    size = max((r.index for _, rs in rows for r in rs), default=0) + 1
    image = np.full((len(rows), size), np.nan)
    for row, (_, rs) in enumerate(rows):
        for r in rs:
            if r.write:
                image[row, r.index] = r.block
            elif np.isnan(image[row, r.index]):
                image[row, r.index] = -1
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 0.5 + 0.45 * len(rows)))
    cmap = plt.get_cmap("tab20").copy()
    shown = np.ma.masked_invalid(np.where(image < 0, np.nan, image))
    ax.imshow(np.where(image < 0, 0.0, np.nan), aspect="auto", cmap="Greys", vmin=0, vmax=4, interpolation="nearest")
    ax.imshow(shown % 20, aspect="auto", cmap=cmap, vmin=0, vmax=19, interpolation="nearest")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label for label, _ in rows], fontsize=8)
    ax.set_xlabel("index (colour: the block that wrote it; grey: read only)")
    ax.set_title("global memory, launch by launch")
    return ax


def steps(
    trace,
    array,
    *,
    block=None,
    offsets=None,
    labels=None,
    row_labels=None,
    runs=True,
    title=None,
    ax=None,
    max_cells=128,
):
    """Draw who reads whom in ``array`` over a whole run, one row per step.

    A *step* is a launch, or a barrier phase within a launch, in which some thread writes
    ``array``. So a scheme run as a kernel launch per step and the same scheme run in one block
    with a barrier per step give the same picture; :func:`dataflow` shows the phases of one
    launch only. Row 0 is the array after the first step (usually the load); each later row is
    the array after one more step. Arrows run downwards, from every cell a thread read in
    ``array`` (since its previous write in that step) to the cell it then wrote, coloured by the
    thread; cells written in a step are black dots, the others grey.

    Parameters
    ----------
    trace : prefixsum.trace.Trace
        A recorded run, of one launch or several.
    array : str
        The array's name in the kernels (a kernel parameter or a shared array's variable).
    block : int, optional
        Only this linear block's accesses (needed for a shared array in a launch of several
        blocks, whose blocks have separate copies). Default: every block, as for a global array.
    offsets : sequence of int, optional
        Where the parts of ``array`` start (for a buffer holding several levels, such as
        :func:`prefixsum.scans.kstep.levels`'s ``offsets``): each part is shaded and its start marked.
    labels : sequence of str, optional
        A name for each part given by ``offsets``, written above it.
    row_labels : sequence of str, optional
        A name for each row (default: kernel name and launch number, and the phase when a
        launch has several steps).
    runs : bool, default True
        Join the cells that one thread wrote in one step with a bar of its colour (a value the
        thread carried from one write to the next in a register is drawn this way, since the
        trace sees only memory).
    title : str, optional
    ax : matplotlib Axes, optional
    max_cells : int
        Cells at and above this index are left out.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import numpy as np, prefixsum as ps
    >>> run = ps.trace.record(ps.scan, np.ones(35, np.int32), algorithm="kstep", L=3, one_block=False)
    >>> ax = ps.viz.steps(run, "buf", offsets=ps.kstep.levels(35, 3).offsets, labels=["x", "z0", "z1", "z2"])
    """
    records = [
        r for r in trace.records if r.array == array and r.index < max_cells and (block is None or r.block == block)
    ]
    keys = sorted({(r.launch, r.phase) for r in records if r.write})
    if not keys:
        raise ValueError(
            f"the trace has no writes to an array called {array!r}; arrays: "
            f"{', '.join(sorted({r.array for r in trace.records}))}"
        )
    rows = {key: row for row, key in enumerate(keys)}
    size = max(r.index for r in records) + 1
    if ax is None:
        _, ax = plt.subplots(figsize=(min(14, 2 + size * 0.22), 1.2 + 0.55 * len(keys)))

    def thread_id(r):
        launch = trace.launches[r.launch]
        return r.block * int(np.prod(launch.block)) + r.thread

    segments, colours, written = [], [], [set() for _ in keys]
    reads = collections.defaultdict(list)
    writes = collections.defaultdict(list)
    for r in records:  # in program order within each thread
        row = rows.get((r.launch, r.phase))
        key = (r.launch, r.phase, r.block, r.thread)
        if not r.write:
            reads[key].append(r.index)
            continue
        written[row].add(r.index)
        colour = WARP_COLOURS(thread_id(r) % 10)
        writes[key].append((r.index, colour))
        if row > 0:
            for source in reads.pop(key, []):
                segments.append([(source, row - 1), (r.index, row)])
                colours.append(colour)
        reads.pop(key, None)
    if offsets is not None:
        bounds = list(offsets) + [size]
        for part, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:])):
            if part % 2:
                ax.axvspan(start - 0.5, stop - 0.5, color="0.93", zorder=0)
            if part:
                ax.axvline(start - 0.5, color="0.5", linestyle="--", linewidth=0.8, zorder=1)
            if labels is not None and part < len(labels):
                ax.text((start + stop - 1) / 2, -0.75, labels[part], ha="center", va="bottom", fontsize=9)
    if runs:
        for (launch, phase, _, _), cells in writes.items():
            if len(cells) > 1:
                indices = [index for index, _ in cells]
                row = rows[(launch, phase)]
                ax.plot(
                    [min(indices), max(indices)],
                    [row, row],
                    color=cells[0][1],
                    linewidth=4,
                    alpha=0.35,
                    solid_capstyle="round",
                    zorder=2,
                )
    ax.add_collection(LineCollection(segments, colors=colours, linewidths=0.9, alpha=0.8, zorder=2))
    cells = np.arange(size)
    for row, done in enumerate(written):
        changed = np.isin(cells, sorted(done))
        ax.scatter(cells[changed], np.full(changed.sum(), row), s=14, c="black", zorder=3)
        ax.scatter(cells[~changed], np.full((~changed).sum(), row), s=6, c="lightgrey", zorder=3)
    if row_labels is None:
        phases = collections.Counter(launch for launch, _ in keys)
        row_labels = [
            f"{launch}: {trace.kernel(launch)}" + (f", phase {phase}" if phases[launch] > 1 else "")
            for launch, phase in keys
        ]
    ax.set_xlim(-1, size)
    ax.set_ylim(len(keys) - 0.5, -1.0 if labels is not None else -0.5)
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels(row_labels, fontsize=8)
    ax.set_xlabel(f"{array}[i]")
    ax.set_title(title or f"{array}, step by step")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return ax


def bank_conflicts(traces, *, ax=None):
    """Bar chart of shared-memory passes per warp access, for each labelled trace.

    Parameters
    ----------
    traces : dict
        ``{label: Trace}``, e.g. ``{"padded": t1, "unpadded": t2}``.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    labels = list(traces)
    summaries = [traces[label].conflict_summary() for label in labels]
    ideal = [s["instructions"] for s in summaries]
    actual = [s["passes"] for s in summaries]
    x = np.arange(len(labels))
    ax.bar(x - 0.2, ideal, 0.4, label="conflict-free (one pass per warp access)", color="tab:green")
    ax.bar(x + 0.2, actual, 0.4, label="passes needed", color="tab:red")
    ax.set_xticks(x)
    ax.set_xticklabels(labels)
    ax.set_ylabel("shared-memory passes")
    ax.legend(fontsize=8)
    return ax


def lookbacks(trace, *, array="status", launch=None, ax=None):
    """Draw how far each tile of a decoupled look-back looked, and where it waited.

    From the atomic accesses to the tile states ``array``: a block's own tile is the highest state
    it touched (it publishes there), the states below are the predecessors it read. One row per
    tile: a line over the predecessors it read, a dot on each, dark where it read the state more
    than once (it found nothing published yet, and polled).
    """
    launch = _pick_launch(trace, array, launch)
    reads = {}
    for r in trace.select(launch=launch, array=array, space="global"):
        if getattr(r, "atomic", False):
            reads.setdefault(r.block, []).append(r.index)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.6 + 0.16 * len(reads)))
    for indices in reads.values():
        tile = max(indices)
        polls = collections.Counter(i for i in indices if i < tile)
        if polls:
            ax.plot([min(polls), tile - 1], [tile, tile], color="0.7", lw=1, zorder=1)
            xs = sorted(polls)
            ax.scatter(xs, [tile] * len(xs), c=["black" if polls[i] > 1 else "tab:blue" for i in xs], s=14, zorder=2)
        ax.scatter([tile], [tile], marker="s", color="tab:orange", s=14, zorder=2)
    ax.invert_yaxis()
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # tiles are whole numbers
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("tile whose state was read (orange: the tile's own)")
    ax.set_ylabel("tile")
    ax.set_title("look-back: states each tile read (black: read again, it had to wait)")
    return ax
