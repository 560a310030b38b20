"""Run a command and keep its answer: ``python keep_answer.py ANSWER.json COMMAND...``.

Writes ``[command, returncode, stdout, stderr]`` as JSON to ``ANSWER.json`` when the command has
ended, whole (through a rename), so that a reader that sees the file sees all of it. The
``ptx_command`` fixture of ``tests/conftest.py`` starts ``python -m prefixsum ptx`` with it in the
background at the session's first test; the pytest-xdist worker whose test needs the answer
then reads it, whichever worker started it.
"""

import json
import os
import subprocess
import sys


def main(answer, command):
    child = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    with open(f"{answer}.part", "w") as handle:
        json.dump([command, child.returncode, child.stdout, child.stderr], handle)
    os.replace(f"{answer}.part", answer)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
