"""The observations of a sandboxed check as JSON (:mod:`.observations`): encoded in the sandbox,
decoded strictly in the grader's judge.

Decoding is strict: every field is type-checked, arrays come only in the :data:`DTYPES`, sizes
and nesting are bounded, compressed data is inflated with a bound (:class:`Decoder`). Nothing is
unpickled and no code or class of the sandbox is rebuilt: an error comes back as a known
exception type (or a new subclass of the nearest known one) with its message.
"""

import base64
import builtins
import hashlib
import re
import zlib

import numpy as np

from ..classroom import sim, trace as tracing

DTYPES = frozenset(
    "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 complex64 complex128".split()
)
MAX_DEPTH = 16
MAX_ITEMS = 1 << 16
MAX_TEXT = 4096
MAX_COUNTS = 8  # integers in one run's counter (prefixsum.classroom.check.counting's tally)
MAX_RECORDS = 2_000_000
"""Memory accesses that one submission's traces may hold together (an honest exercise's make about 150,000)."""
MAX_BYTES = 256 << 20
"""Bytes that one submission's observations may inflate to, arrays and traces together."""
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}\Z")
# The exception types an error may come back as; any other name becomes a subclass of the nearest of these.
_KNOWN_ERRORS = {
    cls.__name__: cls
    for cls in (
        sim.NegativeIndexError,
        sim.WarpDivergenceError,
        sim.BarrierDivergenceError,
        sim.DeadlockError,
        sim.LaunchError,
        sim.KernelError,
        sim.PollLimitError,
    )
}
_KNOWN_ERRORS.update(
    {
        name: cls
        for name, cls in vars(builtins).items()
        if isinstance(cls, type) and issubclass(cls, Exception) and name not in _KNOWN_ERRORS
    }
)
# Record's fields by column: integers, flags, strings (a table of each column's distinct values), and the value.
_INTS = ("launch", "block", "thread", "index", "phase", "line", "instance", "itemsize")
_FLAGS = ("write", "atomic", "stale")
_STRINGS = ("array", "space", "file")
_FENCE = ("launch", "block", "thread", "phase", "line", "position")


class Malformed(ValueError):
    """Data from a sandbox that does not follow the schema."""


def _pack(data):
    return base64.b64encode(zlib.compress(data, 1)).decode("ascii")


def encode_value(value, depth=0):
    """``value`` (a result, an argument, a constant of the student's) as JSON-ready data."""
    if hasattr(value, "copy_to_host") and not isinstance(value, np.ndarray):
        value = value.copy_to_host()
    if value is None:
        return None
    if depth > MAX_DEPTH:
        return {"o": "nested"}
    kind = type(value)
    if kind is bool:
        return {"b": value}
    if kind is int:
        return {"i": value} if abs(value) < 1 << 63 else {"f": float(value).hex()}
    if kind is float:
        return {"f": value.hex()}
    if kind is str:
        return {"s": value[:MAX_TEXT]}
    if isinstance(value, np.ndarray) and value.dtype.name in DTYPES:
        return {"a": [value.dtype.name, list(value.shape), _pack(np.ascontiguousarray(value).tobytes())]}
    if isinstance(value, np.generic) and value.dtype.name in DTYPES:
        return {"n": [value.dtype.name, _pack(value.tobytes())]}
    if kind in (tuple, list) and len(value) <= MAX_ITEMS:
        return {"t" if kind is tuple else "l": [encode_value(v, depth + 1) for v in value]}
    return {"o": kind.__name__[:100]}


def _digest(value, into):
    """Feed ``value`` (arguments of a run) to the hash ``into``: arrays by dtype, shape and bytes; callables by kind
    only."""
    if hasattr(value, "copy_to_host") and not isinstance(value, np.ndarray):
        value = value.copy_to_host()
    if isinstance(value, np.ndarray):
        into.update(f"a{value.dtype.str}{value.shape}".encode())
        into.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, (tuple, list)):
        into.update(f"{type(value).__name__}{len(value)}(".encode())
        for v in value:
            _digest(v, into)
        into.update(b")")
    elif isinstance(value, dict):
        into.update(b"d{")
        for k in sorted(value, key=str):
            into.update(repr(k).encode())
            _digest(value[k], into)
        into.update(b"}")
    elif callable(value):
        into.update(b"callable;")
    else:
        into.update(f"{type(value).__name__}:{value!r};".encode())


def fingerprint(args, kwargs):
    """A digest of a run's inputs, the same in the sandbox and in the grader for the same inputs."""
    into = hashlib.sha256()
    _digest((tuple(args), kwargs), into)
    return into.hexdigest()


def arrays_in(value):
    """The numpy arrays in ``value`` (an argument tuple), depth first."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in arrays_in(v)]
    return []


def encode_error(error):
    """An exception as data: its type's name, the nearest known type and its message."""
    if error is None:
        return None
    like = next((cls.__name__ for cls in type(error).__mro__ if _KNOWN_ERRORS.get(cls.__name__) is cls), "Exception")
    return {"type": type(error).__name__[:100], "like": like, "message": str(error)[:MAX_TEXT]}


def encode_trace(run):
    """A :class:`prefixsum.classroom.trace.Trace`'s accesses, launches and fences as columns (no result, no error)."""
    fields = tracing.Record._fields
    columns = dict(zip(fields, zip(*run.records))) if run.records else {f: () for f in fields}
    out = {"n": len(run.records)}
    for name in _INTS:
        out[name] = _pack(np.array([-1 if v is None else v for v in columns[name]], np.int64).tobytes())
    for name in _FLAGS:
        out[name] = _pack(np.array(columns[name], np.uint8).tobytes())
    for name in _STRINGS:
        table = sorted({str(v) for v in columns[name]})
        where = {s: k for k, s in enumerate(table)}
        out[name] = [table, _pack(np.array([where[str(v)] for v in columns[name]], np.int32).tobytes())]
    kinds, floats, ints = [], [], []
    for v in columns["value"]:
        if isinstance(v, (bool, np.bool_)):
            kinds.append(1), floats.append(0.0), ints.append(int(v))
        elif isinstance(v, (int, np.integer)) and -(1 << 63) <= int(v) < 1 << 63:
            kinds.append(2), floats.append(0.0), ints.append(int(v))
        elif isinstance(v, (int, float, np.integer, np.floating)):
            kinds.append(3), floats.append(float(v)), ints.append(0)
        else:
            kinds.append(0), floats.append(0.0), ints.append(0)
    out["value"] = [
        _pack(np.array(kinds, np.uint8).tobytes()),
        _pack(np.array(floats, np.float64).tobytes()),
        _pack(np.array(ints, np.int64).tobytes()),
    ]
    out["launches"] = [
        [launch.kernel[:200], list(launch.grid), list(launch.block), launch.combines] for launch in run.launches
    ]
    out["fences"] = [[getattr(f, name) for name in _FENCE] for f in run.fences]
    return out


class Decoder:
    """Strict decoding of one submission's observations, with a bound on the bytes they inflate to."""

    def __init__(self, budget=MAX_BYTES, records=MAX_RECORDS):
        self.left = budget
        self.records_left = records

    def _inflate(self, text, size):
        if type(text) is not str or len(text) > 4 * self.left // 3 + 8:
            raise Malformed("packed data too long")
        try:
            inflater = zlib.decompressobj()
            data = inflater.decompress(base64.b64decode(text, validate=True), self.left + 1)
        except (ValueError, zlib.error) as error:
            raise Malformed(f"packed data: {error}") from None
        if len(data) > self.left or inflater.unconsumed_tail or len(data) != size:
            raise Malformed(f"packed data of {len(data)} bytes where {size} were expected")
        self.left -= len(data)
        return data

    def _column(self, text, dtype, n):
        return np.frombuffer(self._inflate(text, n * np.dtype(dtype).itemsize), dtype)

    def value(self, data, depth=0):
        """The value :func:`encode_value` encoded (an opaque object of the same type's name where it could not)."""
        if data is None:
            return None
        if type(data) is not dict or len(data) != 1 or depth > MAX_DEPTH:
            raise Malformed("a value is a one-key object")
        ((tag, body),) = data.items()
        if tag == "b" and type(body) is bool:
            return body
        if tag == "i" and type(body) is int:
            return body
        if tag == "f" and type(body) is str and len(body) < 64:
            try:
                return float.fromhex(body)
            except ValueError:
                raise Malformed(f"not a float: {body[:40]!r}") from None
        if tag == "s" and type(body) is str and len(body) <= MAX_TEXT:
            return body
        if tag in ("t", "l") and type(body) is list and len(body) <= MAX_ITEMS:
            items = [self.value(v, depth + 1) for v in body]
            return tuple(items) if tag == "t" else items
        if (
            tag == "a"
            and type(body) is list
            and len(body) == 3
            and body[0] in DTYPES
            and type(body[1]) is list
            and len(body[1]) <= 8
            and all(type(d) is int and 0 <= d < 1 << 40 for d in body[1])
        ):
            dtype, shape = np.dtype(body[0]), tuple(body[1])
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            return np.frombuffer(self._inflate(body[2], size), dtype).reshape(shape).copy()
        if tag == "n" and type(body) is list and len(body) == 2 and body[0] in DTYPES:
            dtype = np.dtype(body[0])
            return np.frombuffer(self._inflate(body[1], dtype.itemsize), dtype)[0]
        if tag == "o" and type(body) is str and IDENTIFIER.match(body):
            return type(body, (), {"__repr__": lambda self: f"<{type(self).__name__}>"})()
        raise Malformed(f"a value of tag {tag!r} does not follow the schema")

    def error(self, data):
        """The exception :func:`encode_error` encoded: a known type, or a subclass of the nearest one by its name."""
        if data is None:
            return None
        if (
            type(data) is not dict
            or set(data) != {"type", "like", "message"}
            or not all(type(v) is str for v in data.values())
            or not IDENTIFIER.match(data["type"])
            or data["like"] not in _KNOWN_ERRORS
            or len(data["message"]) > MAX_TEXT
        ):
            raise Malformed("an error is {type, like, message}")
        base = _KNOWN_ERRORS[data["like"]]
        cls = _KNOWN_ERRORS.get(data["type"]) or type(data["type"], (base,), {"__module__": "submission"})
        error = cls.__new__(cls)
        error.args = (data["message"],)
        return error

    def trace(self, data):
        """The :class:`prefixsum.classroom.trace.Trace` :func:`encode_trace` encoded (without result and error)."""
        keys = {"n", "launches", "fences", "value", *_INTS, *_FLAGS, *_STRINGS}
        if (
            type(data) is not dict
            or set(data) != keys
            or type(data["n"]) is not int
            or not 0 <= data["n"] <= self.records_left
        ):
            raise Malformed(f"a trace has the columns of a Record, and at most {MAX_RECORDS} records in all")
        n = data["n"]
        self.records_left -= n
        launch_numbers = self._column(data["launch"], np.int64, n)
        columns = {name: self._column(data[name], np.int64, n).tolist() for name in _INTS if name != "launch"}
        columns["launch"] = launch_numbers.tolist()
        columns.update({name: (self._column(data[name], np.uint8, n) != 0).tolist() for name in _FLAGS})
        for name in _STRINGS:
            entry = data[name]
            if (
                type(entry) is not list
                or len(entry) != 2
                or type(entry[0]) is not list
                or len(entry[0]) > max(n, 1)
                or not all(type(s) is str and len(s) <= MAX_TEXT for s in entry[0])
            ):
                raise Malformed(f"trace column {name} is [table, indices]")
            where = self._column(entry[1], np.int32, n)
            if n and (where.min() < 0 or where.max() >= len(entry[0])):
                raise Malformed(f"trace column {name} points outside its table")
            columns[name] = [entry[0][k] for k in where.tolist()]
        if type(data["value"]) is not list or len(data["value"]) != 3:
            raise Malformed("trace values are [kinds, floats, ints]")
        kinds = self._column(data["value"][0], np.uint8, n).tolist()
        floats = self._column(data["value"][1], np.float64, n).tolist()
        ints = self._column(data["value"][2], np.int64, n).tolist()
        columns["value"] = [(None, bool(i), i, f)[k] if k < 4 else None for k, f, i in zip(kinds, floats, ints)]
        columns["line"] = [None if v == -1 else v for v in columns["line"]]
        records = list(map(tracing.Record._make, zip(*(columns[f] for f in tracing.Record._fields)))) if n else []
        launches = []
        for number, launch in enumerate(self._rows(data["launches"], 4)):
            kernel, grid, block, combines = launch
            if (
                type(kernel) is not str
                or not all(type(d) is list and len(d) == 3 and all(type(v) is int for v in d) for d in (grid, block))
                or type(combines) is not int
            ):
                raise Malformed("a launch is [kernel, grid, block, combines]")
            launches.append(tracing.Launch(number, kernel, tuple(grid), tuple(block), combines))
        fences = []
        for fence in self._rows(data["fences"], len(_FENCE)):
            if not all(type(v) is int for v in fence):
                raise Malformed("a fence is six integers")
            fences.append(tracing.FenceRecord(*fence))
        if n and (launch_numbers.min() < 0 or launch_numbers.max() >= len(launches)):
            raise Malformed("a record of no launch")
        return tracing.Trace(records, launches, fences=fences)

    @staticmethod
    def _rows(rows, width):
        if (
            type(rows) is not list
            or len(rows) > MAX_ITEMS
            or not all(type(r) is list and len(r) == width for r in rows)
        ):
            raise Malformed(f"rows of {width}")
        return rows

    def observation(self, data):
        """One observation of a :class:`Recorder`, decoded."""
        required = {"kind", "inputs", "result", "error", "after"}
        kind = data.get("kind") if type(data) is dict else None
        allowed = required | ({"trace", "counter"} if kind == "record" else set())
        if (
            kind not in ("record", "call")
            or not required <= set(data) <= allowed
            or type(data["inputs"]) is not str
            or type(data["after"]) is not dict
            or (kind == "record" and "trace" not in data)
        ):
            raise Malformed("an observation is {kind, inputs, result, error, after[, trace, counter]}")
        after = {}
        for key, value in data["after"].items():
            if not key.isdigit() or len(key) > 6:
                raise Malformed("after's keys are argument positions")
            after[int(key)] = self.value(value)
        counter = data.get("counter")
        if counter is not None and not (
            type(counter) is list and len(counter) <= MAX_COUNTS and all(type(c) is int for c in counter)
        ):
            raise Malformed(f"a counter is a list of at most {MAX_COUNTS} integers")
        found = {
            "kind": kind,
            "inputs": data["inputs"],
            "result": self.value(data["result"]),
            "error": self.error(data["error"]),
            "after": after,
            "counter": counter,
        }
        if kind == "record":
            found["trace"] = self.trace(data["trace"])
        return found


__all__ = [
    "DTYPES",
    "IDENTIFIER",
    "Decoder",
    "Malformed",
    "arrays_in",
    "encode_error",
    "encode_trace",
    "encode_value",
    "fingerprint",
]
