"""Submissions that passed a check without solving its exercise, and right answers every check must pass.

A check grades the student's kernel on the check's own terms (the red team of issue 43, the
student's loop of issue 47):

* its constants are its own: a cell's ``BLOCK = 1`` does not make the tiles one element;
* where the exercise is a kernel, the check launches it itself, on its own arrays and launch
  shape, so that host code (numpy, a list comprehension) cannot stand in for it, and a budget
  proves that the kernel did the work;
* it runs the sizes and shapes that expose the exercise's mistakes: blocks of several warps
  for lane arithmetic, the whole int32 range for an identity, an addition count for a loop.

:data:`LOOPHOLES` are the submissions that got through before, as a student writes them, each
with the words its verdict must hold (the mistake, and where the trace or the compiler shows
it, the source line); :data:`SLOW_RIGHT` are right answers, slow or naive or of another shape
than the solution, that their checks must pass. ``tests/test_loopholes.py`` runs both as the
grader's check runs them; ``notebooks/exercise_checks.md`` lists every named mistake with the
size or shape of its check that kills it.
"""

import re

from .mistakes import MISTAKES, Mistake


def _m(exercise, name, verdict, *edits, avoid=()):
    return Mistake(exercise, name, tuple(edits), verdict, tuple(avoid))


# A student's code as typed, one loophole or slow right answer a row: the formatter would spread
# each row over a dozen lines.
# fmt: off
_SERIAL = "    s[0] = x[0]\n    for i in range(1, len(x)):\n        s[i] = s[i - 1] + x[i]\n"
_SUFFIX_PHASES = ("    phase = BLOCK >> 1\n    while phase > 0:\n        folded = cells[t]\n        if t + phase < "
                  "BLOCK:\n"
                  "            folded += cells[t + phase]\n        cuda.syncthreads()\n        cells[t] = folded\n"
                  "        cuda.syncthreads()\n        phase >>= 1\n")
_EMPTY_LOOP = "    for i in range(len(x)):\n        pass\n"
_LADDER_BODY = "        if t & phase:\n            rungs[t] += rungs[(t & ~(phase - 1)) - 1]\n"
_MAX_LADDER = ("    phase = 1\n    while phase < BLOCK:\n        if t & phase:\n"
               "            rungs[t] = max(rungs[t], rungs[(t & ~(phase - 1)) - 1])\n        cuda.syncthreads()\n      "
               "  phase <<= 1\n")
_FOLD_BODY = ("        folded = cells[t]\n        if t >= phase:\n            folded += cells[t - phase]\n        "
              "cuda.syncthreads()\n"
              "        cells[t] = folded\n        cuda.syncthreads()\n")
_UPSWEEP = ("    active = THREADS\n    while active > 0:\n        cuda.syncthreads()\n        if t < active:\n"
            "            tree[offset * (2 * t + 2) - 1] += tree[offset * (2 * t + 1) - 1]\n        offset *= 2\n       "
            " active //= 2\n")
_RANK_TWO_BODY = ("    if j < n:\n        uj, qj = u[m, j], q[m, j]\n        for k in range(n):\n"
                  "            A[m, k, j] -= q[m, k] * uj + u[m, k] * qj\n")
_RANK_TWO_HOST = ("    A = cuda.to_device(A)\n    my_update[A.shape[0], THREADS](A, cuda.to_device(u), "
                  "cuda.to_device(q))\n    return A")
_NORM_BODY = ("    half = NORM_THREADS // 2\n    while half > 0:\n        cuda.syncthreads()\n        if t < half:\n"
              "            partials[t] += partials[t + half]\n        half //= 2\n    if t == 0:\n        h[b] = "
              "partials[0]\n")
_NORM_HOST = ("    h = cuda.device_array(X.shape[0], X.dtype)\n    my_squared_norms[X.shape[0], "
              "NORM_THREADS](cuda.to_device(X), h)\n"
              "    return h")
_SCATTER_BODY = "    if i < x.shape[0] and flags[i]:\n        out[places[i]] = x[i]\n"
_COMPACT_RETURN = "                                                       cuda.to_device(places), out)\n    return out"
_SPLIT_BODY = "        place = zeros_before[i] if flags[i] else zeros + i - zeros_before[i]\n        out[place] = keys[i]\n"
_SPLIT_HOST = "    flags = (((keys >> bit) & 1) == 0).astype(np.int32)\n    zeros_before = ps.exclusive_scan(flags)\n"
_SPLIT_RETURN = "                                                                cuda.to_device(zeros_before), out)\n    return out"
_WARP_RANK = "    return cuda.popc(ballot & cuda.lanemask_lt()), cuda.popc(ballot)\n"

LOOPHOLES = (
    # The check's terms taken from the cell: one-element tiles, no ladder.
    _m("01.ladder-step", "BLOCK = 1 and no ladder", "tiles of 64 elements", ("BLOCK = 64", "BLOCK = 1"), (_LADDER_BODY, "        pass\n")),
    _m("01.ladder-max", "BLOCK = 1 and no ladder", "tiles of 64 elements", ("BLOCK = 64", "BLOCK = 1"),
       (_MAX_LADDER, "    cuda.syncthreads()\n")),
    _m("02.folding-phase", "BLOCK = 1 and no fold", "tiles of 64 elements", ("BLOCK = 64", "BLOCK = 1"), (_FOLD_BODY, "        pass\n")),
    _m("03.hs-step", "BLOCK = 1 and no step", "tiles of 64 elements", ("BLOCK = 64", "BLOCK = 1"),
       ("        if t >= stride:\n            cells[(1 - src) * BLOCK + t] = cells[src * BLOCK + t] + cells[src * "
        "BLOCK + t - stride]\n"
        "        else:\n            cells[(1 - src) * BLOCK + t] = cells[src * BLOCK + t]\n", "        pass\n")),
    _m("03.hs-two-barriers", "BLOCK = 1 and no steps", "tiles of 64 elements", ("BLOCK = 64", "BLOCK = 1")),
    _m("03.blelloch-down-sweep", "BLOCK = 1, LEVELS = 0 and no down-sweep", "tiles of 64 elements", ("BLOCK = 64", "BLOCK = 1"),
       ("LEVELS = 6", "LEVELS = 0")),
    _m("04.packed-upsweep", "THREADS = 1 and a tile of two", "tiles of 128 elements on 64 threads", ("THREADS = 64", "THREADS = 1"),
       (_UPSWEEP, "    cuda.syncthreads()\n    if t == 0:\n        tree[1] += tree[0]\n    offset = 2\n")),
    _m("04.conflict-free", "THREADS = 1 and no padding", "tiles of 128 elements on 64 threads", ("THREADS = 64", "THREADS = 1"),
       ("    return i + (i >> 5)\n", "    return i\n")),
    _m("05.reduce", "L = 1000000: one thread sums the whole level", "FAIL", ("L = 3", "L = 1000000")),
    _m("05.kstep-correct", "L = 1000000: one thread scans the whole level", "FAIL", ("L = 3", "L = 1000000")),
    _m("06.block-combine", "BLOCK = 32 and no combine", "tiles of 128 elements", ("BLOCK = 128", "BLOCK = 32"),
       ("    if warp > 0:\n        value += warp_totals[warp - 1]\n", "")),
    _m("10.lookback-loop", "a wait for the PREFIX, with LOOK_BACK_POLLS raised in the cell", "poll-limit",
       ("            while flag < published:\n", "            while flag != published + PREFIX:\n"),
       ("@cuda.jit(device=True)\ndef my_look_back", "LOOK_BACK_POLLS = 1000000\n\n\n@cuda.jit(device=True)\ndef "
                                                    "my_look_back")),
    # Host work standing in for the kernel.
    _m("01.serial-scan", "np.dot with a triangular matrix and an empty loop", "over-budget",
       (_SERIAL, "    s[:] = np.tri(len(x), dtype=x.dtype) @ x\n" + _EMPTY_LOOP)),
    _m("01.serial-scan", "s[i] = x[:i + 1].sum(): O(n^2) additions", "of them in one execution of line 5",
       (_SERIAL, "    for i in range(len(x)):\n        s[i] = x[:i + 1].sum(dtype=s.dtype)\n")),
    _m("01.serial-scan", "np.cumsum and an empty loop", "line 4 of my_partial_sums made",
       (_SERIAL, "    s[:] = np.cumsum(x)\n" + _EMPTY_LOOP)),
    _m("02.suffix-fold", "the suffix sums on the host, one launch of the kernel", "wrong-result",
       ("    my_suffix_fold[1, BLOCK](cuda.to_device(x), out, len(x))\n    return out",
        "    my_suffix_fold[1, BLOCK](cuda.to_device(x), out, 0)\n    return "
        "cuda.to_device(np.cumsum(x[::-1])[::-1].astype(x.dtype))"),
       ("    cells[t] = x[t] if t < n else float32(0)\n    cuda.syncthreads()\n", "    cells[t] = float32(0)\n"),
       (_SUFFIX_PHASES, "")),
    _m("09.rank-two-update", "host numpy and one launch of an empty kernel", "not computed by the kernels launched",
       (_RANK_TWO_BODY, "    pass\n"),
       (_RANK_TWO_HOST, "    A = cuda.to_device(A - (q[:, :, None] * u[:, None, :] + u[:, :, None] * q[:, None, :]))\n"
                        "    my_update[A.shape[0], THREADS](A, cuda.to_device(u), cuda.to_device(q))\n    return A")),
    _m("09.parallel-norm", "host numpy and one launch of an empty kernel", "not computed by the kernels launched",
       (_NORM_BODY, "    pass\n"),
       (_NORM_HOST, "    my_squared_norms[X.shape[0], NORM_THREADS](cuda.to_device(X), cuda.device_array(X.shape[0]))\n"
                    "    return cuda.to_device((X ** 2).sum(axis=1))")),
    _m("11.compact", "a list comprehension, no index", "unwritten-output",
       (_SCATTER_BODY, "    pass\n"),
       (_COMPACT_RETURN, "                                                       cuda.to_device(places), out)\n"
                         "    return np.array([v for v, kept in zip(x, mask) if kept], dtype=x.dtype)")),
    _m("11.radix-pass", "host numpy and one launch of an empty kernel", "unwritten-output",
       (_SPLIT_BODY, "        pass\n"),
       (_SPLIT_RETURN, "                                                                cuda.to_device(zeros_before), "
                       "out)\n"
                       "    zero = ((keys >> bit) & 1) == 0\n    return np.concatenate([keys[zero], keys[~zero]])")),
    # Sizes and shapes that expose the mistake.
    _m("01.ladder-max", "padding with INT32_MIN + 1", "got it at line 13", ("int32(INT32_MIN)", "int32(INT32_MIN + 1)")),
    _m("11.warp-rank", "lane = cuda.threadIdx.x, without % 32", "FAIL",
       (_WARP_RANK, "    lane = cuda.threadIdx.x\n"
                    "    return cuda.popc(ballot & ((np.uint32(1) << np.uint32(lane)) - np.uint32(1))), "
                    "cuda.popc(ballot)\n")),
    _m("11.digit-rank", "the leader found by cuda.threadIdx.x, without % 32", "FAIL",
       ("    if cuda.laneid == leader:\n", "    if cuda.threadIdx.x == leader:\n")),
)

SLOW_RIGHT = (
    _m("01.serial-scan", "an int32 array of its own for s", "PASS", (_SERIAL, "    s = np.zeros(len(x), np.int32)\n" + _SERIAL)),
    _m("01.serial-scan", "s[i] from ints, not from x's elements", "PASS",
       (_SERIAL, "    s = np.zeros(len(x), np.int64)\n    s[0] = int(x[0])\n    for i in range(1, len(x)):\n"
                 "        s[i] = s[i - 1] + int(x[i])\n    s = s.astype(np.int32)\n")),
    _m("01.ladder-max", "the identity written as np.iinfo(np.int32).min", "PASS",
       ("int32(INT32_MIN)", "np.iinfo(np.int32).min")),
    _m("09.rank-two-update", "each thread re-reads u[m, j] and q[m, j] for every k", "PASS",
       ("            A[m, k, j] -= q[m, k] * uj + u[m, k] * qj\n", "            A[m, k, j] -= q[m, k] * u[m, j] + u[m, "
                                                                   "k] * q[m, j]\n")),
    _m("11.compact", "flags read once into a register", "PASS",
       (_SCATTER_BODY, "    if i < x.shape[0]:\n        kept = flags[i]\n        if kept:\n            out[places[i]] "
                       "= x[i]\n")),
    _m("11.radix-pass", "the flags computed by a helper kernel of the student's own", "PASS",
       ("def my_split(keys, bit):\n", "@cuda.jit\ndef my_flags(keys, bit, flags):\n    i = cuda.grid(1)\n    if i < "
                                      "keys.shape[0]:\n"
                                      "        flags[i] = 1 if (keys[i] >> bit) & 1 == 0 else 0\n\n\ndef "
                                      "my_split(keys, bit):\n"),
       (_SPLIT_HOST, "    flags_on_device = cuda.device_array(len(keys), np.int32)\n"
                     "    my_flags[max(1, -(-len(keys) // 128)), 128](cuda.to_device(keys), bit, flags_on_device)\n"
                     "    flags = flags_on_device.copy_to_host()\n    zeros_before = ps.exclusive_scan(flags)\n")),
    _m("11.warp-rank", "lane = cuda.threadIdx.x % 32", "PASS",
       (_WARP_RANK, "    lane = cuda.threadIdx.x % 32\n"
                    "    return cuda.popc(ballot & ((np.uint32(1) << np.uint32(lane)) - np.uint32(1))), "
                    "cuda.popc(ballot)\n")),
    _m("11.digit-rank", "the leader found by cuda.threadIdx.x % 32", "PASS",
       ("    if cuda.laneid == leader:\n", "    if cuda.threadIdx.x % 32 == leader:\n")),
)
# fmt: on

# What finds each diagnosis, for the table of what kills each mistake.
_FOUND_BY = {
    "wrong-result": "the comparison with the reference",
    "wrong-identity": "every tile's total on the padding probe (the whole range of the dtype)",
    "unwritten-output": "poisoned outputs: an element the kernel never wrote",
    "out-of-bounds": "the bounds of every array, at the largest thread",
    "race": "the tracer: two threads on one cell in one barrier phase",
    "uninitialized-read": "poisoned memory: a read before any write",
    "barrier-divergence": "the barriers and warp calls every thread must reach",
    "modified-input": "the input compared after the run",
    "over-budget": "the budget",
    "library-call": "the lines of the function's own code",
    "poll-limit": "the poll limit of one wait",
    "plain-load-poll": "the tracer: a flag polled with plain loads",
    "stale-read": "the tracer: data read after a flag raised without a fence",
    "race-between-blocks": "the tracer: blocks on one cell with no flag between",
    "exception": "the error it raised",
    "timeout": "the step limit",
    "deadlock": "the blocks that wait for each other",
    "not-associative": "the operator on random triples",
}
# Which part of a budget a verdict's hint shows, by its words.
_BUDGET_PARTS = (
    ("additions for", "the budget: additions counted on the elements"),
    ("additions in one execution", "the budget: additions in one execution of a line"),
    ("lines of its own code", "the lines of the function's own code"),
    ("memory accesses between two barriers", "the budget: accesses of one thread between two barriers"),
    ("barriers in one launch", "the budget: barriers"),
    ("global-memory accesses for", "the budget: global traffic per element"),
    ("passes of the shared-memory banks", "the budget: bank conflicts"),
    ("of the input's", "the budget: the kernels' reads of the input"),
    ("published", "the budget: the look-back's order"),
    ("serial walk", "the budget: the look-back's order"),
)
_VERDICT = re.compile(r"FAIL [^:]*: ([a-z-]+)(?: at (n=\d+|case \d+))?")


def kill_row(mistake, output):
    """The row of ``mistake`` in ``notebooks/exercise_checks.md``: exercise, name, the size (or case)
    of its check that first fails it, and what there shows it (the diagnosis)."""
    found = _VERDICT.search(output)
    if found is None:
        return f"| {mistake.exercise} | {mistake.name} | (passes) | |"
    diagnosis, where = found.groups()
    shown = next(
        (what for words, what in _BUDGET_PARTS if diagnosis in ("over-budget", "library-call") and words in output),
        _FOUND_BY.get(diagnosis, diagnosis),
    )
    if where is None and diagnosis == "wrong-identity":
        shown = "the identity on both sides of random elements"
    return f"| {mistake.exercise} | {mistake.name} | {where or 'the operator alone'} | {diagnosis}: {shown} |"


def main(paths):
    """Print the rows of every named mistake (:data:`prefixsum.classroom.mistakes.MISTAKES`, then
    :data:`LOOPHOLES`) for the exercises of the notebooks at ``paths``, each graded as the grader's
    check runs it::

        python -m prefixsum.classroom.loopholes notebooks/[01][0-9]_*.ipynb
    """
    from . import mutation

    exercises = {e.id: e for e in mutation.exercises(paths)}
    for mistake in sorted(
        MISTAKES + LOOPHOLES, key=lambda m: list(exercises).index(m.exercise) if m.exercise in exercises else 0
    ):
        exercise = exercises.get(mistake.exercise)
        if exercise is not None:
            _, output = mutation.isolated_verdict(exercise, mistake.source(exercise.source), timeout=20, wall=240)
            print(kill_row(mistake, output), flush=True)


__all__ = ["LOOPHOLES", "SLOW_RIGHT", "kill_row", "main"]

if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
