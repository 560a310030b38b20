"""Polls are waits, and slow but right kernels are no hangs (issue 47, item 2).

A re-read is a poll only when some thread of the launch writes the array: a thread that sums
``x[0..i]`` reads the input, which nothing writes, and a kernel that re-reads a constant table
waits for nothing. Each first access of a thread to a global cell pays for a few more steps, so
the naive scan (one thread per output, O(n^2) reads) passes every default size, while a loop
that goes round the same cells, or round warp-level calls that read nothing, still stops at the
step limit, and its verdict says which.
"""

import numpy as np
import pytest
from numba import cuda, float32

from prefixsum import check, trace


@cuda.jit
def naive(x, out, n):
    i = cuda.grid(1)
    if i < n:
        total = x[0]
        for j in range(1, i + 1):
            total += x[j]
        out[i] = total


def naive_scan(x):
    """The first kernel a student writes: thread i sums x[0..i]."""
    out = cuda.device_array(len(x), x.dtype)
    naive[(len(x) + 127) // 128, 128](cuda.to_device(x), out, len(x))
    return out


@cuda.jit
def scaled(x, table, out, n):
    i = cuda.grid(1)
    if i < n:
        total = float32(0)
        for j in range(i + 1):
            total += x[j] * table[j % 4]  # the table is re-read by every thread, again and again
        out[i] = total


def table_scan(x):
    out = cuda.device_array(len(x), x.dtype)
    scaled[(len(x) + 127) // 128, 128](cuda.to_device(x), cuda.to_device(np.ones(4, np.float32)), out, len(x))
    return out


@pytest.mark.slow  # the naive scan at every default size: 2.6 million reads on the simulator, about half a minute
def test_the_naive_scan_passes_every_default_size():
    # n = 1000, a default size, is where it timed out ("block 5 polls x[638] 76 times"): the same
    # run (each size's input comes from the seed and the size alone), so it is not run again alone
    result = check.scan(naive_scan)
    assert result, str(result)


@pytest.mark.slow  # a table re-read by every thread at n = 1000: about 17 s on the simulator
def test_a_kernel_re_reading_a_constant_table_passes():
    assert check.scan(table_scan, sizes=(1, 33, 1000))


@cuda.jit
def raises_late(flag, counter):
    if cuda.blockIdx.x == 0:
        for _ in range(50):  # changes memory at every turn: no deadlock, a turn for block 1 each time
            cuda.atomic.add(counter, 0, 1)
        cuda.atomic.exch(flag, 0, 1)
    else:
        while cuda.atomic.add(flag, 0, 0) == 0:
            pass


def test_re_reads_of_the_input_are_no_polls_and_re_reads_of_a_written_cell_are():
    run = trace.record(table_scan, np.ones(300, np.float32), polls=2)
    assert run.error is None  # thread 299 re-read table[0] 75 times: not a poll
    waited = trace.record(lambda: raises_late[2, 1](np.zeros(1, np.int32), np.zeros(1, np.int32)), polls=2)
    assert "polled flag[0]" in str(waited.error)


@cuda.jit
def walks_below_zero(out):
    lane = cuda.threadIdx.x
    end = 0
    found = 0
    while found == 0:  # a look-back whose window never finds what ends it, reading nothing
        end -= 32
        found = cuda.ballot_sync(0xFFFFFFFF, end + lane == 5)
    out[lane] = end


@cuda.jit
def spins_on_the_input(x, out):
    j = 0
    total = float32(0)
    while j < x.shape[0]:
        total += x[j]  # j never moves
    out[0] = total


def test_loops_that_read_nothing_new_stop_at_the_step_limit_with_a_verdict_that_says_so():
    run = trace.record(lambda: walks_below_zero[1, 32](np.zeros(32, np.int64)), steps=20_000, timeout=30)
    assert isinstance(run.error, TimeoutError)
    calls, kind, _ = max(run.idle.values())
    assert calls > 500 and kind == "ballot_sync"
    result = check.scan(lambda x: (walks_below_zero[1, 32](np.zeros(32, np.int64)), x)[1], sizes=(1,), timeout=1.0)
    assert (
        result.diagnosis == "timeout"
        and "warp-level calls" in result.hint
        and "since its last memory access" in result.hint
    )
    spinning = check.scan(
        lambda x: (spins_on_the_input[1, 1](x, np.zeros(1, np.float32)), x)[1], sizes=(4,), timeout=1.0
    )
    assert spinning.diagnosis == "timeout", str(spinning)
