"""The scans: operators, the registry, the public scan, the reference, and one module per algorithm.

Layered as CUB's are: :mod:`.warp` (warp primitives) and :mod:`.tiles` (what every tiled scan
shares: a tile's place, the carry between tiles) below the algorithms; each algorithm module
registers itself in :data:`.registry.ALGORITHMS`, and :func:`.api.scan` dispatches through it.
:mod:`.user_ops` runs a user's operator on tuple elements through the algorithms that carry one.
"""
from . import api, ops, reference, registry, testing, tiles, user_ops, warp  # noqa: F401
from . import ladder, folding, hillis_steele, blelloch, kstep, hierarchical, lookback  # noqa: F401  (register themselves)
