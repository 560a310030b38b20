"""``ps.viz.step``: step through a traced run in the notebook, phase by phase (issue 31).

The model (values, arrows, marks) is :mod:`prefixsum.classroom.stepping`; this module draws it.
Each step is drawn as SVG (arrays as rows of cells with their values, arrows from reads to the
writes they feed, threads active or idle, the source lines), shown in an **ipywidgets** box
with a slider and previous/next buttons. ipywidgets, not anywidget: its front end comes as a
prebuilt extension in the ``jupyterlab_widgets`` wheel that ``pip install .`` brings (JupyterLab
4 and Notebook 7 load it with no build and no server extension), VS Code's Jupyter extension
renders its widgets itself, and the stepper needs only stock controls and an HTML output, so
there is no JavaScript of ours to ship (anywidget would bring a module of our own, and
ipywidgets with it anyway).

Where there is no widget front end (a stored notebook, nbval, GitHub), the stepper shows its
static fallback: a PNG (the chapter's usual picture, or the selected step drawn by matplotlib,
:mod:`prefixsum.classroom.viz.step_pictures`) and one deterministic text line. That module also
draws a comparison's first differing step for the grader's feedback (``difference_png``).
"""

import html
import math
import os

import matplotlib.pyplot as plt

from .. import lookback_timeline, references, stepping
from .step_pictures import cell_text, cells_figure, difference_figure, draw_step, fallback_png, figure_png, shown_slots
from .traces import WARP_COLOURS

CELL, HEIGHT, GAP, LEFT = 34, 22, 36, 190


def _colour(thread):
    r, g, b, _ = WARP_COLOURS((thread // 32) % 10)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def svg(step, *, differing=frozenset(), max_cells=64, max_rows=12, max_arrows=400):
    """The SVG of one :class:`~prefixsum.classroom.stepping.Step`; ``differing`` cells outlined red.

    Every cell is a ``<g class="ps-cell">`` with ``data-array``, ``data-owner``, ``data-index`` and
    ``data-value`` (the browser test reads them), and a tooltip naming the thread and source line
    of its last access in the step.
    """
    slots = shown_slots(step, max_rows)
    row = {slot: i for i, slot in enumerate(slots)}
    width = LEFT + CELL * min(max_cells, max((len(step.values[s]) for s in slots), default=1)) + 10
    height = 24 + len(slots) * (HEIGHT + GAP)
    top = {slot: 24 + i * (HEIGHT + GAP) + GAP - 8 for i, slot in enumerate(slots)}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" '
        'font-size="11"><defs><marker id="ps-head" viewBox="0 0 6 6" refX="5" refY="3" markerWidth="5" '
        'markerHeight="5" orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="#444"/></marker></defs>'
    ]
    for slot in slots:
        y = top[slot]
        parts.append(f'<text x="4" y="{y + 15}">{html.escape(slot.label)}</text>')
        read, written = step.read.get(slot, ()), step.written.get(slot, ())
        for i, value in enumerate(step.values[slot][:max_cells]):
            cell = (slot, i)
            fill = (
                "#f4a6a6"
                if cell in step.races
                else "#ffcc80"
                if cell in step.uninitialized
                else "#fff3b0"
                if i in written
                else "#d6ecff"
                if i in read
                else "#f2f2f2"
                if value is None
                else "white"
            )
            stroke = (
                "#d00000"
                if cell in differing
                else "#7b1fa2"
                if cell in step.conflicts
                else "#222"
                if i in written
                else "#999"
            )
            wide = 3 if cell in differing or cell in step.conflicts else 1.5 if i in written else 0.7
            x = LEFT + i * CELL
            access = step.accesses.get(cell)
            tip = f"{slot.array}[{i}] = {cell_text(value)}" + (
                ""
                if access is None
                else (
                    f", {'written' if access[2] else 'read'} by thread {access[1]} of block {access[0]} at line "
                    f"{access[3]}"
                )
            )
            parts.append(
                f'<g class="ps-cell" data-array="{html.escape(slot.array)}" '
                f'data-owner="{",".join(map(str, slot.owner))}" '
                f'data-index="{i}" data-value="{html.escape(cell_text(value))}">'
                f"<title>{html.escape(tip)}</title>"
                f'<rect x="{x}" y="{y}" width="{CELL - 2}" height="{HEIGHT}" fill="{fill}" stroke="{stroke}" '
                f'stroke-width="{wide}"/><text x="{x + CELL / 2 - 1}" y="{y + 15}" text-anchor="middle">'
                f"{html.escape(cell_text(value))}</text></g>"
            )
    for arrow in step.arrows[:max_arrows]:
        (source, i), (target, j) = arrow.source, arrow.target
        if source not in row or target not in row or i >= max_cells or j >= max_cells:
            continue
        x1, x2 = LEFT + i * CELL + CELL / 2 - 1, LEFT + j * CELL + CELL / 2 - 1
        if source == target:
            y = top[target]
            lift = 8 + min(GAP - 14, abs(x2 - x1) * 0.15)
            path = f"M{x1},{y} Q{(x1 + x2) / 2},{y - 2 * lift} {x2},{y}"
        else:
            below = row[source] < row[target]
            y1 = top[source] + (HEIGHT if below else 0)
            y2 = top[target] + (0 if below else HEIGHT)
            path = f"M{x1},{y1} L{x2},{y2}"
        parts.append(
            f'<path d="{path}" fill="none" stroke="{_colour(arrow.thread)}" stroke-width="1" opacity="0.8" '
            'marker-end="url(#ps-head)"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def threads_svg(step, block_size, max_threads=512):
    """One square per thread of the launch (up to ``max_threads``), a block per row of squares:
    coloured by warp where the thread was active in the step, grey where idle."""
    shown = min(step.threads, max_threads)
    per_row = min(block_size, 64)
    rows_per_block = (block_size + per_row - 1) // per_row
    squares = []
    for k in range(shown):
        block, thread = divmod(k, block_size)
        active = (block, thread) in step.active
        y = (block * rows_per_block + thread // per_row) * 9 + block * 3
        kind, fill = ("ps-thread ps-active", _colour(thread)) if active else ("ps-thread", "#e0e0e0")
        squares.append(
            f'<rect class="{kind}" x="{(thread % per_row) * 9}" y="{y}" width="8" height="8" fill="{fill}"/>'
        )
    height = ((shown + block_size - 1) // block_size) * (rows_per_block * 9 + 3)
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{per_row * 9}" height="{height}">{"".join(squares)}</svg>'


def describe(step):
    """A short HTML account of the step: label, active threads, marks, source lines."""
    marks = [
        f"{len(step.races)} cells raced on" if step.races else "",
        f"{len(step.uninitialized)} uninitialized reads" if step.uninitialized else "",
        f"{len(step.conflicts)} cells in bank-conflicting accesses" if step.conflicts else "",
    ]
    lines = "".join(
        f"<div><code>{html.escape(os.path.basename(f))}:{n}  {html.escape(text)}</code></div>"
        for f, n, text in step.lines
    )
    return (
        f'<div class="ps-step-label"><b>{html.escape(step.label)}</b>: {len(step.active)} of {step.threads} '
        f"threads active. {'; '.join(m for m in marks if m)}</div>{lines}"
    )


class Stepper:
    """The stepper of one run (or of a student's run beside a reference): a widget with a static fallback."""

    def __init__(self, model, reference=None, fallback=None, max_cells=64):
        self.model, self.reference, self.max_cells = model, reference, max_cells
        self.differences = stepping.differences(model, reference) if reference is not None else None
        self.beside = stepping.aligned(model, reference) if reference is not None else None
        first = None if reference is None else stepping.first_difference(model, reference)
        self.first_difference = first
        marked = next((k for k, s in enumerate(model) if s.races or s.uninitialized), 0)
        self.start = min(first, len(model) - 1) if first is not None else marked  # where to look first
        self._box = None
        self._png = fallback_png(fallback)

    def _board(self, k):
        step = self.model[k]
        block_size = math.prod(self.model.trace.launches[step.key[0]].block)
        left = svg(
            step,
            differing=frozenset(self.differences[k]) if self.differences else frozenset(),
            max_cells=self.max_cells,
        )
        if self.reference is None:
            return (
                f'<div class="ps-board" style="overflow-x:auto">{left}</div><div>{threads_svg(step, block_size)}</div>'
            )
        beside = self.beside[k]
        right = (
            "no step of the reference stands beside this one"
            if beside is None
            else svg(self.reference[beside], max_cells=self.max_cells)
        )
        return (
            '<div style="display:flex;gap:24px;overflow-x:auto"><div class="ps-board ps-student"><b>yours</b><br>'
            f'{left}</div><div class="ps-board ps-reference"><b>reference</b><br>{right}</div></div>'
            f"<div>{threads_svg(step, block_size)}</div>"
        )

    def _count(self):
        return len(self.model)

    def _notes(self, k):
        return describe(self.model[k])

    def widget(self):
        """The ipywidgets box: previous/next buttons, a slider over the steps, the board, the source lines."""
        if self._box is not None:
            return self._box
        import ipywidgets as widgets

        slider = widgets.IntSlider(
            value=self.start,
            min=0,
            max=self._count() - 1,
            description="step",
            continuous_update=True,
            layout=widgets.Layout(width="420px"),
        )
        back, forward = widgets.Button(description="◀ previous"), widgets.Button(description="next ▶")
        board, notes = widgets.HTML(), widgets.HTML()

        def show(change=None):
            k = slider.value
            board.value = self._board(k)
            notes.value = self._notes(k)

        def move(by):
            slider.value = max(slider.min, min(slider.max, slider.value + by))

        back.on_click(lambda _: move(-1))
        forward.on_click(lambda _: move(1))
        slider.observe(show, names="value")
        show()
        self._box = widgets.VBox([widgets.HBox([back, slider, forward]), notes, board])
        self._box.add_class("ps-stepper")
        return self._box

    def __repr__(self):
        kernels = sorted({self.model.trace.kernel(s.key[0]) for s in self.model})
        text = f"<prefixsum stepper: {', '.join(kernels)}, {len(self.model)} steps by {self.model.by}"
        if self.reference is not None:
            text += (
                ", no difference from the reference"
                if self.first_difference is None
                else f", first difference from the reference at step {self.first_difference}"
            )
        return text + f"; {self.model[self.start].label}>"

    def png(self):
        """The static fallback, base64: the given figure, or the selected step drawn by matplotlib."""
        if self._png is not None:
            return self._png
        if self.reference is not None and self.first_difference is not None:
            return figure_png(difference_figure(self.model, self.reference, self.first_difference))
        step = self.model[self.start]
        figure, (ax,) = cells_figure([min(12, len(step.values))])
        draw_step(step, ax)
        return figure_png(figure)

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = dict(self.widget()._repr_mimebundle_())
        bundle["text/plain"] = repr(self)
        self._png = bundle["image/png"] = self.png()
        return bundle


class TimelineStepper(Stepper):
    """A decoupled look-back on a time axis: a tile per row, a step per publication of a tile's state."""

    def __init__(self, trace, array, fallback=None):
        self.tiles = lookback_timeline.timeline(trace, array)
        self.times = sorted(p for tile in self.tiles for p in tile.published)
        self.end = max(tile.end for tile in self.tiles) + 1
        self.kernel = trace.kernel(trace.records[0].launch)
        self.start, self.reference, self._box = 0, None, None
        self._png = fallback_png(fallback)

    def _count(self):
        return len(self.times)

    def _state(self, tile, now):
        published = sum(p <= now for p in tile.published)
        polled = [t for p, t in tile.reads if p <= now]
        waiting = (
            polled
            and published < len(tile.published)
            and max(p for p, _ in tile.reads if p <= now) > max([p for p in tile.published if p <= now], default=-1)
        )
        return published, (polled[-1] if waiting else None)

    def _notes(self, k):
        now = self.times[k]
        tile = next(t for t in self.tiles if now in t.published)
        return (
            f'<div class="ps-step-label"><b>time {now} of {self.end}</b>: tile {tile.tile} publishes '
            f"({tile.published.index(now) + 1} of {len(tile.published)}); it waited for tiles "
            f"{', '.join(map(str, tile.waited_for)) or 'none'}</div>"
        )

    def _board(self, k):
        now, scale, rows = self.times[k], 560 / self.end, []
        for r, tile in enumerate(self.tiles):
            y = 6 + r * 14
            published, reading = self._state(tile, now)
            rows.append(
                f'<g class="ps-tile" data-tile="{tile.tile}" data-published="{published}" '
                f'data-reading="{"" if reading is None else reading}">'
                f'<text x="0" y="{y + 9}">tile {tile.tile}</text>'
                f'<rect x="{60 + tile.start * scale}" y="{y + 3}" width="{(tile.end - tile.start) * scale}" '
                'height="4" fill="#ddd"/>'
            )
            for p, t in tile.reads:
                colour = "black" if t in tile.waited_for else "#1f77b4"
                rows.append(f'<circle cx="{60 + p * scale}" cy="{y + 5}" r="1.6" fill="{colour}"/>')
            for i, p in enumerate(tile.published):
                rows.append(
                    f'<rect x="{60 + p * scale - 1.5}" y="{y}" width="3" height="10" '
                    f'fill="{"#2ca02c" if i == len(tile.published) - 1 else "#ff7f0e"}"/>'
                )
            state = f"published {published}" + ("" if reading is None else f", reading tile {reading}")
            rows.append(f'<text x="630" y="{y + 9}">{state}</text></g>')
        height = 10 + 14 * len(self.tiles)
        cursor = f'<line x1="{60 + now * scale}" x2="{60 + now * scale}" y1="0" y2="{height}" stroke="#d00000"/>'
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="800" height="{height}" font-family="monospace" '
            f'font-size="10">{"".join(rows)}{cursor}</svg><div>orange: the tile publishes its aggregate, '
            "green: its inclusive prefix (its last publication); dots: states of predecessors it read "
            "(black: read again, it waited)</div>"
        )

    def __repr__(self):
        return (
            f"<prefixsum stepper: {self.kernel}, look-back of {len(self.tiles)} tiles, {len(self.times)} publications>"
        )

    def png(self):
        if self._png is not None:
            return self._png
        figure, ax = plt.subplots(figsize=(9, 0.6 + 0.16 * len(self.tiles)))
        for tile in self.tiles:
            ax.plot([tile.start, tile.end], [tile.tile] * 2, color="0.85", lw=3)
            ax.scatter([p for p, _ in tile.reads], [tile.tile] * len(tile.reads), s=3, color="tab:blue")
            ax.scatter(tile.published, [tile.tile] * len(tile.published), marker="|", color="tab:orange")
        ax.invert_yaxis()
        ax.set_xlabel("time (position in the trace)")
        ax.set_ylabel("tile")
        return figure_png(figure)


def step(trace, reference=None, *, by="phase", arrays=None, fallback=None, max_cells=64, flags="status"):
    """Step through a traced run, phase by phase, in the notebook.

    Parameters
    ----------
    trace : prefixsum.trace.Trace
        A recorded run (``ps.trace.record``).
    reference : prefixsum.trace.Trace, optional
        A reference run of the same computation: both are shown side by side, the first step
        where the arrays (matched by name) differ is selected and the differing cells outlined red.
        Without one, the first step with a race or an uninitialized read is selected (else the first).
    by : {"phase", "warp", "thread", "time"}
        One step per barrier phase of a launch, or per warp or thread of a block inside a phase;
        ``"time"``: a decoupled look-back on a time axis, a tile per row, a step each time a tile
        publishes its state in the global array ``flags``, with whose states it read and waited for.
    arrays : sequence of str, optional
        Only these arrays (default every array the run touched).
    fallback : matplotlib Figure or Axes, optional
        The static picture shown where widgets are not (a stored notebook, nbval); it is closed
        here, so that the notebook does not show it twice. Default: the selected step drawn.
    max_cells : int
        Cells shown per array.
    flags : str
        With ``by="time"``: the look-back's array of tile states.

    Returns
    -------
    Stepper
        Displays as the widget in JupyterLab, VS Code and the classic notebook.
    """
    if by == "time":
        if reference is not None:
            raise ValueError("by='time' shows one run; compare two runs by phase, warp or thread")
        return TimelineStepper(trace, flags, fallback)
    return Stepper(
        stepping.model(trace, by, arrays),
        None if reference is None else stepping.model(reference, by, arrays),
        fallback=fallback,
        max_cells=max_cells,
    )


def step_failure(algorithm=None, *, by="phase", **options):
    """The stepper on the last failing check's run beside ``prefixsum.scan`` on the same input: with
    ``algorithm`` if given, else the registered scan that agrees longest with the student's run, the
    exercise's own (:func:`prefixsum.classroom.references.last_failure`; a check that failed on more
    than 64 elements is stepped through on a smaller input that fails too, or says why not)."""
    from ..child import on_simulator, simulating

    student, reference = (
        references.last_failure(algorithm, **options)
        if simulating()
        else on_simulator(references.last_failure, algorithm, **options)
    )
    return step(student, reference, by=by)
