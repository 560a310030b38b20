"""The seccomp filter of every sandboxed run: a classic-BPF program that bwrap loads (``--seccomp FD``).

Written here, not with libseccomp's Python binding, which is not on PyPI for every machine the
grader runs on; the program is short and :func:`program` is all of it. Like Flatpak's filter
(``flatpak-run.c``, ``setup_seccomp``) it allows every system call but those below, so that
Python, numba's compiler, Jupyter's kernel and zmq work unchanged, and it denies with an errno
rather than killing, so that a library that probes a call (glibc's ``clone3``) falls back:

* the kernel's key store (``keyctl``, ``add_key``, ``request_key``): no key of the grader, of
  nobody or of an earlier run can be read, and none can be left behind;
* new namespaces and mounts (``unshare``, ``setns``, ``clone`` with a namespace flag, ``clone3``
  whose flags a filter cannot read, ``mount``, ``umount2``, ``pivot_root``, ``chroot`` and the
  new mount API): no nested user namespace, so no tmpfs beyond the sandbox's ``--size``;
* reaching into other processes (``ptrace``, ``process_vm_readv``/``writev``, ``pidfd_getfd``,
  ``process_madvise``) and the kernel's larger attack surfaces (``perf_event_open``, ``bpf``,
  ``userfaultfd``, ``io_uring_*``, module and ``kexec`` loading, NUMA placement, ``syslog``,
  ``acct``, ``quotactl``, ``personality`` other than Linux's, ``ioctl`` ``TIOCSTI``/``TIOCLINUX``);
* memory that no process's resident size counts: ``memfd_create``, ``memfd_secret`` and System V
  shared memory (``shmget``); what is left (``/tmp`` and ``/dev/shm``) is bounded tmpfs;
* socket families other than Unix, IPv4, IPv6 and netlink (the network namespace has only a
  loopback; rarer families load kernel modules).

A call made for another architecture than the grader's (an i386 ``int 0x80`` on x86_64) kills
the process: the numbers below would not mean the same calls. So do x32 calls on x86_64.
"""

import errno
import platform
import struct

# linux/audit.h: AUDIT_ARCH_X86_64 and AUDIT_ARCH_AARCH64 (64-bit, little-endian).
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# x86_64's x32 calls carry this bit in their number (asm/unistd.h, __X32_SYSCALL_BIT).
_X32_BIT = 0x40000000

# Numbers from asm/unistd_64.h (x86_64) and asm-generic/unistd.h (aarch64); None where the
# architecture has no such call. tests/test_sandbox.py compares them with the headers.
SYSCALLS = {
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "unshare": (272, 97),
    "setns": (308, 268),
    "clone": (56, 220),
    "clone3": (435, 435),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440),
    "perf_event_open": (298, 241),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "mbind": (237, 235),
    "move_pages": (279, 239),
    "migrate_pages": (256, 238),
    "set_mempolicy": (238, 237),
    "get_mempolicy": (239, 236),
    "set_mempolicy_home_node": (450, 450),
    "syslog": (103, 116),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "uselib": (134, None),
    "modify_ldt": (154, None),
    "lookup_dcookie": (212, 18),
    "memfd_create": (319, 279),
    "memfd_secret": (447, 447),
    "shmget": (29, 194),
    "personality": (135, 92),
    "ioctl": (16, 29),
    "socket": (41, 198),
}

DENIED = {
    errno.EPERM: (
        "keyctl",
        "add_key",
        "request_key",
        "unshare",
        "setns",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_getfd",
        "process_madvise",
        "perf_event_open",
        "bpf",
        "userfaultfd",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "mbind",
        "move_pages",
        "migrate_pages",
        "set_mempolicy",
        "get_mempolicy",
        "set_mempolicy_home_node",
        "syslog",
        "acct",
        "quotactl",
        "quotactl_fd",
        "uselib",
        "modify_ldt",
        "lookup_dcookie",
        "memfd_create",
        "memfd_secret",
        "shmget",
    ),
    # ENOSYS, as Flatpak: a caller falls back (glibc from clone3 to clone, whose flags are checked).
    errno.ENOSYS: (
        "clone3",
        "open_tree",
        "move_mount",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
    ),
}
"""``{errno: names}`` of the calls denied whatever their arguments."""

# linux/sched.h: every CLONE_NEW* that clone's 32-bit flags can carry (CLONE_NEWTIME shares its
# bit with the exit signal there, so it only exists for clone3 and unshare, both denied).
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
PER_LINUX, PERSONALITY_QUERY = 0, 0xFFFFFFFF
# AF_UNSPEC, AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
SOCKET_FAMILIES = (0, 1, 2, 10, 16)

_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6] (the low
# half of a little-endian argument first).
_NR, _ARCH = 0, 4


def _arg(index):
    return 16 + 8 * index


class UnknownArchitecture(RuntimeError):
    """The grader runs on an architecture this filter has no system call numbers for."""


def architecture(machine=None):
    """The name :data:`SYSCALLS` knows for ``machine`` (``platform.machine()`` by default)."""
    machine = machine or platform.machine()
    name = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine.lower())
    if name not in _AUDIT_ARCH:
        raise UnknownArchitecture(
            f"no seccomp filter for the architecture {machine!r} (only "
            f"{', '.join(_AUDIT_ARCH)}): "
            "grading refuses to run without one"
        )
    return name


def _op(code, k, jt=0, jf=0):
    return (code, jt, jf, k)


def _deny(value):
    return _op(_RET, _RET_ERRNO | value)


def _allow():
    return _op(_RET, _RET_ALLOW)


def _on_argument(number, index, allowed=(), denied=(), mask=None, refusal=errno.EPERM):
    """For call ``number``: load the low half of argument ``index``; allow or deny, and stop here.

    ``allowed``: values allowed (the rest denied); ``denied``: values denied (the rest allowed);
    ``mask``: denied when any of these bits is set.
    """
    body = [_op(_LD_ABS, _arg(index))]
    if mask is not None:
        body += [_op(_JSET, mask, 0, 1), _deny(refusal), _allow()]
    elif allowed:
        for position, value in enumerate(allowed):
            body.append(_op(_JEQ, value, len(allowed) - position, 0))
        body += [_deny(refusal), _allow()]
    else:
        for position, value in enumerate(denied):
            body.append(_op(_JEQ, value, len(denied) - position, 0))
        body += [_allow(), _deny(refusal)]
    return [_op(_JEQ, number, 0, len(body)), *body]


def program(machine=None):
    """The filter for ``machine``: ``struct sock_filter`` instructions, as bytes for bwrap's ``--seccomp``."""
    name = architecture(machine)
    column = ("x86_64", "aarch64").index(name)

    def number(call):
        return SYSCALLS[call][column]

    code = [_op(_LD_ABS, _ARCH), _op(_JEQ, _AUDIT_ARCH[name], 1, 0), _op(_RET, _RET_KILL_PROCESS), _op(_LD_ABS, _NR)]
    if name == "x86_64":
        code += [_op(_JGE, _X32_BIT, 0, 1), _op(_RET, _RET_KILL_PROCESS)]
    for value, calls in DENIED.items():
        for call in calls:
            if number(call) is not None:
                code += [_op(_JEQ, number(call), 0, 1), _deny(value)]
    # Each rule on an argument returns, so the number stays loaded for the rules before it only.
    code += _on_argument(number("clone"), 0, mask=CLONE_NAMESPACES)
    code += _on_argument(number("ioctl"), 1, denied=(TIOCSTI, TIOCLINUX))
    code += _on_argument(number("personality"), 0, allowed=(PER_LINUX, PERSONALITY_QUERY))
    code += _on_argument(number("socket"), 0, allowed=SOCKET_FAMILIES, refusal=errno.EAFNOSUPPORT)
    code.append(_allow())
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in code)
