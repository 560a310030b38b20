"""A stepper's step drawn by matplotlib: the static fallback of :mod:`prefixsum.classroom.viz.stepper`'s
widget, and the grader's picture of the first step where a student's run leaves the reference's
(:func:`difference_png`, with :func:`difference_caption`, what it shows in words).
"""

import base64
import io

import matplotlib.pyplot as plt

from .. import stepping


def cell_text(value):
    """A cell's value as the stepper writes it: blank where unknown, a float to four digits."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def shown_slots(step, max_rows):
    """The first ``max_rows`` arrays of the step's launch, in the order the run first touched them
    (the input, the shared array it is loaded into, the output: the data flows downwards)."""
    return list(step.values)[:max_rows]


def figure_png(figure):
    """``figure`` as base64 PNG, the figure closed."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def fallback_png(figure):
    """The given fallback picture (a Figure or Axes) as base64 PNG, its figure closed at once so
    that the notebook does not show it beside the stepper; None if none was given."""
    return None if figure is None else figure_png(getattr(figure, "figure", figure))


PICTURE_CELLS = 32


def draw_step(step, ax, *, differing=frozenset(), slots=None, title=None, first=0):
    """Draw a step's arrays as rows of cells on a matplotlib ``ax``, :data:`PICTURE_CELLS` of
    them from index ``first``, red where ``differing``."""
    slots = slots or shown_slots(step, 12)
    stop = first + PICTURE_CELLS
    for r, slot in enumerate(slots):
        for i, value in enumerate(step.values.get(slot, [])[first:stop], start=first):
            bad, cell = (slot, i) in differing, (slot, i)
            fill = (
                "#f4a6a6"
                if bad or cell in step.races
                else "#ffcc80"
                if cell in step.uninitialized
                else "#fff3b0"
                if i in step.written.get(slot, ())
                else "white"
            )
            ax.add_patch(
                plt.Rectangle(
                    (i, -r - 0.9),
                    0.95,
                    0.8,
                    facecolor=fill,
                    edgecolor="#d00000" if bad else "0.5",
                    linewidth=2 if bad else 0.8,
                )
            )
            text = f"{value:.3g}" if isinstance(value, float) else cell_text(value)
            ax.text(i + 0.47, -r - 0.5, text, ha="center", va="center", fontsize=7)
        ax.text(first - 0.3, -r - 0.5, slot.label, ha="right", va="center", fontsize=8)
    width = max((min(stop, len(step.values.get(s, []))) for s in slots), default=first + 1)
    ax.set_xlim(first - 0.2, width + 0.2)
    ax.set_ylim(-len(slots) - 0.2, 0.2)
    ax.axis("off")
    key = (
        "yellow: written in this step"
        + (", red: raced on" if step.races else "")
        + (", orange: read uninitialized" if step.uninitialized else "")
        + (", outlined: differs" if differing else "")
    )
    ax.set_title(f"{title or step.label} ({key})", fontsize=9, loc="left")
    return ax


def cells_figure(rows):
    """A figure with one axes per row of ``rows`` (how many arrays each shows), sized for :data:`PICTURE_CELLS`
    cells."""
    figure, axes = plt.subplots(
        len(rows), 1, figsize=(3 + 0.36 * PICTURE_CELLS, sum(0.5 + 0.45 * n for n in rows)), squeeze=False
    )
    return figure, axes[:, 0]


def difference_figure(student, reference, k):
    """Step ``k`` of ``student`` (two :class:`prefixsum.classroom.stepping.Model` s) over the reference's step beside
    it, the differing cells outlined, from a few cells before the first."""
    cells = stepping.differences(student, reference)[k]
    slots = sorted({slot for slot, _ in cells}, key=lambda s: (s.space, s.owner, s.array))[:4] or shown_slots(
        student[k], 4
    )
    beside = stepping.aligned(student, reference)[k]
    mine, theirs = student[k], reference[beside if beside is not None else len(reference) - 1]
    by_name = {(s.launch, s.space, s.array, s.owner): s for s in theirs.values}
    first = max(0, min((i for _, i in cells), default=0) - 4)  # the first difference, and a few cells before it
    figure, axes = cells_figure([len(slots)] * 2)
    draw_step(mine, axes[0], differing=frozenset(cells), slots=slots, title=f"yours: {mine.label}", first=first)
    draw_step(
        theirs,
        axes[1],
        slots=[by_name.get((s.launch, s.space, s.array, s.owner), s) for s in slots],
        title=f"reference: {theirs.label}",
        first=first,
    )
    return figure


def difference_caption(student, reference, k):
    """What :func:`difference_png` draws for step ``k`` of two :class:`prefixsum.classroom.stepping.Model` s, in
    words."""
    cells = stepping.differences(student, reference)[k]
    shown = sorted(
        {f"{slot.array}[{i}]" for slot, i in cells}, key=lambda t: (t.split("[")[0], int(t.split("[")[1][:-1]))
    )
    mine = student[min(k, len(student) - 1)]
    return f"first difference at step {k} ({mine.label}): {', '.join(shown[:8])}{', ...' if len(shown) > 8 else ''}"


def difference_png(student_trace, reference_trace, path, *, by="phase"):
    """Draw the first step where ``student_trace`` leaves ``reference_trace`` to a PNG at ``path``.

    Returns
    -------
    pathlib.Path or None
        ``path``, or None when the two runs never differ (nothing is written).
    """
    # The traces come from the grader's sandbox and judge: their file names are never opened.
    student, reference = (stepping.model(t, by, source=stepping.no_source) for t in (student_trace, reference_trace))
    k = stepping.first_difference(student, reference)
    if k is None:
        return None
    figure = difference_figure(student, reference, k)
    # The step it shows, as text in the PNG (its Description): a reader or a test need not read pixels.
    figure.savefig(
        path, dpi=80, bbox_inches="tight", metadata={"Description": difference_caption(student, reference, k)}
    )
    plt.close(figure)
    return path


__all__ = [
    "PICTURE_CELLS",
    "cell_text",
    "cells_figure",
    "difference_caption",
    "difference_figure",
    "difference_png",
    "draw_step",
    "fallback_png",
    "figure_png",
    "shown_slots",
]
