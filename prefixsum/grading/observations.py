"""What a sandboxed check saw of the student's code, as JSON, and its replay in the grader's process.

The grader draws no verdict inside its sandbox. There (:mod:`.trusted`) a :class:`Recorder`
runs every traced run and host call that a check makes of the student's code (the door of
:mod:`prefixsum.classroom.check.observed`; the student's names reach the check only as
:class:`Observed` proxies, so that every host call goes through it) and keeps the *observations*:
the outputs, the arguments afterwards, the error as data, the trace of every memory access, and
a digest of the inputs. In the grader's judge (:mod:`.judge`), a process that never ran
student code, a :class:`Replayer` runs the same instructor's checks on the same inputs with
:class:`StandIn` s for the student's names, and hands each run the observation of the same rank:
every reference, comparison and verdict is computed there. Both hand the check the same decoded
observation (:func:`answer`), so that a check's run sequence, which depends on what earlier
runs showed (a check stops at its first failing size, then the next check begins), is the
same in both processes by construction. An observation whose inputs' digest differs from the
grader's, a kind out of order or one missing stops the replay (:class:`Unreplayable`): the
sandbox did not run what the grader asked.

The JSON and its strict decoding are :mod:`.encoding`'s.
"""

import json

import numpy as np

from ..classroom import trace as tracing
from ..core import numba_gpu
from ..core.plans import PLANS
from .encoding import IDENTIFIER, Decoder, Malformed, arrays_in, encode_error, encode_trace, encode_value, fingerprint


class Unreplayable(BaseException):
    """The sandbox's observations do not answer the grader's check (a BaseException: checks catch Exception)."""


class Recorder:
    """The sandbox's observer: runs each traced run and host call of the student's code and keeps what came out.

    The check gets back what the judge's :class:`Replayer` will hand it (:func:`answer` of the
    observation decoded from its JSON): both processes take the same decisions on the same data.
    """

    def __init__(self):
        self.observations = []
        self._inside = 0
        self._decoder = Decoder()

    def _observe(self, kind, args, kwargs, run, counter=None):
        arrays = arrays_in(args)
        before = [a.tobytes() for a in arrays]
        entry = {"kind": kind, "inputs": fingerprint(args, kwargs)}
        self._inside += 1
        try:
            # The judge replays this run without making its plans: neither process keeps them.
            with PLANS.unchanged():
                result, error, extra = run()
        finally:
            self._inside -= 1
        entry.update(
            result=encode_value(result),
            error=encode_error(error),
            **extra,
            after={str(k): encode_value(a) for k, (a, b) in enumerate(zip(arrays, before)) if a.tobytes() != b},
        )
        self.observations.append(entry)
        try:
            # Through JSON, as the judge reads it: the decoded observation is the judge's, bit for bit.
            return answer(self._decoder.observation(json.loads(json.dumps(entry))), args, counter)
        except Malformed as error:
            raise Unreplayable(f"the run's observation does not fit the grader's bounds: {error}") from None

    def record(self, fn, args, kwargs, counter):
        """A traced run (:func:`prefixsum.classroom.check.observed.record`), handed back as the judge decodes it."""

        def run():
            trace = tracing.record(fn, *args, **kwargs)
            observed = {"trace": encode_trace(trace), "counter": list(counter) if counter else None}
            return trace.result, trace.error, observed

        return self._observe("record", args, kwargs, run, counter)

    def call(self, fn, args, kwargs):
        """A host call of the student's function by the check (through an :class:`Observed`); nested calls just run."""
        if self._inside:
            return fn(*args, **kwargs)

        def run():
            try:
                return fn(*args, **kwargs), None, {}
            except Exception as error:  # noqa: BLE001  (the student's error is an observation; it is raised again by answer)
                return None, error, {}

        return self._observe("call", args, kwargs, run)


class Observed:
    """A student's object as the sandbox's checks see it: host calls go through the :class:`Recorder`.

    Launch configurations (``kernel[grid, block]``) and attributes are the object's own, except
    its Python function (``py_func``, ``fn``), which is observed in turn.
    """

    __slots__ = ("_real", "_recorder")

    def __init__(self, real, recorder):
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_recorder", recorder)

    def __call__(self, *args, **kwargs):
        return self._recorder.call(self._real, args, kwargs)

    def __getitem__(self, key):
        return self._real[key]

    def __getattr__(self, name):
        value = getattr(self._real, name)
        return Observed(value, self._recorder) if name in ("py_func", "fn") else value

    def __repr__(self):
        return repr(self._real)


def describe(value):
    """A student's name as the grader's replay gets it: a callable's name and kind, or the value itself."""
    if callable(value) and not isinstance(value, type):
        return {"callable": [str(getattr(value, "__name__", "function"))[:100], numba_gpu.is_device_function(value)]}
    return {"value": encode_value(value)}


class StandIn:
    """A student's function or kernel in the grader's replay: its name and kind; a host call takes the next
    observation."""

    def __init__(self, name, device):
        self.__name__ = self.__qualname__ = name
        numba_gpu.pass_for_device_function(self, device)

    def __call__(self, *args, **kwargs):
        from ..classroom.check import observed

        replayer = observed.current()
        if not isinstance(replayer, Replayer):
            raise Unreplayable(f"{self.__name__} was called outside the grader's replay")
        return replayer.call(self, args, kwargs)

    @property
    def py_func(self):
        return StandIn(self.__name__, False)

    fn = py_func

    def __getitem__(self, key):
        raise Unreplayable(f"{self.__name__} was launched outside a traced run")

    def __repr__(self):
        return f"<{self.__name__}>"


def stand_ins(names, decoder):
    """``{name: StandIn or value}`` from a sandbox's ``names`` (:func:`describe` of each)."""
    found = {}
    if type(names) is not dict or len(names) > 256:
        raise Malformed("names is an object")
    for name, entry in names.items():
        if not IDENTIFIER.match(name) or type(entry) is not dict or len(entry) != 1:
            raise Malformed("a name is {callable: [name, device]} or {value: ...}")
        if "callable" in entry:
            pair = type(entry["callable"]) is list and len(entry["callable"]) == 2
            label, device = entry["callable"] if pair else (None, None)
            if type(label) is not str or len(label) > 100 or type(device) is not bool:
                raise Malformed("a callable is [name, device]")
            found[name] = StandIn(label, device)
        elif "value" in entry:
            found[name] = decoder.value(entry["value"])
        else:
            raise Malformed("a name is {callable: [name, device]} or {value: ...}")
    return found


def answer(entry, args, counter):
    """What a run of the check gets from a decoded observation ``entry``, in the sandbox and in the judge alike.

    The changed arguments are copied into ``args``' arrays, ``counter`` gets the run's count; a
    traced run returns its trace with the result and error, a host call its result or raises
    its error.
    """
    arrays = arrays_in(args)
    for position, value in entry["after"].items():
        if (
            position >= len(arrays)
            or not isinstance(value, np.ndarray)
            or value.shape != arrays[position].shape
            or value.dtype != arrays[position].dtype
        ):
            raise Unreplayable("the sandbox reported an argument changed into another shape or type")
        np.copyto(arrays[position], value)
    if counter is not None:
        counted = list(entry["counter"] or ())[: len(counter)]  # the check's own tally keeps its length
        counter[:] = counted + [0] * (len(counter) - len(counted))
    if entry["kind"] == "call":
        if entry["error"] is not None:
            raise entry["error"]
        return entry["result"]
    run = entry["trace"]
    run.result, run.error = entry["result"], entry["error"]
    return run


class Replayer:
    """The grader's observer: each traced run and host call gets the sandbox's observation of the same rank."""

    def __init__(self, observations):
        self.observations = observations
        self.used = 0

    def _next(self, kind, args, kwargs, counter=None):
        if self.used >= len(self.observations):
            raise Unreplayable(f"the check needed a {kind} of the student's code that the sandbox did not report")
        entry = self.observations[self.used]
        self.used += 1
        if entry["kind"] != kind or entry["inputs"] != fingerprint(args, kwargs):
            raise Unreplayable(
                f"the sandbox reported run {self.used} (a {entry['kind']}) on other inputs than the grader's {kind}"
            )
        return answer(entry, args, counter)

    def record(self, fn, args, kwargs, counter):
        return self._next("record", args, kwargs, counter)

    def call(self, fn, args, kwargs):
        return self._next("call", args, kwargs)


__all__ = ["Observed", "Recorder", "Replayer", "StandIn", "Unreplayable", "answer", "describe", "stand_ins"]
