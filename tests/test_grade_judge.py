"""Verdicts computed outside the sandbox: the sandbox returns observations, the judge replays the checks.

Fast: chapter 01's host exercise (01.serial-scan), a small traced run and a look-back's two calls, in this process.
:mod:`prefixsum.grading.trusted`'s ``check`` mode runs here as it does in a sandbox,
and the judge draws the verdicts from its output; a forged or malformed report earns nothing.
"""

import base64
import contextlib
import inspect
import io
import json
import os
import pathlib
import subprocess
import sys
import zlib

import numpy as np
import pytest

from prefixsum.classroom import mistakes, trace as tracing
from prefixsum.cli import grade as grade_command
from prefixsum.grading import encoding, judge, judging, read_chapter, trusted
from prefixsum.grading.runner import _inside
from prefixsum.scans.api import scan

LADDER = pathlib.Path(__file__).resolve().parent.parent / "notebooks" / "01_ladder.ipynb"
LOOKBACK = LADDER.with_name("10_lookback.ipynb")
EXERCISE = "01.serial-scan"
PASS = "PASS my_partial_sums: 11 sizes from 1 to 2049\n"


@pytest.fixture(scope="module")
def chapter():
    return read_chapter(LADDER)


def sandbox_output(chapter, source, exercise=EXERCISE):
    """What trusted.py's ``check`` mode writes for ``{exercise: source}``, run in this process."""
    request = {"chapter": _inside(chapter), "sources": {exercise: source}, "timeout": 30, "signatures": {}}
    lines = []
    with contextlib.redirect_stdout(io.StringIO()):
        trusted._check(request, lambda entry: lines.append(json.dumps(entry)))
    return "\n".join(lines)


def verdicts(chapter, observed, exercise=EXERCISE):
    found = []
    judge.judge(
        {"chapter": json.loads(_inside(chapter)), "observed": observed, "ids": [exercise], "timeout": 30}, found.append
    )
    return {v["id"]: v for v in found}


def test_the_sandbox_returns_observations_and_no_verdict(chapter):
    (entry,) = map(json.loads, sandbox_output(chapter, chapter.exercise(EXERCISE).source).splitlines())
    assert set(entry) == {"id", "status", "names", "observations", "launches"}
    assert entry["names"] == {"my_partial_sums": {"callable": ["my_partial_sums", False]}}
    assert len(entry["observations"]) == 11 and {o["kind"] for o in entry["observations"]} == {"record"}
    assert "PASS" not in json.dumps(entry) and "FAIL" not in json.dumps(entry)


def test_the_judge_draws_the_verdict_and_its_text(chapter):
    source = chapter.exercise(EXERCISE).source
    assert verdicts(chapter, sandbox_output(chapter, source))[EXERCISE]["lines"] == [PASS]
    wrong = source.replace("s[i] = s[i - 1] + x[i]", "s[i] = s[i - 1]")
    found = verdicts(chapter, sandbox_output(chapter, wrong))[EXERCISE]
    assert found["status"] == "ran" and found["message"].startswith("FAIL my_partial_sums: wrong-result at n=2")


def test_a_forged_report_earns_nothing(chapter):
    honest = json.loads(sandbox_output(chapter, chapter.exercise(EXERCISE).source))
    old_style = {"id": EXERCISE, "status": "ran", "message": "", "lines": [PASS], "launches": 1}
    assert verdicts(chapter, json.dumps(old_style)) == {}  # not the schema: no verdict at all
    empty = {**honest, "observations": []}
    assert verdicts(chapter, json.dumps(empty))[EXERCISE]["status"] == "tampered"
    other_inputs = json.loads(json.dumps(honest))
    other_inputs["observations"][3]["inputs"] = "0" * 64
    found = verdicts(chapter, json.dumps(other_inputs))[EXERCISE]
    assert found["status"] == "tampered" and "other inputs" in found["message"]
    # Outputs that the sandbox could forge without the inputs' right answer: the judge compares them.
    forged = json.loads(json.dumps(honest))
    forged["observations"][2]["result"] = encoding.encode_value(np.zeros(31, np.int32))
    assert verdicts(chapter, json.dumps(forged))[EXERCISE]["message"].startswith(
        "FAIL my_partial_sums: wrong-result at n=31"
    )


def test_a_check_that_stops_on_what_only_the_trace_shows_is_replayed_run_for_run():
    """The chained scan (10.lookback-loop's named mistake): right outputs, but its trace shows each
    tile reading its predecessor before publishing, so the first of the check's two calls stops
    at n=33 and the second begins. The sandbox's check once saw no accesses, ran the first call on
    to n=2049, and the judge's replay met its third run on other inputs: ``tampered``. The
    sandbox's check now sees the trace the judge decodes and takes the same decisions."""
    chapter = read_chapter(LOOKBACK)
    exercise = "10.lookback-loop"
    chained = next(m for m in mistakes.MISTAKES if m.exercise == exercise and "chained" in m.name)
    observed = sandbox_output(chapter, chained.source(chapter.exercise(exercise).source), exercise)
    found = verdicts(chapter, observed, exercise)[exercise]
    assert found["status"] == "ran" and "over-budget at n=33" in found["message"], found
    assert "before it published its own state" in found["message"]
    (entry,) = map(json.loads, observed.splitlines())
    assert len(entry["observations"]) == 4  # n = 1 and 33 of each call: as many runs as the judge's replay asks


def _packed(data):
    return base64.b64encode(zlib.compress(data)).decode()


@pytest.mark.parametrize(
    "value",
    [
        {"a": ["object", [1], _packed(b"x" * 8)]},  # no object arrays
        {"a": ["float64", [2], _packed(b"\0" * 8)]},  # fewer bytes than the shape
        {"a": ["uint8", [1 << 30], _packed(b"\0" * (1 << 20))]},  # a bomb: its size is checked before it inflates
        {"n": ["float32", "not base64!"]},
        {"x": 1},
        {"i": 1, "f": "0x1p0"},
        {"f": "nan?"},
        {"o": "not a name"},
        [1, 2],
        "text",
    ],
)
def test_observed_values_are_read_strictly(value):
    with pytest.raises(encoding.Malformed):
        encoding.Decoder().value(value)


def test_errors_come_back_as_known_types_with_their_message():
    decoder = encoding.Decoder()
    error = decoder.error({"type": "NegativeIndexError", "like": "NegativeIndexError", "message": "index -1"})
    assert isinstance(error, IndexError) and str(error) == "index -1"
    mine = decoder.error({"type": "MyError", "like": "ValueError", "message": "mine"})
    assert isinstance(mine, ValueError) and type(mine).__name__ == "MyError"
    for bad in (
        {"type": "X", "like": "SystemExit", "message": ""},
        {"type": "a b", "like": "ValueError", "message": ""},
    ):
        with pytest.raises(encoding.Malformed):
            decoder.error(bad)


def test_a_trace_survives_its_encoding():
    run = tracing.record(scan, np.arange(40, dtype=np.float32), algorithm="ladder")
    back = encoding.Decoder().trace(json.loads(json.dumps(encoding.encode_trace(run))))
    assert back.launches == run.launches and back.fences == run.fences
    assert [r._replace(value=None) for r in back.records] == [r._replace(value=None) for r in run.records]
    assert [float(r.value) for r in back.records] == [float(r.value) for r in run.records]
    assert back.races() == run.races() and back.counts() == run.counts()


def test_the_graders_own_processes_are_bounded():
    """The judge and the batch's process bound themselves (limits.limit_process): a bomb in what they read ends in
    MemoryError."""
    program = (
        "import resource, numpy as np\n"
        "from prefixsum.grading import limits\n"
        "limits.limit_process(address_space_mb=2048, open_files=64, cpu_s=30)\n"
        "print(resource.getrlimit(resource.RLIMIT_AS)[0] >> 20, resource.getrlimit(resource.RLIMIT_NOFILE)[0],"
        " resource.getrlimit(resource.RLIMIT_CPU)[0])\n"
        "try:\n    np.ones(3 << 30, np.uint8)\nexcept MemoryError:\n    print('MemoryError')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(LADDER.parents[1])},
    )
    assert done.stdout.split() == ["2048", "64", "30", "MemoryError"]
    assert "limits.limit_process(" in inspect.getsource(judge.main) and "limit_process(" in inspect.getsource(
        grade_command.main
    )
    assert "limits.limit_process(" in inspect.getsource(judging._judge_child)


def test_the_judge_server_judges_each_request_in_a_fork_of_its_own(chapter):
    """One server per grading thread, each verdict in a fork: a request that breaks its child
    leaves the server to judge the next one; one that takes too long stops the server."""
    judges = judging.Judges({**os.environ, "PYTHONPATH": str(LADDER.parents[1])})
    observed = sandbox_output(chapter, chapter.exercise(EXERCISE).source)
    request = json.dumps(
        {"chapter": json.loads(_inside(chapter)), "observed": observed, "ids": [EXERCISE], "timeout": 30}
    ).encode()
    broken = judges.judge(b"[]", 120)
    assert broken[0] == 1 and "TypeError" in broken[2], broken
    returncode, stdout, _ = judges.judge(request, 120)
    assert returncode == 0 and json.loads(stdout)["lines"] == [PASS], stdout
    server = judges._local.server
    assert judges.judge(request, 0.001) == (None, "", "no verdict within 0.001 s") and server.poll() is not None
    assert judges.judge(b"[]", 120)[0] == 1
    judges.close()  # the batch's last step
    assert judges._local.server.poll() is not None


def test_the_recheck_and_the_judge_start_without_nbformat():
    """The sandbox's re-check and the judge import what they use of the grading package, not the
    batch: nbformat brings jsonschema, whose optional IRI checker compiles its grammars at import
    (over a second of every sandboxed run)."""
    program = (
        "import sys\n"
        "import prefixsum.grading.observations, prefixsum.grading.judge, "
        "prefixsum.grading.results\n"
        "print(sorted(m for m in ('nbformat', 'jsonschema') if m in sys.modules))\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert finished.stdout.strip() == "[]", finished.stdout


def test_nbvals_pytest_in_the_sandbox_leaves_out_only_the_iri_grammars():
    code = trusted._PYTEST_WITHOUT_IRI_GRAMMARS
    finished = subprocess.run([sys.executable, "-c", code + "\n", "--version"], capture_output=True, text=True)
    assert finished.returncode == 0 and "pytest" in finished.stdout + finished.stderr, finished.stderr[-2000:]
    # what the prelude does before pytest starts, then nbval's own import: jsonschema found no IRI checker
    probe = trusted._WITHOUT_IRI_GRAMMARS + "; import nbformat; print(sys.modules.get('rfc3987_syntax', 'absent'))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "None"
