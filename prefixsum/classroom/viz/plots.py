"""Pictures of measurements and of warp shuffles."""

import collections

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection

from .traces import WARP_COLOURS


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
    rules = {
        "up": lambda lane, d: lane - d if lane - d >= 0 else lane,
        "down": lambda lane, d: lane + d if lane + d <= 31 else lane,
        "xor": lambda lane, d: lane ^ d,
        "idx": lambda lane, d: d % 32,
    }
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


def taxonomy(points, *, ax=None, title=None):
    """Prefix networks placed by depth (x) and work (y), fan-out written beside each point.

    Parameters
    ----------
    points : dict
        ``{label: {"depth": ..., "work": ..., "fan_out": ..., "measured": bool}}``: filled
        markers for networks counted by the tracer on a real kernel, hollow ones for networks
        placed by their formulas.
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib Axes
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    for number, (label, point) in enumerate(points.items()):
        colour = WARP_COLOURS(number % WARP_COLOURS.N)
        measured = point.get("measured", True)
        ax.scatter(
            [point["depth"]],
            [point["work"]],
            s=40 + 8 * point["fan_out"],
            marker="o",
            facecolors=colour if measured else "none",
            edgecolors=colour,
            linewidths=1.5,
            zorder=3,
        )
        ax.annotate(
            f"{label}\nfan-out {point['fan_out']}",
            (point["depth"], point["work"]),
            textcoords="offset points",
            xytext=(8, 4) if measured else (8, -24),
            fontsize=8,
        )
    ax.set_xlabel("depth (steps between barriers)")
    ax.set_ylabel("work (combines)")
    ax.margins(0.25)
    ax.grid(alpha=0.3)
    ax.set_title(title or "prefix networks: filled = counted by the tracer, hollow = formula")
    return ax
