"""The simulator gives a GPU's answer for the integer operations and bit counts the chapters use.

numba compiles integer operators in 64 bits (signed if either operand is), shifts with the left
operand's signedness, casts to a narrower type by keeping the low bits, and PTX counts bits in
the operand's own width (``popc.b32`` of the ballot of 32 lanes, an int32 -1, is 32). The
expected values below are PTX's and numba's rules written out; the last tests compare the
simulator with ``benchmarks/warp_integers.py``'s model of them and with every case of the
recorded GPU run, ``benchmarks/warp_semantics_gpu.json``.
"""

import importlib
import json
import pathlib
import sys

import numpy as np
import pytest
from numba import cuda, int32, uint32

from prefixsum.classroom.sim import integers

ROOT = pathlib.Path(__file__).resolve().parent.parent
INT32_MIN, UINT32_MAX = -(2**31), 2**32 - 1

# (value, its numpy type) -> (popc, clz, ffs, brev), by PTX: bits of the operand's width, two's complement.
BITS = [
    (np.int32(-1), (32, 0, 1, 0xFFFFFFFF)),
    (np.int32(0), (0, 32, 0, 0)),
    (np.int32(INT32_MIN), (1, 0, 32, 1)),
    (np.int32(1), (1, 31, 1, 0x80000000)),
    (np.uint32(UINT32_MAX), (32, 0, 1, 0xFFFFFFFF)),
    (np.uint32(0x80000000), (1, 0, 32, 1)),
    (np.int64(-1), (64, 0, 1, 0xFFFFFFFF)),  # brev of an int64: numba converts it to uint32 first
    (np.uint64(2**64 - 1), (64, 0, 1, 2**64 - 1)),
    (np.uint64(1 << 40), (1, 23, 41, 1 << 23)),
    (-1, (64, 0, 1, 0xFFFFFFFF)),  # a Python int is numba's int64
]


@pytest.mark.parametrize("value, expected", BITS, ids=lambda v: repr(v))
def test_bit_counts_count_the_operands_own_width(value, expected):
    got = (integers.popc(value), integers.clz(value), integers.ffs(value), integers.brev(value))
    assert tuple(int(g) for g in got) == expected
    assert type(got[0]) is (np.int64 if type(value) is int else type(value))  # popc and clz keep the type
    assert type(got[2]) is np.uint32


# (operation, operands) -> (value, numpy type) as numba computes it.
ARITHMETIC = [
    (lambda a, b: integers.lshift(a, b), (np.int32(3), 32), 3 << 32, np.int64),  # (flag << 32) in int32 keeps the flag
    (lambda a, b: integers.lshift(a, b), (np.uint32(3), np.uint32(32)), 3 << 32, np.uint64),
    (lambda a, b: integers.lshift(a, b), (np.int32(1), 64), 0, np.int64),  # PTX clamps the count
    (lambda a, b: integers.rshift(a, b), (np.int32(-8), 70), -1, np.int64),
    (lambda a, b: integers.rshift(a, b), (np.uint32(UINT32_MAX), 31), 1, np.uint64),
    (lambda a, b: integers.add(a, b), (np.int32(2**31 - 1), np.int32(1)), 2**31, np.int64),
    (lambda a, b: integers.sub(a, b), (np.uint32(0), np.uint32(1)), 2**64 - 1, np.uint64),
    (lambda a, b: integers.sub(a, b), (np.uint32(0), 1), -1, np.int64),  # a literal is an int64
    (lambda a, b: integers.and_(a, b), (np.int32(-1), np.uint32(0xF0)), 0xF0, np.int64),
    (lambda a, b: integers.or_(a, b), (np.uint64(1), 2), 3, np.int64),  # uint64 with int64: int64, not numpy's float64
    (lambda a, b: integers.floordiv(a, b), (np.int32(-7), 2), -4, np.int64),
    (
        lambda a, _: integers.inverted(a),
        (np.uint32(0), None),
        UINT32_MAX,
        np.uint64,
    ),  # inverted in 32 bits, then widened
    (lambda a, _: integers.negative(a), (np.uint32(1), None), UINT32_MAX, np.uint64),  # negated in 32 bits (an H100)
    (lambda a, _: integers.negative(a), (np.int32(INT32_MIN), None), INT32_MIN, np.int64),  # then sign-extended
    (lambda a, _: integers.cast(np.int32, a), (2**31, None), INT32_MIN, np.int32),  # numpy raises OverflowError
    (lambda a, _: integers.cast(np.uint32, a), (-1, None), UINT32_MAX, np.uint32),
    (lambda a, _: integers.cast(uint32, a), (np.int64(3 << 32 | 5), None), 5, np.uint32),
    (lambda a, b: integers.add(a, b), (1.5, np.int32(2)), 3.5, np.float64),  # not integers: as Python does
]


@pytest.mark.parametrize("operation, operands, value, kind", ARITHMETIC, ids=[str(k) for k in range(len(ARITHMETIC))])
def test_integer_operators_follow_numbas_typing(operation, operands, value, kind):
    got = operation(*operands)
    assert type(got) is kind and got == value


@cuda.jit
def _votes_and_shifts(flags, out):
    lane = cuda.threadIdx.x
    votes = cuda.ballot_sync(0xFFFFFFFF, True)  # an int32 -1: every lane
    out[lane, 0] = cuda.popc(votes)
    out[lane, 1] = 31 - cuda.clz(cuda.match_any_sync(0xFFFFFFFF, lane // 8))
    flag = int32(flags[lane])
    out[lane, 2] = ((flag << 32) | 7) >> 32
    below = np.int32(1 << lane) - 1  # lane 31: numba wraps 1 << 31 into int32's sign bit, minus 1 is int64
    out[lane, 3] = cuda.popc(np.uint32(votes) & below)
    out[lane, 4] = cuda.popc(votes & below)  # the int32 votes sign-extended to 64 bits, as on a GPU
    counted = uint32(0)
    counted -= 1
    out[lane, 5] = counted


def test_a_kernel_gets_a_gpus_integers():
    out = np.zeros((32, 6), np.int64)
    _votes_and_shifts[1, 32](np.arange(32, dtype=np.int32), out)
    lanes = np.arange(32)
    assert (out[:, 0] == 32).all()  # numba's simulator counted the bits of bin(-1): 1
    assert (out[:, 1] == lanes // 8 * 8 + 7).all()
    assert (out[:, 2] == lanes).all()  # numpy: np.int32 << 32 is 0, the flag lost
    assert (out[:, 3] == lanes).all()  # numpy: np.int32(1 << 31) raises OverflowError
    assert (out[:31, 4] == lanes[:31]).all() and out[31, 4] == 63
    assert (out[:, 5] == -1).all()  # uint32 minus a literal int64: int64


def test_functions_without_readable_source_and_the_packages_own_run_unchanged():
    from prefixsum.classroom.sim import numba_typing
    from prefixsum.primitives import tile_state

    namespace = {}
    exec("def hidden(a):\n    return a << 32\n", namespace)  # noqa: S102  (no source in linecache)
    assert numba_typing.numba_typed(namespace["hidden"]) is namespace["hidden"]
    publish, _ = tile_state.state_access(np.float32)
    assert numba_typing.numba_typed(publish.py_func) is publish.py_func


def _benchmark():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module("warp_semantics")
    finally:
        sys.path.pop(0)


def test_the_benchmarks_integer_cases_agree_with_its_ptx_model():
    semantics = _benchmark()
    cases = semantics.integer_cases()
    assert len(cases) > 80 and semantics.model_disagreements(cases) == []
    by_name = {c["name"]: c for c in cases}
    assert by_name["integer popc(ballot), predicate=all"]["values"] == [32] * 32


def test_the_simulator_agrees_with_every_case_the_gpu_recorded():
    """Every case of the last GPU run (``bash benchmarks/run_gpu.sh warp``) against the simulator's:
    the defined results of both must be equal, case by case."""
    recorded = json.loads((ROOT / "benchmarks" / "warp_semantics_gpu.json").read_text())
    assert not recorded["device"]["simulator"]
    ours = {c["name"]: c for c in _benchmark().run_all()}
    compared = 0
    for case in recorded["cases"]:
        if case["status"] != "defined":
            continue
        mine = ours[case["name"]]
        lanes = [k for k, (a, b) in enumerate(zip(case["defined"], mine["defined"])) if a and b]
        assert [mine["values"][k] for k in lanes] == [case["values"][k] for k in lanes], case["name"]
        compared += len(lanes)
    assert compared > 50_000


@pytest.mark.ptx
def test_the_benchmarks_integer_kernels_compile_for_a_gpu(ptx_child):
    """The kernels that record a GPU's integers compile on numba's real target, shifts in 64 bits."""
    child = ptx_child(f"""
import sys
sys.path.insert(0, {str(ROOT / "benchmarks")!r})
import warp_integers as w
from numba import cuda, types
from prefixsum.core.numba_gpu import pretend_device
pretend_device((9, 0))
array = lambda t, n=1: types.Array(t, n, "C")
for t in (types.int32, types.uint32, types.int64, types.uint64):
    cuda.compile_ptx(w.bit_counts.py_func, (array(t), types.int64, array(types.int64)), cc=(9, 0))
cuda.compile_ptx(w.vote_bits.py_func, (array(types.int64, 2), array(types.int32, 2), array(types.int64, 3)), cc=(9, 0))
ptx, _ = cuda.compile_ptx(w.integer_arithmetic.py_func, (array(types.int32), array(types.int32), array(types.uint32),
                                                          array(types.uint32), array(types.int64, 2)), cc=(9, 0))
print(ptx.count("shl.b64") > 0)
""")
    assert child.returncode == 0, child.stderr
    assert child.stdout.split()[-1] == "True"


def test_an_augmented_assignment_stays_in_place_on_an_array():
    values = np.zeros(3)
    same = values
    same = integers.iadd(same, 1)  # what ``same += 1`` becomes in a rewritten kernel
    assert same is values and (values == 1).all()
    assert integers.ilshift(np.int32(1), 40) == 1 << 40
