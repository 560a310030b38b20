"""Run a command under resource limits, in a process group of its own, killed at a wall-clock limit.

The limits are set by this file run as a program (``python .../grading/sandbox.py LIMITS --
command...``, by its path, so that it imports nothing but the standard library), which calls
``setrlimit`` and then ``exec``-s the command: no ``preexec_fn`` in a parent that runs threads. The parent puts the
child in a new session (its own process group) and kills the whole group when the wall-clock
limit passes, and again when the command ends, so nothing the submission started survives it.
"""
import dataclasses
import json
import os
import resource
import signal
import subprocess
import sys


@dataclasses.dataclass(frozen=True)
class Limits:
    """Limits of one graded run (each process of it)."""

    cpu_s: int = 600
    """CPU seconds of each process (RLIMIT_CPU)."""
    memory_mb: int = 4096
    """Address space of each process, MiB (RLIMIT_AS)."""
    file_mb: int = 64
    """Largest file a process may write, MiB (RLIMIT_FSIZE)."""
    processes: int = 256
    """Processes and threads beyond those the user already runs (RLIMIT_NPROC)."""


@dataclasses.dataclass(frozen=True)
class Finished:
    """How a sandboxed command ended."""

    returncode: int
    timed_out: bool
    stdout: str
    stderr: str


def _user_threads():
    """Threads the real user runs now (RLIMIT_NPROC counts them all, not only the sandbox's)."""
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as status:
                    fields = dict(line.split(":", 1) for line in status if ":" in line)
                if int(fields["Uid"].split()[0]) == uid:
                    count += int(fields["Threads"])
            except (OSError, KeyError, ValueError):
                continue
    return count


def run(command, *, limits, timeout, cwd, env):
    """Run ``command`` (a list) in ``cwd`` with ``env`` under ``limits``; kill it after ``timeout`` s.

    Returns
    -------
    Finished
        ``returncode`` is negative for a signal (``-9`` for the kill at the time limit).
    """
    spec = {**dataclasses.asdict(limits), "nproc": _user_threads() + limits.processes}
    wrapped = [sys.executable, os.path.abspath(__file__), json.dumps(spec), "--", *command]
    child = subprocess.Popen(wrapped, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    timed_out = False
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(child.pid)
        stdout, stderr = child.communicate()
    _kill_group(child.pid)
    return Finished(child.returncode, timed_out, stdout, stderr)


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _apply(spec):
    mib = 1 << 20
    for limit, value in ((resource.RLIMIT_CPU, spec["cpu_s"]), (resource.RLIMIT_AS, spec["memory_mb"] * mib),
                         (resource.RLIMIT_FSIZE, spec["file_mb"] * mib), (resource.RLIMIT_NPROC, spec["nproc"]),
                         (resource.RLIMIT_CORE, 0)):
        hard = resource.getrlimit(limit)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, value))


def main(argv):
    spec, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit("usage: python sandbox.py LIMITS_JSON -- command ...")
    _apply(json.loads(spec))
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
