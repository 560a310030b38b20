"""No chapter is longer than a chapter should be (issue 28, item 5).

Chapter 07 had grown to 76 cells and some 7,500 words of prose, two to four times any other; it
is now two chapters. The limits: at most 45 cells and 5,000 words of markdown. A word is what
``str.split`` finds in a markdown cell (formulas and tables count as they are written).

:data:`OVER` is the shrinking list of chapters still above a limit while other work cuts them
down, with the counts they had when listed: a listed chapter may not grow, and must leave the
list once it fits.
"""
import json
import pathlib

import pytest

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
MAX_CELLS, MAX_WORDS = 45, 5000

OVER = {  # chapter -> (cells, markdown words) when listed
    "05_kstep": (51, 3765),
    "06_hierarchical": (69, 4678),
    "09_householder": (63, 4147),
    "11_applications": (50, 2886),
}


def length(path):
    """``(cells, words of markdown)`` of a notebook."""
    cells = json.loads(path.read_text())["cells"]
    return len(cells), sum(len("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")


CHAPTERS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_a_chapter_has_at_most_45_cells_and_5000_words_of_prose(path):
    cells, words = length(path)
    if path.stem in OVER:
        listed_cells, listed_words = OVER[path.stem]
        assert (cells, words) != (min(cells, MAX_CELLS), min(words, MAX_WORDS)), (
            f"{path.stem} fits now ({cells} cells, {words} words): remove it from OVER")
        assert cells <= listed_cells and words <= listed_words, (
            f"{path.stem} grew to {cells} cells and {words} words; OVER lists {listed_cells} and {listed_words}")
    else:
        assert cells <= MAX_CELLS and words <= MAX_WORDS, (
            f"{path.stem}: {cells} cells and {words} words of markdown; the limits are {MAX_CELLS} and {MAX_WORDS}")


def test_every_listed_chapter_exists():
    assert set(OVER) <= {p.stem for p in CHAPTERS}, sorted(set(OVER) - {p.stem for p in CHAPTERS})
