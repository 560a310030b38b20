"""Device primitives below the algorithms, as CUB keeps BlockLoad / BlockScan / BlockStore below its agents.

Device functions only, no kernels of their own and no registry: the scans (:mod:`prefixsum.scans`)
and the tridiagonal solvers (:mod:`prefixsum.tridiag`) build their kernels from them.

* :mod:`.ops`: the operators and element types, their identities, an operator as a device function;
* :mod:`.warp`: ``FULL_MASK``, a warp's scan and reduction (shuffles, or ``syncwarp`` on shared memory);
* :mod:`.block`: a block's scan and reduction, a tile's load and store through shared memory;
* :mod:`.chunk`: a thread's chunk of rows of tridiagonal systems: the loads into shared memory
  and registers, and the partition step on it.
"""
from . import block, chunk, ops, warp  # noqa: F401
