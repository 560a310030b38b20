"""The house kept true: measured numbers live in the benchmarks' CSVs (and the pages built from
them), never in the package's docstrings or comments, where nothing checks them against a run.

A docstring says what was measured and where it is (``benchmarks/transfers_tune.csv``), not the
figure: a figure in prose goes stale with the next driver, card or change, and nothing reruns it.
"""

import ast
import io
import pathlib
import re
import subprocess
import sys
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "prefixsum"

_NUMBER = r"\d+(?:\.\d+)?"
_RANGE = rf"{_NUMBER}(?:\s*(?:-|to|against)\s*{_NUMBER})?"
TIME_OR_RATE = re.compile(
    rf"(?<![\w.]){_RANGE}\s*(?:us|µs|ms|ns|microseconds?|milliseconds?|nanoseconds?|"
    rf"GB/s|GiB/s|TB/s|MB/s|Gelem/s)(?![\w])"
)
"""A time or a throughput: anywhere in prose, a measurement (a design parameter is named by its
constant instead)."""
RATIO = re.compile(rf"(?<![\w.]){_NUMBER}(?:-{_NUMBER})?(?:x\b|\s*%)|\b{_NUMBER}\s+times\s+(?:faster|slower|longer)")
"""A ratio or a percentage: a measurement where the same paragraph names a GPU (elsewhere it is
usually a promise, such as nanosleep's "0 to 2x the request")."""
GPU = re.compile(r"\b(?:[AHBLV]\d{2,3}|RTX|GeForce|Tesla)\b")

ALLOWED = {}
"""``path: figures`` that may stay, each with its reason: none."""


def prose(source):
    """``(line, text)`` of every comment and every string statement (docstrings, attribute
    docstrings) of the Python ``source``."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.append((node.lineno, node.value.value))
    return found


def measured_figures(source):
    """``(line, figure)`` of each measured figure in the prose of ``source``, paragraph by paragraph."""
    figures = []
    for line, text in prose(source):
        for paragraph in re.split(r"\n\s*\n", text):
            found = [m.group(0) for m in TIME_OR_RATE.finditer(paragraph)]
            if GPU.search(paragraph):
                found += [m.group(0) for m in RATIO.finditer(paragraph)]
            figures += [(line, " ".join(figure.split())) for figure in found]
    return figures


def modules():
    return sorted(path.relative_to(ROOT).as_posix() for path in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", modules())
def test_no_measured_figure_in_the_package_prose(path):
    figures = [f for f in measured_figures((ROOT / path).read_text()) if f[1] not in ALLOWED.get(path, ())]
    assert not figures, f"{path} states measured figures {figures}: name the CSV or benchmark that holds them instead"


@pytest.mark.parametrize(
    "source, figure",
    [
        ('"""A scan of 2^24 floats took 61.2 us on the H100."""', "61.2 us"),
        ("x = 1  # 35-55 GB/s each way\n", "35-55 GB/s"),
        ('def f():\n    """Faster on an H200: 1.11-1.17x the old one."""\n', "1.11-1.17x"),
        ('"""The H100 ran it 21% faster."""', "21%"),
        ('"""On the H100 it was 4.5 times faster."""', "4.5 times faster"),
        ('LIMIT = 4\n"""Took 0.95 to 1.5 ms on the shared machine."""', "0.95 to 1.5 ms"),
    ],
)
def test_a_planted_figure_is_caught(source, figure):
    assert figure in [found for _, found in measured_figures(source)]


@pytest.mark.parametrize(
    "source",
    [
        '"""nanosleep only promises 0 to 2x the request."""',
        '"""48 KiB of shared memory, 32 threads a warp, within 30 % on the simulator."""',
        'x = "4.5 ms"  # a string value is data, not prose\n',
    ],
)
def test_what_is_not_a_measurement_passes(source):
    assert measured_figures(source) == []


LINTED = ("prefixsum", "tests", "browser_tests", "benchmarks", "notebooks/build.py")
"""What ruff checks and formats: the package, the tests (the browser's too), the benchmarks and the
notebooks' builder."""


def test_ruff_check_passes():
    """pyproject.toml's lint rules hold on the package, the tests and the benchmarks (ruff: the test extra)."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", *LINTED],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_format_check_passes():
    """The package, the tests and the benchmarks are laid out as ``ruff format`` lays them out
    (pyproject.toml's line length), so that a diff shows what changed and not how it was typed; a
    table whose rows are data (students' code as typed) is kept by ``# fmt: off`` with a reason."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", *LINTED],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


MODULE_LINES = 500
"""The most lines a module of the package, the tests (the browser's too) or the benchmarks may have
(one concern a module)."""


def test_no_module_is_longer_than_the_house_allows():
    long = {
        str(path.relative_to(ROOT)): lines
        for folder in ("prefixsum", "tests", "browser_tests", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert long == {}, f"modules over {MODULE_LINES} lines: split each along its concerns"
