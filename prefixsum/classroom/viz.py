"""Pictures of traces and benchmarks, drawn with matplotlib.

* :func:`dataflow`: who reads whom, phase by phase, in one array of one block (from a trace).
* :func:`launches`: which block writes which cells of each global array, launch by launch.
* :func:`steps`: who reads whom in one array over a whole run, one row per launch or phase.
* :func:`bank_conflicts`: passes per warp access instruction, for one or more traces.
* :func:`throughput`: GB/s against n from a benchmark CSV.
* :func:`shuffles`: which lane a warp shuffle reads from, step by step.
* :func:`reflection`: a Householder reflection as a mirror, in two dimensions.
* :func:`sparsity`: a row of matrices coloured by magnitude, zeros blank (Householder steps).

Every function returns the matplotlib Axes (or Figure) it drew on, so a notebook can add to it.
"""
import collections

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection

WARP_COLOURS = plt.get_cmap("tab10")


def _pick_launch(trace, array, launch):
    if launch is not None:
        return launch
    for r in trace.records:
        if r.array == array and r.write:
            return r.launch
    raise ValueError(f"the trace has no writes to an array called {array!r}; arrays: "
                     f"{', '.join(sorted({r.array for r in trace.records}))}")


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


def steps(trace, array, *, block=None, offsets=None, labels=None, row_labels=None, runs=True, title=None,
          ax=None, max_cells=128):
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
    records = [r for r in trace.records
               if r.array == array and r.index < max_cells and (block is None or r.block == block)]
    keys = sorted({(r.launch, r.phase) for r in records if r.write})
    if not keys:
        raise ValueError(f"the trace has no writes to an array called {array!r}; arrays: "
                         f"{', '.join(sorted({r.array for r in trace.records}))}")
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
                ax.plot([min(indices), max(indices)], [row, row], color=cells[0][1], linewidth=4, alpha=0.35,
                        solid_capstyle="round", zorder=2)
    ax.add_collection(LineCollection(segments, colors=colours, linewidths=0.9, alpha=0.8, zorder=2))
    cells = np.arange(size)
    for row, done in enumerate(written):
        changed = np.isin(cells, sorted(done))
        ax.scatter(cells[changed], np.full(changed.sum(), row), s=14, c="black", zorder=3)
        ax.scatter(cells[~changed], np.full((~changed).sum(), row), s=6, c="lightgrey", zorder=3)
    if row_labels is None:
        phases = collections.Counter(launch for launch, _ in keys)
        row_labels = [f"{launch}: {trace.kernel(launch)}" + (f", phase {phase}" if phases[launch] > 1 else "")
                      for launch, phase in keys]
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


def throughput(rows, *, x="n", y="gbps", group="variant", ax=None, title=None):
    """Plot ``y`` against ``x`` (log-log) for each ``group`` of benchmark rows.

    ``rows`` is a path to a CSV or a list of dicts (``csv.DictReader`` rows).
    """
    import csv

    if isinstance(rows, str) or hasattr(rows, "__fspath__"):
        with open(rows, newline="") as handle:
            rows = [row for row in csv.DictReader(handle) if not row.get(x, "").startswith("#")]
    series = collections.defaultdict(list)
    for row in rows:
        series[row[group]].append((float(row[x]), float(row[y])))
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
    for name, points in sorted(series.items()):
        points.sort()
        ax.plot(*zip(*points), marker="o", markersize=3, label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def reflection(x, u, *, titles=None, labels=("x[0]", "x[1]"), ax=None):
    """Draw the Householder reflection ``P = I - u u^T / H`` (``H = |u|^2 / 2``) of a 2-D ``x``.

    ``P`` is the mirror in the line orthogonal to ``u``: the picture shows ``x``, the mirror
    line, the image ``P x`` (``x`` minus twice its component along ``u``), the segment from
    ``P x`` to ``x`` (parallel to ``u``, and cut in half by the mirror), and the circle of
    radius ``|x|``, on which ``P x`` stays because a reflection keeps lengths. With
    ``u = x - g e`` and ``|g| = |x|``, the image is ``g e``.

    Parameters
    ----------
    x, u : array_like, shape (2,) or (k, 2)
        The vector and the reflector's ``u`` (any non-zero length: ``P`` does not depend on
        it); ``k`` rows draw ``k`` panels side by side.
    titles : sequence of str, optional
        One title per panel.
    labels : pair of str
        Names of the two coordinate axes.
    ax : matplotlib Axes, optional
        Where to draw a single pair (``x`` and ``u`` of shape (2,)).

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the panels.

    Examples
    --------
    >>> import numpy as np, prefixsum as ps
    >>> x = np.array([3.0, 4.0])
    >>> g = -np.sign(x[1]) * np.linalg.norm(x)      # the image is g e, e = (0, 1)
    >>> fig = ps.viz.reflection(x, x - g * np.array([0.0, 1.0]))
    """
    xs, us = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(u, float))
    if xs.shape != us.shape or xs.shape[1] != 2:
        raise ValueError(f"x and u must both have shape (2,) or (k, 2); got {np.shape(x)} and {np.shape(u)}")
    if not np.all(np.linalg.norm(us, axis=1) > 0):
        raise ValueError("u must not be zero: P = I - u u^T / H needs H = |u|^2 / 2 > 0")
    if ax is not None and len(xs) != 1:
        raise ValueError("ax takes a single pair; give x and u of shape (2,)")
    if ax is None:
        fig, axes = plt.subplots(1, len(xs), figsize=(4.2 * len(xs), 4.6), squeeze=False, layout="constrained")
        axes = axes[0]
    else:
        fig, axes = ax.figure, [ax]
    for k, (axk, xk, uk) in enumerate(zip(axes, xs, us)):
        image = xk - 2 * uk * (uk @ xk) / (uk @ uk)
        radius = max(np.linalg.norm(xk), 1e-300)
        reach = 1.35 * radius
        along = np.array([-uk[1], uk[0]]) / np.linalg.norm(uk)
        axk.axhline(0, color="0.75", linewidth=0.8, zorder=0)
        axk.axvline(0, color="0.75", linewidth=0.8, zorder=0)
        angles = np.linspace(0, 2 * np.pi, 200)
        axk.plot(radius * np.cos(angles), radius * np.sin(angles), color="0.8", linestyle=":", linewidth=1)
        axk.plot(*np.transpose([-reach * along, reach * along]), color="tab:green", linewidth=2, alpha=0.8,
                 label="mirror (orthogonal to u)")
        axk.plot(*np.transpose([image, xk]), color="tab:orange", linestyle="--", linewidth=1.5,
                 label="u = x - P x (parallel to u)")
        for vector, colour, name, side in ((xk, "tab:blue", "x", 1), (image, "tab:red", "P x", -1)):
            axk.annotate("", xy=vector, xytext=(0, 0),
                         arrowprops=dict(arrowstyle="-|>", color=colour, linewidth=2, shrinkA=0, shrinkB=0))
            # x's name to the right of its tip, P x's to the left, so that close tips stay readable
            axk.annotate(name, xy=vector, xytext=(8 * side, 0), textcoords="offset points", color=colour,
                         fontsize=11, ha="left" if side > 0 else "right", va="center")
        axk.set_xlim(-reach, reach)
        axk.set_ylim(-reach, reach)
        axk.set_aspect("equal")
        axk.set_xlabel(labels[0])
        axk.set_ylabel(labels[1])
        if titles is not None and k < len(titles):
            axk.set_title(titles[k], fontsize=10)
    handles, names = axes[0].get_legend_handles_labels()
    if ax is None:
        fig.legend(handles, names, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    else:
        ax.legend(handles, names, loc="lower left", fontsize=7)
    return fig


def sparsity(matrices, titles=None, *, zero=None, highlight=None, annotate=None, cmap="viridis"):
    """Draw a row of matrices, one panel each: magnitudes in colour, zeros blank.

    Made for a sequence of steps of an elimination or a reduction (Householder, Givens, LU),
    where entries become zero one step after another: an entry whose magnitude is at most
    ``zero`` is drawn as a white cell, every other entry is coloured by ``log10 |a|`` on one
    colour scale for all panels.

    Parameters
    ----------
    matrices : sequence of 2-D array_like
        The matrices, left to right.
    titles : sequence of str, optional
        One title per matrix.
    zero : float, optional
        Entries with ``|a| <= zero`` count as zero. Default: ``64 * eps * max|a|`` over all the
        matrices (``eps`` of float64), so that rounding errors left where an exact computation
        gives 0 count as zero.
    highlight : sequence, optional
        One boolean mask per matrix (of its shape), or ``None``: those cells get a red frame
        (for example the entries that the step just zeroed).
    annotate : bool, optional
        Write each non-zero value in its cell (default: when every matrix has at most 8 rows
        and columns).
    cmap : str
        A matplotlib colour map.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np, prefixsum as ps
    >>> A = np.array([[4.0, 1, 2], [1, 3, 0], [2, 0, 5]])
    >>> fig = ps.viz.sparsity([A, np.triu(A)], ["A", "upper triangle"])
    """
    mats = [np.asarray(m, float) for m in matrices]
    if not mats or any(m.ndim != 2 for m in mats):
        raise ValueError("matrices must be a non-empty sequence of 2-D arrays")
    top = max(float(np.abs(m).max()) if m.size else 0.0 for m in mats)
    if zero is None:
        zero = 64 * np.finfo(np.float64).eps * top
    if annotate is None:
        annotate = all(max(m.shape) <= 8 for m in mats)
    shown = [np.where(np.abs(m) > zero, np.abs(m), np.nan) for m in mats]
    values = np.concatenate([s[np.isfinite(s)] for s in shown] + [np.array([])])
    low, high = (np.log10(values.min()), np.log10(values.max())) if values.size else (0.0, 1.0)
    if high - low < 1:
        low -= 1
    fig, axes = plt.subplots(1, len(mats), figsize=(2.5 * len(mats) + 1.2, 3.0), squeeze=False, layout="constrained")
    image = None
    for k, (axk, m, s) in enumerate(zip(axes[0], mats, shown)):
        image = axk.imshow(np.log10(s), cmap=cmap, vmin=low, vmax=high, interpolation="nearest")
        rows, cols = m.shape
        axk.set_xticks(np.arange(-0.5, cols, 1), minor=True)
        axk.set_yticks(np.arange(-0.5, rows, 1), minor=True)
        axk.grid(which="minor", color="0.85", linewidth=0.6)
        axk.tick_params(which="minor", length=0)
        axk.set_xticks(range(cols))
        axk.set_yticks(range(rows))
        axk.tick_params(labelsize=7)
        if annotate:
            middle = (low + high) / 2
            for (i, j), v in np.ndenumerate(m):
                if np.isfinite(s[i, j]):
                    axk.text(j, i, f"{v:.2g}", ha="center", va="center", fontsize=6.5,
                             color="white" if np.log10(s[i, j]) < middle else "black")
        if highlight is not None and k < len(highlight) and highlight[k] is not None:
            for i, j in np.argwhere(np.asarray(highlight[k], bool)):
                axk.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="tab:red", linewidth=1.6))
        zeros = int(np.sum(~np.isfinite(s)))
        label = titles[k] if titles is not None and k < len(titles) else f"matrix {k}"
        axk.set_title(f"{label}\n{zeros} zeros", fontsize=9)
    fig.colorbar(image, ax=list(axes[0]), shrink=0.85, label="log10 |a|")
    return fig


def shuffles(deltas=(1, 2, 4, 8, 16), *, kind="up", sources=None, lanes=32, title=None, ax=None):
    """Draw which lane reads which in a sequence of warp shuffles, one row per step.

    Shuffles hand registers from lane to lane without touching memory, so a trace
    (:mod:`prefixsum.trace`) does not see them; this draws their pattern instead. Row 0 is the
    lanes before the first shuffle, row k the lanes after step k. A line goes from the source
    lane in row k - 1 down to the lane that receives its value in row k; a lane that gets its
    own value back (``shfl_up_sync`` in lanes below the delta, ``shfl_down_sync`` in lanes above
    ``31 - delta``) is a grey dot, a lane that receives another lane's value a black one.

    Parameters
    ----------
    deltas : sequence of int
        The operand of each step: the delta for ``"up"`` and ``"down"``, the lane mask for
        ``"xor"``, the source lane for ``"idx"``. The default is the five steps of a warp scan.
    kind : {"up", "down", "xor", "idx"}
        ``cuda.shfl_up_sync``, ``shfl_down_sync``, ``shfl_xor_sync`` or ``shfl_sync``, with the
        rules of PTX's ``shfl.sync`` over a whole warp (no segments).
    sources : array_like of int, shape (steps, lanes), optional
        The lane each lane received its value from at each step, as measured (for example by a
        kernel in which every lane shuffles its own lane id). Default: computed from ``kind`` and
        ``deltas``.
    lanes : int
        Lanes drawn, 1 to 32.
    title : str, optional
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import prefixsum as ps
    >>> ax = ps.viz.shuffles()                                # the warp scan's shfl_up_sync steps
    >>> ax = ps.viz.shuffles((16, 8, 4, 2, 1), kind="xor")    # a butterfly reduction
    """
    rules = {"up": lambda lane, d: lane - d if lane - d >= 0 else lane,
             "down": lambda lane, d: lane + d if lane + d <= 31 else lane,
             "xor": lambda lane, d: lane ^ d,
             "idx": lambda lane, d: d % 32}
    if kind not in rules:
        raise ValueError(f"kind={kind!r}; allowed: {', '.join(rules)}")
    if not 1 <= lanes <= 32:
        raise ValueError(f"lanes={lanes!r} must be from 1 to 32")
    deltas = list(deltas)
    if sources is None:
        sources = [[rules[kind](lane, d % 32) for lane in range(lanes)] for d in deltas]
    sources = np.asarray(sources, dtype=int)
    if sources.ndim != 2 or sources.shape[1] < lanes:
        raise ValueError(f"sources must have shape (steps, {lanes}); got {sources.shape}")
    sources = sources[:, :lanes]
    steps = len(sources)
    if ax is None:
        _, ax = plt.subplots(figsize=(min(14, 2.5 + lanes * 0.32), 1.2 + 0.75 * steps))
    segments, colours = [], []
    cells = np.arange(lanes)
    ax.scatter(cells, np.zeros(lanes), s=14, c="black", zorder=3)
    for step, row in enumerate(sources, start=1):
        colour = WARP_COLOURS((step - 1) % 10)
        moved = row != cells
        for lane in cells[moved]:
            segments.append([(row[lane], step - 1), (lane, step)])
            colours.append(colour)
        ax.scatter(cells[moved], np.full(moved.sum(), step), s=14, c="black", zorder=3)
        ax.scatter(cells[~moved], np.full((~moved).sum(), step), s=6, c="lightgrey", zorder=3)
    ax.add_collection(LineCollection(segments, colors=colours, linewidths=1.0, alpha=0.85, zorder=2))
    names = {"up": "shfl_up_sync", "down": "shfl_down_sync", "xor": "shfl_xor_sync", "idx": "shfl_sync"}
    operand = {"up": "delta", "down": "delta", "xor": "mask", "idx": "lane"}[kind]
    ax.set_xlim(-1, lanes)
    ax.set_ylim(steps + 0.5, -0.5)
    ax.set_yticks(range(steps + 1))
    rows = [f"{operand} {d}" for d in deltas] if len(deltas) == steps else [f"step {s}" for s in range(1, steps + 1)]
    ax.set_yticklabels(["registers"] + rows, fontsize=8)
    ax.set_xticks(range(0, lanes, 4 if lanes > 16 else 1))
    ax.set_xlabel("lane")
    ax.set_title(title or f"{names[kind]}: which lane each lane reads")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return ax
