"""Drive a real JupyterLab in headless Chromium as a student would, and judge what the page shows.

Three parts:

- ``JupyterLab``: a JupyterLab server this test starts (127.0.0.1, a free port, a random token,
  its own settings, workspaces and config folders) and stops (only that process).
- ``chromium``: a headless Chromium driven by Selenium, using Debian's ``/usr/bin/chromium`` and
  ``/usr/bin/chromedriver`` (or ``$PREFIXSUM_CHROMIUM`` and ``$PREFIXSUM_CHROMEDRIVER``); Selenium
  Manager is never asked to download anything.
- ``open_notebook``, ``run_all``, ``read_page``: the student's gestures (open the notebook's
  URL, Run > Run All Cells from the menu bar, type into a cell, Shift+Enter) and a snapshot of
  what the page shows; ``page_problems`` compares a snapshot with what the instructor's ``.ipynb``
  says the notebook should show (``page_checks``), one sentence per problem, naming the notebook
  and the cell. Nothing here executes code through Jupyter's REST API.
"""

import contextlib
import json
import os
import pathlib
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
from page_checks import problems

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("PREFIXSUM_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("PREFIXSUM_CHROMEDRIVER", "/usr/bin/chromedriver")
# Bounded waits: a notebook takes about a minute on a laptop; a loaded 2-core CI machine is slower.
NOTEBOOK_TIMEOUT = float(os.environ.get("PREFIXSUM_BROWSER_TIMEOUT", "900"))
LOAD_TIMEOUT = 120
RENDER_GRACE = 15  # outputs arrive before they are drawn: a problem must persist this long

# ---------------------------------------------------------------------------------------------
# The server


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    """A JupyterLab server serving ``root``, started by ``start`` and stopped by ``stop``."""

    def __init__(self, root, state):
        self.root, self.state = pathlib.Path(root), pathlib.Path(state)
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.process = None
        self.log = self.state / "jupyterlab.log"

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        settings = self.state / "settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True, exist_ok=True)
        # no "would you like news?" toast over the notebook
        (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))  # the checkout's kernels
        env["JUPYTER_CONFIG_DIR"] = str(self.state / "config")  # nothing from the user's own ~/.jupyter
        env["JUPYTER_RUNTIME_DIR"] = str(self.state / "runtime")
        command = [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.allow_root=True",  # CI runs as root; harmless otherwise
            f"--LabApp.user_settings_dir={self.state / 'settings'}",
            f"--LabApp.workspaces_dir={self.state / 'workspaces'}",
        ]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.root)
        deadline = time.monotonic() + LOAD_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                if self.api("GET", "/api/status") is not None:
                    return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer on {self.url} within {LOAD_TIMEOUT} s:\n{self.log_tail()}")

    def api(self, method, path):
        request = urllib.request.Request(
            self.url + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else {}

    def shut_down_kernels(self):
        """Free the memory of the kernels a notebook left running (no code is executed)."""
        for kernel in self.api("GET", "/api/kernels"):
            with contextlib.suppress(OSError):
                self.api("DELETE", f"/api/kernels/{kernel['id']}")

    def log_tail(self, lines=30):
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def stop(self):
        """Stop the server this object started (and with it the kernels it started)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def lay_out(tmp, notebooks=(), students=()):
    """Copy the notebooks into ``tmp/notebooks`` and the benchmark results they read into
    ``tmp/benchmarks`` (they read ``../benchmarks``); write student versions into ``tmp/students``.

    The copies have their stored outputs and execution counts cleared, so that whatever the page
    shows after Run All (a figure, a PASS, a prompt's number) comes from this run: a cell that
    never ran cannot pass on the instructor's stored output. The expectations come from the
    originals."""
    from prefixsum.classroom import student

    (tmp / "notebooks").mkdir(parents=True, exist_ok=True)
    (tmp / "benchmarks").mkdir(exist_ok=True)
    for path in map(pathlib.Path, notebooks):
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        nbformat.write(notebook, tmp / "notebooks" / path.name)
    for path in (ROOT / "benchmarks").iterdir():
        if path.suffix in (".csv", ".json", ".txt"):
            shutil.copy(path, tmp / "benchmarks" / path.name)
    if students:
        student.write_student_versions(students, tmp / "students")
    return tmp


# ---------------------------------------------------------------------------------------------
# The browser


def chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            raise RuntimeError(
                f"{path} is missing: apt-get install -y chromium chromium-driver "
                f"(or point $PREFIXSUM_CHROMIUM / $PREFIXSUM_CHROMEDRIVER at them)"
            )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # an explicit browser and driver: Selenium Manager downloads nothing
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def wait(driver, condition, timeout, message):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.5).until(lambda d: condition(d))
    except TimeoutException:
        raise AssertionError(f"{message} (waited {timeout:.0f} s)") from None


KERNEL_STATUS = (
    "return document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')"
    "?.getAttribute('data-status')"
)
CELLS = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell"


def open_notebook(driver, lab, relpath, n_cells):
    """Open ``relpath`` (under the server's root) in JupyterLab, as its URL would, and wait for
    every cell to be on the page and the kernel to be idle."""
    driver.get(f"{lab.url}/lab/tree/{relpath}?token={lab.token}&reset")
    wait(
        driver,
        lambda d: len(d.find_elements("css selector", CELLS)) == n_cells,
        LOAD_TIMEOUT,
        f"{relpath}: the page did not show its {n_cells} cells",
    )
    wait(
        driver,
        lambda d: d.execute_script(KERNEL_STATUS) == "idle",
        LOAD_TIMEOUT,
        f"{relpath}: the kernel did not start and go idle",
    )


def click_menu(driver, menu, item):
    """Click ``menu`` in the menu bar, then ``item`` in it, by their labels."""
    driver.find_element("xpath", f"//li[contains(@class,'lm-MenuBar-item')][.//div[text()={menu!r}]]").click()
    entry = wait(
        driver,
        lambda d: d.find_elements(
            "xpath", f"//li[contains(@class,'lm-Menu-item')][.//div[@class='lm-Menu-itemLabel' and text()={item!r}]]"
        ),
        10,
        f"no {item!r} in the {menu!r} menu",
    )
    entry[0].click()


PROMPTS = (
    f"return [...document.querySelectorAll('{CELLS}')]"
    ".map(c => c.querySelector('.jp-InputArea-prompt')?.textContent.trim() ?? null)"
)


def settled(driver):
    """True when no cell is running or queued and the kernel is idle."""
    return (
        not any("*" in p for p in driver.execute_script(PROMPTS) if p)
        and driver.execute_script(KERNEL_STATUS) == "idle"
    )


def run_all(driver, relpath, timeout=NOTEBOOK_TIMEOUT):
    """Run > Run All Cells, then wait for every queued cell to have run and the kernel to be idle."""
    click_menu(driver, "Run", "Run All Cells")
    # Run All marks every cell queued at once; Run All stops at the first error, clearing the queue
    wait(driver, settled, timeout, f"{relpath}: cells still running or queued, or the kernel busy")


# one snapshot of the page: per cell, its kind, prompt, first source line, outputs (mime, text), images
SNAPSHOT = f"""
return [...document.querySelectorAll('{CELLS}')].map(cell => ({{
  kind: cell.classList.contains('jp-CodeCell') ? 'code'
        : (cell.classList.contains('jp-MarkdownCell') ? 'markdown' : 'raw'),
  prompt: cell.querySelector('.jp-InputArea-prompt')?.textContent.trim() ?? '',
  first_line: cell.querySelector('.cm-line')?.textContent ?? '',
  outputs: [...cell.querySelectorAll('.jp-OutputArea-output')].map(o => ({{
    mime: o.getAttribute('data-mime-type') || '', text: o.textContent || ''}})),
  images: cell.querySelectorAll('.jp-OutputArea-output img').length,
  steppers: cell.querySelectorAll('.jp-OutputArea-output .ps-stepper').length,
}}));
"""


def read_page(driver):
    return driver.execute_script(SNAPSHOT)


def cell_source(driver, index):
    return driver.execute_script(
        f"return [...document.querySelectorAll('{CELLS}')[arguments[0]].querySelectorAll('.cm-line')]"
        ".map(l => l.textContent).join('\\n')",
        index,
    )


def type_into_cell(driver, index, text):
    """Replace the text of cell ``index`` as a student would: click into its editor, select all
    (Ctrl+A), paste ``text``. The paste is a real ``paste`` event on the editor with the text in
    its clipboard data (headless Chromium has no system clipboard); CodeMirror inserts pasted text
    as it is, where typing key by key would add its own indentation and closing brackets."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    cell = driver.find_elements("css selector", CELLS)[index]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
    editor = cell.find_element("css selector", ".cm-content")
    editor.click()
    wait(
        driver,
        lambda d: d.execute_script("return document.activeElement === arguments[0]", editor),
        10,
        f"cell {index}: its editor did not take the focus",
    )
    ActionChains(driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).perform()
    driver.execute_script(
        """
        const data = new DataTransfer(); data.setData('text/plain', arguments[1]);
        arguments[0].dispatchEvent(new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true}));
    """,
        editor,
        text,
    )
    wait(
        driver,
        lambda d: cell_source(d, index) == text.rstrip("\n"),
        10,
        f"cell {index}: the pasted text did not arrive",
    )


def run_cell_and_next(driver, index, relpath, timeout=NOTEBOOK_TIMEOUT):
    """With cell ``index`` in edit mode, Shift+Enter runs it and selects the next cell; Shift+Enter
    again runs that one. Waits for both to have fresh execution counts and the kernel to be idle."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    before = driver.execute_script(PROMPTS)[index : index + 2]
    for _ in range(2):
        ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()

    def done(d):
        now = d.execute_script(PROMPTS)[index : index + 2]
        return settled(d) and all(re.fullmatch(r"\[\d+\]:", p) and p != b for p, b in zip(now, before))

    wait(driver, done, timeout, f"{relpath}: cells {index} and {index + 1} did not both run again")


def screenshot(driver, folder, name):
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (re.sub(r"[^\w.-]", "_", name) + ".png")
    with contextlib.suppress(Exception):
        driver.save_screenshot(str(path))
        return path
    return None


def page_problems(driver, name, expected, student=False, grace=RENDER_GRACE):
    """``problems`` of the page, given ``grace`` seconds for outputs already received to be drawn."""
    deadline = time.monotonic() + grace
    while True:
        found = problems(name, expected, read_page(driver), student=student)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


# ---------------------------------------------------------------------------------------------
# The stepper (ps.viz.step): what it draws, and the slider moved as a user moves it

STEPPER = """
const cell = document.querySelectorAll(arguments[0])[arguments[1]];
const box = cell && cell.querySelector('.ps-stepper');
if (!box) return null;
const board = box.querySelector('.ps-student') || box.querySelector('.ps-board');
return {
  label: box.querySelector('.ps-step-label')?.textContent ?? '',
  cells: [...board.querySelectorAll('g.ps-cell')]
    .map(g => [g.dataset.array, g.dataset.owner, +g.dataset.index, g.dataset.value]),
  differing: board.querySelectorAll('rect[stroke="#d00000"]').length,
};
"""


def read_stepper(driver, index):
    """The stepper in cell ``index`` as drawn: its step's label, every cell (array, owner, index,
    value shown) of its board (the student's, beside a reference), how many cells are marked as
    differing; None if the cell shows no stepper."""
    return driver.execute_script(STEPPER, CELLS, index)


def drawn_values(stepper, array):
    """The values ``read_stepper`` found in the cells of ``array``, by index (None where blank)."""
    cells = sorted((i, v) for a, _, i, v in stepper["cells"] if a == array)
    return [int(v) if v.lstrip("-").isdigit() else (v or None) for _, v in cells]


def move_slider(driver, index):
    """Move the slider of the stepper in cell ``index`` one step right, as a user does with the
    keyboard (click its handle, press the right arrow), and wait for the drawing to follow."""
    from selenium.webdriver.common.keys import Keys

    before = read_stepper(driver, index)
    handle = driver.find_elements("css selector", CELLS)[index].find_element("css selector", ".ps-stepper .noUi-handle")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", handle)
    handle.click()
    handle.send_keys(Keys.ARROW_RIGHT)
    wait(
        driver,
        lambda d: (read_stepper(d, index) or {}).get("label") != before["label"],
        30,
        f"cell {index}: the stepper did not redraw after its slider moved",
    )


def run_cell(driver, index, relpath, timeout=NOTEBOOK_TIMEOUT):
    """Click into cell ``index``'s editor and Shift+Enter, as a user runs one cell; wait for its new prompt number."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    before = driver.execute_script(PROMPTS)[index]
    cell = driver.find_elements("css selector", CELLS)[index]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
    cell.find_element("css selector", ".cm-content").click()
    ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()

    def done(d):
        now = d.execute_script(PROMPTS)[index]
        return settled(d) and re.fullmatch(r"\[\d+\]:", now or "") and now != before

    wait(driver, done, timeout, f"{relpath}: cell {index} did not run")
