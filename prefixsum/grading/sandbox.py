"""Run a submission's process in an OS sandbox, under limits that hold for the submission as a whole.

The sandbox is bubblewrap (``bwrap``, Debian's ``bubblewrap``): a small, audited, setuid-free tool
that makes Linux namespaces. Each run gets

* a new PID namespace: whatever the submission starts, double forks and ``setsid`` included, is
  killed with it (bwrap's init is its PID 1), and no signal reaches the grader or a classmate,
  whose processes it cannot see;
* a new network namespace with only a loopback of its own (nothing listens after the run, nothing
  outside is reachable), and new IPC and UTS namespaces;
* a read-only view of the system (``/usr``, a few files of ``/etc``), of Python and its
  environment, and of the ``prefixsum`` package's own folder (not the checkout that holds it:
  no instructor notebook, no submission, no ``--out``, no home folder), and a private writable
  ``/tmp`` of bounded size; ``/proc/keys`` and ``/proc/key-users`` are hidden;
* a uid of its own. As root, bwrap makes the namespaces and ``setpriv`` drops to a uid that no
  other run has (:func:`.bwrap_command.run_uid`: so no per-uid kernel object, a user keyring or a
  count of processes, is shared between runs) with no capability and ``no_new_privs``. As another user,
  bwrap maps nobody onto that user in a new user namespace (the user keyrings are per user
  namespace), and ``--disable-userns`` (bubblewrap 0.8 or later) forbids nested ones;
* a new, empty session keyring: the grader's own keys are not the run's;
* a seccomp filter (:mod:`.seccomp_filter`) that denies the kernel's key store, new namespaces
  and mounts, ``ptrace`` and the other ways into a process, memory that no resident size counts,
  and the kernel's larger attack surfaces.

Limits per submission are kept by the supervisor (:func:`run`): memory as the kernel counts it
(:mod:`.usage`: a cgroup where one can be made, otherwise the resident memory of every process
of the run plus what its tmpfs folders hold), the threads and the CPU time of every process of
the run, sampled every few tenths of a second; the whole sandbox is killed when one is over.
Each process also gets rlimits (address space, CPU, file size, core dumps, a processes
backstop), set by each run's launcher (:mod:`.launcher`, ``python .../launcher.py SPEC --
command``), which also makes the sandbox's command line (:mod:`.bwrap_command`) and execs bwrap.
The wall-clock limit kills the sandbox too. The limits themselves are :class:`.limits.Limits`.

Data goes in on stdin and comes back on stdout, both bounded: no folder of the grader is
writable inside.
"""

import dataclasses
import functools
import itertools
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from . import bwrap_command, seccomp_filter, usage
from .bwrap_command import UNSAFE_ADVICE, SandboxUnavailable
from .limits import Limits

_LAUNCHER = os.path.abspath(pathlib.Path(__file__).with_name("launcher.py"))
_RUN_NAMES = itertools.count()


@dataclasses.dataclass(frozen=True)
class Finished:
    """How a sandboxed command ended."""

    returncode: int
    timed_out: bool
    stdout: str
    stderr: str
    over: str = ""
    """The limit the supervisor killed the run for (``memory``, ``processes``, ``cpu``), or empty."""


# Run inside by check_available: what the sandbox must show a process (no root, the filter on).
_PROBE = (
    "import json, os; status = dict(line.split(':', 1) for line in open('/proc/self/status')); "
    "print(json.dumps({'uid': os.getuid(), 'seccomp': status['Seccomp'].strip(), "
    "'no_new_privs': status['NoNewPrivs'].strip()}))"
)


@functools.lru_cache(maxsize=None)
def check_available():
    """Make one sandbox and start Python in it; raise :class:`SandboxUnavailable` saying why not."""
    bwrap_command.bwrap_executable()
    try:
        seccomp_filter.program()
    except seccomp_filter.UnknownArchitecture as error:
        raise SandboxUnavailable(f"{error}; {UNSAFE_ADVICE}") from None
    bwrap_command.check_reachable()
    finished = run([sys.executable, "-c", _PROBE], limits=Limits(), timeout=60, env=environment({}))
    try:
        seen = json.loads(finished.stdout)
    except ValueError:
        seen = None
    if finished.returncode != 0 or not seen:
        raise SandboxUnavailable(
            f"bwrap could not make a sandbox here, or Python could not start in it (are user "
            f"namespaces enabled?): exit {finished.returncode}: {finished.stderr.strip()[-300:]}; "
            f"{UNSAFE_ADVICE}"
        )
    if seen["uid"] == 0 or seen["seccomp"] != "2" or seen["no_new_privs"] != "1":
        raise SandboxUnavailable(
            f"the sandbox does not hold here (uid {seen['uid']}, seccomp mode {seen['seccomp']}, "
            f"no_new_privs {seen['no_new_privs']}); {UNSAFE_ADVICE}"
        )
    return True


def environment(extra):
    """The environment inside: no variable of the grader's own, only these and ``extra``."""
    return {
        "PATH": f"{pathlib.Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": "/tmp/home",
        "TMPDIR": "/tmp",
        "PYTHONPATH": str(bwrap_command.package_folder().parent),
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "NUMBA_CACHE_DIR": "/tmp/numba",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/home/.matplotlib",
        "JUPYTER_RUNTIME_DIR": "/tmp/home/.jupyter",
        **extra,
    }


def _kill(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class _Reader(threading.Thread):
    """Read a pipe to its end, keeping at most ``limit`` bytes (the first, or the last with ``tail``)."""

    def __init__(self, pipe, limit, tail=False):
        super().__init__(daemon=True)
        self.pipe, self.limit, self.tail, self.kept = pipe, limit, tail, bytearray()
        self.start()

    def run(self):
        while chunk := self.pipe.read1(1 << 16):
            if self.tail:
                self.kept += chunk
                del self.kept[: -self.limit]
            elif len(self.kept) < self.limit:
                self.kept += chunk[: self.limit - len(self.kept)]
        self.pipe.close()


def _feed(pipe, data):
    try:
        pipe.write(data)
        pipe.close()
    except (BrokenPipeError, OSError):
        pass


def _spec(limits, isolated, cgroup):
    """What the launcher needs to know of a run (:func:`.launcher.main`)."""
    root = os.getuid() == 0
    # RLIMIT_NPROC counts every thread of the uid outside. As root each run's uid is its own; as
    # another user the grader's processes count too. The supervisor's sum is the per-run limit:
    # this only stops a fork bomb between two looks.
    nproc = 4 * limits.processes + (0 if root and isolated else usage.uid_threads(os.getuid()))
    sandbox = {"root": root, "disable_userns": bwrap_command.bwrap_version() >= (0, 8)} if isolated else None
    return {
        "limits": dataclasses.asdict(limits),
        "nproc": nproc,
        "sandbox": sandbox,
        "cgroup": str(cgroup.path) if cgroup else None,
    }


def run(command, *, limits, timeout, env, stdin=b"", isolated=True):
    """Run ``command`` (a list) in a sandbox with ``env``, ``stdin`` as its input; supervise it.

    Parameters
    ----------
    isolated : bool
        False only for ``--unsafe-no-sandbox``: the same limits and supervision, no namespaces.

    Returns
    -------
    Finished
        ``returncode`` is negative for a signal (``-9`` for a kill by the supervisor or the kernel).
    """
    cgroup = usage.Cgroup.create(f"prefixsum-run-{os.getpid()}-{next(_RUN_NAMES)}", limits.memory_mb, limits.processes)
    wrapped = [sys.executable, _LAUNCHER, json.dumps(_spec(limits, isolated, cgroup)), "--", *command]
    # Without a sandbox, the run's /tmp is a folder of its own in the machine's.
    scratch = None if isolated else tempfile.mkdtemp(prefix="prefixsum-unsandboxed-")
    if scratch:
        env = {k: scratch + v[4:] if v == "/tmp" or v.startswith("/tmp/") else v for k, v in env.items()}
    try:
        return _supervise(wrapped, limits, timeout, env, stdin, isolated, scratch or "/tmp", cgroup)
    finally:
        if cgroup:
            cgroup.remove()
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _memory(found, isolated, cgroup):
    """Bytes of memory the run holds now, as the kernel counts it (:mod:`.usage`)."""
    if cgroup:
        return cgroup.memory()
    held = found.resident
    if isolated and found.children:
        # bwrap's child is the sandbox's PID 1: its root is the sandbox's, and so are /tmp and /dev/shm.
        held += usage.tmpfs_bytes(found.children[0])
    return held


def _supervise(wrapped, limits, timeout, env, stdin, isolated, cwd, cgroup):
    """Start ``wrapped``, feed it, read it, and kill it when a limit is passed (see :func:`run`)."""
    child = subprocess.Popen(
        wrapped,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out, err = _Reader(child.stdout, limits.output_mb << 20), _Reader(child.stderr, 64 << 10, tail=True)
    threading.Thread(target=_feed, args=(child.stdin, stdin), daemon=True).start()
    deadline, over, timed_out, pause = time.monotonic() + timeout, "", False, 0.05
    while child.poll() is None:
        found = usage.tree(child.pid)
        over = (
            "memory"
            if _memory(found, isolated, cgroup) > limits.memory_mb << 20
            else "processes"
            if found.threads > limits.processes
            else "cpu"
            if found.cpu_s > limits.cpu_s
            else ""
        )
        timed_out = time.monotonic() > deadline
        if over or timed_out:
            # bwrap itself (the root) is left to reap its PID 1 and exit: killed first, it would
            # leave that PID 1 a zombie of the container's init, which may never reap it.
            _kill(found.pids[1:] if isolated else found.pids)
            break
        time.sleep(pause)
        pause = min(pause * 1.5, 0.25)
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _kill(usage.tree(child.pid).pids)
        child.wait()
    # bwrap's PID 1 took every process of the sandbox with it; without the sandbox, the group goes.
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    out.join()
    err.join()
    if not over and cgroup and cgroup.killed_for_memory():
        over = "memory"
    return Finished(
        child.returncode, timed_out, out.kept.decode("utf-8", "replace"), err.kept.decode("utf-8", "replace"), over
    )
