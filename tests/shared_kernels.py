"""Kernels that several test files launch, defined once (tests/ is on sys.path, as for notebook_taint)."""

import functools

import numpy as np
from numba import cuda, float32


@functools.lru_cache(maxsize=None)
def strided_shared(element=float32):
    """Kernel ``(out, stride)``: thread t writes ``cells[t * stride]`` of shared memory, then reads it.

    A warp's accesses meet in the banks as the stride and the cell's size (``element``) make them:
    the tracer's bank conflicts and the stepper's marks are checked on it.
    """

    def strided_shared(out, stride):
        cells = cuda.shared.array(1024, element)
        t = cuda.threadIdx.x
        cells[t * stride] = t
        cuda.syncthreads()
        out[t] = cells[t * stride]

    return cuda.jit(strided_shared)


def run_strided(stride, element=float32, threads=32):
    """One block of ``threads`` runs :func:`strided_shared`; returns what they read back."""
    out = cuda.device_array(threads, np.float32)
    strided_shared(element)[1, threads](out, stride)
    return out.copy_to_host()
