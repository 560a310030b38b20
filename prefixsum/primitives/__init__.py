"""Device primitives below the algorithms, as CUB keeps BlockLoad / BlockScan / BlockStore below its agents.

Device functions only (and the storage of the look-back's states), no kernels of their own and no registry: the scans
(:mod:`prefixsum.scans`) and the tridiagonal solvers (:mod:`prefixsum.tridiag`) build their kernels from them.

* :mod:`.ops`: the operators and element types, their identities, an operator as a device function;
* :mod:`.warp`: ``FULL_MASK``, a warp's scan and reduction (shuffles, or ``syncwarp`` on shared memory),
  a lane's rank among the lanes that keep something;
* :mod:`.block`: a block's scan and reduction, a tile's load and store through shared memory;
* :mod:`.tile_state`: the look-back's tile states (publish, peek, the look-back by a warp and by
  one thread, the tile-id draw) and their storage per thread and stream, shared by the look-back
  scan, the one-pass compaction and the onesweep sort;
* :mod:`.chunk`: a thread's chunk of rows of tridiagonal systems: the loads into shared memory
  and registers, and the partition step on it.
"""

from . import block, chunk, ops, tile_state, warp  # noqa: F401
