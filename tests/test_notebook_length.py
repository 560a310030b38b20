"""Every chapter is short enough to read in one sitting: at most 45 cells and 5,000 words of prose.

Issue 28, item 5: chapters had grown to 60-76 cells, mostly benchmark reports. Words are the
whitespace-separated words of the markdown cells (prose, math and inline code alike); cells
are all cells, code and markdown.

:data:`PENDING` names the chapters still over a limit while other work shortens them; each
must still be over (a fixed one must leave the list).
"""

import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_CELLS = 45
MAX_WORDS = 5000

# chapter -> why it is still long; none since chapter 07 was split in two (issue 28, item 5).
PENDING = {}


def length(path):
    """``(cells, words of markdown)`` of the notebook at ``path``."""
    cells = json.loads(path.read_text())["cells"]
    words = sum(len("".join(cell["source"]).split()) for cell in cells if cell["cell_type"] == "markdown")
    return len(cells), words


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_chapter_is_at_most_45_cells_and_5000_words(path):
    cells, words = length(path)
    over = cells > MAX_CELLS or words > MAX_WORDS
    if path.stem in PENDING:
        assert over, f"{path.stem} is within the limits now ({cells} cells, {words} words): remove it from PENDING"
    else:
        assert not over, (
            f"{path.stem} has {cells} cells (at most {MAX_CELLS}) and {words} words of prose "
            f"(at most {MAX_WORDS}): cut repetitions and benchmark narration, or fold lead-in cells"
        )


def test_pending_chapters_exist():
    assert set(PENDING) <= {path.stem for path in NOTEBOOKS}, "a chapter of PENDING was renamed: follow it"
