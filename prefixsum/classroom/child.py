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

    previous = {name: os.environ.get(name) for name in (_device._ENV, _device._MARK)}
    # the spawned child reads it when it imports prefixsum
    _device.hand_down(True, "a simulated run for a process on the GPU")
    try:
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            payload = pool.apply(_call_pickled, (cloudpickle.dumps((fn, args, kwargs)),))
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return cloudpickle.loads(payload)
