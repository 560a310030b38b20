"""The launcher of one sandboxed run: ``python .../launcher.py SPEC -- command``.

Started by the supervisor (:func:`.sandbox.run`) by its file's path, so that starting it imports
nothing of the package: it loads what it needs of its folder by path too. It sets the rlimits of
the run (address space, CPU, file size, core dumps, a processes backstop: every process of the run
inherits them), enters the run's cgroup, joins a new session keyring, and execs bwrap with the
sandbox's command line (:func:`.bwrap_command.sandbox_prefix`).
"""

import errno
import importlib.util
import json
import os
import pathlib
import resource
import sys


def _sibling(name):
    """A module of this folder: imported from the package, or loaded by its path when this file runs as the launcher."""
    if __package__:
        return importlib.import_module(f".{name}", __package__)
    path = pathlib.Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"prefixsum_sandbox_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bwrap_command = _sibling("bwrap_command")
limits = _sibling("limits")
seccomp_filter = _sibling("seccomp_filter")

_KEYCTL_JOIN_SESSION_KEYRING = 1


def _apply(fields, nproc):
    """Set this process's rlimits, soft and hard, from a run's limits (``fields``: :class:`.limits.Limits` as a dict);
    every process of the run inherits them."""
    mib = 1 << 20
    for limit, value in (
        (resource.RLIMIT_CPU, fields["cpu_s"]),
        (resource.RLIMIT_AS, fields["memory_mb"] * mib),
        (resource.RLIMIT_FSIZE, fields["file_mb"] * mib),
        (resource.RLIMIT_NPROC, nproc),
        (resource.RLIMIT_CORE, 0),
    ):
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
        raise SystemExit("usage: python launcher.py SPEC_JSON -- command ...")
    spec = json.loads(spec)
    if spec["cgroup"]:
        (pathlib.Path(spec["cgroup"]) / "cgroup.procs").write_text(f"{os.getpid()}\n")
    _apply(spec["limits"], spec["nproc"])
    sandbox = spec["sandbox"]
    if sandbox:
        _new_session_keyring()
        uid = bwrap_command.run_uid(os.getpid()) if sandbox["root"] else bwrap_command.NOBODY
        command = (
            bwrap_command.sandbox_prefix(
                limits.Limits(**spec["limits"]),
                uid=uid,
                root=sandbox["root"],
                disable_userns=sandbox["disable_userns"],
                seccomp=seccomp_filter.program(),
            )
            + command
        )
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
