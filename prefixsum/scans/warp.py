"""Deprecated: the warp primitives moved to :mod:`prefixsum.primitives.warp`, the lessons to
:mod:`prefixsum.classroom.lessons`.

Every old name still resolves, with a DeprecationWarning naming its new place.
"""

from ..core.moved import moved

_PRIMITIVES = "prefixsum.primitives.warp"
_LESSONS = "prefixsum.classroom.lessons"
__getattr__ = moved(
    __name__,
    {
        **{
            name: f"{_PRIMITIVES}:{name}"
            for name in ("FULL_MASK", "carrier", "scan_syncwarp", "scan_shfl", "reduce_shfl", "lanes_mask")
        },
        **{name: f"{_LESSONS}:{name}" for name in ("VARIANTS", "scan_volatile", "warp_scan_kernel", "warp_scan")},
    },
)
