"""Make the checkout's package the one every test and every notebook kernel imports.

nbval runs each notebook in its own Jupyter kernel (a child process, started in notebooks/);
the kernel inherits this environment, so it imports this checkout even where an older
``prefixsum`` is installed.
"""
import os
import pathlib

_ROOT = str(pathlib.Path(__file__).resolve().parent)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")]))
