"""Grade students' notebooks: ``python -m prefixsum grade`` (docs/teaching.md).

The grader's own product, apart from the students' tools: it uses :mod:`prefixsum.classroom`
(the checker, the simulator, the stepper, the students' versions), which never imports it.

* :mod:`.chapters`: the exercise metadata of the instructor's notebooks, matching a submission
  to its chapter, and the notebook that is graded (assembled from the instructor's cells and the
  submission's exercise cells);
* :mod:`.allowlist`: what a submitted exercise may name and contain, decided by parsing it before
  anything runs it (its walk of a cell in :mod:`.cell_walk`, its tables in :mod:`.whitelist`,
  Python's name resolution in :mod:`.scopes`, what a chapter's cells bind in :mod:`.bindings`);
* :mod:`.sandbox`: the bubblewrap sandbox and the supervisor of every run's limits (:mod:`.limits`);
* :mod:`.bwrap_command`: the sandbox's command line, and whether one can be made here;
* :mod:`.launcher`: the launcher of each run (its rlimits, its keyring), which execs bwrap;
* :mod:`.seccomp_filter`: the system calls a sandboxed run may not make;
* :mod:`.usage`: what a run uses (memory as the kernel counts it, threads, CPU);
* :mod:`.trusted`: what runs inside a sandbox: the re-check, the PTX compile, nbval;
* :mod:`.observations`: what the re-check observes of the student's code, its JSON, its replay;
* :mod:`.judge`: the grader's process that replays the checks on those observations: the verdicts;
* :mod:`.results`: the sandboxes' and the judge's JSON read with a strict schema, the comparison
  with the stored output;
* :mod:`.runner`: one notebook, nbval and the re-check;
* :mod:`.statuses`: the status of each exercise, from nbval's report and every step's verdict;
* :mod:`.report`: grades.csv, summary.csv, feedback pages;
* :mod:`.batch`: a whole class in parallel, or on a Dask cluster;
* :mod:`.recording`: the instructor's solutions recorded once for several batches (``--record``,
  ``--recording``), its JSON read strictly and refused where the notebooks or options differ.
"""

import importlib

# The names below load their module on first use (PEP 562): the sandbox's re-check and the judge
# import .observations, .encoding and .results through this package, and must not pay for what grading a
# batch needs (nbformat imports jsonschema, whose optional IRI checker compiles some 35 Earley
# grammars at import: over a second per process, jsonschema issue #1428).
_WHERE = {
    "collect": "batch",
    "default_instructor_notebooks": "batch",
    "grade": "batch",
    "record": "batch",
    "Recording": "recording",
    "RecordingError": "recording",
    "Chapter": "chapters",
    "Exercise": "chapters",
    "InvalidSubmission": "chapters",
    "read_chapter": "chapters",
    "STATUSES": "statuses",
    "Options": "runner",
    "Row": "runner",
    "grade_notebook": "runner",
    "Limits": "limits",
    "SandboxUnavailable": "bwrap_command",
    "limit_process": "limits",
}

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_WHERE])
