"""The HTML book in a real browser: two chapters' pages open and every figure on them loads.

The book is ``$PREFIXSUM_BOOK`` when set (``.ci/run`` builds it once and points here), else it is
built into a temporary folder (``pip install ".[docs]"``). It is served over HTTP from
127.0.0.1, as a web server would, and read by the same headless Chromium as the notebooks.
A figure that is on the page but whose file is missing must fail the same check.
"""

import functools
import http.server
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading

import labdriver
import page_checks
import pytest

CHAPTERS = ("01_ladder", "07_tridiagonal_pcr")  # a scan chapter and a tridiagonal one, both with figures
# An image that has loaded has a size; a missing file leaves an image of width 0.
FIGURES = """return Array.from(document.querySelectorAll('.cell_output img')).map(
    img => [img.getAttribute('src'), img.complete && img.naturalWidth > 0])"""


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    built = os.environ.get("PREFIXSUM_BOOK")
    if built:
        return pathlib.Path(built)
    out = tmp_path_factory.mktemp("book")
    subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(labdriver.ROOT / "docs"), str(out)], check=True
    )
    return out


@pytest.fixture(scope="module")
def serve():
    """``serve(folder)`` -> the URL of an HTTP server on 127.0.0.1 for ``folder``, stopped after the tests."""
    servers = []

    def start(folder):
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def browser():
    driver = labdriver.chromium()
    yield driver
    driver.quit()


def figures(browser, url, chapter):
    """``[(src, loaded)]`` of the chapter page's output figures, after the page has loaded."""
    browser.get(f"{url}/notebooks/{chapter}.html")
    labdriver.wait(
        browser,
        lambda d: d.execute_script("return document.readyState") == "complete",
        labdriver.LOAD_TIMEOUT,
        f"the book's page of {chapter} did not load",
    )
    return browser.execute_script(FIGURES)


def stored_figures(chapter):
    """The chapter's stored PNG outputs: its figures, and the pictures a stepper widget stores as its
    fallback (a static page shows those; JupyterLab shows the widget instead)."""
    cells = page_checks.expectations(labdriver.ROOT / "notebooks" / f"{chapter}.ipynb")
    return sum(cell["images"] + cell["steppers"] for cell in cells)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapters_page_shows_every_stored_figure(book, serve, browser, chapter, on_failure):
    url = serve(book)
    with on_failure(browser, f"book_{chapter}"):
        shown = figures(browser, url, chapter)
        assert "prefixsum" in browser.title
        assert len(shown) == stored_figures(chapter) > 0, f"{chapter}: {len(shown)} figures on the page"
        assert all(loaded for _, loaded in shown), (
            f"{chapter}: figures that did not load: {[s for s, ok in shown if not ok]}"
        )


def test_a_figure_whose_file_is_missing_fails_the_check(book, serve, browser, tmp_path):
    broken = shutil.copytree(book, tmp_path / "book")
    page = broken / "notebooks" / f"{CHAPTERS[0]}.html"
    missing = re.search(r'<img [^>]*src="([^"]+)"', page.read_text()[page.read_text().index("cell_output") :]).group(1)
    (page.parent / missing).unlink()
    shown = figures(browser, serve(broken), CHAPTERS[0])
    assert len(shown) == stored_figures(CHAPTERS[0])
    assert [src for src, loaded in shown if not loaded] == [missing]
