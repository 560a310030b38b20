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
  ``/tmp`` of bounded size;
* the uid 65534 (nobody) inside, also when the grader runs as root: as root, bwrap makes the
  namespaces and ``setpriv`` drops to nobody with no capability and ``no_new_privs``; as another
  user, bwrap maps nobody onto that user in a user namespace.

Limits per submission are kept by the supervisor (:func:`run`): it sums, every few tenths of a
second, the resident memory, the threads and the CPU time of every process of the run, and kills
the whole sandbox when one is over (cgroups are not writable in the containers that teachers and
CI run in). Each process also gets rlimits (address space, CPU, file size, core dumps, a
processes backstop), set by this file run as a program (``python .../sandbox.py LIMITS --
command``) before it execs bwrap. The wall-clock limit kills the sandbox too.

Data goes in on stdin and comes back on stdout, both bounded: no folder of the grader is
writable inside.
"""
import dataclasses
import functools
import json
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

NOBODY = 65534
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")
_ETC = ("passwd", "group", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "hosts", "fonts")


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made here (no bwrap, or no namespaces for this user)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Limits of one graded run: the sums hold for every process of the run together."""

    cpu_s: int = 600
    """CPU seconds of the run (all its processes), and of each process (RLIMIT_CPU)."""
    memory_mb: int = 4096
    """Resident memory of the run's processes together, MiB; also each one's address space (RLIMIT_AS)."""
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
        raise SandboxUnavailable("bwrap (bubblewrap) is not installed: apt-get install bubblewrap")
    return found


def _package_folder():
    return pathlib.Path(__file__).resolve().parents[2]


def _python_folders():
    """Folders Python needs, read-only: the interpreter's installation and the environment."""
    folders = {pathlib.Path(sys.prefix).resolve(), pathlib.Path(sys.base_prefix).resolve(),
               pathlib.Path(os.path.realpath(sys.executable)).parent.parent}
    return sorted(f for f in folders if f.is_dir() and f != pathlib.Path("/"))


def _bind(args, source, target=None, *, kind="--ro-bind"):
    """Bind ``source`` at ``target``, first making each missing parent folder traversable."""
    target = pathlib.Path(target or source)
    for parent in reversed(target.parents[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    args += [kind, str(source), str(target)]


def sandbox_prefix(limits, root=None):
    """The bwrap command line (without the command) of one run; ``root`` defaults to ``os.getuid() == 0``."""
    root = os.getuid() == 0 if root is None else root
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
    # The private /tmp first: a virtual environment may live under the host's /tmp (CI's does), and
    # a bind made before the tmpfs would be hidden by it.
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(limits.tmp_mb << 20), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(64 << 20), "--tmpfs", "/dev/shm"]
    for folder in _python_folders():
        if not str(folder).startswith("/usr/"):
            _bind(args, folder)
    _bind(args, _package_folder())
    args += ["--chdir", "/tmp"]
    if root:
        return args + ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--no-new-privs",
                       "--bounding-set=-all", "--inh-caps=-all", "--"]
    return args + ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY), "--cap-drop", "ALL", "--"]


@functools.lru_cache(maxsize=None)
def check_available():
    """Make one sandbox and run ``true`` in it; raise :class:`SandboxUnavailable` saying why not."""
    command = sandbox_prefix(Limits()) + ["/usr/bin/id", "-u"]
    try:
        finished = subprocess.run(command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SandboxUnavailable(f"bwrap could not start: {error}") from None
    if finished.returncode != 0 or finished.stdout.strip() != str(NOBODY):
        raise SandboxUnavailable(f"bwrap could not make a sandbox here (are user namespaces enabled?): "
                                 f"exit {finished.returncode}: {finished.stderr.strip()[:300]}")
    return True


def environment(extra):
    """The environment inside: no variable of the grader's own, only these and ``extra``."""
    return {"PATH": f"{pathlib.Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
            "HOME": "/tmp/home", "TMPDIR": "/tmp", "PYTHONPATH": str(_package_folder().parent), "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "NUMBA_CACHE_DIR": "/tmp/numba", "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": "/tmp/home/.matplotlib", "JUPYTER_RUNTIME_DIR": "/tmp/home/.jupyter", **extra}


def _processes():
    """``{pid: fields after the command name in /proc/pid/stat}`` of every process visible."""
    found = {}
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                try:
                    with open(f"/proc/{entry.name}/stat", "rb") as handle:
                        text = handle.read()
                except OSError:
                    continue
                found[int(entry.name)] = text[text.rindex(b")") + 2:].split()
    return found


def _tree(root):
    """``(pids, resident bytes, threads, cpu seconds)`` of ``root`` and every process below it.

    Orphans inside the sandbox are re-parented to its PID 1, which is below ``root``: none escapes.
    """
    table = _processes()
    children = {}
    for pid, fields in table.items():
        children.setdefault(int(fields[1]), []).append(pid)
    pids, todo = [], [root] if root in table else []
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, ()))
    fields = [table[p] for p in pids]
    rss = sum(int(f[21]) for f in fields) * _PAGE
    threads = sum(int(f[17]) for f in fields)
    cpu = sum(int(f[11]) + int(f[12]) + int(f[13]) + int(f[14]) for f in fields) / _TICK
    return pids, rss, threads, cpu


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


def _outer_uid(isolated):
    return NOBODY if isolated and os.getuid() == 0 else os.getuid()


def _uid_threads(uid):
    """Threads that ``uid`` runs now (RLIMIT_NPROC counts them all, not only the run's)."""
    count = 0
    for pid in _processes():
        try:
            with open(f"/proc/{pid}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return count


def run(command, *, limits, timeout, env, stdin=b"", isolated=True):
    """Run ``command`` (a list) in a sandbox with ``env``, ``stdin`` as its input; supervise it.

    Parameters
    ----------
    isolated : bool
        False only for ``--unsafe-no-sandbox``: the same limits and supervision, no namespaces.

    Returns
    -------
    Finished
        ``returncode`` is negative for a signal (``-9`` for a kill by the supervisor).
    """
    # The processes backstop counts every thread of the uid the run has outside (nobody as root):
    # the supervisor's sum is the per-run limit, this only stops a fork bomb between two looks.
    spec = {**dataclasses.asdict(limits), "nproc": _uid_threads(_outer_uid(isolated)) + 4 * limits.processes}
    inner = (sandbox_prefix(limits) if isolated else []) + list(command)
    wrapped = [sys.executable, os.path.abspath(__file__), json.dumps(spec), "--", *inner]
    # Without a sandbox, the run's /tmp is a folder of its own in the machine's.
    scratch = None if isolated else tempfile.mkdtemp(prefix="prefixsum-unsandboxed-")
    if scratch:
        env = {k: scratch + v[4:] if v == "/tmp" or v.startswith("/tmp/") else v for k, v in env.items()}
    try:
        return _supervise(wrapped, limits, timeout, env, stdin, isolated, scratch or "/tmp")
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _supervise(wrapped, limits, timeout, env, stdin, isolated, cwd):
    """Start ``wrapped``, feed it, read it, and kill it when a limit is passed (see :func:`run`)."""
    child = subprocess.Popen(wrapped, cwd=cwd, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    out, err = _Reader(child.stdout, limits.output_mb << 20), _Reader(child.stderr, 64 << 10, tail=True)
    threading.Thread(target=_feed, args=(child.stdin, stdin), daemon=True).start()
    deadline, over, timed_out, pause = time.monotonic() + timeout, "", False, 0.05
    while child.poll() is None:
        pids, rss, threads, cpu = _tree(child.pid)
        over = ("memory" if rss > limits.memory_mb << 20 else "processes" if threads > limits.processes
                else "cpu" if cpu > limits.cpu_s else "")
        timed_out = time.monotonic() > deadline
        if over or timed_out:
            # bwrap itself (the root) is left to reap its PID 1 and exit: killed first, it would
            # leave that PID 1 a zombie of the container's init, which may never reap it.
            _kill(pids[1:] if isolated else pids)
            break
        time.sleep(pause)
        pause = min(pause * 1.5, 0.25)
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _kill(_tree(child.pid)[0])
        child.wait()
    # bwrap's PID 1 took every process of the sandbox with it; without the sandbox, the group goes.
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    out.join()
    err.join()
    return Finished(child.returncode, timed_out, out.kept.decode("utf-8", "replace"), err.kept.decode("utf-8", "replace"), over)


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
