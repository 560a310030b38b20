"""Rebuild the notebooks from their jupytext sources and store fresh outputs.

Each chapter is kept as a pair: ``NN_topic.py`` (jupytext percent format, easy to review and
diff) and ``NN_topic.ipynb`` (what students open and nbval runs). This script turns each source
into its notebook and executes it top to bottom on the CUDA simulator, so the stored outputs
are the ones nbval compares against.

    python notebooks/build.py                 # every chapter
    python notebooks/build.py 01_ladder.py    # one chapter
"""
import os
import pathlib
import sys
import time

import jupytext
import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent


def build(source):
    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata.pop("jupytext", None)
    start = time.perf_counter()
    NotebookClient(notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    target = source.with_suffix(".ipynb")
    nbformat.write(notebook, target)
    print(f"{target.name}: executed in {time.perf_counter() - start:.1f} s")


def main(names):
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    os.environ.setdefault("PYTHONPATH", str(HERE.parent))
    sources = [HERE / name for name in names] or sorted(HERE.glob("[0-9][0-9]_*.py"))
    for source in sources:
        build(source)


if __name__ == "__main__":
    main(sys.argv[1:])
