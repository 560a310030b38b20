"""The chapters cite their sources by what they are, on the book's references page.

A reader of the repository has only the repository: no internal numbers of the source
documents ("seed 003"), no paths outside it (``../shared/seeds/``, ``specs/kstep.md``). Every
chapter links to the book's references page, ``docs/references.md`` (``../docs/references.md`` from
``notebooks/``, which resolves in Jupyter and in the book alike), and every anchor a chapter links to is a heading
of that page (the book's build, ``sphinx -W``, fails on a missing one; this test says which).
"""

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
REFERENCES = ROOT / "docs" / "references.md"
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
INTERNAL = re.compile(r"\bseeds? 00\d|\.\./shared/|shared/seeds|\bspecs/\w+\.md", re.IGNORECASE)


def readable_files():
    """Every file a reader of the repository reads: sources of the chapters, pages, the package, the
    benchmarks, the tests (not the changelog's old entries)."""
    patterns = (
        "*.md",
        "notebooks/*.md",
        "notebooks/sources/*.py",
        "docs/*.md",
        "prefixsum/**/*.py",
        "benchmarks/*.py",
        "benchmarks/*.sh",
        ".ci/*",
        "benchmarks/README.md",
        "tests/*.py",
    )
    found = {path for pattern in patterns for path in ROOT.glob(pattern)}
    return sorted(found - {pathlib.Path(__file__), ROOT / "CHANGELOG.md"})  # the changelog keeps its history


def anchors():
    """The heading anchors of the references page, as the book (myst's heading anchors) makes them."""
    headings = re.findall(r"^#{1,3} (.+)$", REFERENCES.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_no_file_cites_a_source_by_an_internal_number_or_a_path_outside_the_repository():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in readable_files()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if INTERNAL.search(line)
    ]
    assert not found, "cite the source by what it is (docs/references.md):\n" + "\n".join(found)


@pytest.mark.parametrize("path", CHAPTERS[1:], ids=[path.stem for path in CHAPTERS[1:]])
def test_every_chapter_links_to_the_references_page_and_its_anchors_exist(path):
    markdown = "".join(
        "".join(cell["source"]) for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "markdown"
    )
    links = re.findall(r"\]\(\.\./docs/references\.md(?:#([^)]*))?\)", markdown)
    assert links, f"{path.name} links to no entry of docs/references.md"
    missing = sorted({anchor for anchor in links if anchor and anchor not in anchors()})
    assert not missing, f"{path.name} links to anchors that docs/references.md lacks: {missing}"
