"""``python -m prefixsum grade``, with a hole made in the allow-list for the cells marked ``# hole``.

The allow-list keeps hostile code out of every run; the sandbox must hold even when it does not.
This driver lets the marked attacks through the allow-list (nothing else changes), so that they
run inside the sandboxes of the grader's re-check and of nbval, where test_grade_attacks.py
looks for what they could reach.
"""

import sys

from hole import let_through  # beside this script, its folder first on sys.path

from prefixsum.cli.main import main
from prefixsum.grading import allowlist, runner

_check = allowlist.check


def _with_hole(source, **kwargs):
    return [] if let_through(source) else _check(source, **kwargs)


runner.allowlist.check = _with_hole

if __name__ == "__main__":
    sys.exit(main(["grade", *sys.argv[1:]]))
