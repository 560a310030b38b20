"""The operators and element types of the scans: :mod:`prefixsum.primitives.ops`, by the name the scans use.

The operators sit in the primitives layer, as CUB keeps its thread operators below its block
and device algorithms, because the block and warp primitives are built per operator; the
scans, the checker and the notebooks import them from here as before.
"""

from ..primitives.ops import (  # noqa: F401
    DTYPES,
    OPS,
    check_dtype,
    check_op,
    device_op,
    host_ufunc,
    identity,
    native,
    numba_type,
)
