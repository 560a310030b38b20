"""Every measured quantity a chapter states comes from a committed CSV or a computation in a cell.

A number typed into a markdown cell drifts from the CSV it was read off once the benchmark runs
again (issue 28: chapter 02 quoted times "on the H200" that no committed CSV held). This test
reads every markdown cell of every chapter and fails on what looks like a measurement: a time
or a bandwidth (``244 µs``, ``0.7 ms``, ``1632 GB/s``), a speed-up (``1.17×``, ``2x``; not a
shape such as ``512 × 512``) or a claim about one GPU ("on the H100"). Such figures belong in a
code cell's output, computed from ``prefixsum.cli.results.read`` of the CSV, with the prose
saying what they mean.

:data:`PENDING` lists the figures still typed into the prose of chapters that other work is
rewriting; each entry must still occur (a fixed one must leave the list), and nothing outside
the list may appear.
"""

import collections
import json
import pathlib
import re

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
UNIT = r"(?:ns|us|µs|μs|ms|GB/s|GiB/s|TB/s)"
MEASURED = re.compile(
    r"(?<![\w.^{])\d[\d,]*(?:\.\d+)?\s*" + UNIT + r"(?!\w)"  # a time or a bandwidth
    r"|(?<![\w.^{])\d+(?:\.\d+)?\s*[x×](?![\w\s]*\d)(?!\w)"  # a ratio, not "n × m"
    r"|\b[Oo]n (?:the|an?) H[12]00\b"
)

# chapter -> figures still in its prose, each with the number of times it occurs. To be moved
# into code output (issue 28, item 1): none at present.
PENDING = {}


def measured_figures():
    """``{chapter: Counter(figure)}`` over the markdown cells of every chapter."""
    found = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        figures = collections.Counter()
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                figures.update(match.group(0) for match in MEASURED.finditer("".join(cell["source"])))
        found[path.name[:2]] = figures
    return found


def test_the_pattern_finds_measurements_and_not_shapes():
    text = (
        "folding 244 µs, 0.7 ms, 1632 GB/s, 1.17× torch, within 2x, on the H200; "
        "a 512 × 512 batch, 10,000 × 64, a 5 × 5 matrix, $2^{24}$, exercise 09.parallel-norm"
    )
    assert [m.group(0) for m in MEASURED.finditer(text)] == [
        "244 µs",
        "0.7 ms",
        "1632 GB/s",
        "1.17×",
        "2x",
        "on the H200",
    ]


def test_no_markdown_cell_states_a_measurement_that_no_cell_computed():
    found = measured_figures()
    unexplained = {
        chapter: {figure: count for figure, count in figures.items() if count > PENDING.get(chapter, {}).get(figure, 0)}
        for chapter, figures in found.items()
    }
    unexplained = {chapter: figures for chapter, figures in unexplained.items() if figures}
    assert not unexplained, (
        f"measured figures typed into markdown (print them from the CSV in a code cell instead): {unexplained}"
    )
    gone = {
        chapter: sorted(figure for figure, count in figures.items() if found.get(chapter, {})[figure] < count)
        for chapter, figures in PENDING.items()
    }
    gone = {chapter: figures for chapter, figures in gone.items() if figures}
    assert not gone, f"fixed, so remove them from PENDING: {gone}"
