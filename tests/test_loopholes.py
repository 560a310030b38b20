"""Checks that grade the kernel on their own terms (issue 43, item 2; issue 47, item 3).

Every submission of :data:`prefixsum.classroom.loopholes.LOOPHOLES` once passed its check
without solving the exercise (the check's tile taken from the cell's ``BLOCK``, host numpy beside
an empty kernel, a size or shape that hid the mistake); each now fails with a verdict that names
it. Every right answer of :data:`~prefixsum.classroom.loopholes.SLOW_RIGHT` (naive, slow, of
another shape) passes. Each runs as the grader's check runs it
(:func:`prefixsum.classroom.mutation.isolated_verdict`: the setup cells, the cell, its check, in a
forked process); the grader's own path (the sandbox's observations, the judge, the PTX compile
of device functions) is tested on the cases that only it shows.
"""

import ast
import contextlib
import io
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda

from prefixsum.classroom import check, loopholes, mistakes, mutation
from prefixsum.classroom.check import counting
from prefixsum.grading import judge, read_chapter, trusted
from prefixsum.grading.runner import _inside

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
GRADED = sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if p.name[:2] >= "01")
EXERCISES = {e.id: e for e in mutation.exercises(GRADED)}


@pytest.mark.parametrize("loophole", loopholes.LOOPHOLES, ids=lambda m: f"{m.exercise}: {m.name}")
def test_every_loophole_fails_its_check_with_a_verdict_that_names_it(loophole):
    exercise = EXERCISES[loophole.exercise]
    passed, output = mutation.isolated_verdict(exercise, loophole.source(exercise.source), timeout=20, wall=240)
    assert not passed, output
    assert loophole.verdict in output, output


@pytest.mark.parametrize("answer", loopholes.SLOW_RIGHT, ids=lambda m: f"{m.exercise}: {m.name}")
def test_slow_naive_and_other_right_answers_pass(answer):
    exercise = EXERCISES[answer.exercise]
    passed, output = mutation.isolated_verdict(exercise, answer.source(exercise.source), timeout=20, wall=240)
    assert passed, output


def _module_constants(source):
    """Names the cell binds at its top level by assignment (its constants, not its functions)."""
    return {
        n.id
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        for target in node.targets
        for n in ast.walk(target)
        if isinstance(n, ast.Name)
    }


def _host_functions(source):
    """``{name: has a solution span}`` of the plain (not ``cuda.jit``) functions a cell defines."""
    lines = source.splitlines()
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and not node.decorator_list:
            body = lines[node.lineno - 1 : node.end_lineno]
            found[node.name] = any(line.strip().startswith("### BEGIN SOLUTION") for line in body)
    return found


@pytest.mark.parametrize("exercise", EXERCISES.values(), ids=lambda e: e.id)
def test_checks_take_no_constant_and_no_host_wrapper_from_the_cell(exercise):
    """A check's terms (tile, threads, L, rows, identities, poll limits) are written in it, and a
    kernel is launched by the check itself: a check reads from the exercise cell only its
    functions and kernels, and of its host functions only those the student writes."""
    read = trusted._reads([exercise.check])
    assert not read & _module_constants(exercise.source), (
        f"the check reads the cell's {read & _module_constants(exercise.source)}"
    )
    given = {name for name, solved in _host_functions(exercise.source).items() if not solved}
    assert not read & given, f"the check calls the cell's given host code {read & given}, not the kernel"


def test_the_table_lists_every_exercises_terms_and_every_named_mistake():
    """``notebooks/exercise_checks.md``: a row of terms per exercise, a row per named mistake and loophole."""
    rows = [
        line.split(" | ")
        for line in (NOTEBOOKS / "exercise_checks.md").read_text().splitlines()
        if line.startswith("| ")
    ]
    named = {(row[0][2:], row[1]) for row in rows if len(row) == 4}
    assert set(EXERCISES) <= {row[0][2:] for row in rows}
    assert {(m.exercise, m.name) for m in mistakes.MISTAKES + loopholes.LOOPHOLES} <= named


# The family of right kernels every check must pass, however slow or naive: plain ``ps.check.scan``
# with no budget, at sizes that keep the test short. The same two kernels at n = 1000, a default
# size (half a million reads of read-only input, which are never polls), are tests/test_polls.py's
# (the naive one at every default size), in float32: the steps and polls do not depend on the dtype.
@cuda.jit
def naive_scan_kernel(x, out, n):
    i = cuda.grid(1)
    if i < n:
        total = x[0]
        for k in range(1, i + 1):
            total += x[k]
        out[i] = total


@cuda.jit
def weighted_scan_kernel(x, weights, out, n):
    i = cuda.grid(1)
    if i < n:
        total = x[0] * weights[0]
        for k in range(1, i + 1):
            total += x[k] * weights[k % 4]  # the same four weights, read again by every thread
        out[i] = total


def _launched(kernel, *extra, threads=64):
    def scan(x):
        out = cuda.device_array(len(x), x.dtype)
        kernel[max(1, -(-len(x) // threads)), threads](cuda.to_device(x), *extra, out, len(x))
        return out

    return scan


SHORT = (1, 2, 31, 33, 100, 300)


def test_a_naive_scan_one_thread_per_output_passes():
    verdict = check.scan(_launched(naive_scan_kernel), dtype=np.int32, sizes=SHORT)
    assert verdict.passed, verdict


def test_a_kernel_reading_a_constant_table_again_and_again_passes():
    verdict = check.scan(
        _launched(weighted_scan_kernel, cuda.to_device(np.ones(4, np.int32))), dtype=np.int32, sizes=SHORT
    )
    assert verdict.passed, verdict


def test_a_naive_scan_in_blocks_of_several_warps_passes_where_it_is_short():
    verdict = check.scan(_launched(naive_scan_kernel, threads=96), dtype=np.int32, sizes=(1, 2, 31, 33, 95, 97))
    assert verdict.passed, verdict


@cuda.jit
def split_flags(keys, flags):
    i = cuda.grid(1)
    if i < keys.shape[0]:
        flags[i] = 1 if (keys[i] >> 3) & 1 == 0 else 0


@cuda.jit
def split_flags_in_one_thread(keys, flags):
    if cuda.grid(1) == 0:
        for i in range(keys.shape[0]):
            flags[i] = 1 if (keys[i] >> 3) & 1 == 0 else 0


@cuda.jit
def split_scatter(keys, flags, zeros_before, out):
    i = cuda.grid(1)
    n = keys.shape[0]
    if i < n:
        zeros = zeros_before[n - 1] + flags[n - 1]
        out[zeros_before[i] if flags[i] else zeros + i - zeros_before[i]] = keys[i]


def _split_with(flag_kernel):
    import prefixsum as ps

    def split(keys, bit):
        flags = cuda.device_array(len(keys), np.int32)
        flag_kernel[max(1, -(-len(keys) // 64)), 64](cuda.to_device(keys), flags)
        flags = flags.copy_to_host()
        zeros_before = ps.exclusive_scan(flags)
        out = cuda.device_array(len(keys), keys.dtype)
        split_scatter[max(1, -(-len(keys) // 64)), 64](
            cuda.to_device(keys), cuda.to_device(flags), cuda.to_device(zeros_before), out
        )
        return out

    return split


RADIX_BUDGET = check.Budget(accesses_per_step=8, kernels=("split_scatter",), device_work=True)


def test_a_helper_kernel_of_the_students_is_allowed_within_the_budget_and_only_within_it():
    assert check.radix_pass(_split_with(split_flags), sizes=(1, 33, 100), budget=RADIX_BUDGET).passed
    serial = check.radix_pass(_split_with(split_flags_in_one_thread), sizes=(1, 33, 100), budget=RADIX_BUDGET)
    assert serial.diagnosis == "over-budget" and "memory accesses between two barriers" in serial.hint, serial


def test_a_kernel_handed_the_answer_did_not_read_its_input():
    @cuda.jit
    def copy_answer(answer, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = answer[i]

    def handed(x):
        out = cuda.device_array(len(x), x.dtype)
        copy_answer[max(1, -(-len(x) // 64)), 64](cuda.to_device(np.cumsum(x).astype(x.dtype)), out)
        return out

    verdict = check.scan(handed, dtype=np.int32, sizes=(1, 33), budget=check.Budget(device_work=True))
    assert verdict.diagnosis == "over-budget" and "read" in verdict.hint and "of the input's" in verdict.hint, verdict


def test_counted_elements_add_as_their_dtype_and_count_every_operation():
    tally = counting.new_tally()
    big = counting.Counted(np.int32(2**31 - 1), tally)
    wrapped = big + 1
    assert isinstance(wrapped, counting.Counted) and wrapped.value == np.int32(-(2**31))
    assert int(3 - big) == int(np.int32(3) - np.int32(2**31 - 1)) and tally[counting.ADDITIONS] == 2
    assert np.int32(5) + counting.Counted(np.int32(1), tally) == 6 and tally[counting.ADDITIONS] == 3
    assert counting.plain([counting.Counted(np.int32(4), tally), 0], np.int32).tolist() == [4, 0]


# The grader's path: what the sandbox observes, the judge replays; the PTX stage compiles.


def _sandbox(chapter, sources, record=False):
    """What trusted.py's ``check`` (or ``record``) mode writes for ``sources``, run in this process."""
    request = {"chapter": _inside(chapter), "sources": sources, "timeout": 60, "signatures": {}}
    lines = []
    with contextlib.redirect_stdout(io.StringIO()):
        trusted._check(request, lambda entry: lines.append(json.dumps(entry)), record=record)
    return "\n".join(lines)


def _judged(chapter, observed, exercise):
    found = []
    judge.judge(
        {"chapter": json.loads(_inside(chapter)), "observed": observed, "ids": [exercise], "timeout": 60}, found.append
    )
    return {v["id"]: v for v in found}[exercise]


@pytest.fixture(scope="module")
def ladder():
    return read_chapter(NOTEBOOKS / "01_ladder.ipynb")


def test_the_judge_counts_the_additions_the_sandbox_saw(ladder):
    exercise = "01.serial-scan"
    quadratic = next(m for m in loopholes.LOOPHOLES if m.exercise == exercise and "O(n^2)" in m.name)
    found = _judged(ladder, _sandbox(ladder, {exercise: quadratic.source(ladder.exercise(exercise).source)}), exercise)
    assert found["status"] == "ran" and "over-budget at n=31" in found["message"], found
    assert "465 additions for 31 elements" in found["message"]


def test_the_judge_keeps_the_setups_names_whatever_the_sandbox_reports(ladder):
    exercise = "01.ladder-step"
    (entry,) = map(json.loads, _sandbox(ladder, {exercise: ladder.exercise(exercise).source}).splitlines())
    entry["names"]["ps"] = {"value": {"i": 1}}  # a forged report: the check's ps an integer
    assert _judged(ladder, json.dumps(entry), exercise)["lines"] == ["PASS my_ladder_tile: 11 sizes from 1 to 2049\n"]


WARP_RANK = "11.warp-rank"
LANE_MASKS = (
    "@cuda.jit(device=True)\ndef my_warp_rank(kept):\n    ### BEGIN SOLUTION\n"
    "    ballot = np.uint32(cuda.ballot_sync(0xFFFFFFFF, kept))\n"
    "    return cuda.popc(ballot & cuda.lanemask_lt()), cuda.popc(ballot)\n    ### END SOLUTION"
)


def test_device_functions_are_compiled_to_ptx_like_kernels(ptx_compiler):
    """11.warp-rank's device function, which only the package's kernels call: the grader records the
    types the instructor's solution was called with, and compiles a submission's for them. A
    module-level Python list, which the simulator reads as any Python object, is refused at the
    compile stage, naming the line and the name."""
    chapter = read_chapter(NOTEBOOKS / "11_applications.ipynb")
    solution = chapter.exercise(WARP_RANK).source
    assert LANE_MASKS in solution
    (recorded,) = map(json.loads, _sandbox(chapter, {WARP_RANK: solution}, record=True).splitlines())
    assert recorded["status"] == "ran", recorded
    assert recorded["signatures"]["my_warp_rank"] == ["(boolean,)"], recorded["signatures"]
    with_list = solution.replace(
        LANE_MASKS,
        "BELOW = [(1 << k) - 1 for k in range(32)]\n\n\n"
        + LANE_MASKS.replace("cuda.lanemask_lt()", "BELOW[cuda.laneid]"),
    )
    request = {"chapter": _inside(chapter), "timeout": 60, "signatures": {WARP_RANK: recorded["signatures"]}}
    results = {}
    for label, source in (("solution", solution), ("list", with_list)):
        request["sources"] = {WARP_RANK: source}
        finished = subprocess.run(
            [sys.executable, trusted.__file__, "ptx"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            env={**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": str(NOTEBOOKS.parent)},
            timeout=300,
        )
        assert finished.returncode == 0, finished.stderr[-3000:]
        results[label] = json.loads(finished.stdout)
    assert results["solution"]["status"] == "ok", results["solution"]
    refused = results["list"]
    assert refused["status"] == "rejected", refused
    assert "device function my_warp_rank does not compile for a GPU (line 8)" in refused["message"], refused
    assert "module-level BELOW" in refused["message"], refused
