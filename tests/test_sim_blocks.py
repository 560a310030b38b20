"""Blocks that run at the same time in prefixsum.sim: the device model, what one block sees of
another's stores, and deadlocks."""

import re

import numpy as np
import pytest
from numba import cuda

import prefixsum
from prefixsum import sim
from prefixsum.classroom import mutants

pytestmark = pytest.mark.skipif(not prefixsum.device_info()["simulator"], reason="simulator only")


@cuda.jit
def tickets(order, counter):
    if cuda.threadIdx.x == 0:
        order[cuda.blockIdx.x] = cuda.atomic.add(counter, 0, 1)


def block_order(blocks=8):
    order = np.zeros(blocks, np.int32)
    tickets[blocks, 32](order, np.zeros(1, np.int32))
    return order


def test_resident_blocks_take_turns_in_a_seeded_order():
    first = block_order()
    assert sorted(first) == list(range(8))
    assert list(first) != list(range(8))  # not blockIdx order
    assert sorted(first[:4]) == [0, 1, 2, 3]  # dispatched in blockIdx order, four at a time
    np.testing.assert_array_equal(block_order(), first)  # the same seed, the same order
    with sim.block_order_seed(5):
        assert list(block_order()) != list(first)
    with sim.resident_blocks(1):
        np.testing.assert_array_equal(block_order(), np.arange(8))
    with sim.resident_blocks(2):
        assert sorted(block_order()[:2]) == [0, 1]
    assert sim.DEFAULT_RESIDENT_BLOCKS == 4 and sim.DEFAULT_SEED == 0


@pytest.mark.parametrize(
    "bad, error", [(0, ValueError), (-2, ValueError), (2.5, TypeError), ("4", TypeError), (True, TypeError)]
)
def test_resident_blocks_refuses_bad_counts(bad, error):
    with pytest.raises(error, match=re.escape(repr(bad)) if error is TypeError else str(bad)):
        sim.resident_blocks(bad)


@pytest.mark.parametrize("bad, error", [(-1, ValueError), (1.0, TypeError), ("0", TypeError)])
def test_block_order_seed_refuses_bad_seeds(bad, error):
    with pytest.raises(error):
        sim.block_order_seed(bad)


NOTHING, FENCE, ATOMIC = 0, 1, 2  # what block 0 does after its store, before it raises the flag


@cuda.jit
def message(data, flags, out, publish):
    """Block 0 stores data[0] and raises flags[0]; block 1 waits for the flag, then reads data[0].
    Between the store and the flag block 0 does ``publish``: nothing, a fence, or an atomic on the
    element. Block 0 stays resident until block 1 has read (flags[1]), so that retiring publishes nothing."""
    if cuda.threadIdx.x != 0:
        return
    if cuda.blockIdx.x == 0:
        data[0] = 42
        if publish == FENCE:
            cuda.threadfence()
        if publish == ATOMIC:
            cuda.atomic.add(data, 0, 0)  # an atomic on the element publishes the store to it
        cuda.atomic.add(flags, 0, 1)
        while cuda.atomic.add(flags, 1, 0) == 0:
            pass
    else:
        while cuda.atomic.add(flags, 0, 0) == 0:
            pass
        out[0] = data[0]
        cuda.atomic.add(flags, 1, 1)


def send(publish):
    out = np.zeros(1, np.int32)
    message[2, 32](np.zeros(1, np.int32), np.zeros(2, np.int32), out, publish)
    return out[0]


def test_a_store_is_hidden_from_other_blocks_until_a_fence():
    assert send(NOTHING) == 0  # the old contents: the flag overtook the data
    assert send(FENCE) == 42


def test_stale_reads_are_reported_to_the_access_hook():
    accesses = []
    with sim.access_hook(accesses.append):
        send(NOTHING)
    (read,) = [a for a in accesses if a.array == "data" and a.kind == "read"]
    assert read.stale and read.value == 0 and read.block == (1, 0, 0)
    assert not any(a.stale for a in accesses if a is not read)


def test_an_atomic_on_the_element_publishes_a_store():
    assert send(ATOMIC) == 42


@cuda.jit
def relay(data, out):
    """Each block reads what the block before it stored: right only when that block retired."""
    b = cuda.blockIdx.x
    if cuda.threadIdx.x == 0:
        out[b] = data[b]
        data[b + 1] = data[b] + 1


def test_a_retired_block_has_published_its_stores():
    with sim.resident_blocks(1):
        out = np.zeros(4, np.int32)
        relay[4, 1](np.zeros(5, np.int32), out)
        np.testing.assert_array_equal(out, [0, 1, 2, 3])
    out = np.zeros(4, np.int32)
    relay[4, 1](np.zeros(5, np.int32), out)  # four resident blocks: the reads are stale
    assert list(out) != [0, 1, 2, 3]


@cuda.jit
def own_block(data, out):
    t = cuda.threadIdx.x
    if t == 0:
        data[cuda.blockIdx.x] = 5
    cuda.syncthreads()
    if t == 1:
        out[cuda.blockIdx.x] = data[cuda.blockIdx.x]


def test_a_block_sees_its_own_stores():
    out = np.zeros(3, np.int32)
    own_block[3, 32](np.zeros(3, np.int32), out)
    np.testing.assert_array_equal(out, [5, 5, 5])


@cuda.jit
def rereads(x, out):
    t = cuda.threadIdx.x
    total = 0
    if t == 0:
        for _ in range(50):  # reads one element again and again, but its loop ends
            total += x[0]
    cuda.syncthreads()
    out[t] = total


def test_a_finite_loop_over_one_element_is_no_deadlock():
    out = np.zeros(32, np.int64)
    rereads[1, 32](np.ones(1, np.int64), out)
    assert out[0] == 50


def test_waiting_for_a_block_dispatched_later_is_a_deadlock():
    x = np.ones(64 * 6, np.float32)
    with pytest.raises(sim.DeadlockError) as caught:
        mutants.chained_scan(mutants.chained_waits_for_later_block_tile, x)
    message_text = str(caught.value)
    assert "deadlock in kernel 'chained_waits_for_later_block_tile'" in message_text
    assert "4 resident blocks" in message_text
    for block in range(4):
        assert f"block ({block}, 0, 0):" in message_text
    assert "thread (63, 0, 0) (1 thread) poll flags[4] (value 0)" in message_text
    assert "while cuda.atomic.add(flags, b - 1, 0) == 0:" in message_text
    assert "threads (0, 0, 0)..(62, 0, 0) (63 threads) wait at syncthreads()" in message_text
    assert "not yet dispatched: block (4, 0, 0) and 1 more" in message_text
    assert "in the order of seed 0: prefixsum.sim.block_order_seed(0) repeats it" in message_text
    with sim.resident_blocks(6):  # all six resident: every block's wait ends
        out = mutants.chained_scan(mutants.chained_waits_for_later_block_tile, x).copy_to_host()
    np.testing.assert_array_equal(out, np.arange(1, 64 * 6 + 1))


@cuda.jit
def wait_for_a_barrier(flags):
    if cuda.threadIdx.x == 0:
        while cuda.atomic.add(flags, 0, 0) == 0:  # thread 1 raises the flag after the barrier
            pass
    cuda.syncthreads()
    if cuda.threadIdx.x == 1:
        flags[0] = 1


def test_polling_for_a_thread_held_at_a_barrier_is_a_deadlock():
    with pytest.raises(
        sim.DeadlockError,
        match=r"(?s)block \(0, 0, 0\):.*poll flags\[0\].*"
        r"threads \(1, 0, 0\)\.\.\(31, 0, 0\) \(31 threads\) wait",
    ):
        wait_for_a_barrier[1, 32](np.zeros(1, np.int32))


@cuda.jit
def plain_poll(flags):
    if cuda.blockIdx.x == 0:
        while flags[0] == 0:  # a plain load, read again and again
            pass
    elif cuda.threadIdx.x == 0:
        cuda.atomic.add(flags, 0, 1)


def test_a_plain_polling_loop_lets_other_blocks_run():
    flags = np.zeros(1, np.int32)
    plain_poll[2, 32](flags)
    assert flags[0] == 1
    with sim.resident_blocks(1), pytest.raises(sim.DeadlockError, match=r"poll flags\[0\] \(value 0\)"):
        plain_poll[2, 32](np.zeros(1, np.int32))


def test_errors_of_a_launch_of_several_blocks_print_the_seed():
    with sim.block_order_seed(None), pytest.raises(sim.DeadlockError) as caught:
        mutants.chained_scan(mutants.chained_waits_for_later_block_tile, np.ones(64 * 5, np.float32))
    seed = int(re.search(r"in the order of seed (\d+)", str(caught.value)).group(1))
    with sim.block_order_seed(seed), pytest.raises(sim.DeadlockError) as again:
        mutants.chained_scan(mutants.chained_waits_for_later_block_tile, np.ones(64 * 5, np.float32))
    assert str(again.value) == str(caught.value)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("resident", [1, 3, 4, 16])
def test_a_chained_scan_with_flags_and_a_fence_is_right_in_any_order(seed, resident):
    x = np.random.default_rng(seed).integers(-9, 9, 64 * 7 + 5).astype(np.float32)
    with sim.block_order_seed(seed), sim.resident_blocks(resident):
        out = mutants.chained_scan(mutants.chained_tile, x).copy_to_host()
    np.testing.assert_array_equal(out, np.cumsum(x))
