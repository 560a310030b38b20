"""Pictures of traces and benchmarks, drawn with matplotlib.

* :func:`dataflow`: who reads whom, phase by phase, in one array of one block (from a trace).
* :func:`launches`: which block writes which cells of each global array, launch by launch.
* :func:`bank_conflicts`: passes per warp access instruction, for one or more traces.
* :func:`throughput`: GB/s against n from a benchmark CSV.

Every function returns the matplotlib Axes (or Figure) it drew on, so a notebook can add to it.
"""
import collections

import matplotlib

matplotlib.use(matplotlib.get_backend())
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402

WARP_COLOURS = plt.get_cmap("tab10")


def _pick_launch(trace, array, launch):
    if launch is not None:
        return launch
    for r in trace.records:
        if r.array == array and r.write:
            return r.launch
    raise ValueError(f"the trace has no writes to an array called {array!r}; arrays: "
                     f"{', '.join(sorted({r.array for r in trace.records}))}")


def dataflow(trace, array, *, launch=None, block=0, title=None, ax=None, max_cells=128):
    """Draw who reads whom in ``array`` of one block, one row per barrier phase.

    Row 0 is the array after its first writes (the load); each later row is the array after one
    more phase that wrote it. An arrow goes from every cell a thread read (in ``array``) to the
    cell the same thread then wrote, coloured by the thread's warp; cells that did not change
    are grey dots.

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
    written_rows = []
    for row, phase in enumerate(phases):
        reads = collections.defaultdict(list)
        written = set()
        for r in records:
            if r.phase != phase:
                continue
            if r.write:
                written.add(r.index)
                if row > 0:
                    for source in reads.pop(r.thread, []):
                        segments.append([(source, row - 1), (r.index, row)])
                        colours.append(WARP_COLOURS((r.thread // 32) % 10))
            else:
                reads[r.thread].append(r.index)
        written_rows.append(written)
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
