"""The scans: operators, the registry, the public scan, the reference, and one module per algorithm.

Layered as CUB's are: the device primitives of :mod:`prefixsum.primitives` (warp and block
scans, a tile's load and store) and :mod:`.tiles` (what every tiled scan shares: a tile's
place, the carry between tiles) below the algorithms; each algorithm module registers itself in
:data:`.registry.ALGORITHMS`, and :func:`.api.scan` dispatches through it. :mod:`.user_ops` runs
a user's operator on tuple elements through the algorithms that carry one.

The algorithms of the chapters are imported in the chapters' order (the registry's order, which
tables follow); any other module of this package is imported after them, so that a new
algorithm is one new file here and registers itself with no other file edited.
"""

import importlib
import pkgutil

from . import api, ops, reference, registry, testing, tile_state, tiles, user_ops, warp  # noqa: F401

# The order of registration is the chapters' order (ps.ALGORITHMS, the demo, the tables): not sorted.
# isort: off
from . import ladder, folding, hillis_steele, blelloch, kstep, hierarchical, lookback  # noqa: F401  (register themselves)
# isort: on

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
