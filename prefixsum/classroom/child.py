"""Run a function on the CUDA simulator, also from a process that uses a real GPU.

numba picks the simulator or the GPU once per process. On a GPU machine, a notebook that wants
to show a simulated run (a trace, the stock simulator's behaviour) sends the function to a fresh
child process that simulates, so the notebook's own CUDA session stays intact and its outputs
are the same as on a laptop. Functions and arguments travel by cloudpickle, so lambdas and
functions defined in a notebook work.
"""
import multiprocessing
import os

from ..core import device as _device
from ..core.device import simulating


def _call_pickled(payload):
    import cloudpickle

    import prefixsum  # noqa: F401  (chooses the simulator and installs the classroom one)

    fn, args, kwargs = cloudpickle.loads(payload)
    return cloudpickle.dumps(fn(*args, **kwargs))


def on_simulator(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, run on the simulator: here if this process simulates, else in a child.

    ``fn`` must return something picklable; an exception in the child is raised here again.
    """
    if simulating():
        return fn(*args, **kwargs)
    import cloudpickle

    previous = os.environ.get(_device._ENV)
    os.environ[_device._ENV] = "1"  # the spawned child reads it when it imports prefixsum
    try:
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            payload = pool.apply(_call_pickled, (cloudpickle.dumps((fn, args, kwargs)),))
    finally:
        if previous is None:
            os.environ.pop(_device._ENV, None)
        else:
            os.environ[_device._ENV] = previous
    return cloudpickle.loads(payload)
