"""Deprecated: the look-back's tile states moved to :mod:`prefixsum.primitives.tile_state`, where
the scans and the applications (the one-pass compaction, the onesweep sort) share them.

Every old name still resolves, with a DeprecationWarning naming its new place.
"""

from ..core.moved import moved

__getattr__ = moved(
    __name__,
    {
        name: f"prefixsum.primitives.tile_state:{name}"
        for name in (
            "AGGREGATE",
            "PREFIX",
            "MAX_EPOCH",
            "bit_carrier",
            "wide_bit_carrier",
            "packed",
            "paired",
            "state_arrays",
            "word_access",
            "state_access",
            "look_back",
            "look_back_lane",
            "kept_states",
            "states",
            "draw_tile",
        )
    },
)
