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
    r"|\b[Oo]n (?:the|an?) H[12]00\b")

# chapter -> figures still in its prose, each with the number of times it occurs. To be moved
# into code output (issue 28, item 1): 06 (sections 9-11, the benchmark report that item 5
# shrinks to one table and one plot) and 11 (the one-pass compaction's bandwidth, new with
# issue 30).
PENDING = {
    "06": {"4 µs": 2, "0.13 ms": 1, "34 µs": 2, "0.4 ms": 1, "0.041 ms": 1, "0.081 ms": 1, "0.0042 ms": 1,
           "0.141 ms": 1, "0.096 ms": 1, "0.0157 ms": 1, "0.0043 ms": 1, "0.006 ms": 1, "1.077 ms": 1,
           "0.046 ms": 1, "0.038 ms": 1, "0.029 ms": 1, "62 GB/s": 1, "177 GB/s": 1, "1466 GB/s": 1,
           "1764 GB/s": 1, "2320 GB/s": 1, "0.384 ms": 1, "3.3 ns": 1, "4.1 ns": 1, "34.6 ms": 1,
           "27.7 ms": 1, "5 µs": 1, "0.108 ms": 1, "0.212 ms": 1, "1.076924 ms": 1, "2.142949 ms": 1,
           "1.090579 ms": 1, "0.3 µs": 1, "0.047 ms": 1, "0.012 ms": 1, "82.2 µs": 1, "1632 GB/s": 1,
           "48.3 µs": 1, "1104.8\n  µs": 1, "712.8 µs": 1, "1082.3 µs": 2, "70.6 µs": 1, "1012.1 µs": 1, "1104.8 µs": 2,
           "10 µs": 1, "0.70 ms": 2},
    "11": {"1.9 TB/s": 1},
}


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
    text = ("folding 244 µs, 0.7 ms, 1632 GB/s, 1.17× torch, within 2x, on the H200; "
            "a 512 × 512 batch, 10,000 × 64, a 5 × 5 matrix, $2^{24}$, exercise 09.parallel-norm")
    assert [m.group(0) for m in MEASURED.finditer(text)] == ["244 µs", "0.7 ms", "1632 GB/s", "1.17×", "2x", "on the H200"]


def test_no_markdown_cell_states_a_measurement_that_no_cell_computed():
    found = measured_figures()
    unexplained = {chapter: {figure: count for figure, count in figures.items()
                             if count > PENDING.get(chapter, {}).get(figure, 0)}
                   for chapter, figures in found.items()}
    unexplained = {chapter: figures for chapter, figures in unexplained.items() if figures}
    assert not unexplained, (
        f"measured figures typed into markdown (print them from the CSV in a code cell instead): {unexplained}")
    gone = {chapter: sorted(figure for figure, count in figures.items() if found.get(chapter, {})[figure] < count)
            for chapter, figures in PENDING.items()}
    gone = {chapter: figures for chapter, figures in gone.items() if figures}
    assert not gone, f"fixed, so remove them from PENDING: {gone}"
