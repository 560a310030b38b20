"""The bubblewrap command line of one run, and whether a sandbox can be made here at all.

What the sandbox shows a run (:mod:`.sandbox`'s docstring lists it): namespaces of its own, a
read-only view of the system, of Python and its environment and of the ``prefixsum`` package's
own folder, a private ``/tmp``, accounts for root, nobody and the run, the seccomp filter, and the
run's uid (:func:`run_uid`). :func:`sandbox_prefix` is called by the launcher
(:mod:`.launcher`), which loads this file by its path: it imports nothing of the package.
"""

import functools
import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys

NOBODY = 65534
RUN_UIDS = range(0x7A000000, 0x7A000000 + (1 << 22))
"""The uids of the runs when the grader is root: the first plus the launcher's pid (pids stay below
2**22), so that no two runs alive share one. A range no distribution or container runtime gives out."""
_ETC = ("nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "hosts", "fonts")
_HIDDEN = ("/proc/keys", "/proc/key-users")
UNSAFE_ADVICE = "or pass --unsafe-no-sandbox to grade with no isolation (every row then says so)"


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made here (no bwrap, no namespaces for this user, no seccomp filter for this machine)."""


class Unreachable(SandboxUnavailable):
    """The grader's user, or the runs' uid, cannot reach a folder the sandbox shows (Python, its environment, the
    package)."""


def bwrap_executable():
    """The path of ``bwrap``; raise :class:`SandboxUnavailable` where it is not installed."""
    found = shutil.which("bwrap")
    if not found:
        raise SandboxUnavailable(f"bwrap (bubblewrap) is not installed: apt-get install bubblewrap, {UNSAFE_ADVICE}")
    return found


@functools.lru_cache(maxsize=None)
def bwrap_version():
    """bubblewrap's version as a tuple, ``(0, 8, 0)``; ``()`` where it does not say."""
    found = subprocess.run([bwrap_executable(), "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", found)
    return tuple(int(part or 0) for part in match.groups()) if match else ()


def package_folder():
    """The ``prefixsum`` package's own folder, which every run sees read-only."""
    return pathlib.Path(__file__).resolve().parents[1]


def _python_folders():
    """``{folder: what it is}`` that Python needs, read-only: the interpreter's installation and the environment."""
    folders = {
        pathlib.Path(sys.base_prefix): "Python's installation",
        pathlib.Path(sys.prefix): "the Python environment",
        # A Python that cannot read its own installation (a pyenv under /root, run as another
        # user) falls back to another one's; its executable still names the real one.
        pathlib.Path(os.path.realpath(sys.executable)).parent.parent: "Python's installation",
    }
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
    advice = (
        "Run the grader (and its tests) as a user who can reach that folder, or let every user traverse "
        "the folders on the way (chmod o+x on each), or use a Python installed where every user can reach it"
    )
    wanted = {**_python_folders(), package_folder(): "the prefixsum package"}
    for folder, what in sorted(wanted.items()):
        blocker = _blocking(folder)
        if blocker is not None:
            raise Unreachable(
                f"the grader runs as uid {uid}, which cannot reach {folder} ({what}): {blocker} is not "
                "open "
                f"to it. {advice}"
            )
        try:
            mode = folder.stat().st_mode
        except FileNotFoundError:
            continue
        if uid == 0 and not mode & stat.S_IXOTH:
            raise Unreachable(
                f"the sandboxed runs (a uid of their own) cannot enter {folder} ({what}): its mode is "
                f"{stat.filemode(mode)}. {advice}"
            )


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
    passwd = "".join(
        f"{name}:x:{u}:{u}:{name}:{'/tmp/home' if u == uid else '/nonexistent'}:/usr/sbin/nologin\n"
        for u, name in users.items()
    )
    group = "".join(f"{name}:x:{u}:\n" for u, name in users.items())
    return passwd.encode(), group.encode()


def sandbox_prefix(limits, *, uid, root, disable_userns, seccomp):
    """The bwrap command line (without the command) of one run, as uid ``uid`` inside.

    ``seccomp`` is the filter's program (:func:`.seccomp_filter.program`). Opens pipes that hold
    it and the run's accounts, inherited by bwrap: call it in the process that execs bwrap (the
    launcher, :func:`.launcher.main`).
    """
    args = [
        bwrap_executable(),
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
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
    args += [
        "--perms",
        "0644",
        "--ro-bind-data",
        _data(passwd),
        "/etc/passwd",
        "--perms",
        "0644",
        "--ro-bind-data",
        _data(group),
        "/etc/group",
    ]
    # The private /tmp first: a virtual environment may live under the host's /tmp (CI's does), and
    # a bind made before the tmpfs would be hidden by it.
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        str(limits.tmp_mb << 20),
        "--tmpfs",
        "/tmp",
        "--perms",
        "1777",
        "--size",
        str(64 << 20),
        "--tmpfs",
        "/dev/shm",
    ]
    for hidden in _HIDDEN:
        if os.path.exists(hidden):
            args += ["--ro-bind", "/dev/null", hidden]
    for folder in sorted(_python_folders()):
        if not str(folder).startswith("/usr/") and folder.is_dir():
            _bind(args, folder)
    _bind(args, package_folder())
    args += ["--chdir", "/tmp", "--seccomp", _data(seccomp)]
    if root:
        return args + [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--no-new-privs",
            "--bounding-set=-all",
            "--inh-caps=-all",
            "--",
        ]
    return args + [
        "--unshare-user",
        *(["--disable-userns"] if disable_userns else []),
        "--uid",
        str(uid),
        "--gid",
        str(uid),
        "--cap-drop",
        "ALL",
        "--",
    ]
