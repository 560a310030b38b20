"""The classroom CUDA simulator: numba's simulator, made faster and stricter.

numba's CUDA simulator runs every CUDA thread as an OS thread, so a kernel with barriers spends
most of its time handing the GIL from thread to thread, and it quietly accepts code that fails or
misbehaves on a GPU. This package replaces how a simulated kernel *runs* while keeping everything
else of numba's simulator (``cuda.jit``, device arrays, copies, streams); kernel code needs no
change.

``install()`` patches numba's simulator in place and returns True; it is idempotent, and does
nothing (returning False) unless numba's simulator is selected (``numba.config.ENABLE_CUDASIM``).
``prefixsum`` calls it on import. Afterwards::

    with prefixsum.sim.enabled(False):   # numba's stock simulator, e.g. to compare
        kernel[blocks, threads](x)
    prefixsum.sim.is_enabled()           # True when the next launch runs here

Every rule names the kernel, the block and the thread that broke it. Where each is documented:

* :mod:`.scheduler`: how a launch runs (the device model: a few resident blocks taking turns in
  a seeded order; deterministic greenlet threads), barrier divergence, deadlocks, silent
  overflow;
* :mod:`.launch`: launches a GPU refuses (:class:`LaunchError`);
* :mod:`.memory`: negative and out-of-bounds indices, the arrays the access hook sees, what one
  block sees of another's stores (fences, atomics) and when a thread polls;
* :mod:`.allocation`: poisoned shared and local memory, one array per call site;
* :mod:`.warp`: shuffles, votes, ``syncwarp`` and ``activemask``;
* :mod:`.errors`: the error messages and how to sanitize them;
* :mod:`.hooks`: the launch, device-function call, allocation, access, fence and wait hooks;
* :mod:`.integers` and :mod:`.numba_typing`: integer arithmetic and ``popc``/``clz``/``ffs``/``brev``
  as numba compiles them for a GPU, not as numpy computes them;
* :mod:`.settings`: the switches ``enabled``, ``allow_negative_indices``, ``resident_blocks``
  and ``block_order_seed``;
* :mod:`.numba_patches`: what ``install()`` changes in numba's simulator;
* :mod:`.numba_sim`: the one door to numba's simulator internals.
"""

from ...core.poison import POISON_BYTE, poison_value
from .errors import (
    BarrierDivergenceError,
    DeadlockError,
    KernelError,
    LaunchError,
    NegativeIndexError,
    PollLimitError,
    SimError,
    WarpDivergenceError,
)
from .hooks import (
    Access,
    Fence,
    LaunchInfo,
    Wait,
    access_hook,
    allocation_hook,
    call_hook,
    fence_hook,
    launch_hook,
    wait_hook,
)
from .numba_patches import install, is_enabled
from .scheduler import in_launch
from .settings import (
    DEFAULT_RESIDENT_BLOCKS,
    DEFAULT_SEED,
    allow_negative_indices,
    block_order_seed,
    enabled,
    resident_blocks,
)

__all__ = [
    "Access",
    "BarrierDivergenceError",
    "DEFAULT_RESIDENT_BLOCKS",
    "DEFAULT_SEED",
    "DeadlockError",
    "Fence",
    "KernelError",
    "LaunchError",
    "LaunchInfo",
    "NegativeIndexError",
    "POISON_BYTE",
    "PollLimitError",
    "SimError",
    "Wait",
    "WarpDivergenceError",
    "access_hook",
    "allocation_hook",
    "allow_negative_indices",
    "block_order_seed",
    "call_hook",
    "enabled",
    "fence_hook",
    "in_launch",
    "install",
    "is_enabled",
    "launch_hook",
    "poison_value",
    "resident_blocks",
    "wait_hook",
]
