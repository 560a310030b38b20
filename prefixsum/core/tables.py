"""The committed measurements a choice is made from: the CSVs of ``benchmarks/``, read where they ship.

A method's registry (:mod:`prefixsum.core.registry`) picks ``"auto"`` from measured times, and
the look-back scan its tile; both read the tables ``run_gpu.sh``'s scripts wrote and the
repository commits. They ship with the package: read from the checkout's ``benchmarks/`` or, in an
installed wheel, from ``prefixsum/data/`` (where ``setup.py`` copies the committed results). A
copy that lacks both has no rows, and every choice falls back to its default.
"""

import csv
import functools
import math
import pathlib

PLACES = (
    pathlib.Path(__file__).resolve().parents[2] / "benchmarks",  # a checkout
    pathlib.Path(__file__).resolve().parents[1] / "data",
)  # an installed wheel


@functools.lru_cache(maxsize=None)
def rows(name):
    """The rows of the committed table ``name`` (``"scan_tiles.csv"``) as a tuple of dicts; ``()`` without it."""
    for folder in PLACES:
        path = folder / name
        if path.is_file():
            with open(path, newline="") as handle:
                return tuple(csv.DictReader(handle))
    return ()


def nearest(lengths, n):
    """The length of ``lengths`` nearest ``n`` in log2 (a tie goes to the longer one), or None if there is none."""
    at = math.log2(max(n, 1))
    return min(lengths, key=lambda length: (abs(math.log2(max(length, 1)) - at), -length), default=None)
