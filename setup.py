"""The wheel carries the committed benchmark results the chapters quote (see ``build_py`` below).

Everything else about the package is declared in ``pyproject.toml``.
"""
import pathlib

from setuptools import setup
from setuptools.command.build_py import build_py

# The results live in one place, benchmarks/, where run_gpu.sh's scripts write them. A chapter
# quotes them through prefixsum.cli.results.path, which finds them in an installed package's
# prefixsum/data/ when the notebook runs outside a checkout (a student's handout folder).
RESULTS = ("*.csv", "h200/*.csv", "warp_semantics_compare.txt")


class build_py_with_results(build_py):
    """Build the package, then copy ``benchmarks/``'s results into ``prefixsum/data/`` of the build."""

    def run(self):
        super().run()
        source = pathlib.Path(__file__).resolve().parent / "benchmarks"
        target = pathlib.Path(self.build_lib) / "prefixsum" / "data"
        for pattern in RESULTS:
            for result in sorted(source.glob(pattern)):
                copy = target / result.relative_to(source)
                self.mkpath(str(copy.parent))
                self.copy_file(str(result), str(copy))


setup(cmdclass={"build_py": build_py_with_results})
