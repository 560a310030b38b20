"""Pictures of what scans build (chapter 11): compaction, a radix-sort pass, curves."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection

_KEPT, _DROPPED, _ZERO, _ONE = "#4c9be8", "#dddddd", "#8fd18f", "#f2a65a"


def _cells(ax, y, labels, colours, *, title=None):
    """One row of labelled cells at height ``y``, cell i centred at x = i."""
    for i, (label, colour) in enumerate(zip(labels, colours)):
        ax.add_patch(plt.Rectangle((i - 0.45, y - 0.3), 0.9, 0.6, facecolor=colour, edgecolor="#555555"))
        ax.text(i, y, label, ha="center", va="center", fontsize=8)
    if title:
        ax.text(-0.8, y, title, ha="right", va="center", fontsize=9)


def _moves(ax, sources, targets, y_from, y_to):
    """Arrows (as lines) from cells ``sources`` at ``y_from`` to cells ``targets`` at ``y_to``."""
    segments = [((s, y_from - 0.32), (t, y_to + 0.32)) for s, t in zip(sources, targets)]
    ax.add_collection(LineCollection(segments, colors="#333333", linewidths=0.8))
    return len(segments)


def _frame(ax, width, height, title):
    ax.set_xlim(-4.5, width)
    ax.set_ylim(-0.6, height)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)


def compaction(
    x, mask, *, ax=None, title="compaction: an exclusive scan of the flags gives each kept element its place"
):
    """Input cells (kept ones coloured), the flags, their exclusive scan, the output; a line per move.

    Parameters
    ----------
    x, mask : sequences of one length (up to about 32 cells to stay readable)
    """
    x, flags = list(x), [int(bool(m)) for m in mask]
    places = np.concatenate(([0], np.cumsum(flags)[:-1])).astype(int)
    kept = [i for i, f in enumerate(flags) if f]
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6, 0.45 * len(x) + 2), 3.2))
    colours = [_KEPT if f else _DROPPED for f in flags]
    _cells(ax, 4, [f"{v:g}" if isinstance(v, float) else str(v) for v in x], colours, title="x")
    _cells(ax, 3, [str(f) for f in flags], colours, title="flags")
    _cells(ax, 2, [str(p) for p in places], colours, title="exclusive scan")
    _cells(ax, 0, [str(x[i]) for i in kept], [_KEPT] * len(kept), title="out")
    _moves(ax, kept, [places[i] for i in kept], 2, 0)
    _frame(ax, len(x), 4.6, title)
    return ax


def radix_pass(keys, bit, *, bits=4, ax=None, title=None):
    """One split of unsigned ``keys`` by ``bit``: the keys in binary, zeros (green) then ones (orange), in order."""
    keys = [int(k) for k in keys]
    flags = [(k >> bit) & 1 for k in keys]
    zeros = [i for i, f in enumerate(flags) if not f]
    ones = [i for i, f in enumerate(flags) if f]
    target = {i: p for p, i in enumerate(zeros + ones)}
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6, 0.6 * len(keys) + 2), 2.6))
    colour = [_ONE if f else _ZERO for f in flags]
    _cells(ax, 2, [format(k, f"0{bits}b") for k in keys], colour, title="keys")
    after = zeros + ones
    _cells(
        ax, 0, [format(keys[i], f"0{bits}b") for i in after], [colour[i] for i in after], title=f"split by bit {bit}"
    )
    _moves(ax, range(len(keys)), [target[i] for i in range(len(keys))], 2, 0)
    _frame(ax, len(keys), 2.6, title or f"one radix-sort pass: stable split by bit {bit}")
    return ax


def curves(x, series, *, points=None, logy=False, logx=False, ax=None, title=None, xlabel="x", ylabel=None):
    """Lines ``series`` (a dict label -> y values over ``x``), optionally ``points`` = (xs, ys) as dots.

    For a spline and its derivatives, a filter's output against scipy's, or errors against n.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    styles = ["-", "--", ":", "-."]
    for k, (label, y) in enumerate(series.items()):
        ax.plot(x, y, styles[k % len(styles)], label=label, marker="o" if len(x) < 30 else None, markersize=3)
    if points is not None:
        ax.plot(*points, "o", color="black", markersize=3, label="data")
    if logy:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return ax
