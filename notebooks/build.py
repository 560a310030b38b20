"""Rebuild the notebooks from their jupytext sources and store fresh outputs.

Each chapter is kept as a pair: ``sources/NN_topic.py`` (jupytext percent format, easy to review
and diff) and ``NN_topic.ipynb`` (what students open and nbval runs). The sources have a folder
of their own, so that JupyterLab's file browser shows each chapter once. This script turns each
source into its notebook, written to this folder beside the others, and executes it top to
bottom on the CUDA simulator with this folder as the working directory (the notebooks read
``../benchmarks/``), so the stored outputs are the ones nbval compares against.

Needs jupytext and nbclient besides the package: ``pip install ".[dev]"``.

    python notebooks/build.py                         # every chapter
    python notebooks/build.py sources/01_ladder.py    # one chapter (or just 01_ladder.py)
"""

import os
import pathlib
import sys
import time

import jupytext
import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent
SOURCES = HERE / "sources"


def build(source):
    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata.pop("jupytext", None)
    for number, cell in enumerate(notebook.cells):
        cell.id = f"cell-{number:03d}"  # jupytext draws new ids on every build: diffs would show them all
    start = time.perf_counter()
    NotebookClient(notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    static_outputs(notebook)
    target = HERE / source.with_suffix(".ipynb").name
    nbformat.write(notebook, target)
    print(f"{target.name}: executed in {time.perf_counter() - start:.1f} s")


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def static_outputs(notebook):
    """Keep a widget's static fallback (``ps.viz.step``'s picture and text line) and drop the
    widget itself: its model lived in the kernel that built the notebook, so a stored view would
    only show "model not found"; the picture is what readers without a kernel, and nbval, see.
    Consecutive text of one stream is stored as one output (:func:`coalesced`)."""
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            output.get("data", {}).pop(WIDGET_VIEW, None)
        if "outputs" in cell:
            cell.outputs = coalesced(cell.outputs)


def coalesced(outputs):
    """``outputs`` with consecutive text of one stream in one output: a kernel sends a cell's prints in
    as many messages as its flushes, which a busy machine makes more of, and the stored notebook
    should not depend on that."""
    found = []
    for output in outputs:
        if (
            output.get("output_type") == "stream"
            and found
            and found[-1].get("output_type") == "stream"
            and found[-1].get("name") == output.get("name")
        ):
            found[-1]["text"] += output["text"]
        else:
            found.append(output)
    return found


def simulate_in_kernels():
    """Have the notebooks' kernels import this checkout and simulate, giving the true reason.

    Importing prefixsum here makes the device choice that the kernels inherit: on a machine
    without a GPU they report "no usable CUDA GPU found", as on a student's laptop. On a machine
    with one, this script hands the simulator down itself, saying so, rather than setting
    NUMBA_ENABLE_CUDASIM as a user would.
    """
    os.environ.setdefault("PYTHONPATH", str(HERE.parent))
    sys.path[:0] = os.environ["PYTHONPATH"].split(os.pathsep)
    import prefixsum
    from prefixsum.core import device as _device

    if not prefixsum.device_info()["simulator"]:
        _device.hand_down(True, "notebooks/build.py stores the simulator's outputs")


def source_path(name):
    """A source given as a path, or by its name in ``sources/``."""
    path = pathlib.Path(name)
    return path.resolve() if path.exists() else SOURCES / path.name


def main(names):
    simulate_in_kernels()
    sources = [source_path(name) for name in names] or sorted(SOURCES.glob("[0-9][0-9]_*.py"))
    for source in sources:
        build(source)


if __name__ == "__main__":
    main(sys.argv[1:])
