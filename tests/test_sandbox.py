"""The grader's sandbox alone (prefixsum.grading.sandbox, its command line and launcher), as root and as nobody.

Issue 43's attacks on the sandbox itself, each a program of tests/attacks/sandbox/ that prints
``BREACHED`` when it gets through: the grader's session keyring, a key left in a user keyring for
the next run, memory that no resident size counts (memfd, detached System V memory, a nested
tmpfs, the run's own /tmp), new user namespaces, ptrace and process_vm_readv of another process
of the run. Beside them: the seccomp filter's decisions, read by a small classic-BPF
interpreter for both architectures; its system call numbers against the kernel's headers; the
run's own session keyring; the cgroup of a run; the clear error where a run cannot reach Python.
"""

import ctypes
import errno
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import pytest
from grader_users import AS_NOBODY, ROOT, is_a_run_uid, nobody_cannot_run

from prefixsum.grading import bwrap_command, launcher, sandbox, seccomp_filter, usage

ATTACKS = pathlib.Path(__file__).resolve().parent / "attacks" / "sandbox"
DRIVER = pathlib.Path(__file__).resolve().parent / "sandbox_driver.py"
CANARY = "prefixsum-canary-7f3c9b"
# The tests on the graded fixture make a dozen sandboxes per mode (about 10 s each mode on 2 cores):
# CI runs them, the developer loop not; the filter's own tests below are fast.
_SANDBOXES = pytest.mark.slow
# What every run shows of itself: the uid, the filter, no privileges.
_SELF = (
    "import json, os; s = dict(l.split(':', 1) for l in open('/proc/self/status')); "
    "print(json.dumps({'uid': os.getuid(), 'seccomp': s['Seccomp'].strip(), 'caps': s['CapEff'].strip()}))"
)


def attacks():
    """``{name: (source, memory_mb)}`` of tests/attacks/sandbox/*.py (``# limits: memory_mb=N``, else 1024)."""
    found = {}
    for path in sorted(ATTACKS.glob("*.py")):
        source = path.read_text()
        limit = re.search(r"^# limits: memory_mb=(\d+)$", source, re.MULTILINE)
        found[path.stem] = (source, int(limit.group(1)) if limit else 1024)
    return found


def _runs():
    runs = [
        {"name": "self", "argv": ["-c", _SELF], "memory_mb": 1024},
        {"name": "self again", "argv": ["-c", _SELF], "memory_mb": 1024},
    ]
    for name, (source, memory_mb) in attacks().items():
        if name == "user_keyring_left":
            runs += [
                {"name": f"{name} {step}", "argv": ["-c", source, step], "memory_mb": memory_mb}
                for step in ("leave", "find")
            ]
        else:
            runs.append({"name": name, "argv": ["-c", source], "memory_mb": memory_mb})
    return runs


@pytest.fixture(scope="module", params=["root", "unprivileged"])
def graded(request):
    """The driver's answer for every run, the grader running as root or as an unprivileged user."""
    prefix = []
    if request.param == "root" and os.getuid() != 0:
        pytest.skip("the root mode needs root (CI runs as root)")
    if request.param == "unprivileged" and os.getuid() == 0:
        reason = nobody_cannot_run()
        if reason:
            pytest.skip(reason)
        prefix = AS_NOBODY
    sandbox.check_available()
    finished = subprocess.run(
        [*prefix, sys.executable, str(DRIVER)],
        input=json.dumps({"canary": CANARY, "runs": _runs()}),
        capture_output=True,
        text=True,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    answer = json.loads(finished.stdout)
    if answer["unreachable"]:
        pytest.skip(answer["unavailable"])
    assert answer["unavailable"] is None, answer["unavailable"]
    return answer


def _run(graded, name):
    found = graded["runs"][name]
    return found, f"exit {found['returncode']}, over {found['over']!r}\n{found['stdout']}\n{found['stderr'][-2000:]}"


@_SANDBOXES
@pytest.mark.parametrize("name", sorted(attacks()))
def test_attack_is_held(graded, name):
    names = [n for n in graded["runs"] if n == name or n.startswith(f"{name} ")]
    assert names
    for run in names:
        found, shown = _run(graded, run)
        assert "BREACHED" not in found["stdout"], shown
        assert not found["timed_out"], shown


@_SANDBOXES
def test_the_graders_keys_never_reach_a_run(graded):
    if not graded["canary_added"]:
        pytest.skip("no key could be added to the grader's session keyring here (keyctl denied outside, as in Docker)")
    for name, found in graded["runs"].items():
        assert CANARY not in found["stdout"] + found["stderr"], name


@_SANDBOXES
def test_memory_that_no_process_maps_is_denied_or_counted(graded):
    for name in ("memfd_memory", "sysv_shm_memory"):
        found, shown = _run(graded, name)
        assert "Operation not permitted" in found["stdout"], shown
    found, shown = _run(graded, "tmpfs_memory")
    assert found["over"] == "memory", shown


@_SANDBOXES
def test_a_run_is_unprivileged_filtered_and_alone(graded):
    first, second = (json.loads(graded["runs"][n]["stdout"]) for n in ("self", "self again"))
    for seen in (first, second):
        assert (
            seen["uid"] != 0 and is_a_run_uid(seen["uid"]) and seen["seccomp"] == "2" and int(seen["caps"], 16) == 0
        ), seen
    if graded["grader_uid"] == 0:  # a uid of its own for each run
        assert first["uid"] != second["uid"] and {first["uid"], second["uid"]} <= set(bwrap_command.RUN_UIDS)
    else:  # nobody, in a user namespace of its own
        assert first["uid"] == second["uid"] == bwrap_command.NOBODY


def test_the_launcher_joins_a_new_session_keyring():
    libc = ctypes.CDLL(None, use_errno=True)
    keyctl = seccomp_filter.SYSCALLS["keyctl"][("x86_64", "aarch64").index(seccomp_filter.architecture())]
    get_id, session = 0, -3
    mine = libc.syscall(keyctl, get_id, session, 1)
    if mine < 0:
        pytest.skip(f"no session keyring here: {os.strerror(ctypes.get_errno())}")
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        launcher._new_session_keyring()
        os.write(write, str(libc.syscall(keyctl, get_id, session, 0)).encode())
        os._exit(0)
    os.close(write)
    theirs = int(os.read(read, 64))
    os.waitpid(child, 0)
    assert theirs > 0 and theirs != mine


# A classic-BPF interpreter for the filter's few instructions (linux/filter.h), on struct seccomp_data.
def _decide(program, nr, args=(), arch=None, machine="x86_64"):
    data = struct.pack(
        "=iIQ6Q", nr, arch if arch is not None else seccomp_filter._AUDIT_ARCH[machine], 0, *(list(args) + [0] * 6)[:6]
    )
    code = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    accumulator, pc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:
            accumulator = struct.unpack_from("=I", data, k)[0]
        elif op == 0x06:
            return k
        elif op in (0x15, 0x35, 0x45):
            taken = {0x15: accumulator == k, 0x35: accumulator >= k, 0x45: bool(accumulator & k)}[op]
            pc += jt if taken else jf
        else:
            raise AssertionError(f"unexpected instruction {op:#x}")
        pc += 1


ALLOW, KILL = 0x7FFF0000, 0x80000000


def _errno(value):
    return 0x00050000 | value


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_decides_as_designed(machine):
    program = seccomp_filter.program(machine)
    column = ("x86_64", "aarch64").index(machine)
    number = {name: numbers[column] for name, numbers in seccomp_filter.SYSCALLS.items()}
    for value, calls in seccomp_filter.DENIED.items():
        for call in calls:
            if number[call] is not None:
                assert _decide(program, number[call], machine=machine) == _errno(value), call
    read, write, openat, mmap = {"x86_64": (0, 1, 257, 9), "aarch64": (63, 64, 56, 222)}[machine]
    for call in (read, write, openat, mmap):
        assert _decide(program, call, machine=machine) == ALLOW
    thread = 0x3D0F00  # glibc's pthread_create: CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | ...
    assert _decide(program, number["clone"], [thread], machine=machine) == ALLOW
    assert _decide(program, number["clone"], [17], machine=machine) == ALLOW  # fork: SIGCHLD only
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
        assert _decide(program, number["clone"], [flag | 17], machine=machine) == _errno(errno.EPERM), hex(flag)
    for request in (0x5412, 0x541C, 0x1_0000_5412):  # the high half is not the kernel's (cmd is an unsigned int)
        assert _decide(program, number["ioctl"], [0, request], machine=machine) == _errno(errno.EPERM), hex(request)
    assert _decide(program, number["ioctl"], [0, 0x541B], machine=machine) == ALLOW  # FIONREAD
    assert _decide(program, number["personality"], [0], machine=machine) == ALLOW
    assert _decide(program, number["personality"], [0xFFFFFFFF], machine=machine) == ALLOW
    for persona in (0x0040000, 0x0008, 0x0800000):  # ADDR_NO_RANDOMIZE, PER_SVR4, READ_IMPLIES_EXEC
        assert _decide(program, number["personality"], [persona], machine=machine) == _errno(errno.EPERM)
    for family in (1, 2, 10, 16):
        assert _decide(program, number["socket"], [family, 1], machine=machine) == ALLOW
    for family in (17, 3, 38, 40):  # AF_PACKET, AF_AX25, AF_ALG, AF_VSOCK
        assert _decide(program, number["socket"], [family, 1], machine=machine) == _errno(errno.EAFNOSUPPORT)
    other = seccomp_filter._AUDIT_ARCH["aarch64" if machine == "x86_64" else "x86_64"]
    assert _decide(program, read, arch=other, machine=machine) == KILL
    assert _decide(program, read, arch=0x40000003, machine=machine) == KILL  # AUDIT_ARCH_I386
    if machine == "x86_64":
        assert _decide(program, 0x40000000 | number["keyctl"], machine=machine) == KILL  # an x32 call


def test_an_unknown_architecture_is_refused():
    with pytest.raises(seccomp_filter.UnknownArchitecture, match="riscv64"):
        seccomp_filter.program("riscv64")


def _header_numbers(path):
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^#define __NR_(\w+)\s+(\d+)\s*$", path.read_text(), re.MULTILINE)
    }


@pytest.mark.parametrize(
    "machine, header",
    [
        ("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        ("x86_64", "/usr/include/asm/unistd_64.h"),
        ("aarch64", "/usr/include/asm-generic/unistd.h"),
    ],
)
def test_the_system_call_numbers_are_the_kernels(machine, header):
    if not pathlib.Path(header).exists():
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    found = _header_numbers(pathlib.Path(header))
    column = ("x86_64", "aarch64").index(machine)
    for name, numbers in seccomp_filter.SYSCALLS.items():
        assert found.get(name) == numbers[column], name


def test_a_folder_a_run_cannot_enter_is_named(tmp_path, monkeypatch):
    if os.getuid() != 0:
        pytest.skip("the check for the runs' own uid is root's (as another user, the runs are that user)")
    private = tmp_path / "venv"
    private.mkdir(mode=0o700)
    monkeypatch.setattr(bwrap_command, "_python_folders", lambda: {private: "the Python environment"})
    with pytest.raises(bwrap_command.Unreachable, match=re.escape(f"cannot enter {private} (the Python environment)")):
        bwrap_command.check_reachable()


def test_a_folder_the_grader_cannot_reach_is_named(monkeypatch):
    if os.getuid() != 0:
        pytest.skip("needs root, to look as nobody")
    top = pathlib.Path(tempfile.mkdtemp(prefix="psreach-"))  # not pytest's tmp_path: its parent is private
    top.chmod(0o755)
    monkeypatch.setattr(bwrap_command, "_python_folders", lambda: {folder: "Python's installation"})
    (top / "private").mkdir(mode=0o700)
    folder = top / "private" / "python"
    folder.mkdir()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.setgroups([])
        os.setresgid(bwrap_command.NOBODY, bwrap_command.NOBODY, bwrap_command.NOBODY)
        os.setresuid(bwrap_command.NOBODY, bwrap_command.NOBODY, bwrap_command.NOBODY)
        try:
            bwrap_command.check_reachable()
            os.write(write, b"no error")
        except bwrap_command.Unreachable as error:
            os.write(write, str(error).encode())
        os._exit(0)
    os.close(write)
    message = os.read(read, 4096).decode()
    os.waitpid(child, 0)
    shutil.rmtree(top)
    assert f"uid {bwrap_command.NOBODY}, which cannot reach {folder} (Python's installation)" in message, message
    assert f"{top / 'private'} is not open to it" in message and "chmod o+x" in message, message


def test_the_unprivileged_tests_skip_where_nobody_cannot_reach_python(tmp_path):
    if os.getuid() != 0:
        pytest.skip("needs root, to run the grader as nobody")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(private / "venv")], check=True)
    reason = nobody_cannot_run(str(private / "venv" / "bin" / "python"))
    assert reason and ("chmod o+x" in reason or str(private) in reason), reason


def test_a_cgroup_is_made_where_memory_is_delegated(tmp_path):
    mount = tmp_path / "cgroup"
    (mount / "grader.slice" / "grader").mkdir(parents=True)
    for folder, controllers in (
        (mount, "cpu memory pids"),
        (mount / "grader.slice", "cpu"),
        (mount / "grader.slice" / "grader", ""),
    ):
        (folder / "cgroup.subtree_control").write_text(controllers + "\n")
        (folder / "cgroup.procs").write_text("")
    assert usage.delegated_parent(mount, "/grader.slice/grader") == mount
    group = usage.Cgroup.create("run-1", 300, 64, parent=mount)
    assert (mount / "run-1" / "memory.max").read_text() == f"{300 << 20}\n"
    assert (mount / "run-1" / "memory.oom.group").read_text() == "1\n"
    (mount / "run-1" / "memory.current").write_text("12345\n")
    (mount / "run-1" / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.memory() == 12345 and group.killed_for_memory()
    (mount / "cgroup.subtree_control").write_text("cpu\n")
    assert usage.delegated_parent(mount, "/grader.slice/grader") is None


def test_the_graders_own_tmp_is_not_counted_as_a_runs():
    assert usage.tmpfs_bytes(os.getpid()) == 0
