"""The tridiagonal family on the plan layer (issue 46): plans (tridiag.plan_solve, the one plan cache),
out=, stream= and temp= on every public tridiagonal call, the one input check, and the registry.

On the simulator every stream is accepted and ignored (kernels run at once); tests/test_streams_gpu.py
proves the ordering on a GPU.
"""

import ast
import pathlib
import re
import textwrap

import numpy as np
import pytest
from numba import cuda
from test_plans import STREAMS, _finish
from test_tridiag import check, dominant

import prefixsum as ps
from prefixsum import apps, tridiag
from prefixsum.core import plans
from prefixsum.core.arrays import is_device_array
from prefixsum.core.poison import poison
from prefixsum.core.registry import Capability
from prefixsum.tridiag import registry

PACKAGE = pathlib.Path(ps.__file__).resolve().parent


def spd(rng, batch, n):
    """Symmetric positive definite matrices ``B B^T + n I``."""
    m = rng.normal(size=(batch, n, n))
    return m @ m.transpose(0, 2, 1) + n * np.eye(n)


def test_a_one_line_call_is_a_lookup_in_the_plan_cache_and_reuses_its_plan(rng):
    system = dominant(rng, 3, 40)
    key = ("tridiag.solve", np.dtype(np.float64), (3, 40), "thomas", tridiag.METHODS.version)
    check(tridiag.solve(*system, method="thomas"), system, np.float64)
    plan = plans.PLANS.get(key)
    assert isinstance(plan, tridiag.SolvePlan) and plan.algorithm == "thomas" and plan.shape == (3, 40)
    kept = len(plans.PLANS)
    other = dominant(rng, 3, 40)
    check(tridiag.solve(*other, method="thomas"), other, np.float64)  # each call solves its own systems
    assert plans.PLANS.get(key) is plan and len(plans.PLANS) == kept
    x, info, _ = tridiag.solve_ex(*other, method="thomas")  # solve_ex goes through the same plan
    assert plans.PLANS.get(key) is plan and not info.any()


@pytest.mark.parametrize("method", ["auto", *tridiag.METHODS])
def test_a_plan_solves_in_a_loop_and_says_what_it_runs(method, rng):
    plan = tridiag.plan_solve(np.float32, (4, 33), method=method)
    assert plan.algorithm in tridiag.METHODS and (method == "auto" or plan.algorithm == method)
    assert repr(plan) == f"<SolvePlan (4, 33) x float32, {plan.algorithm!r}>"
    for _ in range(2):
        system = [v.astype(np.float32) for v in dominant(rng, 4, 33)]
        check(plan(*system), system, np.float32)
    one = tridiag.plan_solve(np.float64, 9)
    assert one.shape == (9,) and one(*(v[0] for v in dominant(rng, 1, 9))).shape == (9,)


def test_a_plan_refuses_what_it_was_not_made_for():
    refusal = "^dtype: unsupported dtype 'int32'; the allowed dtypes are float32 and float64$"
    with pytest.raises(TypeError, match=refusal):
        tridiag.plan_solve(np.int32, 5)
    for shape in ((2, 3, 4), (-1, 4), (2.0, 4)):
        with pytest.raises(ValueError, match=re.escape(f"got {shape!r}")):
            tridiag.plan_solve(np.float64, shape)
    with pytest.raises(ValueError, match="n >= 1"):
        tridiag.plan_solve(np.float64, (3, 0))
    with pytest.raises(ValueError, match="unknown method 'gauss'; allowed: auto, pcr"):
        tridiag.plan_solve(np.float64, 5, method="gauss")
    plan = tridiag.plan_solve(np.float64, (2, 5))
    with pytest.raises(
        ValueError,
        match=r"this plan solves systems of shape \(2, 5\) in float64; "
        r"got shape \(2, 6\) in float64",
    ):
        plan(*np.ones((4, 2, 6)))
    with pytest.raises(ValueError, match=r"got shape \(2, 5\) in float32"):
        plan(*np.ones((4, 2, 5), np.float32))


def _out_calls():
    """``(name, call(system, out))`` of every public call that takes out=, on (3, 6) float64 systems."""

    def symmetric(system, out, **kw):
        A = np.stack([np.diag(b) + np.diag(a[1:], -1) + np.diag(a[1:], 1) for a, b in zip(system[0], system[1])])
        return tridiag.solve_symmetric(cuda.to_device(A) if is_device_array(system[3]) else A, system[3], out=out, **kw)

    return {
        "solve": lambda system, out, **kw: tridiag.solve(*system, out=out, **kw),
        "solve_ex": lambda system, out, **kw: tridiag.solve_ex(*system, out=out, **kw).x,
        "plan": lambda system, out, **kw: tridiag.plan_solve(np.float64, (3, 6))(*system, out=out, **kw),
        "stone_solve": lambda system, out, **kw: apps.stone_solve(*system, out=out, **kw),
        "solve_symmetric": symmetric,
    }


def _symmetric_dominant(rng):
    a, b, c, d = dominant(rng, 3, 6)
    a[:, 1:] = c[:, :-1] = 0.5 * (a[:, 1:] + c[:, :-1])  # a_i = c_(i-1): a symmetric matrix, still dominant
    return [a, b, c, d]


@pytest.mark.parametrize("name", list(_out_calls()))
@pytest.mark.parametrize("on_device", [False, True])
def test_out_is_written_and_returned_and_the_inputs_kept(name, on_device, rng):
    system = _symmetric_dominant(rng)
    before = [v.copy() for v in system]
    expected = tridiag.solve(*system, method="pivoting")
    given = [cuda.to_device(v) for v in system] if on_device else system
    out = cuda.to_device(poison(np.empty((3, 6)))) if on_device else poison(np.empty((3, 6)))
    x = _out_calls()[name](given, out)
    assert x is out
    got = out.copy_to_host() if on_device else out
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    for kept, v in zip(before, given):
        np.testing.assert_array_equal(v.copy_to_host() if on_device else v, kept)


@pytest.mark.parametrize(
    "out, error, message",
    [
        (lambda d: np.empty((3, 5)), ValueError, r"out must have shape \(3, 6\); got \(3, 5\)"),
        (lambda d: np.empty((3, 6), np.float32), TypeError, "out must have dtype float64; got float32"),
        (lambda d: cuda.device_array((3, 6)), TypeError, "out must be a numpy array for a numpy input; got"),
        (lambda d: d, ValueError, "out shares memory with the input"),
        (lambda d: np.empty((3, 12))[:, ::2], ValueError, "out must be a contiguous, writeable numpy array"),
    ],
)
@pytest.mark.parametrize("name", list(_out_calls()))
def test_a_wrong_out_is_refused_naming_the_value_before_a_launch(name, out, error, message, rng):
    system = _symmetric_dominant(rng)
    before = [v.copy() for v in system]
    bad = out(system[3])
    run = ps.trace.record(_out_calls()[name], system, bad)
    assert isinstance(run.error, error), repr(run.error)
    assert re.search(message, str(run.error)), str(run.error)
    assert run.launches == []
    for kept, v in zip(before, system):
        np.testing.assert_array_equal(v, kept)


def test_a_device_out_of_the_wrong_shape_or_kind_is_refused(rng):
    device = [cuda.to_device(v) for v in dominant(rng, 3, 6)]
    with pytest.raises(ValueError, match=r"out must have shape \(3, 6\); got \(18,\)"):
        tridiag.solve(*device, out=cuda.device_array(18))
    with pytest.raises(TypeError, match="out must be a device array for a device input; got ndarray"):
        tridiag.solve(*device, out=np.empty((3, 6)))
    with pytest.raises(ValueError, match="out shares memory with the input"):
        tridiag.solve(*device, out=device[0])


@pytest.mark.parametrize("form", STREAMS)
def test_every_public_tridiagonal_call_takes_a_stream_in_every_form(form, rng):
    stream = STREAMS[form]()
    system = _symmetric_dominant(rng)
    device = [cuda.to_device(v) for v in system]
    expected = tridiag.solve(*system, method="pivoting")
    x = tridiag.solve(*device, stream=stream)
    _finish(stream)
    np.testing.assert_allclose(x.copy_to_host(), expected, rtol=1e-10)
    np.testing.assert_allclose(tridiag.solve(*system, method="thomas", stream=stream), expected, rtol=1e-10)
    np.testing.assert_allclose(tridiag.solve_ex(*system, stream=stream).x, expected, rtol=1e-10)
    np.testing.assert_allclose(tridiag.plan_solve(np.float64, (3, 6))(*system, stream=stream), expected, rtol=1e-10)
    np.testing.assert_allclose(apps.stone_solve(*system, stream=stream), expected, rtol=1e-10)
    A = spd(rng, 2, 5)
    rhs = rng.normal(size=(2, 5))
    expected = np.linalg.solve(A, rhs[..., None])[..., 0]
    np.testing.assert_allclose(tridiag.solve_symmetric(A, rhs, stream=stream), expected, rtol=1e-9)
    d, e, Q = tridiag.householder(A, stream=stream)
    T = np.stack([np.diag(dk) + np.diag(ek, 1) + np.diag(ek, -1) for dk, ek in zip(d, e)])
    np.testing.assert_allclose(Q.transpose(0, 2, 1) @ A @ Q, T, atol=1e-9)
    knots = np.arange(6.0)
    spline = apps.cubic_spline(knots, knots**2, stream=stream)
    np.testing.assert_allclose(spline(knots), knots**2, atol=1e-12)


def test_anything_else_is_refused_as_a_stream_before_a_launch(rng):
    system = dominant(rng, 2, 5)
    for call in (
        lambda: tridiag.solve(*system, stream="stream"),
        lambda: apps.stone_solve(*system, stream=3),
        lambda: tridiag.householder(spd(rng, 1, 3), stream=object()),
    ):
        run = ps.trace.record(call)
        assert isinstance(run.error, TypeError) and "stream must be None, a numba stream" in str(run.error)
        assert run.launches == []


def test_temporary_storage_of_the_callers_own(rng):
    plan = tridiag.plan_solve(np.float64, (5, 30), method="thomas")
    assert plan.temp_bytes == 32 + 5 * 30 * 8  # the failure flags (16-byte aligned), then the scratch
    temp = cuda.to_device(np.full(plan.temp_bytes, 0xA5, np.uint8))  # poisoned: the plan zeroes the flags
    for _ in range(3):
        system = dominant(rng, 5, 30)
        check(plan(*system, temp=temp), system, np.float64)
    system[1][2, 0] = 0  # a zero first pivot in system 2: the flags in temp say so
    with pytest.raises(np.linalg.LinAlgError, match="system 2 of 5"):
        plan(*system, temp=temp)
    system = dominant(rng, 5, 30)
    check(plan(*system, temp=temp), system, np.float64)  # zeroed again at the start of the call
    with pytest.raises(ValueError, match=rf"temp holds 8 bytes; this plan needs temp_bytes = {plan.temp_bytes}"):
        plan(*system, temp=cuda.device_array(8, np.uint8))
    with pytest.raises(TypeError, match="temp must be a device array"):
        plan(*system, temp=np.zeros(plan.temp_bytes, np.uint8))
    hybrid = tridiag.plan_solve(np.float64, (5, 30), method="hybrid")
    assert hybrid.temp_bytes is None
    with pytest.raises(ValueError, match="algorithm 'hybrid' keeps its temporary storage in the package's workspace"):
        hybrid(*system, temp=temp)


def test_inputs_are_checked_with_the_one_wording():
    good = np.ones(4)
    with pytest.raises(TypeError, match="c: unsupported dtype 'int32'; the allowed dtypes are float32 and float64"):
        tridiag.solve(good, good, np.ones(4, np.int32), good)
    with pytest.raises(ValueError, match=r"a device array b must be contiguous; got strides \(16,\)"):
        tridiag.solve(good, cuda.to_device(np.ones(8))[::2], good, good)
    with pytest.raises(ValueError, match=r"d must be 1-D or 2-D; got an array of shape \(1, 1, 4\)"):
        apps.stone_solve(good, good, good, np.ones((1, 1, 4)))
    with pytest.raises(ValueError, match=r"rhs must be 1-D or 2-D; got an array of shape \(1, 1, 3\)"):
        tridiag.solve_symmetric(np.eye(3), np.ones((1, 1, 3)))
    big_endian = np.array([4.0, 4, 4], ">f8")  # converted, as numpy's own functions accept it
    np.testing.assert_allclose(tridiag.solve(np.zeros(3), big_endian, np.zeros(3), [4.0, 8, 12]), [1, 2, 3])


def test_the_registry_holds_every_method_with_its_flags():
    assert set(tridiag.METHODS) == {"pcr", "cr", "thomas", "hybrid", "pivoting", "routed"}
    for name, method in tridiag.METHODS.items():
        assert isinstance(method, registry.Method) and method.can(Capability.BATCHED), name
        assert (Capability.PIVOTS in method.capabilities) != (Capability.NEEDS_DOMINANCE in method.capabilities), name
        assert tuple(method.dtypes) == tridiag.DTYPES and method.summary and method.source, name
        assert (Capability.CALLER_TEMP in method.capabilities) == (method.temp_parts is not None), name
    assert {n for n, m in tridiag.METHODS.items() if m.can(Capability.PIVOTS)} == {"pivoting", "routed"}


def test_auto_uses_batch_n_and_dtype_from_the_h100_rows():
    times = registry.measured_times(("pivoting", "routed"), (1000, 1000), np.dtype(np.float64))
    assert times["routed"] == pytest.approx((31.36 + 138.53) / 2)  # tridiag.csv: "auto", dominant and indefinite
    assert times["pivoting"] == pytest.approx((109.63 + 110.14) / 2)
    for dtype in tridiag.DTYPES:
        assert registry.choose("auto", 1000, 1000, dtype).name == "routed"
        assert registry.choose("auto", 1, 1 << 16, dtype).name == "pivoting"
    assert registry.choose("auto", 4096, 256, np.float32).name == "pivoting"  # the dtype decides here
    assert registry.choose("auto", 4096, 256, np.float64).name == "routed"
    assert registry.fastest(512, 512, np.float32, pivots=False).name == "hybrid"  # for systems safe without pivoting
    assert registry.measured_times(("hybrid",), (512, 512), np.dtype(np.float32)) == {"hybrid": 9.25}  # its latest run
    assert registry.measured_times(("hybrid",), (512, 512), np.dtype(np.float16)) == {}  # no rows: the rank decides


def test_no_method_is_named_in_code_outside_its_own_module():
    """A string that is a method's name, outside docstrings, only in the module that registers it."""
    owners = {method.run.__module__ for method in tridiag.METHODS.values()}
    names = set(tridiag.METHODS)
    found = []
    for path in PACKAGE.rglob("*.py"):
        module = "prefixsum." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and node.value in names
                and id(node) not in docstrings
                and tridiag.METHODS[node.value].run.__module__ != module
            ):
                found.append(f"{module}:{node.lineno} {node.value!r}")
    assert owners and found == []


def test_every_tridiagonal_plans_kernels_compile_to_ptx(ptx_child):
    """What a plan of every method launches (its ``kernels``, float32 and float64) is among
    ``tridiag.ptx_kernels()``: the same dispatchers with the same argtypes, on numba's real CUDA
    target. ``python -m prefixsum ptx`` compiles each of those for sm_75 and sm_90, and
    tests/test_ptx.py fails on any of them that does not compile, so the plans' kernels (about 40
    s of compiling) are not compiled a second time here."""
    code = """
        import numpy as np
        from prefixsum import tridiag
        from prefixsum.core.numba_gpu import pretend_device
        pretend_device((9, 0))
        compiled = {(id(kernel), argtypes) for kernel, argtypes in tridiag.ptx_kernels()}
        for dtype in (np.float32, np.float64):
            for name in tridiag.METHODS:
                plan = tridiag.plan_solve(dtype, (8, 600), method=name)
                missing = [kernel.py_func.__name__ for kernel, argtypes in plan.kernels
                           if (id(kernel), argtypes) not in compiled]
                assert plan.kernels and not missing, (name, dtype, missing)
                print("ok", plan.algorithm, len(plan.kernels))
    """
    child = ptx_child(textwrap.dedent(code))
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-3000:]
    assert {line.split()[1] for line in child.stdout.splitlines() if line.startswith("ok ")} == set(tridiag.METHODS)


def test_the_pivoting_solver_is_at_least_cusparses_speed_on_every_measured_shape():
    """Issue 44's claim, from the committed H100 rows: on random indefinite systems the pivoting
    solver's kernel time is at most that of each cuSPARSE routine named for its shape (gtsv2 for
    a few long systems, the interleaved batch's LU and QR for many short ones), both dtypes."""
    table = registry.against_cusparse("pivoting")
    shapes = {(1, 1 << 16), (1, 1 << 20), (7, 100000), (64, 8192), (100, 1000), (512, 512), (1000, 1000)}
    shapes |= {(4096, 256), (16384, 64)}
    assert {(row["dtype"], row["batch"], row["n"]) for row in table} == {
        (dtype, *shape) for dtype in ("float32", "float64") for shape in shapes
    }
    for row in table:
        names = [name for name, _, _ in row["library"]]
        long = row["n"] >= registry.LONG_ROWS
        assert names == (["gtsv2"] if long else ["gtsvInterleavedBatch (LU)", "gtsvInterleavedBatch (QR)"]), row
        assert all(ratio == pytest.approx(us / row["ours_us"]) and ratio >= 1.0 for _, us, ratio in row["library"]), row
