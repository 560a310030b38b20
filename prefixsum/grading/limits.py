"""What a graded run may use (:class:`Limits`), and the bounds the grader's own processes set themselves.

The supervisor (:mod:`.sandbox`) keeps a run's sums; the launcher (:mod:`.launcher`, which loads
this file by its path) sets the rlimits of each of the run's processes from them.
"""

import dataclasses
import resource


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
