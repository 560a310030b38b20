"""The device choice and the reason reported for it, in fresh processes.

The package sets NUMBA_ENABLE_CUDASIM itself when the user did not; child processes inherit it
and must report the parent's reason, not "set by the user".
"""

import pathlib
import subprocess
import sys

from prefixsum.core.device import undecided_environment

ROOT = str(pathlib.Path(__file__).resolve().parent.parent)
REPORT = "import prefixsum as ps; print(ps.device_info()['simulator'], ps.device_info()['reason'], sep='|')"
# A parent that imports prefixsum, then starts a child that does the same, with the parent's environment.
PARENT_AND_CHILD = (
    "import subprocess, sys\n"
    f"{REPORT}\n"
    f"sys.stdout.flush(); subprocess.run([sys.executable, '-c', {REPORT!r}], check=True)\n"
)


def run(code, **env):
    """Run ``code`` in a fresh interpreter whose environment has neither variable unless given."""
    base = undecided_environment()
    child = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "PYTHONPATH": ROOT, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return [line.split("|") for line in child.stdout.splitlines()], child.stderr


def test_a_child_reports_its_parents_reason_not_the_user():
    (parent, child), stderr = run(PARENT_AND_CHILD)
    assert parent[1] in ("no usable CUDA GPU found", "a CUDA GPU was found")
    assert child == parent
    assert "set by the user" not in stderr


def test_a_setting_by_the_user_is_reported_as_such_in_children_too():
    (parent, child), _ = run(PARENT_AND_CHILD, NUMBA_ENABLE_CUDASIM="1")
    assert parent == child == ["True", "NUMBA_ENABLE_CUDASIM=1 set by the user"]


def test_a_user_setting_that_contradicts_the_mark_is_the_users():
    """An inherited mark says "gpu", but the user asked for the simulator: the user's setting wins."""
    (report,), _ = run(REPORT, NUMBA_ENABLE_CUDASIM="1", PREFIXSUM_DEVICE="gpu: a CUDA GPU was found")
    assert report == ["True", "NUMBA_ENABLE_CUDASIM=1 set by the user"]


def test_hand_down_gives_children_the_reason():
    code = (
        "from prefixsum.core import device as _device; import subprocess, sys\n"
        "_device.hand_down(True, 'the simulator, for a test')\n"
        f"subprocess.run([sys.executable, '-c', {REPORT!r}], check=True)\n"
    )
    (report,), stderr = run(code)
    assert report == ["True", "the simulator, for a test"]
    assert "prefixsum: running on the CUDA simulator (the simulator, for a test)." in stderr


def test_the_notebook_build_gives_its_kernels_a_true_reason():
    """notebooks/build.py executes every notebook on the simulator; its kernels must not claim a
    user setting (the stored outputs are what students see)."""
    build = pathlib.Path(ROOT, "notebooks", "build.py")
    code = (
        f"import runpy, subprocess, sys\nrunpy.run_path({str(build)!r})['simulate_in_kernels']()\n"
        f"subprocess.run([sys.executable, '-c', {REPORT!r}], check=True)\n"
    )
    (report,), _ = run(code)
    assert report[0] == "True"
    assert report[1] in ("no usable CUDA GPU found", "notebooks/build.py stores the simulator's outputs")
