"""prefixsum.check.tridiagonal: a correct PCR kernel passes, typical mistakes get their diagnosis.

Each kernel below is the PCR exercise of notebook 07 (one block per system, one thread per row,
two shared buffers of rows), either right or with one classic mistake.
"""

import numpy as np
import pytest
from numba import cuda, float64

from prefixsum import check, tridiag

ROWS = 64  # one block holds one system of up to ROWS rows


def pcr_kernel(
    *,
    next_stride=lambda s: 2 * s,
    barrier=True,
    ping_pong=True,
    guard_left=True,
    identity_right=True,
    steps_while=lambda s, n: s < n,
    divide=True,
):
    """The exercise's kernel, with one of its parts replaced (the defaults give the right one)."""

    @cuda.jit
    def pcr(a, b, c, d, x):
        rows = cuda.shared.array((2, 4, ROWS), float64)
        system = cuda.blockIdx.x
        i = cuda.threadIdx.x
        n = x.shape[1]
        if i < n:
            rows[0, 0, i] = a[system, i] if i > 0 else 0.0
            rows[0, 1, i] = b[system, i]
            rows[0, 2, i] = c[system, i] if i < n - 1 else 0.0
            rows[0, 3, i] = d[system, i]
        cuda.syncthreads()
        src, s = 0, 1
        while steps_while(s, n):
            dst = 1 - src if ping_pong else src
            if i < n:
                if i >= s or not guard_left:
                    al, bl, cl, dl = rows[src, 0, i - s], rows[src, 1, i - s], rows[src, 2, i - s], rows[src, 3, i - s]
                else:
                    al, bl, cl, dl = 0.0, 1.0, 0.0, 0.0
                if i + s < n or (not identity_right and i + s < ROWS):
                    ar, br, cr, dr = rows[src, 0, i + s], rows[src, 1, i + s], rows[src, 2, i + s], rows[src, 3, i + s]
                else:
                    ar, br, cr, dr = 0.0, 1.0, 0.0, 0.0
                ai, bi, ci, di = rows[src, 0, i], rows[src, 1, i], rows[src, 2, i], rows[src, 3, i]
                k1 = ai / bl
                k2 = ci / br
                rows[dst, 0, i] = -al * k1
                rows[dst, 1, i] = bi - cl * k1 - ar * k2
                rows[dst, 2, i] = -cr * k2
                rows[dst, 3, i] = di - dl * k1 - dr * k2
            if barrier:
                cuda.syncthreads()
            src = dst
            s = next_stride(s)
        if i < n:
            x[system, i] = rows[src, 3, i] / rows[src, 1, i] if divide else rows[src, 3, i]

    def solve(a, b, c, d):
        x = cuda.device_array(d.shape, d.dtype)
        pcr[d.shape[0], ROWS](cuda.to_device(a), cuda.to_device(b), cuda.to_device(c), cuda.to_device(d), x)
        return x

    return solve


MISTAKES = {
    # name: (the kernel's change, the expected diagnosis)
    "stride_plus_one": (dict(next_stride=lambda s: s + 1), "wrong-result"),
    "missing_barrier": (dict(barrier=False), "race"),
    "one_buffer": (dict(ping_pong=False), "race"),
    "no_left_guard": (dict(guard_left=False), "out-of-bounds"),
    "reads_past_n": (dict(identity_right=False), "uninitialized-read"),
    "one_step_short": (dict(steps_while=lambda s, n: 2 * s < n), "wrong-result"),
    "no_division": (dict(divide=False), "wrong-result"),
}


def test_the_exercise_solution_passes():
    result = check.tridiagonal(pcr_kernel(), name="pcr_exercise")
    assert result.passed and result.diagnosis == "pass"
    assert str(result) == "PASS pcr_exercise: 7 sizes from 1 to 33"


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_mistake_gets_its_diagnosis(mistake):
    change, diagnosis = MISTAKES[mistake]
    result = check.tridiagonal(pcr_kernel(**change), name=mistake)
    assert not result.passed
    assert result.diagnosis == diagnosis, str(result)
    assert str(result).startswith(f"FAIL {mistake}: {diagnosis} at n=")
    assert "\n" not in str(result)


def test_a_wrong_stride_is_caught_at_the_first_n_whose_strides_differ():
    # s = 1, 2, 3, ... instead of 1, 2, 4, ...: the same steps for n <= 3, not for n = 7
    result = check.tridiagonal(pcr_kernel(next_stride=lambda s: s + 1), name="stride")
    assert result.size == 7 and result.diagnosis == "wrong-result"


def test_stopping_one_step_short_fails_where_a_row_still_has_a_neighbour():
    result = check.tridiagonal(pcr_kernel(steps_while=lambda s, n: 2 * s < n), name="short")
    assert result.size == 2  # n = 2 needs one step (s = 1); stopping at 2s < n runs none


@pytest.mark.parametrize("method", tuple(tridiag.METHODS))
@pytest.mark.parametrize("dtype", (np.float32, np.float64))
def test_the_package_solvers_pass(method, dtype):
    result = check.tridiagonal(lambda a, b, c, d: tridiag.solve(a, b, c, d, method=method), dtype=dtype, name=method)
    assert result.passed, str(result)


def test_outside_coefficients_must_be_ignored():
    def uses_a0(a, b, c, d):
        x = tridiag.solve(a, b, c, d, method="thomas")
        return x - a[:, :1] * 1e-3  # as if a[:, 0] x_{-1} had been kept, with x_{-1} = 1e-3

    result = check.tridiagonal(uses_a0)
    assert result.diagnosis == "wrong-result" and "a_0" in result.hint, str(result)


def test_not_written_yet_is_not_attempted_with_the_exercise_message():
    def not_written_yet(a, b, c, d):
        raise NotImplementedError("Exercise: write the row update")

    result = check.tridiagonal(not_written_yet)
    assert not result and result.diagnosis == "not-attempted"
    assert str(result).startswith(
        "NOT ATTEMPTED not_written_yet: not attempted yet: the exercise's cell still raises "
        "NotImplementedError (Exercise: write the row update)."
    )


def test_a_wrong_shape_is_reported():
    result = check.tridiagonal(lambda a, b, c, d: d[:, :-1], name="short")
    assert result.diagnosis == "exception" and "shape" in result.hint


def test_the_verdict_is_deterministic():
    solver = pcr_kernel(identity_right=False)
    assert str(check.tridiagonal(solver, name="m")) == str(check.tridiagonal(solver, name="m"))


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError):
        check.tridiagonal(pcr_kernel(), dtype=np.int32)
    with pytest.raises(ValueError):
        check.tridiagonal(pcr_kernel(), n_values=(0, 3))
