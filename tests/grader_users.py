"""The users the grader's tests run it as: the test's own, and nobody when the test runs as root.

As root, the tests also run the grader as nobody (uid 65534): the unprivileged mode, where
bwrap makes a user namespace. That needs nobody to reach this Python, its environment and the
checkout. Where it cannot (a pyenv Python under a ``/root`` of mode 0700, a virtual environment
in a private folder), those tests skip with :func:`nobody_cannot_run`'s reason and what to do,
instead of failing; ``.ci/run`` opens the folders so that CI runs them.
"""

import os
import pathlib
import shutil
import subprocess
import sys

from prefixsum.grading import bwrap_command

ROOT = pathlib.Path(__file__).resolve().parent.parent
AS_NOBODY = ["setpriv", f"--reuid={bwrap_command.NOBODY}", f"--regid={bwrap_command.NOBODY}", "--clear-groups"]
_WHAT_TO_DO = (
    "To run them: run the tests as a user other than root, or let nobody traverse the folders on the "
    "way to Python, its environment and the checkout (chmod o+x on each, as .ci/run does)"
)
# As nobody: the grader's own check of what its sandboxes need (bwrap_command.check_reachable).
_PROBE = (
    "import sys\nfrom prefixsum.grading import bwrap_command\ntry:\n    bwrap_command.check_reachable()\n"
    "except bwrap_command.Unreachable as error:\n    print(error)\n    sys.exit(3)\n"
)


def nobody_cannot_run(python=sys.executable):
    """Why the grader cannot run as nobody with ``python`` here (a sentence that says what to do), or None."""
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is missing, so the tests cannot run the grader as nobody"
    probe = subprocess.run(
        [*AS_NOBODY, python, "-c", _PROBE],
        capture_output=True,
        text=True,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if probe.returncode == 3:
        return f"the grader cannot run as nobody here: {probe.stdout.strip()}"
    if probe.returncode != 0:
        return (
            f"nobody cannot start this Python ({python}) with the grader: "
            f"{(probe.stderr.strip() or f'exit {probe.returncode}')[-300:]}. {_WHAT_TO_DO}"
        )
    return None


def is_a_run_uid(uid):
    """Whether ``uid`` is one a sandboxed run has (nobody, or a per-run uid when the grader is root)."""
    return uid == bwrap_command.NOBODY or uid in bwrap_command.RUN_UIDS
