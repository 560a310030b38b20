"""User operators: ps.scan(x, op, identity=...) on one array or a tuple of arrays."""

import re
import textwrap

import numpy as np
import pytest
from numba import cuda

import prefixsum as ps
from prefixsum.scans import user_ops


@cuda.jit(device=True)
def affine(p, q):  # apply p, then q: x -> q.a * (p.a * x + p.b) + q.b
    return (p[0] * q[0], q[0] * p[1] + q[1])


@cuda.jit(device=True)
def plus(p, q):
    return p + q


@cuda.jit(device=True)
def plus_one(p, q):
    return (p[0] + q[0],)


@cuda.jit(device=True)
def four_fields(p, q):
    """(count, sum, max, product of signs): four monoids side by side."""
    return (p[0] + q[0], p[1] + q[1], max(p[2], q[2]), p[3] * q[3])


@cuda.jit(device=True)
def counted_affine(p, q):  # (count, a, b): affine maps with the number of maps composed
    return (p[0] + q[0], p[1] * q[1], q[1] * p[2] + q[2])


@cuda.jit(device=True)
def saturating_add(p, q):
    return min(max(p + q, -3.0), 3.0)


CARRIERS = [a.name for a in user_ops.carriers()]
CLASSIC = [a.name for a in user_ops.carriers() if not a.warp_level]  # ladder, hillis_steele, blelloch
FAST = [a.name for a in user_ops.carriers() if a.warp_level]  # lookback, hierarchical
SIZES = (1, 2, 31, 32, 33, 100, 257)  # blocks of 32 threads: one tile to several, in two levels


def check(x, op, identity, **kw):
    got = ps.scan(x, op, identity=identity, **kw)
    kw.pop("algorithm", None), kw.pop("block_size", None), kw.pop("items_per_thread", None)
    expected = user_ops.reference(user_ops.float64_copy(x), op, identity=identity, **kw)
    assert type(got) is type(x)
    fields = got if isinstance(got, tuple) else (got,)
    inputs = x if isinstance(x, tuple) else (x,)
    assert [f.dtype for f in fields] == [f.dtype for f in inputs]
    bad = user_ops.wrong_indices(got, expected, reverse=kw.get("reverse", False))
    assert bad.size == 0, f"wrong at {bad[:5]}: {got} vs {expected}"


def test_the_issue_example_as_written():
    rng = np.random.default_rng(1)
    a, b = rng.uniform(0.5, 1.0, 300), rng.normal(size=300)
    A, B = ps.scan((a, b), affine, identity=(1.0, 0.0))
    x, xs = 0.0, []
    for ai, bi in zip(a, b):
        x = ai * x + bi
        xs.append(x)
    np.testing.assert_allclose(B, xs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(A, np.cumprod(a), rtol=1e-12)


@pytest.mark.parametrize("algorithm", CLASSIC)  # the others: below
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("inclusive, reverse", [(True, False), (False, False), (True, True), (False, True)])
def test_pairs_every_carrier_size_and_direction(algorithm, n, inclusive, reverse):
    rng = np.random.default_rng(n)
    x = (rng.uniform(0.5, 1.0, n), rng.normal(size=n).astype(np.float32))
    check(x, affine, (1.0, 0.0), inclusive=inclusive, reverse=reverse, algorithm=algorithm, block_size=32)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int64", "uint32", "uint64"])
@pytest.mark.parametrize("n", (1, 33, 300))
def test_one_array_and_a_one_tuple_every_dtype(dtype, n):
    rng = np.random.default_rng(n)
    x = user_ops.random_fields(n, (dtype,), rng)[0]
    check(x, plus, 0, algorithm="ladder", block_size=32)
    check((x,), plus_one, (0,), inclusive=False, reverse=True, algorithm="blelloch", block_size=32)


@pytest.mark.parametrize("n", (1, 64, 1000))
def test_four_fields_of_four_dtypes(n):
    rng = np.random.default_rng(n)
    x = (
        np.ones(n, np.int32),
        rng.normal(size=n),
        rng.normal(size=n).astype(np.float32),
        rng.choice([-1, 1], size=n).astype(np.int64),
    )
    identity = (0, 0.0, -np.inf, 1)
    for inclusive, reverse in [(True, False), (False, True)]:
        check(x, four_fields, identity, inclusive=inclusive, reverse=reverse, algorithm="hillis_steele", block_size=64)
    count, total, peak, sign = ps.scan(x, four_fields, identity=identity)
    np.testing.assert_array_equal(count, np.arange(1, n + 1))
    np.testing.assert_array_equal(peak, np.maximum.accumulate(x[2]))
    np.testing.assert_array_equal(sign, np.cumprod(x[3]))


def test_int32_fields_wrap_as_numpy():
    x = np.full(100, 2**30, np.int32)
    got = ps.scan(x, plus, identity=0)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.cumsum(x, dtype=np.int32))


def test_auto_device_arrays_and_the_input_is_not_modified():
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0.5, 1.0, 100), rng.normal(size=100)
    before = (a.copy(), b.copy())
    on_device = ps.scan((cuda.to_device(a), cuda.to_device(b)), affine, identity=(1.0, 0.0))
    assert all(hasattr(f, "copy_to_host") for f in on_device)
    np.testing.assert_array_equal(a, before[0]), np.testing.assert_array_equal(b, before[1])
    host = ps.scan((a, b), affine, identity=(1.0, 0.0))
    np.testing.assert_allclose(on_device[1].copy_to_host(), host[1])
    empty = ps.scan((a[:0], b[:0]), affine, identity=(1.0, 0.0))
    assert [e.shape for e in empty] == [(0,), (0,)]


def test_exclusive_scan_passes_the_identity_on():
    got = ps.exclusive_scan(np.arange(1, 5.0), plus, identity=0.0)
    np.testing.assert_array_equal(got, [0, 1, 3, 6])


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda a: ps.scan((a, a), affine), ValueError, "needs identity"),
        (lambda a: ps.scan((a, a), affine, identity=(1.0,)), ValueError, "tuple of 2 values"),
        (lambda a: ps.scan((a, a[:3]), affine, identity=(1.0, 0.0)), ValueError, "one length"),
        (lambda a: ps.scan((a, a), lambda p, q: p, identity=(1.0, 0.0)), TypeError, "cuda.jit(device=True)"),
        (lambda a: ps.scan((a, a), "add"), ValueError, "user operator"),
        (lambda a: ps.scan(a, "add", identity=0.0), ValueError, "user operator"),
        (lambda a: ps.scan((a, a), plus_one, identity=(1.0, 0.0)), ValueError, "tuple of 2 values"),
        (lambda a: ps.scan((a, a), affine, identity=(1.0, 0.0), algorithm="kstep"), ValueError, "cannot carry"),
        (lambda a: ps.scan((a, a.astype(np.float16)), affine, identity=(1.0, 0.0)), TypeError, "x[1]"),
        (lambda a: ps.scan(a.astype(np.int32), plus, identity=0.5), ValueError, "cannot be represented"),
        (lambda a: ps.scan((), affine, identity=()), ValueError, "empty tuple"),
    ],
)
def test_bad_input_is_refused_before_a_launch(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call(np.ones(8))


def test_the_registry_says_which_algorithms_carry_a_user_operator():
    assert {"ladder", "hillis_steele", "blelloch", "lookback", "hierarchical"} <= set(CARRIERS)
    assert {"ladder", "hillis_steele", "blelloch"} <= set(CLASSIC) and {"lookback", "hierarchical"} <= set(FAST)
    assert not ps.ALGORITHMS["kstep"].fields
    assert user_ops.choose("auto").name == "lookback"


MANY_TILES = (1, 2, 31, 32, 33, 64, 65, 100, 640)  # tiles of 64 (32 threads x 2): one to ten


@pytest.mark.parametrize("algorithm", FAST)
@pytest.mark.parametrize("inclusive, reverse", [(True, False), (False, False), (True, True), (False, True)])
def test_the_fast_scans_carry_a_non_commutative_pair_over_many_tiles(algorithm, inclusive, reverse):
    for n in MANY_TILES:
        rng = np.random.default_rng(n)
        x = (rng.uniform(0.5, 1.0, n), rng.normal(size=n).astype(np.float32))
        check(
            x,
            affine,
            (1.0, 0.0),
            inclusive=inclusive,
            reverse=reverse,
            algorithm=algorithm,
            block_size=32,
            items_per_thread=2,
        )


@pytest.mark.parametrize("algorithm", CARRIERS)
@pytest.mark.parametrize("dtype", ["uint32", "float32", "int64"])
def test_every_carrier_carries_one_field_and_three(algorithm, dtype):
    options = {"block_size": 32, **({"items_per_thread": 2} if algorithm in FAST else {})}
    for n in (1, 33, 65, 300):
        rng = np.random.default_rng(n)
        x = user_ops.random_fields(n, (dtype,), rng)[0]
        check(x, plus, 0, reverse=n % 2 == 1, algorithm=algorithm, **options)
        real = np.float32 if dtype == "float32" else np.float64  # b's rounding follows a's: one precision
        maps = (
            np.ones(n, np.int64 if dtype == "int64" else np.int32),
            rng.uniform(0.5, 1.0, n).astype(real),
            rng.normal(size=n).astype(real),
        )
        check(maps, counted_affine, (0, 1.0, 0.0), inclusive=n % 3 != 0, algorithm=algorithm, **options)


def test_hierarchical_spine_of_several_tiles_keeps_a_user_operator_in_order():
    from prefixsum.scans import hierarchical

    operator = user_ops.operator_for(affine, (1.0, 0.0), [np.dtype("float64")] * 2, False)
    count = 32 * hierarchical.spine_items(32, operator.dtypes) * 2 + 7  # three tiles of the spine's one block
    rng = np.random.default_rng(5)
    totals = (rng.uniform(0.9, 1.0, count), rng.normal(size=count))
    expected = user_ops.reference(totals, affine, identity=(1.0, 0.0))
    on_device = [cuda.to_device(t) for t in totals]
    hierarchical.spine_kernel(operator, operator.dtypes, 32)[1, 32](*on_device, count)
    assert user_ops.wrong_indices(tuple(t.copy_to_host() for t in on_device), expected).size == 0


def test_the_look_back_of_a_tuple_is_the_look_back_rewritten_field_by_field():
    import inspect

    from prefixsum.primitives import tile_state
    from prefixsum.scans import lookback

    operator = user_ops.operator_for(affine, (1.0, 0.0), [np.dtype("float64"), np.dtype("int32")], False)
    kernel = lookback.lookback_kernel(operator, operator.dtypes, True, False, 32, 2)
    source = inspect.getsource(kernel.py_func if hasattr(kernel, "py_func") else kernel.fn)
    assert source.startswith(
        "def scan(x__0, x__1, out__0, out__1, status, values__0, values__1, counter, n, epoch, first)"
    )
    assert "staged__1 = cuda.shared.array(size, T__1)" in source
    publish, _ = tile_state.state_access(operator.dtypes)
    source = inspect.getsource(publish.py_func if hasattr(publish, "py_func") else publish.fn)
    assert (
        source.index("values__1, 2 * tile") < source.index("cuda.threadfence()") < source.index("(status, tile, flag)")
    )


def test_the_checker_passes_a_monoid_and_catches_a_non_associative_operator():
    assert ps.check.operator(affine, (1.0, 0.0), (np.float64, np.float64))
    verdict = ps.check.operator(saturating_add, 0.0)
    assert verdict.diagnosis == "not-associative" and "associative" in verdict.hint
    assert ps.check.operator(affine, (0.0, 0.0), (np.float64, np.float64)).diagnosis == "wrong-identity"
    scanned = ps.check.scan(lambda x: ps.scan(x, saturating_add, identity=0.0), op=saturating_add, identity=0.0)
    assert scanned.diagnosis == "not-associative"
    good = ps.check.scan(
        lambda x: ps.scan(x, affine, identity=(1.0, 0.0), reverse=True),
        op=affine,
        identity=(1.0, 0.0),
        reverse=True,
        dtype=(np.float64, np.float32),
        sizes=(1, 33, 300),
    )
    assert good, str(good)


def test_the_tracer_counts_a_user_operator_and_finds_no_race():
    x = (np.ones(64), np.ones(64))
    run = ps.trace.record(lambda: ps.scan(x, affine, identity=(1.0, 0.0), algorithm="blelloch", block_size=32))
    assert run.error is None and not run.races() and not run.uninitialized_reads()
    assert run.counts()["combines"] > 63


def test_a_classic_scan_of_tuples_is_its_readable_tile_kernel_rewritten_field_by_field():
    import inspect

    from prefixsum.scans import blelloch, hillis_steele, ladder

    operator = user_ops.operator_for(affine, (1.0, 0.0), [np.dtype("float64"), np.dtype("int32")], False)

    def source(dispatcher):
        return inspect.getsource(getattr(dispatcher, "py_func", getattr(dispatcher, "fn", dispatcher)))

    rungs = source(ladder.ladder_tile_kernel(operator, operator.dtypes, True, False, 32))
    assert rungs.startswith("def ladder_tile(x__0, x__1, out__0, out__1, totals__0, totals__1, n)")
    assert "rungs__1 = cuda.shared.array(block_size, T__1)" in rungs
    assert "result(rungs__0, rungs__1, t)" in rungs
    ping_pong = source(hillis_steele.hillis_steele_tile_kernel(operator, operator.dtypes, False, True, 32))
    assert "result(buffers__0[source], buffers__1[source], t)" in ping_pong  # a row of a 2-D array, per field
    assert "upsweep(tree__0, tree__1, t)" in source(
        blelloch.blelloch_tile_kernel(operator, operator.dtypes, True, False, 32, True)
    )
    assert "tree__0[right], tree__1[right] = combine(" in source(
        blelloch.blelloch_upsweep(operator, operator.dtypes, 64, True)
    )


def test_a_row_of_an_element_array_is_refused_as_a_value():
    from prefixsum.primitives import fields
    from prefixsum.scans.ops import numba_type

    element = numba_type((np.dtype("float64"), np.dtype("int32")))

    def copies_a_row(x):
        rows = cuda.shared.array((2, 32), element)
        rows[0, 0] = x[0]
        return rows[0]

    with pytest.raises(ValueError, match=re.escape("row 'rows[0]' of an element array is used as a value")):
        fields.rewrite(copies_a_row, (np.dtype("float64"), np.dtype("int32")), ("x",))


def test_user_operator_kernels_compile_to_ptx(ptx_child):
    code = """
        import numpy as np
        from numba import cuda
        import prefixsum
        from prefixsum.scans import user_ops

        @cuda.jit(device=True)
        def affine(p, q):
            return (p[0] * q[0], q[0] * p[1] + q[1])

        @cuda.jit(device=True)
        def four(p, q):
            return (p[0] + q[0], p[1] + q[1], max(p[2], q[2]), p[3] * q[3])

        from prefixsum.core.numba_gpu import pretend_device
        pretend_device((9, 0))
        ops = [user_ops.operator_for(affine, (1.0, 0.0), [np.dtype("float64"), np.dtype("float32")], False),
               user_ops.operator_for(four, (0, 0.0, -np.inf, 1),
                                     [np.dtype(t) for t in ("int32", "float64", "float32", "int64")], False)]
        for k, op in enumerate(ops):
            for algorithm in user_ops.carriers():
                if algorithm.warp_level and k:  # the fast scans' tuples of 3 fields: tests/test_segmented.py
                    continue
                for kernel, argtypes in user_ops.kernels(op, False, True, algorithm):
                    cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
                    print("ok", algorithm.name, kernel.py_func.__name__)
    """
    child = ptx_child(textwrap.dedent(code))
    assert child.returncode == 0, child.stderr[-3000:]
    compiled = [line.split()[1:] for line in child.stdout.splitlines() if line.startswith("ok ")]
    assert {name for name, _ in compiled} == set(CARRIERS)
    # each classic scan, both operators: its tile kernel in two directions and two carries;
    # hierarchical: three kernels, lookback: one, for the pair
    assert len(compiled) == 2 * 4 * (len(CARRIERS) - 2) + 3 + 1


def test_auto_passes_over_warp_level_carriers_where_warp_intrinsics_are_missing():
    with ps.sim.enabled(False):  # numba's stock simulator: no shuffles, so neither lookback nor hierarchical
        chosen = user_ops.choose("auto")
        assert not chosen.warp_level and chosen.name in CARRIERS
        x = (np.full(40, 0.5), np.ones(40))
        check(x, affine, (1.0, 0.0), block_size=32)
