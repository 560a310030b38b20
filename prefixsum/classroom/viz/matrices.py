"""Pictures of linear algebra: a Householder reflection, matrices by magnitude."""

import matplotlib.pyplot as plt
import numpy as np


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
        axk.plot(
            *np.transpose([-reach * along, reach * along]),
            color="tab:green",
            linewidth=2,
            alpha=0.8,
            label="mirror (orthogonal to u)",
        )
        axk.plot(
            *np.transpose([image, xk]),
            color="tab:orange",
            linestyle="--",
            linewidth=1.5,
            label="u = x - P x (parallel to u)",
        )
        for vector, colour, name, side in ((xk, "tab:blue", "x", 1), (image, "tab:red", "P x", -1)):
            axk.annotate(
                "",
                xy=vector,
                xytext=(0, 0),
                arrowprops=dict(arrowstyle="-|>", color=colour, linewidth=2, shrinkA=0, shrinkB=0),
            )
            # x's name to the right of its tip, P x's to the left, so that close tips stay readable
            axk.annotate(
                name,
                xy=vector,
                xytext=(8 * side, 0),
                textcoords="offset points",
                color=colour,
                fontsize=11,
                ha="left" if side > 0 else "right",
                va="center",
            )
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
                    axk.text(
                        j,
                        i,
                        f"{v:.2g}",
                        ha="center",
                        va="center",
                        fontsize=6.5,
                        color="white" if np.log10(s[i, j]) < middle else "black",
                    )
        if highlight is not None and k < len(highlight) and highlight[k] is not None:
            for i, j in np.argwhere(np.asarray(highlight[k], bool)):
                axk.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="tab:red", linewidth=1.6))
        zeros = int(np.sum(~np.isfinite(s)))
        label = titles[k] if titles is not None and k < len(titles) else f"matrix {k}"
        axk.set_title(f"{label}\n{zeros} zeros", fontsize=9)
    fig.colorbar(image, ax=list(axes[0]), shrink=0.85, label="log10 |a|")
    return fig
