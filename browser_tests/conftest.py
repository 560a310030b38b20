"""Fixtures of the browser test: one JupyterLab server for the session, a fresh headless
Chromium per notebook, and a screenshot of the page whenever a notebook's test fails.

Not collected by a plain ``python -m pytest`` (``testpaths`` names ``tests`` and ``notebooks``):
run it with ``python -m pytest browser_tests`` (CONTRIBUTING.md, "The notebooks in a browser").
"""

import contextlib

import labdriver
import pytest

NOTEBOOKS = sorted((labdriver.ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STUDENT = labdriver.ROOT / "notebooks" / "01_ladder.ipynb"  # the student version the tests open
_SCREENSHOTS = []


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """JupyterLab serving copies of the notebooks (outputs cleared), the benchmark CSVs they
    read, and the student version of STUDENT, from a temporary folder."""
    root = labdriver.lay_out(tmp_path_factory.mktemp("lab"), notebooks=NOTEBOOKS, students=[STUDENT])
    server = labdriver.JupyterLab(root, tmp_path_factory.mktemp("lab_state")).start()
    yield server
    server.stop()


@pytest.fixture
def driver(lab):
    """A fresh headless Chromium (quitting it skips the unsaved-changes prompt of a reload);
    afterwards the kernels the page started are shut down, so that nine of them never sit in memory."""
    browser = labdriver.chromium()
    yield browser
    browser.quit()
    lab.shut_down_kernels()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "screenshots"


@pytest.fixture
def on_failure(screenshot_dir):
    """``with on_failure(driver, name):`` saves a screenshot of the page if the block fails, and
    names it in the failure."""

    @contextlib.contextmanager
    def guard(driver, name):
        try:
            yield
        except Exception as exc:
            path = labdriver.screenshot(driver, screenshot_dir, name)
            if path:
                _SCREENSHOTS.append(path)
            raise AssertionError(f"{exc}\nscreenshot of the page: {path}") from exc

    return guard


def pytest_terminal_summary(terminalreporter):
    if _SCREENSHOTS:
        terminalreporter.section("browser screenshots")
        for path in _SCREENSHOTS:
            terminalreporter.write_line(str(path))
