"""The recorder: the simulator's hooks turned into a trace's records, its steps, polls and idle threads.

:func:`prefixsum.classroom.trace.record` registers a :class:`Recorder`'s methods as the
simulator's launch, call, access, fence and wait hooks (:mod:`prefixsum.sim`) and builds the
:class:`~prefixsum.classroom.trace.Trace` from what it collected. It also keeps a run's limits:
steps (accesses that are no polls, barriers and warp-level calls, less what the run's progress
paid for, :mod:`.polls`), the polls of one wait, and the CPU time.
"""

import time

import numpy as np

from . import polls as _polls
from .records import FenceRecord, Launch, Record

_OPERATOR_NAMES = {"combine_in_dtype"}  # prefixsum.scans.ops.device_op's device functions

_new_tuple = tuple.__new__


def _linear(point, dims):
    return point[0] + dims[0] * (point[1] + dims[1] * point[2])


class Recorder:
    """Collects the :class:`Launch` es and :class:`Record` s of a run from the simulator's hooks."""

    def __init__(self, deadline, steps=None, polls=None):
        self.steps = steps
        self.polls = _polls.Polls(polls)
        self.counted = 0  # accesses that are not polls, barriers and warp-level calls: the steps
        self.credit = 0  # steps the run's progress paid for (polls.PROGRESS_CREDIT per first access)
        self.idle = {}  # (launch, block, thread) -> [calls since its last access, kind, line]
        self.shapes = {}  # (launch, space, array) -> shape
        self.scalars = []  # per launch: {name: value} of the numbers the host passed
        self.records = []
        self.launches = []
        self.fences = []
        self.instances = {}  # (launch, block, thread, array, line) -> accesses so far
        self.deadline = deadline

    def start_launch(self, info):
        """A :func:`prefixsum.sim.launch_hook` callback: the accesses that follow are this launch's."""
        names = getattr(getattr(info.function, "__code__", None), "co_varnames", ())
        scalars = tuple(
            (name, value)
            for name, value in zip(names, info.arguments)
            if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
        )
        self.launches.append([info.kernel, info.grid, info.block, 0])
        self.scalars.append(dict(scalars))

    def count_call(self, function):
        """A :func:`prefixsum.sim.call_hook` callback: counts the operator calls of the launch."""
        if function.__name__ in _OPERATOR_NAMES:
            self.launches[-1][3] += 1

    def __call__(self, access):
        # Called for every simulated memory access: the fields are unpacked at once, not read
        # one by one, and the launch's dimensions looked up once per access.
        if self.deadline is not None and time.process_time() > self.deadline:
            raise TimeoutError("the kernel ran past the time limit (an endless loop?)")
        _, (bx, by, bz), (tx, ty, tz), array, space, index, kind, value, phase, file, line, _, dtype, stale = access
        launch = len(self.launches) - 1
        kernel, (gx, gy, _), (dx, dy, _), _ = self.launches[launch]
        b, t = bx + gx * (by + gy * bz), tx + dx * (ty + dy * tz)
        flat = int(index[0] if len(index) == 1 else _flat(access))
        kind_of_access = self.polls.classify((launch, b, t, array, flat), access, kernel)
        if kind_of_access is not _polls.POLL:
            if kind_of_access is _polls.PROGRESS:
                self.credit += _polls.PROGRESS_CREDIT
            self._step()
        self.idle.pop((launch, b, t), None)
        if (launch, space, array) not in self.shapes:
            self.shapes[(launch, space, array)] = tuple(access.shape)
        key = (launch, b, t, array, line)
        instance = self.instances.get(key, 0)
        self.instances[key] = instance + 1
        itemsize = dtype.itemsize if isinstance(dtype, np.dtype) else _itemsize(access)
        # tuple.__new__ skips the Python-level __new__ that NamedTuple generates: every field is given.
        self.records.append(
            _new_tuple(
                Record,
                (
                    launch,
                    b,
                    t,
                    array,
                    space,
                    flat,
                    kind != "read",
                    phase,
                    line,
                    instance,
                    itemsize,
                    kind == "atomic",
                    stale,
                    value,
                    file,
                ),
            )
        )

    def _step(self):
        if self.steps is not None and self.counted >= self.steps + self.credit:
            raise TimeoutError(
                f"the kernels ran past {self.steps} simulated steps (memory accesses, barriers and "
                "warp-level calls, besides those their progress paid for): an endless loop?"
            )
        self.counted += 1

    def wait(self, wait):
        """A :func:`prefixsum.sim.wait_hook` callback: a barrier or warp-level call is a step."""
        if self.deadline is not None and time.process_time() > self.deadline:
            raise TimeoutError("the kernel ran past the time limit (an endless loop?)")
        self._step()
        launch = len(self.launches) - 1
        (bx, by, bz), (tx, ty, tz) = wait.block, wait.thread
        _, (gx, gy, _), (dx, dy, _), _ = self.launches[launch]
        key = (launch, bx + gx * (by + gy * bz), tx + dx * (ty + dy * tz))
        idle = self.idle.get(key)
        if idle is None:
            self.idle[key] = [1, wait.kind, wait.line]
        else:
            idle[0] += 1
            idle[1], idle[2] = wait.kind, wait.line

    def fence(self, fence):
        """A :func:`prefixsum.sim.fence_hook` callback: where the fence falls among the accesses."""
        launch = len(self.launches) - 1
        grid, block = self.launches[launch][1], self.launches[launch][2]
        self.fences.append(
            FenceRecord(
                launch,
                _linear(fence.block, grid),
                _linear(fence.thread, block),
                fence.phase,
                fence.line,
                len(self.records),
            )
        )

    def launches_recorded(self):
        """The launches so far, as :class:`~.records.Launch` es."""
        return [Launch(i, name, grid, block, combines) for i, (name, grid, block, combines) in enumerate(self.launches)]

    def idle_threads(self):
        """``{(launch, block, thread): (calls, kind, line)}``: each thread's barriers and warp-level calls
        since its last memory access, the last one's name and line."""
        return {key: tuple(value) for key, value in self.idle.items()}


def _flat(access):
    shape = getattr(access, "shape", None)
    index = [i for i in access.index if isinstance(i, (int, np.integer))]
    if shape is None or len(shape) != len(index):
        return index[0]
    flat = 0  # row-major, as numpy's ravel_multi_index(mode="wrap"), at a tenth of its cost a call
    for i, d in zip(index, shape):
        flat = flat * d + int(i) % d
    return flat


def _itemsize(access):
    dtype = getattr(access, "dtype", None)
    if dtype is not None:
        return np.dtype(dtype).itemsize
    return np.asarray(access.value).dtype.itemsize


__all__ = ["Recorder"]
