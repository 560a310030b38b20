"""The notebooks of an nbval run whose only failure is a Jupyter kernel that died before it answered.

Usage: ``python .ci/kernel_deaths.py JUNIT_XML`` prints their paths, one per line (for a second run,
alone), and exits with status 1, naming the cells, when any other cell failed: then the run failed
for a reason of its own, and CI stops.

Several kernels starting at once (pytest-xdist's workers) now and then die before they reply to
``kernel_info``: jupyter_client picks a kernel's free ports before the kernel binds them, and
another process can take one meanwhile ("Address already in use"; nbmake issue #129). No cell of
that notebook ran, so running it again, alone, is the same test.
"""
import pathlib
import sys
from xml.etree import ElementTree

DIED = "Kernel died before replying to kernel_info"


def classify(path):
    """``(died, other)`` of the JUnit XML at ``path``: the notebooks (``notebooks/NN_name.ipynb``)
    of the cells that failed because their kernel died at start, and a line for every other
    failed cell."""
    died, other = set(), []
    for case in ElementTree.parse(path).iter("testcase"):
        problem = case.find("error") if case.find("error") is not None else case.find("failure")
        if problem is None:
            continue
        notebook = pathlib.Path("notebooks", case.get("classname", "").removeprefix("notebooks."))
        if DIED in (problem.get("message") or ""):
            died.add(notebook)
        else:
            other.append(f"{notebook}::{case.get('name')}: {(problem.get('message') or '')[:200]}")
    return died, other


def main(path):
    died, other = classify(path)
    if other or not died:
        print("nbval failed for another reason than a kernel that died at start:", *(other or ["no failed cell in its report"]),
              sep="\n  ", file=sys.stderr)
        return 1
    print("\n".join(sorted(map(str, died))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
