"""What a sandboxed run uses, summed over all its processes: memory as the kernel counts it, threads, CPU.

Memory is counted where the kernel counts it. Where the grader can make a cgroup (v2, with the
memory controller delegated to a folder it may write: root on most machines, a user under
systemd's ``user@UID.service``), each run gets one (:class:`Cgroup`): ``memory.max`` is the
run's limit, and the kernel charges it everything, page cache and tmpfs included, and kills the
run's processes together when it is passed. Elsewhere (most containers, where cgroupfs is
read-only, and hybrid v1 machines) the supervisor sums, every few tenths of a second, the
resident memory of every process of the run (anonymous, file and shared pages: ``RSS`` of
``/proc/PID/stat``) and what the run's private tmpfs folders hold (``/tmp`` and ``/dev/shm``,
read through ``/proc/PID/root``). The seccomp filter (:mod:`.seccomp_filter`) denies the memory
that neither counts: ``memfd_create``, ``memfd_secret`` and System V shared memory.
"""

import dataclasses
import functools
import os
import pathlib
import time

_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")
_TMPFS = ("tmp", "dev/shm")


def processes():
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
                found[int(entry.name)] = text[text.rindex(b")") + 2 :].split()
    return found


@dataclasses.dataclass(frozen=True)
class Tree:
    """A process and every process below it, as :func:`tree` found them."""

    pids: list
    """The root first."""
    children: list
    """The root's own children."""
    resident: int
    """Resident bytes of them all (RSS: anonymous, file and shared pages)."""
    threads: int
    cpu_s: float


def tree(root):
    """The :class:`Tree` of ``root``: orphans inside a sandbox are re-parented to its PID 1, below ``root``."""
    table = processes()
    children = {}
    for pid, fields in table.items():
        children.setdefault(int(fields[1]), []).append(pid)
    pids, todo = [], [root] if root in table else []
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, ()))
    fields = [table[p] for p in pids]
    return Tree(
        pids,
        children.get(root, []) if pids else [],
        sum(int(f[21]) for f in fields) * _PAGE,
        sum(int(f[17]) for f in fields),
        sum(int(f[11]) + int(f[12]) + int(f[13]) + int(f[14]) for f in fields) / _TICK,
    )


def uid_threads(uid):
    """Threads that ``uid`` runs now (RLIMIT_NPROC counts them all, not only a run's)."""
    count = 0
    for pid in processes():
        try:
            with open(f"/proc/{pid}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return count


def _host_devices():
    """Devices of the grader's own ``/tmp`` and ``/dev/shm``: a folder seen on one of them is not a sandbox's."""
    found = set()
    for folder in _TMPFS:
        try:
            found.add(os.stat(f"/{folder}").st_dev)
        except OSError:
            continue
    return found


def tmpfs_bytes(pid):
    """Bytes held by the private ``/tmp`` and ``/dev/shm`` that process ``pid`` sees (0 where it sees the grader's
    own)."""
    total, host = 0, _host_devices()
    for folder in _TMPFS:
        path = f"/proc/{pid}/root/{folder}"
        try:
            if os.stat(path).st_dev in host:
                continue
            found = os.statvfs(path)
        except OSError:
            continue
        total += (found.f_blocks - found.f_bfree) * found.f_frsize
    return total


def _cgroup2_mount():
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup``, or ``.../unified`` on hybrid machines), or None."""
    try:
        with open("/proc/self/mountinfo") as mounts:
            for line in mounts:
                before, _, after = line.partition(" - ")
                if after.split(" ", 1)[0] == "cgroup2":
                    return pathlib.Path(before.split()[4].replace("\\040", " "))
    except OSError:
        pass
    return None


def _own_cgroup():
    """This process's cgroup v2 path (``/user.slice/...``), or None."""
    try:
        with open("/proc/self/cgroup") as groups:
            for line in groups:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def delegated_parent(mount, own):
    """The nearest folder at or above this process's cgroup where the grader may make a run's cgroup, or None.

    It must have the memory controller enabled for its children (``cgroup.subtree_control``),
    and the grader must be able to make folders in it and move a process in (write
    ``cgroup.procs`` there: the common ancestor of the grader's cgroup and the run's).
    """
    if mount is None or own is None:
        return None
    folder = (mount / own.lstrip("/")).resolve()
    while True:
        try:
            enabled = (folder / "cgroup.subtree_control").read_text().split()
        except OSError:
            enabled = []
        if "memory" in enabled and os.access(folder, os.W_OK) and os.access(folder / "cgroup.procs", os.W_OK):
            return folder
        if folder == mount or folder.parent == folder:
            return None
        folder = folder.parent


@functools.lru_cache(maxsize=None)
def _graders_parent():
    return delegated_parent(_cgroup2_mount(), _own_cgroup())


class Cgroup:
    """One run's cgroup: its memory limit, counted and kept by the kernel."""

    def __init__(self, path):
        self.path = path

    @classmethod
    def create(cls, name, memory_mb, processes, parent=None):
        """Make ``name`` under :func:`delegated_parent` with these limits; None where none can be made."""
        parent = parent or _graders_parent()
        if parent is None:
            return None
        path = parent / name
        try:
            path.mkdir()
        except OSError:
            return None
        group = cls(path)
        try:
            group._write("memory.max", memory_mb << 20)
            group._write("memory.oom.group", 1)
            if (path / "memory.swap.max").exists():
                group._write("memory.swap.max", 0)
            if (path / "pids.max").exists():
                group._write("pids.max", processes)
        except OSError:
            group.remove()
            return None
        return group

    def _write(self, name, value):
        (self.path / name).write_text(f"{value}\n")

    def join(self, pid):
        """Move process ``pid`` (the run's launcher, before it starts the sandbox) into the cgroup."""
        self._write("cgroup.procs", pid)

    def memory(self):
        """Bytes the kernel charges the run now (``memory.current``)."""
        try:
            return int((self.path / "memory.current").read_text())
        except (OSError, ValueError):
            return 0

    def killed_for_memory(self):
        """Whether the kernel killed a process of the run for passing ``memory.max``."""
        try:
            events = dict(
                line.split() for line in (self.path / "memory.events").read_text().splitlines() if line.strip()
            )
        except (OSError, ValueError):
            return False
        return int(events.get("oom_kill", 0)) > 0 or int(events.get("oom_group_kill", 0)) > 0

    def remove(self):
        """Kill what is left in the cgroup and remove it."""
        try:
            if (self.path / "cgroup.kill").exists():
                self._write("cgroup.kill", 1)
        except OSError:
            pass
        # The kill is asynchronous: the folder is busy until the last process has gone.
        for _ in range(200):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)
