"""Run a function on the CUDA simulator, also from a process that uses a real GPU.

numba picks the simulator or the GPU once per process (``NUMBA_ENABLE_CUDASIM``, read when
``numba.cuda`` is first imported). On a GPU machine, a notebook that wants a simulated run (a
check, a trace, the stock simulator's behaviour) sends the function to a *simulating worker*: one
fresh Python process per notebook session that imported the package on the simulator and stays
until the session ends. The notebook's own CUDA session stays intact, the run is the one a laptop
makes, and a check cell of a dozen traced sizes starts one process, not one per size
(``ARCHITECTURE.md`` says why a worker rather than an in-process simulation).

Functions and arguments travel by cloudpickle, so lambdas, closures and functions defined in a
notebook work. A ``cuda.jit`` kernel or device function of the real CUDA target cannot be rebuilt
in a simulating process as it is, so :class:`_Pickler` sends its Python function and options and
the worker applies its own (simulated) ``cuda.jit`` to it; a kernel of an importable module goes
by name, so the worker uses its own module's. A real device array travels as its contents.

What the simulated run prints reaches this process's ``sys.stdout`` and ``sys.stderr``, and an
exception it raises is raised here: the same type and message, with the worker's traceback as its
cause. The source of notebook cells (IPython keeps it in :mod:`linecache`, not in files) is sent
along, so messages that quote a kernel's line quote it as they do on a laptop.
"""

import atexit
import contextlib
import functools
import io
import linecache
import marshal
import os
import signal
import subprocess
import sys
import threading
import traceback
import types
from multiprocessing import connection

import cloudpickle

from ..core import device as _device, numba_gpu
from ..core.device import simulating
from .sim.settings import settings as _sim_settings

_WAIT_SECONDS = 0.5  # how often a waiting caller looks whether the worker died

# The worker's program: the package's import notice ("running on the CUDA simulator") is not the
# notebook's output.
_SERVE = """\
import contextlib, io
with contextlib.redirect_stderr(io.StringIO()):
    from prefixsum.classroom import child
child.serve({requests}, {replies})
"""


_carried = {}  # name -> (snapshot, apply): this process's settings that a simulated run must see


def carry(name, snapshot, apply):
    """Have every simulated run see this process's state: ``apply(snapshot())`` in the worker, for the run.

    For process-wide settings a notebook changes around a check (``ps.sim.resident_blocks(48)``,
    ``ps.check.thorough()``); both processes register the same ``name`` when they import the package.
    """
    _carried[name] = (snapshot, apply)


def simulated(function):
    """Decorate ``function`` to run whole in the simulating worker when this process is on a GPU.

    A check traces one run per size; in the worker only its verdict travels back, not every trace.
    The decorated function travels by name (``functools.wraps`` gives it ``function``'s), so the
    worker runs its own module's.
    """

    @functools.wraps(function)
    def run_simulated(*args, **kwargs):
        if simulating():
            return function(*args, **kwargs)
        return _worker().call(run_simulated, args, kwargs)

    return run_simulated


def _snapshot_sim_settings():
    return {name: getattr(_sim_settings, name) for name in _sim_settings.__slots__}


def _apply_sim_settings(values):
    for name, value in values.items():
        setattr(_sim_settings, name, value)


carry("sim", _snapshot_sim_settings, _apply_sim_settings)


def on_simulator(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, run on the simulator: here if this process simulates, else in the worker.

    ``fn`` must return something picklable; an exception raised in the worker is raised here
    again, with the same type and message.
    """
    if simulating():
        return fn(*args, **kwargs)
    return _worker().call(fn, args, kwargs)


def portable_error(error):
    """``error`` if it survives a trip to another process with its type and message, else a RuntimeError saying both."""
    try:
        back = cloudpickle.loads(cloudpickle.dumps(error))
        if type(back) is type(error) and str(back) == str(error):
            return error
    except Exception:  # an exception type that cannot be rebuilt from its pickled form
        pass
    return RuntimeError(f"{type(error).__name__}: {error}")


class RemoteTraceback(Exception):
    """The traceback of an exception raised in the simulating worker (the cause of the one raised here)."""

    def __str__(self):
        return self.args[0]


_lock = threading.Lock()
_current = None


def _worker():
    global _current
    with _lock:
        if _current is None or not _current.alive():
            _current = _Worker()
        return _current


@atexit.register
def shutdown():
    """End the simulating worker, if one runs; the next simulated run starts a new one."""
    global _current
    with _lock:
        if _current is not None:
            _current.close()
            _current = None


class _Worker:
    """The simulating process and the pipe to it; one call at a time."""

    def __init__(self):
        # a fresh interpreter, not multiprocessing's spawn: spawn would run the parent's __main__
        # script again in the worker, all of it where it has no ``if __name__ == "__main__"`` guard
        requests, self._requests = os.pipe()
        self._replies, replies = os.pipe()
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if isinstance(p, str)),
            **_device.device_environment(True, "a simulated run for a process on the GPU"),
        }
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SERVE.format(requests=requests, replies=replies)],
            pass_fds=(requests, replies),
            env=environment,
            stdin=subprocess.DEVNULL,
        )
        os.close(requests)
        os.close(replies)
        self._to = connection.Connection(self._requests, readable=False)
        self._from = connection.Connection(self._replies, writable=False)
        self._lines_sent = set()
        self._calls = threading.Lock()

    def alive(self):
        return self._process.poll() is None

    def call(self, fn, args, kwargs):
        with self._calls:
            lines = self._new_lines()
            state = {name: snapshot() for name, (snapshot, _) in _carried.items()}
            request = _dumps((lines, state, fn, args, kwargs))
            try:
                self._to.send_bytes(request)
                self._lines_sent.update(lines)
                while not self._from.poll(_WAIT_SECONDS):
                    if not self.alive():
                        break
                reply = self._from.recv_bytes()
            except (EOFError, BrokenPipeError):
                self.close()
                raise RuntimeError(
                    f"the simulating worker process ended (exit code {self._process.returncode}) before it answered"
                ) from None
            except BaseException:
                # an interrupted or failed call leaves the worker in an unknown state: a new one serves the next
                self.close()
                raise
        status, value, out, err = cloudpickle.loads(reply)
        sys.stdout.write(out)
        sys.stderr.write(err)
        if status == "error":
            error, remote = value
            raise error from RemoteTraceback(remote)
        return value

    def _new_lines(self):
        """linecache entries of sources that are not files (notebook cells) not sent yet."""
        return {
            name: entry
            for name, entry in list(linecache.cache.items())
            if name not in self._lines_sent and len(entry) == 4 and not os.path.exists(name)
        }

    def close(self):
        self._to.close()
        self._from.close()
        if self.alive():
            self._process.kill()
        self._process.wait()


def _dumps(value):
    buffer = io.BytesIO()
    _Pickler(buffer).dump(value)
    return buffer.getvalue()


class _Pickler(cloudpickle.Pickler):
    """cloudpickle, with kernels and device arrays of the real CUDA target made rebuildable on the simulator."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # looked up once per pickle: reducer_override runs for every object of the payload
        self._real_target_types = _real_target_types()

    def reducer_override(self, obj):
        kernel, configured, device_array = self._real_target_types
        if isinstance(obj, kernel):
            return _reduce_kernel(obj)
        if isinstance(obj, configured):
            return _configure, (obj.dispatcher, obj.griddim, obj.blockdim, obj.sharedmem)
        if isinstance(obj, device_array):
            return _to_device, (obj.copy_to_host(),)
        if isinstance(obj, types.CodeType):
            # cloudpickle renames the file of a function's code "<dynamic-code>"; marshal keeps it,
            # so errors and traces name the notebook cell's file and line
            return marshal.loads, (marshal.dumps(obj),)
        return super().reducer_override(obj)


def _real_target_types():
    """The classes of a kernel, a configured launch and a device array of numba's real CUDA target.

    Empty where this process simulates (its kernels and arrays are the simulator's, which pickle as they are).
    """
    if _device.simulating():
        return (), (), ()
    return numba_gpu.real_target_classes()


def _reduce_kernel(kernel):
    """By name where the kernel is a module's attribute (not ``__main__``'s), by its recipe where its code
    depends on the device (:func:`prefixsum.core.device.device_specific`), else its function and options."""
    made_by = _device.recipe(kernel)
    if made_by is not None:
        return _device.remake, made_by
    function = kernel.py_func
    module = sys.modules.get(function.__module__)
    if module is not None and function.__module__ != "__main__":
        found = module
        for part in function.__qualname__.split("."):
            found = getattr(found, part, None)
        if found is kernel:
            return _device.import_attribute, (function.__module__, function.__qualname__)
    return _jit, (function, numba_gpu.jit_options(kernel))


def _jit(function, options):
    from numba import cuda

    return cuda.jit(**options)(function)


def _configure(kernel, griddim, blockdim, sharedmem):
    return kernel[griddim, blockdim, 0, sharedmem]


def _to_device(array):
    from numba import cuda

    return cuda.to_device(array)


def serve(requests, replies):
    """The worker's loop on two pipes: run each call sent, answer with its result or its exception and what it
    printed."""
    requests = connection.Connection(requests, writable=False)
    replies = connection.Connection(replies, readable=False)
    # an interrupt of the notebook (or of its process group, as Jupyter sends one) is the caller's
    # to handle: an interrupted call kills this worker, and the next call starts a new one
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            request = requests.recv_bytes()
        except EOFError:  # the notebook's process closed the pipe or ended
            return
        with _captured() as (out, err):
            try:
                lines, state, fn, args, kwargs = cloudpickle.loads(request)
                linecache.cache.update(lines)
                with _applied(state):
                    reply = ("ok", fn(*args, **kwargs))
            except BaseException as error:  # every exception goes back to the caller, as it would arise there
                reply = ("error", (portable_error(error), traceback.format_exc()))
        try:
            payload = cloudpickle.dumps((*reply, out.getvalue(), err.getvalue()))
        except Exception as error:
            problem = TypeError(f"the simulated run's result cannot be sent back: {error}")
            payload = cloudpickle.dumps(("error", (problem, traceback.format_exc()), out.getvalue(), err.getvalue()))
        replies.send_bytes(payload)


@contextlib.contextmanager
def _applied(state):
    """The caller's carried state, for the duration of one run."""
    previous = {name: _carried[name][0]() for name in state}
    for name, value in state.items():
        _carried[name][1](value)
    try:
        yield
    finally:
        for name, value in previous.items():
            _carried[name][1](value)


@contextlib.contextmanager
def _captured():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err
