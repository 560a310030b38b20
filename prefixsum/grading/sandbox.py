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
  other run has (:func:`run_uid`: so no per-uid kernel object, a user keyring or a count of
  processes, is shared between runs) with no capability and ``no_new_privs``. As another user,
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
backstop), set by this file run as each run's launcher (``python .../sandbox.py SPEC --
command``), which also makes the sandbox's command line and execs bwrap. The wall-clock limit
kills the sandbox too.

Data goes in on stdin and comes back on stdout, both bounded: no folder of the grader is
writable inside.
"""
import dataclasses
import errno
import functools
import importlib.util
import itertools
import json
import os
import pathlib
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time


def _sibling(name):
    """A module of this folder: imported from the package, or loaded by its path when this file runs as the launcher."""
    if __package__:
        return importlib.import_module(f".{name}", __package__)
    path = pathlib.Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"prefixsum_sandbox_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


seccomp_filter = _sibling("seccomp_filter")
usage = _sibling("usage")

NOBODY = 65534
RUN_UIDS = range(0x7A000000, 0x7A000000 + (1 << 22))
"""The uids of the runs when the grader is root: the first plus the launcher's pid (pids stay below
2**22), so that no two runs alive share one. A range no distribution or container runtime gives out."""
_ETC = ("nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "hosts", "fonts")
_HIDDEN = ("/proc/keys", "/proc/key-users")
_KEYCTL_JOIN_SESSION_KEYRING = 1
_UNSAFE = "or pass --unsafe-no-sandbox to grade with no isolation (every row then says so)"
_RUN_NAMES = itertools.count()


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made here (no bwrap, no namespaces for this user, no seccomp filter for this machine)."""


class Unreachable(SandboxUnavailable):
    """The grader's user, or the runs' uid, cannot reach a folder the sandbox shows (Python, its environment, the
    package)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Limits of one graded run: the sums hold for every process of the run together."""

    cpu_s: int = 600
    """CPU seconds of the run (all its processes), and of each process (RLIMIT_CPU)."""
    memory_mb: int = 4096
    """Memory of the run's processes together, MiB, as the kernel counts it (:mod:`.usage`); also each one's address
    space (RLIMIT_AS)."""
    file_mb: int = 64
    """Largest file a process may write, MiB (RLIMIT_FSIZE)."""
    processes: int = 256
    """Threads of the run's processes together."""
    tmp_mb: int = 512
    """Size of the run's private /tmp, MiB."""
    output_mb: int = 32
    """Most of the run's stdout that is read back, MiB (the rest is discarded)."""


@dataclasses.dataclass(frozen=True)
class Finished:
    """How a sandboxed command ended."""

    returncode: int
    timed_out: bool
    stdout: str
    stderr: str
    over: str = ""
    """The limit the supervisor killed the run for (``memory``, ``processes``, ``cpu``), or empty."""


def _bwrap():
    found = shutil.which("bwrap")
    if not found:
        raise SandboxUnavailable(f"bwrap (bubblewrap) is not installed: apt-get install bubblewrap, {_UNSAFE}")
    return found


@functools.lru_cache(maxsize=None)
def bwrap_version():
    """bubblewrap's version as a tuple, ``(0, 8, 0)``; ``()`` where it does not say."""
    found = subprocess.run([_bwrap(), "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", found)
    return tuple(int(part or 0) for part in match.groups()) if match else ()


def _package_folder():
    return pathlib.Path(__file__).resolve().parents[1]


def _python_folders():
    """``{folder: what it is}`` that Python needs, read-only: the interpreter's installation and the environment."""
    folders = {pathlib.Path(sys.base_prefix): "Python's installation",
               pathlib.Path(sys.prefix): "the Python environment",
               # A Python that cannot read its own installation (a pyenv under /root, run as another
               # user) falls back to another one's; its executable still names the real one.
               pathlib.Path(os.path.realpath(sys.executable)).parent.parent: "Python's installation"}
    return {pathlib.Path(os.path.abspath(f)): what for f, what in folders.items() if f != pathlib.Path("/")}


def _blocking(folder):
    """The first folder on the way to ``folder`` that this process cannot search, or None."""
    for step in [*reversed(folder.parents), folder]:
        try:
            os.stat(step)
        except PermissionError:
            return step.parent
        except OSError:
            return None
    return None


def check_reachable():
    """Raise :class:`Unreachable` naming the folder when a run could not reach Python, its environment or the package.

    The grader's user makes the sandbox's views of them (as another user than root it must reach
    them itself); the runs' uid must then be able to enter each one (as root, their folders above
    are made anew, open to all).
    """
    uid = os.getuid()
    advice = ("Run the grader (and its tests) as a user who can reach that folder, or let every user traverse "
              "the folders on the way (chmod o+x on each), or use a Python installed where every user can reach it")
    wanted = {**_python_folders(), _package_folder(): "the prefixsum package"}
    for folder, what in sorted(wanted.items()):
        blocker = _blocking(folder)
        if blocker is not None:
            raise Unreachable(f"the grader runs as uid {uid}, which cannot reach {folder} ({what}): {blocker} is not "
                              "open "
                              f"to it. {advice}")
        try:
            mode = folder.stat().st_mode
        except FileNotFoundError:
            continue
        if uid == 0 and not mode & stat.S_IXOTH:
            raise Unreachable(f"the sandboxed runs (a uid of their own) cannot enter {folder} ({what}): its mode is "
                              f"{stat.filemode(mode)}. {advice}")


def run_uid(launcher_pid):
    """The uid of the run whose launcher is ``launcher_pid``, when the grader is root (see :data:`RUN_UIDS`)."""
    return RUN_UIDS[launcher_pid]


def _bind(args, source, target=None, *, kind="--ro-bind"):
    """Bind ``source`` at ``target``, first making each missing parent folder traversable."""
    target = pathlib.Path(target or source)
    for parent in reversed(target.parents[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    args += [kind, str(source), str(target)]


def _data(content):
    """A pipe that holds ``content`` (a few KiB at most: no reader is needed to write it), its read end inheritable."""
    read, write = os.pipe()
    os.write(write, content)
    os.close(write)
    os.set_inheritable(read, True)
    return str(read)


def _accounts(uid):
    """``/etc/passwd`` and ``/etc/group`` inside: root, nobody and the run's own uid."""
    users = {0: "root", NOBODY: "nobody", uid: "student"}
    passwd = "".join(f"{name}:x:{u}:{u}:{name}:{'/tmp/home' if u == uid else '/nonexistent'}:/usr/sbin/nologin\n"
                     for u, name in users.items())
    group = "".join(f"{name}:x:{u}:\n" for u, name in users.items())
    return passwd.encode(), group.encode()


def sandbox_prefix(limits, *, uid, root, disable_userns):
    """The bwrap command line (without the command) of one run, as uid ``uid`` inside.

    Opens pipes that hold the run's seccomp filter and accounts, inherited by bwrap: call it in
    the process that execs bwrap (the launcher, :func:`main`).
    """
    args = [_bwrap(), "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = pathlib.Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in _ETC:
        if (pathlib.Path("/etc") / name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    passwd, group = _accounts(uid)
    args += ["--perms", "0644", "--ro-bind-data", _data(passwd), "/etc/passwd",
             "--perms", "0644", "--ro-bind-data", _data(group), "/etc/group"]
    # The private /tmp first: a virtual environment may live under the host's /tmp (CI's does), and
    # a bind made before the tmpfs would be hidden by it.
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(limits.tmp_mb << 20), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(64 << 20), "--tmpfs", "/dev/shm"]
    for hidden in _HIDDEN:
        if os.path.exists(hidden):
            args += ["--ro-bind", "/dev/null", hidden]
    for folder in sorted(_python_folders()):
        if not str(folder).startswith("/usr/") and folder.is_dir():
            _bind(args, folder)
    _bind(args, _package_folder())
    args += ["--chdir", "/tmp", "--seccomp", _data(seccomp_filter.program())]
    if root:
        return args + ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                       "--bounding-set=-all", "--inh-caps=-all", "--"]
    return args + ["--unshare-user", *(["--disable-userns"] if disable_userns else []),
                   "--uid", str(uid), "--gid", str(uid), "--cap-drop", "ALL", "--"]


# Run inside by check_available: what the sandbox must show a process (no root, the filter on).
_PROBE = ("import json, os; status = dict(line.split(':', 1) for line in open('/proc/self/status')); "
          "print(json.dumps({'uid': os.getuid(), 'seccomp': status['Seccomp'].strip(), "
          "'no_new_privs': status['NoNewPrivs'].strip()}))")


@functools.lru_cache(maxsize=None)
def check_available():
    """Make one sandbox and start Python in it; raise :class:`SandboxUnavailable` saying why not."""
    _bwrap()
    try:
        seccomp_filter.program()
    except seccomp_filter.UnknownArchitecture as error:
        raise SandboxUnavailable(f"{error}; {_UNSAFE}") from None
    check_reachable()
    finished = run([sys.executable, "-c", _PROBE], limits=Limits(), timeout=60, env=environment({}))
    try:
        seen = json.loads(finished.stdout)
    except ValueError:
        seen = None
    if finished.returncode != 0 or not seen:
        raise SandboxUnavailable(f"bwrap could not make a sandbox here, or Python could not start in it (are user "
                                 f"namespaces enabled?): exit {finished.returncode}: {finished.stderr.strip()[-300:]}; "
                                 f"{_UNSAFE}")
    if seen["uid"] == 0 or seen["seccomp"] != "2" or seen["no_new_privs"] != "1":
        raise SandboxUnavailable(f"the sandbox does not hold here (uid {seen['uid']}, seccomp mode {seen['seccomp']}, "
                                 f"no_new_privs {seen['no_new_privs']}); {_UNSAFE}")
    return True


def environment(extra):
    """The environment inside: no variable of the grader's own, only these and ``extra``."""
    return {"PATH": f"{pathlib.Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
            "HOME": "/tmp/home", "TMPDIR": "/tmp", "PYTHONPATH": str(_package_folder().parent), "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "NUMBA_CACHE_DIR": "/tmp/numba", "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": "/tmp/home/.matplotlib", "JUPYTER_RUNTIME_DIR": "/tmp/home/.jupyter", **extra}


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
                del self.kept[:-self.limit]
            elif len(self.kept) < self.limit:
                self.kept += chunk[:self.limit - len(self.kept)]
        self.pipe.close()


def _feed(pipe, data):
    try:
        pipe.write(data)
        pipe.close()
    except (BrokenPipeError, OSError):
        pass


def _spec(limits, isolated, cgroup):
    """What the launcher needs to know of a run (:func:`main`)."""
    root = os.getuid() == 0
    # RLIMIT_NPROC counts every thread of the uid outside. As root each run's uid is its own; as
    # another user the grader's processes count too. The supervisor's sum is the per-run limit:
    # this only stops a fork bomb between two looks.
    nproc = 4 * limits.processes + (0 if root and isolated else usage.uid_threads(os.getuid()))
    sandbox = {"root": root, "disable_userns": bwrap_version() >= (0, 8)} if isolated else None
    return {"limits": dataclasses.asdict(limits), "nproc": nproc, "sandbox": sandbox,
            "cgroup": str(cgroup.path) if cgroup else None}


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
    wrapped = [sys.executable, os.path.abspath(__file__), json.dumps(_spec(limits, isolated, cgroup)), "--", *command]
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
    child = subprocess.Popen(wrapped, cwd=cwd, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    out, err = _Reader(child.stdout, limits.output_mb << 20), _Reader(child.stderr, 64 << 10, tail=True)
    threading.Thread(target=_feed, args=(child.stdin, stdin), daemon=True).start()
    deadline, over, timed_out, pause = time.monotonic() + timeout, "", False, 0.05
    while child.poll() is None:
        found = usage.tree(child.pid)
        over = ("memory" if _memory(found, isolated, cgroup) > limits.memory_mb << 20 else
                "processes" if found.threads > limits.processes else "cpu" if found.cpu_s > limits.cpu_s else "")
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
    return Finished(child.returncode, timed_out, out.kept.decode("utf-8", "replace"),
                    err.kept.decode("utf-8", "replace"), over)


def limit_process(*, address_space_mb, open_files, cpu_s=None):
    """Bound this process's address space, open files and (if given) CPU seconds, within the hard limits.

    For the grader's own processes, which run no student code but read what sandboxes wrote:
    the judge (:mod:`.judge`) and the batch's process, as defence in depth behind the bounded
    parsing. Soft limits only, and never raised above what they were.
    """
    wanted = [(resource.RLIMIT_AS, address_space_mb << 20), (resource.RLIMIT_NOFILE, open_files)]
    if cpu_s is not None:
        wanted.append((resource.RLIMIT_CPU, cpu_s))
    for limit, value in wanted:
        soft, hard = resource.getrlimit(limit)
        for bound in (soft, hard):
            value = value if bound == resource.RLIM_INFINITY else min(value, bound)
        resource.setrlimit(limit, (value, hard))


def _apply(limits, nproc):
    mib = 1 << 20
    for limit, value in ((resource.RLIMIT_CPU, limits["cpu_s"]), (resource.RLIMIT_AS, limits["memory_mb"] * mib),
                         (resource.RLIMIT_FSIZE, limits["file_mb"] * mib), (resource.RLIMIT_NPROC, nproc),
                         (resource.RLIMIT_CORE, 0)):
        hard = resource.getrlimit(limit)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(limit, (value, value))


def _new_session_keyring():
    """Join a new, anonymous session keyring, so that the run does not hold the grader's.

    Where the kernel has no keys (``ENOSYS``) or a filter outside denies them (``EPERM``, Docker's),
    the run cannot reach any keyring either; the seccomp filter denies the calls inside anyway.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    number = seccomp_filter.SYSCALLS["keyctl"][("x86_64", "aarch64").index(seccomp_filter.architecture())]
    joined = libc.syscall(number, _KEYCTL_JOIN_SESSION_KEYRING, None) >= 0
    if not joined and ctypes.get_errno() not in (errno.ENOSYS, errno.EPERM):
        raise OSError(ctypes.get_errno(), f"no new session keyring for the run: {os.strerror(ctypes.get_errno())}")


def main(argv):
    """The launcher of one run: its rlimits, its cgroup, a new session keyring, then the sandbox (``exec bwrap``)."""
    spec, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit("usage: python sandbox.py SPEC_JSON -- command ...")
    spec = json.loads(spec)
    if spec["cgroup"]:
        (pathlib.Path(spec["cgroup"]) / "cgroup.procs").write_text(f"{os.getpid()}\n")
    _apply(spec["limits"], spec["nproc"])
    sandbox = spec["sandbox"]
    if sandbox:
        _new_session_keyring()
        uid = run_uid(os.getpid()) if sandbox["root"] else NOBODY
        command = sandbox_prefix(Limits(**spec["limits"]), uid=uid, root=sandbox["root"],
                                 disable_userns=sandbox["disable_userns"]) + command
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
