"""Grade students' notebooks: ``python -m prefixsum grade`` (docs/teaching.md).

* :mod:`.chapters`: the exercise metadata of the instructor's notebooks, matching a submission
  to its chapter, and the notebook that is graded (assembled from the instructor's cells and the
  submission's exercise cells);
* :mod:`.allowlist`: what a submitted exercise may contain to be loaded by the grader itself;
* :mod:`.sandbox`: the bubblewrap sandbox and the supervisor of every run's limits;
* :mod:`.trusted`: what runs inside a sandbox: the re-check, the PTX compile, nbval;
* :mod:`.observations`: what the re-check observes of the student's code, its JSON, its replay;
* :mod:`.judge`: the grader's process that replays the checks on those observations: the verdicts;
* :mod:`.results`: the sandboxes' and the judge's JSON read with a strict schema, the comparison
  with the stored output;
* :mod:`.runner`: one notebook, nbval and the re-check, and the status of each exercise;
* :mod:`.report`: grades.csv, summary.csv, feedback pages;
* :mod:`.batch`: a whole class in parallel, or on a Dask cluster.
"""
from .batch import collect, default_instructor_notebooks, grade
from .chapters import Chapter, Exercise, InvalidSubmission, read_chapter
from .runner import STATUSES, Options, Row, grade_notebook
from .sandbox import Limits, SandboxUnavailable, limit_process

__all__ = ["STATUSES", "Chapter", "Exercise", "InvalidSubmission", "Limits", "Options", "SandboxUnavailable", "Row", "collect",
           "default_instructor_notebooks", "grade", "grade_notebook", "limit_process", "read_chapter"]
