"""Sphinx configuration of the workbook's HTML book: the chapters from their stored outputs.

Build it with ``python -m sphinx -W -b html docs docs/_build/html`` (``pip install ".[docs]"``).
The chapters are the committed notebooks (``docs/notebooks`` links to ``notebooks/``) rendered
by myst-nb without running them: nbval already checks those outputs, and executing the chapters
again would take minutes. The API reference is autodoc over the numpydoc docstrings (napoleon).
"""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# autodoc imports the package: on the simulator, whatever the machine, so the pages do not
# depend on the builder's hardware.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

project = "prefixsum"
author = "the prefixsum authors"
copyright = "the prefixsum authors, MIT licence"
release = version = "0.3.0"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
nb_execution_mode = "off"  # the stored outputs, checked by nbval, are the book's
exclude_patterns = ["_build", "notebooks/sources", "notebooks/build.py", "notebooks/exercise_kill_rates.md"]
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]

napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_member_order = "bysource"
autodoc_typehints = "none"

html_theme = "alabaster"
html_title = "prefixsum: a workbook of GPU scans and tridiagonal solvers"
