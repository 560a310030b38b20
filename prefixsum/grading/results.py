"""What comes back from a sandbox, read with a strict schema, and the verdicts the grader draws from it.

A sandboxed run (:mod:`.trusted`: the PTX compile, nbval) and the grader's judge (:mod:`.judge`,
which reads the re-check's observations itself) return JSON lines on their stdout. Each line is
parsed with bounded size and depth and checked field by field against :data:`SCHEMAS`; a line
that fails is dropped (its exercise then has no result: ``crashed``). Nothing is unpickled, and
no object of the sandbox reaches the grader. The verdict of an exercise (:func:`check_verdict`)
is completed here, in the grader's process, which never runs submitted code: the lines that the
judge's replay of the checks printed against the instructor's stored output (which never enters
the sandbox), and a launch of the exercise's own kernel where the instructor's solution launches one.
"""

import configparser
import json
import re

_MAX_LINE = 16 << 20
_MAX_TEXT = 64 << 10
# mode: {field: (type, allowed values or None)}; "id" is checked against the requested ids.
SCHEMAS = {
    "check": {
        "id": (str, None),
        "status": (str, ("ran", "error", "timeout", "tampered", "crashed")),
        "message": (str, None),
        "lines": (list, None),
        "launches": (int, None),
    },
    "ptx": {"id": (str, None), "status": (str, ("ok", "rejected", "error")), "message": (str, None)},
    "nbval": {"id": (str, ("nbval",)), "returncode": (int, None), "junit": (str, None)},
}
SCHEMAS["check"]["stepper"] = (list, None)
SCHEMAS["record"] = {**SCHEMAS["check"], "signatures": (dict, None)}
_OPTIONAL = {"message", "lines", "stepper"}


def not_json(name):
    """``json.loads``'s ``parse_constant``: NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not JSON")


def valid_entry(entry, mode, ids):
    """Whether ``entry`` matches ``SCHEMAS[mode]``, its id among ``ids``, its texts of bounded length."""
    schema = SCHEMAS[mode]
    if not isinstance(entry, dict) or set(entry) - set(schema) or set(schema) - _OPTIONAL - set(entry):
        return False
    for field, value in entry.items():
        kind, allowed = schema[field]
        if type(value) is not kind or (allowed is not None and value not in allowed):
            return False
        if kind is str and field != "junit" and len(value) > _MAX_TEXT:
            return False
    if mode != "nbval" and entry["id"] not in ids:
        return False
    lines = entry.get("lines", [])
    if not all(isinstance(line, str) for line in lines) or sum(map(len, lines)) > _MAX_TEXT:
        return False
    return valid_signatures(entry.get("signatures", {}))


def valid_signatures(value):
    """Whether ``value`` is ``{kernel name: [signature, ...]}`` with strings of bounded length."""
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(s, str) and len(s) < 1000 for s in v)
        for k, v in value.items()
    )


def json_lines(text, max_line=_MAX_LINE):
    """The JSON values of ``text``'s first 10,000 lines; a line longer than ``max_line``, or not
    strict JSON (NaN, nesting too deep to parse), is passed over."""
    for line in text.splitlines()[:10000]:
        if len(line) > max_line:
            continue
        try:
            yield json.loads(line, parse_constant=not_json)
        except (ValueError, RecursionError):
            continue


def parse(text, mode, ids=()):
    """``{id: entry}`` from a sandbox's stdout: the lines that match ``SCHEMAS[mode]``, first one per id."""
    found = {}
    for entry in json_lines(text):
        if valid_entry(entry, mode, ids):
            found.setdefault(entry["id"], entry)
    return found


def sanitize(text, config_text):
    """Apply nbval's sanitize file (its ``regex``/``replace`` sections) to ``text``."""
    parser = configparser.ConfigParser()
    parser.read_string(config_text or "")
    for section in parser.sections():
        text = re.sub(parser[section]["regex"], parser[section]["replace"], text)
    return text


def check_verdict(exercise, entry, launches_needed, sanitize_config):
    """``{status, message}`` of the grader's own check from its sandbox's ``entry``.

    ``pass`` needs the printed lines to be the instructor's stored output (sanitized as nbval
    does) and, where ``launches_needed``, a launch of a kernel that the exercise's cell defines;
    a failure of that rule (``"rule": True``) is the grader's own, which nbval cannot see.
    """
    if entry.get("status") != "ran":
        return {"status": entry.get("status", "crashed"), "message": entry.get("message", "")}
    printed = "".join(entry.get("lines", []))
    expected = "".join(stored for _, stored in exercise.checks)
    if sanitize(printed, sanitize_config) != sanitize(expected, sanitize_config):
        return {"status": "fail", "message": entry.get("message") or f"the check printed {printed.strip()!r}"}
    if launches_needed and entry["launches"] == 0:
        return {
            "status": "fail",
            "rule": True,
            "message": "the check's results came without a launch of the "
            "exercise's "
            "kernel: the exercise is to compute them with that kernel",
        }
    return {"status": "pass", "message": ""}
