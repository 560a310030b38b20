"""One process on numba's real CUDA target that compiles to PTX whatever the tests send it.

The simulator cannot be switched off in the test process, so PTX tests need a process started
with ``NUMBA_ENABLE_CUDASIM=0``. Starting one per test cost each test a fresh import of numba,
numba-cuda and the package (seconds each); this worker is started once per test session (once
per pytest-xdist worker) by the ``ptx_child`` fixture of ``tests/conftest.py`` and runs each
test's program in a fresh namespace, as ``python -c`` would.

Protocol: a request is one JSON line on stdin (the program's source); the answer is one line on
stdout, ``MARK`` followed by JSON ``{"returncode", "stdout", "stderr"}``. What the program prints
through Python is captured; what a library writes to the file descriptor itself may precede the
mark on its line, so the client looks for the mark anywhere in a line.
"""

import contextlib
import io
import json
import sys
import traceback

MARK = "\x00ptx-worker-answer "


def run(source):
    """Run ``source`` as ``python -c`` would; return ``(returncode, stdout, stderr)``."""
    out, err = io.StringIO(), io.StringIO()
    returncode = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(source, "<ptx test program>", "exec"), {"__name__": "__main__"})
        except SystemExit as stop:
            returncode = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:  # the test reads the traceback, as from a child that died of it
            traceback.print_exc()
            returncode = 1
    return returncode, out.getvalue(), err.getvalue()


def serve(requests=sys.stdin, answers=sys.stdout):
    for line in requests:
        returncode, out, err = run(json.loads(line))
        answers.write(MARK + json.dumps({"returncode": returncode, "stdout": out, "stderr": err}) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve()
