"""The notebooks' exercises (issue 14): ids, specs, hints, students' versions, and checks that catch mistakes.

The mutation test runs each exercise's own check cell on mechanical mutants of its solution
(:mod:`prefixsum.classroom.mutation`) and requires at least 90% of the mutants that change an
output to be rejected, every survivor argued in the exercise's ``survivors`` metadata. To keep
CI short it runs a fixed sample of :data:`SAMPLE` mutants per exercise; set
``PREFIXSUM_MUTANTS=all`` to run every mutant (``python -m prefixsum.classroom.mutation`` prints
the whole table). The sample's mutants that the table's notes argue equivalent
(:data:`ARGUED_EQUIVALENT`) run the check alone, not the thorough check after it.
"""

import hashlib
import os
import pathlib
import re
import time

import nbformat
import numpy as np
import pytest
from numba import cuda, float32

import prefixsum as ps
from prefixsum import check
from prefixsum.classroom import hints, mistakes, mutation, student

NOTEBOOKS = sorted(pathlib.Path(__file__).resolve().parent.parent.joinpath("notebooks").glob("[0-9][0-9]_*.ipynb"))
# The chapter without exercises: 00, the introduction.
WITHOUT_EXERCISES = ("00_gpu_basics",)
GRADED = [p for p in NOTEBOOKS if p.stem not in WITHOUT_EXERCISES]
EXERCISES = mutation.exercises(GRADED)
NOTEBOOKS_BY_NAME = {p.name: p for p in NOTEBOOKS}
SAMPLE = None if os.environ.get("PREFIXSUM_MUTANTS") == "all" else 10
KILL_RATES = NOTEBOOKS[0].with_name("exercise_kill_rates.md")


def cells_digest(exercise):
    """A digest of the cells a mutant's behaviour depends on: the notebook's setup cells and the exercise cell."""
    return hashlib.sha256(f"{exercise.setup}\0{exercise.source}".encode()).hexdigest()[:16]


# The mutants of the CI sample that exercise_kill_rates.md argues equivalent to the solution, where
# the thorough run that would show it again costs seconds: ``{exercise: (cells_digest when argued,
# descriptions)}``. Each still runs the check (were it killed, the argument no longer holds); once
# the setup or exercise cell changes, the digest no longer matches and the thorough check judges
# them again, as it judges every other mutant that passes the check. The package's code that the
# cells call (10.lookback-loop's lookback.state_access) is not in the digest: a change there that
# made an argued mutant change an output shows here only if the check kills it, and in
# ``python -m prefixsum.classroom.mutation``'s table, which judges every mutant thoroughly.
ARGUED_EQUIVALENT = {
    "04.packed-upsweep": ("1676b0c7d749ce9b", ("line 8:4 barrier: cuda.syncthreads() -> (removed)",)),
    "04.conflict-free": ("5749a9a4c0024528", ("line 1:21 constant: 5 -> 6",)),
    "10.lookback-loop": (
        "f1fbbd854ac2c344",
        (
            "line 3:4 bound: if lane == 0: publish(status, values, tile, published + (PREFIX if tile == 0 else "
            "AGGREGATE), aggregate) -> if True: publish(status, values, tile, published + (PREFIX if tile == 0 else "
            "AGGREGATE), aggregate)",
            "line 3:7 comparison: lane == 0 -> lane != 0",
            "line 20:4 bound: if lane == 0 and tile > 0: publish(status, values, tile, published + PREFIX, exclusive + "
            "aggregate) -> if True: publish(status, values, tile, published + PREFIX, exclusive + aggregate)",
        ),
    ),
    "11.argmax-operator": ("defc64617b3df1d6", ("line 2:19 index: q[0] -> q[0 - 1]", "line 2:21 constant: 0 -> -1")),
}


def argued_equivalent(exercise):
    """The descriptions of ``exercise``'s mutants argued equivalent, if argued for its cells as they are."""
    digest, descriptions = ARGUED_EQUIVALENT.get(exercise.id, ("", ()))
    return descriptions if digest == cells_digest(exercise) else ()


def solution_lines(exercise, shortest=12):
    """The solution's lines of at least ``shortest`` characters, stripped, that the students' notebook does not show.

    Lines the chapter gives elsewhere (the loop header of a kernel given in another exercise,
    the original notebook's fold that the student mirrors) are not secret.
    """
    given = "\n".join(
        c.source for c in student.student_version(nbformat.read(NOTEBOOKS_BY_NAME[exercise.notebook], 4)).cells
    )
    source = exercise.source
    span = source[source.index(student.BEGIN) : source.index(student.END)].splitlines()[1:]
    return [line.strip() for line in span if len(line.strip()) >= shortest and line.strip() not in given]


def test_every_rewritten_chapter_has_three_graduated_exercises_with_unique_ids():
    ids = [e.id for e in EXERCISES]
    assert len(ids) == len(set(ids)), ids
    for path in GRADED:
        mine = [e for e in EXERCISES if e.notebook == path.name]
        assert len(mine) >= 3, path.name
        for exercise in mine:
            assert re.fullmatch(rf"{path.name[:2]}\.[a-z0-9-]+", exercise.id), exercise.id
            assert exercise.todo and exercise.points >= 1
        text = nbformat.read(path, 4)
        markdown = "\n".join(c.source for c in text.cells if c.cell_type == "markdown")
        for level in ("warm-up", "core", "stretch"):
            assert f"({level}, " in markdown, (path.name, level)


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_spec_hints_and_todo_do_not_give_the_code(exercise):
    assert len(hints.HINTS[exercise.id]) >= 2
    assert solution_lines(exercise), exercise.id  # something is left for the student to write
    text = " ".join(hints.HINTS[exercise.id]) + " " + exercise.todo
    for line in solution_lines(exercise):
        assert line not in text, (exercise.id, line)


# The package's functions whose source solves an exercise: a student's notebook never prints them.
SOLVING = {
    "01.serial-scan": ("reference.partial_sums", "reference.exclusive_partial_sums"),
    "01.ladder-step": ("scans.ladder.ladder_tile_kernel",),
    "02.folding-phase": ("scans.folding.folding_tile_kernel",),
    "03.hs-step": ("scans.hillis_steele.hillis_steele_tile_kernel",),
    "03.blelloch-down-sweep": ("scans.blelloch.blelloch_256_kernel",),
    "04.packed-upsweep": ("scans.blelloch.blelloch_upsweep", "scans.blelloch.blelloch_tile_kernel"),
    "04.blelloch-carry": ("scans.tiles.carry_kernel",),
    "05.levels": ("kstep._level_sizes",),
    "05.reduce": ("kstep._reduce_run", "kstep.reduce_kernel"),
    "05.kstep-correct": ("kstep._correct_run",),
    "06.warp-shuffle-scan": ("primitives.warp.scan_shfl",),
    "06.block-combine": ("scans.hierarchical.block_scan",),
    "07.pcr-step": ("_common.reduce_row",),
    "07.thomas-sweep": ("thomas.thomas", "hybrid.sweep"),
    "08.lane-exchange": ("warp._make",),
    "08.interface-system": ("partition._make",),
    "08.chunk-partition": ("chunk.chunk_partition",),
    "09.householder-reflector": ("hh.reflector",),
    "09.rank-two-update": ("hh.update",),
    "09.parallel-norm": ("hh.block_sum",),
    "10.chained-handoff": ("ps.mutants.hand_off",),
    "10.lookback-loop": ("lookback.look_back",),
    "10.publish": ("lookback.state_access",),
    "11.compact": ("apps.compaction.scatter_kept",),
}


@pytest.mark.parametrize("path", GRADED, ids=lambda p: p.name)
def test_students_version_holds_no_solution_and_no_instructor_cell(path):
    instructor = nbformat.read(path, 4)
    notebook = student.student_version(instructor)
    assert len(notebook.cells) < len(instructor.cells)  # the instructor's comparisons are gone
    sources = "\n".join(cell.source for cell in notebook.cells)
    assert student.BEGIN not in sources
    for exercise in (e for e in EXERCISES if e.notebook == path.name):
        for name in SOLVING.get(exercise.id, ()):
            assert not re.search(rf"getsource\([\w.]*\b{re.escape(name)}\)", sources), (exercise.id, name)
    # the instructor's version shows them, after the checks
    shown = "\n".join(c.source for c in instructor.cells if "instructor" in c.metadata.get("tags", []))
    for exercise in (e for e in EXERCISES if e.notebook == path.name):
        for name in SOLVING.get(exercise.id, ()):
            assert name in shown, (exercise.id, name)


def test_hints_open_one_at_a_time():
    ladder = hints.HINTS["01.ladder-step"]
    hints._opened.pop("01.ladder-step", None)
    first, second = ps.hint("01.ladder-step"), ps.hint("01.ladder-step")
    assert first.startswith(f"Hint 1 of {len(ladder)} for 01.ladder-step: ") and ladder[0] in first
    assert second.startswith("Hint 2 of") and repr(second) == str(second)
    assert ladder[0] in ps.hint("01.ladder-step", 1)
    for _ in ladder:
        last = ps.hint("01.ladder-step")
    assert last.startswith(f"Hint {len(ladder)} of {len(ladder)}") and "last one" in last
    with pytest.raises(ValueError, match="no hints for exercise '01.nope'"):
        ps.hint("01.nope")
    with pytest.raises(ValueError, match="has hints 1 to"):
        ps.hint("01.ladder-step", 9)


def test_mutants_cover_the_issues_kinds_of_mistake():
    source = (
        "from numba import cuda\ndef k(a, n, t):\n    ### BEGIN SOLUTION\n    if t < n and t > 0:\n"
        "        a[t] += a[t - 1] * 2\n    cuda.syncthreads()\n    ### END SOLUTION\n    return a\n"
    )
    kinds = {m.description.split()[2].rstrip(":") for m in mutation.mutants(source)}
    assert kinds == {"operator", "comparison", "constant", "index", "barrier", "bound"}
    assert all("### BEGIN" not in m.source for m in mutation.mutants(source))


def test_mutants_that_make_one_program_are_judged_once(monkeypatch):
    """An index moved by one (``s[0 - 1]``) and its constant moved by one (``s[-1]``) are two mutants,
    each counted, of one program, whose check runs once."""
    source = "def first(s):\n    ### BEGIN SOLUTION\n    return s[0]\n    ### END SOLUTION\n"
    judged = []
    monkeypatch.setattr(mutation, "_passes", lambda exercise, source, **limits: judged.append(source) or False)
    report = mutation.kill_rate(mutation.Exercise("01.first", "01_x.ipynb", source, "", ""), check_seconds=0.0)
    assert len(mutation.mutants(source)) == report.mutants == report.killed == 4
    assert sorted(line.strip() for text in judged for line in text.splitlines() if "return" in line) == [
        "return s[0 + 1]",
        "return s[0 - 1]",
    ]


def test_an_argued_equivalent_mutant_runs_the_check_alone_and_is_killed_if_it_fails(monkeypatch):
    """The thorough run, which tells an equivalent mutant from a survivor, is left out for argued
    ones only, and for the mutants of one program with an argued one (``s[0 + 1]``, ``s[1]``)."""
    source = "def double(s):\n    ### BEGIN SOLUTION\n    return s[0] * 2\n    ### END SOLUTION\n"
    every = mutation.mutants(source)
    shifted = [m.description for m in every if "s[0 + 1]" in m.source or "s[1]" in m.source]
    runs = []

    def passes(exercise, source, *, thorough, **limits):
        runs.append(thorough)
        return "s[0 + 1]" in source or "s[1]" in source

    monkeypatch.setattr(mutation, "_passes", passes)
    exercise = mutation.Exercise("01.double", "01_x.ipynb", source, "", "")
    argued = [shifted[0], next(m.description for m in every if "s[0] * 2 -> s[0] + 2" in m.description)]
    report = mutation.kill_rate(exercise, check_seconds=0.0, argued=argued)
    assert len(shifted) == 2 and report.equivalent == shifted and report.killed == len(every) - 2
    assert True not in runs
    runs.clear()
    assert mutation.kill_rate(exercise, check_seconds=0.0).equivalent == shifted and runs.count(True) == 1


def test_the_argued_equivalent_mutants_are_argued_for_the_cells_as_they_are():
    """A stale digest costs the thorough runs again, silently: this says when to renew it (the
    mutation test judged the mutants again, thoroughly, in the same run)."""
    by_id = {e.id: e for e in EXERCISES}
    argued = KILL_RATES.read_text().split("The equivalent ones", 1)[1].split("## Named mistakes", 1)[0]
    for exercise_id, (digest, descriptions) in ARGUED_EQUIVALENT.items():
        exercise = by_id[exercise_id]
        assert f"**{exercise_id}**" in argued, exercise_id
        assert set(descriptions) <= {m.description for m in mutation.mutants(exercise.source)}, exercise_id
        assert digest == cells_digest(exercise), (
            f"{exercise_id}: its setup or exercise cell changed since its equivalent mutants were argued; once "
            f"test_check_passes_the_solution_fails_the_blank_and_kills_mutants[{exercise_id}] passes (it judged "
            f"them thoroughly) and the argument in {KILL_RATES.name} holds, set the digest to "
            f"{cells_digest(exercise)!r}"
        )


def test_the_kill_rate_table_has_every_exercise_and_argues_every_equivalent_mutant():
    """notebooks/exercise_kill_rates.md: a row per exercise (``python -m prefixsum.classroom.mutation``'s
    table) whose numbers add up, every exercise with equivalent mutants argued below the table, and
    a row per named mistake (``python -m prefixsum.classroom.mistakes``), none of a mistake gone."""
    text = KILL_RATES.read_text()
    rows = re.findall(r"^\| (\d\d\.[a-z0-9-]+) \| (\d+) \| (\d+) \| (\d+) \| (\d+)% \| (.+) \|$", text, re.M)
    ids = [row[0] for row in rows]
    assert len(ids) == len(set(ids)) and set(ids) == {e.id for e in EXERCISES}, sorted(
        set(ids) ^ {e.id for e in EXERCISES}
    )
    argued = text[text.index("The equivalent ones") : text.index("## Named mistakes")]
    for exercise, made, equivalent, killed, rate, survivors in rows:
        made, equivalent, killed = int(made), int(equivalent), int(killed)
        left = 0 if survivors == "none" else len(survivors.split("; "))
        assert made == equivalent + killed + left and int(rate) == round(100 * killed / (made - equivalent)), exercise
        assert not equivalent or f"**{exercise}**" in argued, (
            f"{exercise}: its {equivalent} equivalent mutants are not argued"
        )
    named = set(
        re.findall(r"^\| (\d\d\.[a-z0-9-]+) \| ([^|]+?) \| (?!-)", text[text.index("## Named mistakes") :], re.M)
    )
    assert named == {(m.exercise, m.name) for m in mistakes.MISTAKES}, sorted(
        named ^ {(m.exercise, m.name) for m in mistakes.MISTAKES}
    )


@pytest.mark.slow  # dozens of mutants of each exercise, each through its check on the simulator
@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_check_passes_the_solution_fails_the_blank_and_kills_mutants(exercise):
    start = time.process_time()
    passed, output = mutation.verdict(exercise)
    check_seconds = time.process_time() - start  # the mutants' hang bound, without a second run
    assert passed, output
    assert mutation.blank_fails(exercise)
    argued = argued_equivalent(exercise)
    report = mutation.kill_rate(exercise, sample=SAMPLE, check_seconds=check_seconds, argued=argued)
    killed = [description for description in argued if description not in report.equivalent]
    assert not killed, f"{exercise.id}: the check kills mutants argued equivalent (re-argue them): {killed}"
    unargued = [s for s in report.survivors if s not in exercise.survivors]
    assert not unargued, f"{exercise.id}: survivors not argued in the metadata: {unargued}"
    assert report.rate >= 0.9, f"{exercise.id}: {report.killed} of {report.mutants - len(report.equivalent)} killed"


BLOCK = 64


@cuda.jit
def serial_tile(x, out, totals, n):
    rungs = cuda.shared.array(BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * BLOCK + t
    rungs[t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    if t == 0:  # one thread scans the whole tile: right numbers, no parallel algorithm
        for k in range(1, BLOCK):
            rungs[k] += rungs[k - 1]
    cuda.syncthreads()
    if i < n:
        out[i] = rungs[t]
    if t == BLOCK - 1:
        totals[cuda.blockIdx.x] = rungs[t]


@cuda.jit
def barrier_only_loop_tile(x, out, totals, n):
    phase = 1
    while phase < BLOCK:
        cuda.syncthreads()
        phase >>= 1  # never reaches BLOCK, and touches no memory


LADDER_BUDGET = check.Budget(barriers=7, accesses_per_step=4, traffic_per_element=2)


def test_a_serial_solution_passes_the_numbers_but_not_the_budget():
    assert check.tiled(serial_tile, block_size=BLOCK, sizes=(1, 100)).passed
    result = check.tiled(serial_tile, block_size=BLOCK, sizes=(1, 100), budget=LADDER_BUDGET)
    assert result.diagnosis == "over-budget" and "between two barriers" in result.hint, str(result)
    assert check.tiled(ps.mutants.correct_tile, block_size=BLOCK, sizes=(1, 100, 257), budget=LADDER_BUDGET).passed


def test_each_budget_limit_is_enforced():
    small = dict(block_size=BLOCK, sizes=(100,))
    assert (
        "barriers in one launch" in check.tiled(ps.mutants.correct_tile, budget=check.Budget(barriers=6), **small).hint
    )
    assert (
        "global-memory accesses"
        in check.tiled(ps.mutants.correct_tile, budget=check.Budget(traffic_per_element=1), **small).hint
    )
    hs = ps.scans.hillis_steele.hillis_steele_tile_kernel("add", np.float32, True, False, 64)
    assert check.tiled(hs, budget=check.Budget(bank_conflict_ways=1), **small).passed
    blelloch = ps.scans.blelloch.blelloch_tile_kernel("add", np.float32, True, False, 64, False)
    result = check.tiled(blelloch, block_size=128, threads=64, sizes=(100,), budget=check.Budget(bank_conflict_ways=2))
    assert result.diagnosis == "over-budget" and "passes of the shared-memory banks" in result.hint
    with pytest.raises(TypeError, match="budget must be"):
        check.scan(np.cumsum, budget={"barriers": 3})


def test_a_wrong_partner_index_is_not_diagnosed_as_a_missing_barrier():
    wrong_index = check.tiled(ps.mutants.wrong_partner_tile, block_size=BLOCK)
    assert wrong_index.diagnosis == "race"
    assert "same step" in wrong_index.hint and "Check the index" in wrong_index.hint
    assert "is missing" not in wrong_index.hint
    missing_barrier = check.tiled(ps.mutants.missing_barrier_tile, block_size=BLOCK)
    assert missing_barrier.diagnosis == "race" and "cuda.syncthreads() is missing" in missing_barrier.hint


def test_a_loop_that_only_passes_barriers_is_stopped():
    # no accesses: the CPU-time runaway bound
    result = check.tiled(barrier_only_loop_tile, block_size=BLOCK, sizes=(1,), timeout=0.1)
    assert result.diagnosis == "timeout", str(result)


def test_thorough_adds_sizes_and_time_limit_caps_the_timeout():
    seen = []
    record = lambda x: seen.append(len(x)) or np.cumsum(x)  # noqa: E731
    check.scan(record, sizes=(1, 40))
    assert seen == [1, 40]
    seen.clear()
    with check.thorough():
        assert str(check.scan(record, sizes=(1, 40))) == "PASS <lambda>: 2 sizes from 1 to 40".replace(
            "<lambda>", "scan"
        )
    assert seen == list(range(1, 41))
    start = time.process_time()
    with check.time_limit(0.1):  # host code that never ends: stopped at RUNAWAY * 0.1 s of CPU time
        result = check.function(lambda: [0 for _ in iter(int, 1)], lambda: [0], [()], name="endless")
    assert result.diagnosis == "exception" and "TimeoutError" in result.hint
    assert time.process_time() - start < 0.5 * check.mode.RUNAWAY  # not the 20 s timeout's RUNAWAY * 20


def test_function_checks_host_code_case_by_case():
    assert (
        str(check.function(lambda n: n * n, lambda n: n**2, [(1,), (2,), (3,)], name="square"))
        == "PASS square: 3 cases"
    )
    wrong = check.function(lambda n: [n, n], lambda n: [n, n + 1], [(1,), (2,)], name="pair")
    assert str(wrong) == "FAIL pair: wrong-result at case 0. (1,): expected [1, 2], got [1, 1]"
    with pytest.raises(ValueError, match="at least one"):
        check.function(len, len, [])


@cuda.jit
def _squares(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * x[i]


@cuda.jit
def _squares_by_one_thread(x, out):
    if cuda.grid(1) == 0:
        for i in range(x.size):
            out[i] = x[i] * x[i]


@cuda.jit
def _squares_but_the_last(x, out):
    i = cuda.grid(1)
    if i < x.size - 1:
        out[i] = x[i] * x[i]


def _launching(kernel):
    def squares(x):
        out = cuda.device_array_like(x)
        kernel[(x.size + 31) // 32, 32](cuda.to_device(x), out)
        return out

    return squares


def test_function_with_a_budget_traces_kernels_and_rejects_serial_or_unwritten_results():
    cases = [(np.random.default_rng(n).normal(size=n),) for n in (1, 33, 100)]
    budget = check.Budget(accesses_per_step=3)
    assert str(check.function(_launching(_squares), np.square, cases, budget=budget, name="sq")) == "PASS sq: 3 cases"
    serial = check.function(_launching(_squares_by_one_thread), np.square, cases, budget=budget, name="sq")
    assert (
        not serial
        and serial.diagnosis == "over-budget"
        and "at case 1. thread 0 of block 0 made 99 memory accesses" in str(serial)
    )
    unwritten = check.function(_launching(_squares_but_the_last), np.square, cases, budget=budget, name="sq")
    assert (
        not unwritten
        and unwritten.diagnosis == "wrong-result"
        and "expected [0.119" in str(unwritten)
        and "got [nan]" in str(unwritten)
    )
    assert "at (32,)" in str(check.function(_launching(_squares_but_the_last), np.square, cases[1:], budget=budget))
    with pytest.raises(TypeError, match="Budget"):
        check.function(np.square, np.square, cases, budget=3)


def test_every_exercise_of_every_chapter_has_a_hint_ladder():
    ids = [
        cell.metadata["exercise_id"]
        for path in NOTEBOOKS
        for cell in nbformat.read(path, 4).cells
        if "exercise" in cell.metadata.get("tags", [])
    ]
    assert len(ids) == len(set(ids))
    assert [i for i in ids if len(hints.HINTS.get(i, ())) < 2] == []


@cuda.jit
def serial_tridiagonal(a, b, c, d, x):
    system, n = cuda.blockIdx.x, x.shape[1]
    if cuda.threadIdx.x == 0:  # one thread runs Thomas through global memory: right x, no PCR
        for i in range(1, n):
            k = a[system, i] / b[system, i - 1]
            b[system, i] -= k * c[system, i - 1]
            d[system, i] -= k * d[system, i - 1]
        x[system, n - 1] = d[system, n - 1] / b[system, n - 1]
        for i in range(n - 2, -1, -1):
            x[system, i] = (d[system, i] - c[system, i] * x[system, i + 1]) / b[system, i]


def serial_solve(a, b, c, d):
    x = cuda.device_array(d.shape, d.dtype)
    serial_tridiagonal[d.shape[0], 32](*(cuda.to_device(v) for v in (a, b, c, d)), x)
    return x


def test_one_thread_solving_the_system_passes_the_numbers_but_not_the_pcr_budget():
    budget = check.Budget(accesses_per_step=20)  # 07.pcr-step's
    assert check.tridiagonal(serial_solve, n_values=(1, 2, 33)).passed
    result = check.tridiagonal(serial_solve, n_values=(1, 2, 33), budget=budget)
    assert result.diagnosis == "over-budget" and result.size == 33, str(result)

    def pcr(a, b, c, d):
        return ps.tridiag.solve(a, b, c, d, method="pcr")

    assert check.tridiagonal(pcr, n_values=(1, 2, 33), budget=budget).passed
    with pytest.raises(TypeError, match="budget must be a prefixsum.check.Budget"):
        check.tridiagonal(pcr, budget=20)
