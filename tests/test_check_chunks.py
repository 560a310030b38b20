"""prefixsum.check.partition and .neighbours (chapter 08's exercises), and the chapters' random systems.

The package's own pieces pass; a chunk left half eliminated, or a lane that keeps another
group's row, gets a verdict that names the row or the lane.
"""

import numpy as np
import pytest
from numba import cuda, float64

from prefixsum import check
from prefixsum.primitives.chunk import chunk_partition

ROWS = 4
PARTITION = chunk_partition(ROWS)


def chunks_kernel(partition):
    @cuda.jit
    def chunks(a, b, c, d):
        t, system = cuda.grid(2)
        if system < b.shape[0] and t < b.shape[1] // ROWS:
            la, lb = cuda.local.array(ROWS, float64), cuda.local.array(ROWS, float64)
            lc, ld = cuda.local.array(ROWS, float64), cuda.local.array(ROWS, float64)
            for k in range(ROWS):
                la[k], lb[k], lc[k], ld[k] = (
                    a[system, t * ROWS + k],
                    b[system, t * ROWS + k],
                    c[system, t * ROWS + k],
                    d[system, t * ROWS + k],
                )
            partition(la, lb, lc, ld)
            for k in range(ROWS):
                a[system, t * ROWS + k], b[system, t * ROWS + k] = la[k], lb[k]
                c[system, t * ROWS + k], d[system, t * ROWS + k] = lc[k], ld[k]

    def run(a, b, c, d):
        arrays = [cuda.to_device(v) for v in (a, b, c, d)]
        chunks[(1, b.shape[0]), (32, 1)](*arrays)
        return arrays

    return run


@cuda.jit(device=True)
def package_partition(la, lb, lc, ld):
    PARTITION(la, lb, lc, ld, 1.0)
    for k in range(ROWS):
        lb[k] = 1.0  # the package leaves b as it was: each row is divided by its pivot


@cuda.jit(device=True)
def normalised_only(la, lb, lc, ld):
    for k in range(ROWS):
        la[k], lc[k], ld[k], lb[k] = la[k] / lb[k], lc[k] / lb[k], ld[k] / lb[k], 1.0


def test_the_package_partition_passes_and_a_chunk_only_divided_is_named():
    assert check.partition(chunks_kernel(package_partition), chunks=(1, 3)).passed
    result = check.partition(chunks_kernel(normalised_only), chunks=(1,))
    assert result.diagnosis == "wrong-result" and result.index == 2, str(result)
    assert "interior row 2 of chunk 0 still couples x_1 (the row above)" in result.hint


def exchange(keep_outside):
    @cuda.jit
    def kernel(rows, lanes, s, out):
        lane = cuda.threadIdx.x
        up = [cuda.shfl_up_sync(0xFFFFFFFF, rows[k, lane], s) for k in range(3)]
        down = [cuda.shfl_down_sync(0xFFFFFFFF, rows[k, lane], s) for k in range(3)]
        for k in range(3):
            out[k, lane] = up[k] if keep_outside or lane % lanes >= s else 0.0
            out[3 + k, lane] = down[k] if keep_outside or lane % lanes + s < lanes else 0.0

    def run(rows, lanes, s):
        out = cuda.device_array((6, 32))
        kernel[1, 32](cuda.to_device(rows), lanes, s, out)
        return out

    return run


def test_neighbours_pass_in_the_group_and_name_a_row_from_outside_it():
    assert check.neighbours(exchange(False)).passed
    result = check.neighbours(exchange(True))
    assert (
        result.diagnosis == "wrong-result"
        and "lane 0 (lane 0 of its group of 4, s = 1) got lane 0's a as a_up" in result.hint
    ), str(result)
    with pytest.raises(ValueError, match="lanes a power of two"):
        check.neighbours(exchange(False), cases=((3, 1),))


def test_dominant_systems_are_dominant_and_zero_outside_unless_asked():
    a, b, c, d = check.dominant_systems(3, 5, seed=1)
    assert (np.abs(b) >= np.abs(a) + np.abs(c) + 0.5).all() and not a[:, 0].any() and not c[:, -1].any()
    outside = check.dominant_systems(3, 5, seed=1, zero_outside=False)
    assert outside[0][:, 0].all() and np.array_equal(outside[3], d)
    with pytest.raises(ValueError, match="chunk must be None or an int"):
        check.tridiagonal(lambda *bands: bands[3], chunk=1)
