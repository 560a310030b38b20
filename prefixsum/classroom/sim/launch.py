"""A kernel launch from the host: its configuration checked, its arguments wrapped, its blocks run.

A launch a GPU refuses raises :class:`LaunchError`: more than 1024 threads per block, a block
dimension over its limit (x, y <= 1024, z <= 64), a zero dimension, a grid over its limit, or
more than 48 KiB of shared memory per block (the limits of :mod:`prefixsum.core.hardware`).

The simulator runs one launch at a time: launches from several host threads take turns
(:func:`prefixsum.core.workspace.simulator_turn`, which the package's public calls take for their
whole length as well, as ``cuda`` in a running kernel's modules is the simulated module).
(numba's simulator keeps a launch's configuration, ``kernel[grid, block]``, on the kernel object
itself, so two threads of a user's own code that launch one kernel with different
configurations at the same moment may swap them.)
"""

import numpy as np

from ...core.hardware import (
    MAX_BLOCK_DIM,
    MAX_GRID_DIM,
    MAX_SHARED_BYTES_PER_BLOCK,
    MAX_THREADS_PER_BLOCK,
)
from ...core.workspace import simulator_turn
from . import hooks, numba_sim
from .errors import LaunchError, launch_refused
from .hooks import LaunchInfo
from .scheduler import Launch


def run(kernel, args):
    """Launch ``kernel`` (configured with its grid and block) on ``args`` in the simulator.

    Copies arrays passed from the host back to the host when the launch ends, as numba's
    simulator does. A launch from another host thread waits until this one has ended.
    """
    with simulator_turn():
        _run(kernel, args)


def _run(kernel, args):
    grid_dim, block_dim = numba_sim.normalize_kernel_dimensions(kernel.grid_dim, kernel.block_dim)
    function, shared_bytes = numba_sim.kernel_function(kernel), numba_sim.dynamic_shared_bytes(kernel)
    hooks.launches(
        LaunchInfo(function.__name__, function, tuple(grid_dim), tuple(block_dim), shared_bytes, tuple(args))
    )
    _check_configuration(kernel, grid_dim, block_dim)
    launch = Launch(
        kernel,
        grid_dim,
        block_dim,
        hooks.accesses.callbacks,
        hooks.calls.callbacks,
        hooks.fences.callbacks,
        hooks.waits.callbacks,
    )
    write_back = []
    code = function.__code__
    names = code.co_varnames[: code.co_argcount]
    kernel_args = [
        _argument(kernel, arg, names[i] if i < len(names) else f"arg{i}", launch.global_class, write_back)
        for i, arg in enumerate(args)
    ]
    launch.run(kernel_args)
    for copy_back in write_back:
        copy_back()


def _argument(kernel, arg, name, array_class, write_back):
    """A kernel argument as the threads see it; mirrors numba's simulator."""
    ty = None
    for extension in kernel.extensions:
        ty, arg = extension.prepare_args(ty, arg, stream=0, retr=write_back)
    if isinstance(arg, np.ndarray) and arg.ndim > 0:
        arg = numba_sim.wrap_arg(arg).to_device(write_back)
    elif isinstance(arg, numba_sim.ArgHint):
        arg = arg.to_device(write_back)
    elif isinstance(arg, np.void):
        arg = numba_sim.FakeCUDAArray(arg)
    ary = numba_sim.host_array(arg)
    if ary is not None:
        record = () if isinstance(ary, np.void) else None
        return array_class(ary, name, "global", rec=record)
    return arg


def _check_configuration(kernel, grid_dim, block_dim):
    """Raise LaunchError for a launch configuration that a GPU refuses."""
    problems = []
    threads = block_dim[0] * block_dim[1] * block_dim[2]
    if min(block_dim) < 1 or min(grid_dim) < 1:
        problems.append("every grid and block dimension must be at least 1")
    if threads > MAX_THREADS_PER_BLOCK:
        problems.append(f"{threads} threads per block, but a block has at most {MAX_THREADS_PER_BLOCK}")
    if any(d > m for d, m in zip(block_dim, MAX_BLOCK_DIM)):
        x, y, z = MAX_BLOCK_DIM
        problems.append(f"blockDim is limited to x <= {x}, y <= {y}, z <= {z}")
    if any(d > m for d, m in zip(grid_dim, MAX_GRID_DIM)):
        x, y, z = MAX_GRID_DIM
        problems.append(f"gridDim is limited to x <= 2**{x.bit_length()} - 1, y <= {y}, z <= {z}")
    shared_bytes = numba_sim.dynamic_shared_bytes(kernel)
    if shared_bytes > MAX_SHARED_BYTES_PER_BLOCK:
        problems.append(
            f"{shared_bytes} bytes of dynamic shared memory, but a block has at most {MAX_SHARED_BYTES_PER_BLOCK}"
        )
    if problems:
        raise LaunchError(launch_refused(numba_sim.kernel_function(kernel).__name__, grid_dim, block_dim, problems))
