"""The instructor's cells as the grader runs them, in the sandbox and in the judge alike, and as
mutation testing runs them.

:mod:`prefixsum.grading.trusted` (run by its path inside the sandbox, where it loads this file by
its path too), :mod:`prefixsum.grading.judge` and :mod:`.mutation` run the chapter's setup cells
and the check cells the same way. This module imports nothing of the package and holds no cell:
the cells come with each request, and no request to the sandbox holds a solution.
"""

import contextlib
import io
import linecache


def compiled(source, filename):
    """``compile``, with the source put where ``inspect`` and tracebacks find it (the tracer names
    shared arrays by their source line, as it does in a notebook)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec")


def first_line(error):
    """``Type: first line of the message`` of an exception (its type's name alone without a message)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def run_setup(chapter):
    """The namespace left by the chapter's setup cells (``chapter["setup"]``), run with their output put aside."""
    namespace = {"__name__": "__grading__"}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for source in chapter["setup"]:
            exec(compile(source, "<setup>", "exec"), namespace)  # noqa: S102  (the instructor's own cells)
    return namespace


__all__ = ["compiled", "first_line", "run_setup"]
