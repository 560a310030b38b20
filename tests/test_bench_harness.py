"""The benchmark harness (prefixsum.cli.bench) and benchmarks/run_gpu.sh, on the simulator.

The timings themselves need a GPU; what is proven here is what they rest on: the metadata, the
comparison every result passes before it is timed, the queueing logic of ``kernel_us`` (against a
model of a GPU), and that run_gpu.sh's stages exist and regenerate every committed result.
"""

import contextlib
import csv
import importlib.util
import pathlib
import re
import shlex
import subprocess
import time
import types

import numpy as np
import pytest

import prefixsum as ps
from prefixsum.cli import bench, metadata, timing
from prefixsum.core.poison import poison_value
from prefixsum.scans.testing import expected_scan, mismatches, random_input, wrong_indices

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RUN_GPU = (BENCHMARKS / "run_gpu.sh").read_text()


def test_run_metadata_names_the_device_driver_versions_date_and_command():
    meta = metadata.run_metadata(["torch", "jax"], command="python -m prefixsum bench --quick")
    assert list(meta) == [
        "device",
        "cc",
        "driver",
        "cuda",
        "cpu",
        "date",
        "python",
        "numpy",
        "numba",
        "numba_cuda",
        "torch",
        "jax",
        "command",
    ]
    assert meta["device"] == ps.device_info()["name"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", meta["date"])
    assert meta["numpy"] == np.__version__
    assert meta["command"] == "python -m prefixsum bench --quick"
    assert all(isinstance(value, str) and value for key, value in meta.items() if key not in ("cc", "cuda"))
    assert "cupy" not in metadata.run_metadata()


@pytest.mark.parametrize("dtype", ["int32", "float32"])
@pytest.mark.parametrize("wrong", ["poisoned", "off by one"])
def test_the_comparison_catches_one_wrong_element(dtype, wrong, rng):
    x = random_input(5000, "add", dtype, rng)
    result = np.cumsum(x, dtype=x.dtype)
    assert mismatches(result, x)[0].size == 0
    k = 1234
    if wrong == "poisoned":
        result[k] = poison_value(dtype)
    else:  # element k holds the sum up to k - 1: a kernel that skips an element
        result[k] = result[k - 1]
    expected, allowed = expected_scan(x)
    assert wrong_indices(result, expected, allowed).tolist() == [k]


def test_a_float32_sum_in_another_order_is_within_the_tolerance(rng):
    x = random_input(1 << 16, "add", np.float32, rng)
    tiles = x.reshape(-1, 256)
    # a tiled scan: each tile scanned in float32, the tile totals scanned, then added
    within = np.cumsum(tiles, axis=1, dtype=np.float32)
    carries = np.concatenate([[0], np.cumsum(within[:-1, -1], dtype=np.float32)]).astype(np.float32)
    result = (within + carries[:, None]).ravel()
    assert not np.array_equal(result, np.cumsum(x))  # rounded differently ...
    assert mismatches(result, x)[0].size == 0  # ... and accepted


def test_parse_variant():
    assert bench.parse_variant("ladder") == ("ladder", {})
    assert bench.parse_variant("kstep:L=4") == ("kstep", {"L": 4})
    assert bench.parse_variant("blelloch:conflict_free=False") == ("blelloch", {"conflict_free": False})
    assert bench.parse_variant("hierarchical:block_size=512,items_per_thread=8") == (
        "hierarchical",
        {"block_size": 512, "items_per_thread": 8},
    )
    assert bench.parse_variant("kstep:one_block=auto") == ("kstep", {"one_block": "auto"})


class _ModelGPU:
    """A GPU in host time: work queued on one stream runs in order, after whatever is queued."""

    def __init__(self):
        self.free_at = time.perf_counter()

    def queue(self, seconds):
        self.free_at = max(time.perf_counter(), self.free_at) + seconds

    def wait(self):
        time.sleep(max(0.0, self.free_at - time.perf_counter()))

    def event(self, timing=True):
        gpu = self

        class Event:
            def record(self, stream=0):
                self.at = max(time.perf_counter(), gpu.free_at)

            def query(self):
                return time.perf_counter() >= self.at

            def synchronize(self):
                time.sleep(max(0.0, self.at - time.perf_counter()))

            def elapsed_time(self, stop):
                return (stop.at - self.at) * 1e3

        return Event()


def _on_model(monkeypatch):
    gpu = _ModelGPU()
    monkeypatch.setattr(timing, "simulating", lambda: False)
    monkeypatch.setattr(timing, "_busy", lambda us, stream: gpu.queue(us / 1e6))
    monkeypatch.setattr(
        timing,
        "cuda",
        types.SimpleNamespace(
            default_stream=lambda: 0, synchronize=gpu.wait, event=gpu.event, defer_cleanup=contextlib.nullcontext
        ),
    )
    return gpu


def test_kernel_us_hides_the_host_time_of_the_launches(monkeypatch):
    gpu = _on_model(monkeypatch)

    def launch():  # 1 ms of host time to issue 100 us of GPU work
        time.sleep(1e-3)
        gpu.queue(100e-6)

    measured = timing.kernel_us(launch, repeats=5)
    assert measured.queued
    assert measured.us == pytest.approx(100, abs=5)


def test_kernel_us_times_a_launch_that_synchronises_without_queueing_and_says_so(monkeypatch):
    gpu = _on_model(monkeypatch)

    def launch():  # waits for the GPU (as a copy to the host does), then queues 100 us
        gpu.wait()
        time.sleep(1e-3)
        gpu.queue(100e-6)

    measured = timing.kernel_us(launch, repeats=5)
    assert not measured.queued
    assert measured.us > 1000


def test_calls_in_turn_take_every_order_so_that_no_call_always_follows_the_same_one(monkeypatch):
    """Each call costs 10 us more after "slow" (torch's round trip slowing ``tridiag.solve``): in a
    shuffled order each of the others follows it in some rounds, not in all, and each is timed
    ``repeats`` times; the same seed gives the same orders."""
    clock, log = [0.0], []
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])

    def call(name):
        def run():
            clock[0] += 100e-6 + (10e-6 if log and log[-1] == "slow" else 0)
            log.append(name)

        return run

    names = ["slow", "a", "b", "c"]
    times = timing.host_us_in_turn({name: call(name) for name in names}, warmup=0, repeats=40)
    rounds = [log[k : k + 4] for k in range(0, len(log), 4)]
    assert len(rounds) == 40 and all(sorted(r) == sorted(names) for r in rounds)
    after_slow = {name: sum(1 for x, y in zip(log, log[1:]) if x == "slow" and y == name) for name in names[1:]}
    assert all(5 <= count <= 25 for count in after_slow.values()), after_slow  # 13 each, on average
    assert all(times[name] == pytest.approx(100) for name in names)  # the median of each: not after "slow"
    first = list(log)
    log.clear()
    timing.host_us_in_turn({name: call(name) for name in names}, warmup=0, repeats=40)
    assert log == first


def test_on_the_simulator_a_launch_that_just_ran_is_not_launched_again_for_a_time(monkeypatch):
    """A quick run on the simulator tests the script: one call of each timed thing, none for a
    kernel that ran for its check (``ran=True``), whose time the simulator would not keep."""
    monkeypatch.setattr(timing, "simulating", lambda: True)
    launched = []
    assert np.isnan(timing.kernel_us(lambda: launched.append("timed")).us)
    assert np.isnan(timing.kernel_us(lambda: launched.append("ran"), ran=True).us)
    assert np.isnan(timing.kernel_us_each({"ran": lambda: launched.append("ran")}, ran=True)["ran"].us)
    assert launched == ["timed"]
    if ps.device_info()["simulator"]:
        assert (timing.QUICK_REPEATS, timing.HOST_WARMUP) == (1, 0)


def test_the_busy_kernel_compiles_for_a_gpu(ptx_compiler):
    from prefixsum import ptx

    assert ptx.compiles_in_child(timing._spin, "void(int64)") == (True, "ok")


# run_gpu.sh


def _stages():
    """``{stage: [its outputs]}`` from run_gpu.sh's STAGES and OUTPUTS."""
    names = re.search(r"^STAGES=\(([^)]*)\)", RUN_GPU, re.M).group(1).split()
    outputs = dict(re.findall(r'^\s+\[(\w+)\]="([^"]*)"', RUN_GPU, re.M))
    assert sorted(names) == sorted(outputs), "STAGES and OUTPUTS must name the same stages"
    return {name: outputs[name].split() for name in names}


def _stage_body(stage):
    return re.search(rf"^stage_{stage}\(\) \{{\n(.*?)^\}}", RUN_GPU, re.M | re.S).group(1)


def _bench_args(stage):
    """The arguments of the ``python -m prefixsum bench`` command of ``stage``."""
    words = shlex.split(_stage_body(stage).replace("\\\n", " "))
    start = words.index("bench") + 1
    return [w for w in words[start:] if w != "$quick_flag"]


def test_every_stage_has_its_function_and_its_scripts_exist():
    stages = _stages()
    assert set(re.findall(r"^stage_(\w+)\(\)", RUN_GPU, re.M)) == set(stages)
    for stage in stages:
        body = _stage_body(stage)
        scripts = re.findall(r"benchmarks/(\w+\.py)", body)
        assert scripts or '"$python" -m prefixsum bench' in body, stage
        for script in scripts:
            assert (BENCHMARKS / script).is_file(), f"stage {stage} runs benchmarks/{script}, which does not exist"


def test_an_unknown_stage_is_refused_before_anything_runs(tmp_path):
    run = subprocess.run(
        ["bash", str(BENCHMARKS / "run_gpu.sh"), "scans", "nosuchstage"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "unknown stage 'nosuchstage'" in run.stderr
    assert not any(tmp_path.iterdir())


def test_every_committed_result_is_written_by_a_stage():
    committed = {p.name for p in BENCHMARKS.iterdir() if p.suffix in (".csv", ".json", ".txt")}
    listed = [name for outputs in _stages().values() for name in outputs]
    assert len(listed) == len(set(listed)), "two stages write the same file"
    assert committed == set(listed)


def _rows(name):
    with open(BENCHMARKS / name, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("stage", ["scans", "kstep", "hierarchical"])
def test_each_bench_stage_produces_every_committed_row(stage):
    (csv_name,) = _stages()[stage]
    args = bench.parser().parse_args(_bench_args(stage))
    assert args.csv == f"$out/{csv_name}"
    for variant in args.variant:
        name, options = bench.parse_variant(variant)
        ps.ALGORITHMS[name].resolve_options(options)
    first = args.variant[0]
    names = [
        "copy",
        *args.variant,
        "torch.cumsum",
        "torch copy",
        "cupy.cumsum",
        f"ps.scan({first}) call",
        f"ps.scan({first}) call on numpy",
    ]
    planned = {
        (name, dtype, 1 << k) for name in names for dtype in args.dtype for k in range(args.min_log2, args.max_log2 + 1)
    }
    committed = {(row["variant"], row["dtype"], int(row["n"])) for row in _rows(csv_name)}
    assert committed <= planned, sorted(committed - planned)[:5]


def _script(name):
    spec = importlib.util.spec_from_file_location(f"_benchmark_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table1_stage_produces_every_committed_row():
    table1 = _script("table1")
    assert [int(row["n"]) for row in _rows("table1.csv")] == [n for _, n, *_ in table1.PAPER]
    sizes = table1.sweep_sizes(table1.PAPER)
    assert {(r["dtype"], int(r["n"])) for r in _rows("dtypes.csv")} == {(d.name, n) for d in ps.DTYPES for n in sizes}
    assert {(r["op"], int(r["n"])) for r in _rows("operators.csv")} == {(op, n) for op in ps.OPS for n in sizes}


def test_the_tridiag_and_householder_stages_produce_every_committed_case(monkeypatch):
    for variable in ("XLA_PYTHON_CLIENT_PREALLOCATE", "JAX_ENABLE_X64"):  # tridiag.py sets them for JAX
        monkeypatch.setenv(variable, "")
    script, families = _script("tridiag"), _script("tridiag_systems").FAMILIES
    for name, expected in (
        ("tridiag", script.CASES + script.PIVOTING_CASES),
        ("householder", _script("householder").CASES),
    ):
        cases = {(int(row["batch"]), int(row["n"])) for row in _rows(f"{name}.csv")}
        assert cases == set(expected), name
    calls = {(int(row["batch"]), int(row["n"])) for row in _rows("householder_calls.csv")}
    assert calls == set(_script("householder").CALL_CASES)
    labels = {
        variant[0]
        for method in script.KERNEL_METHODS
        for shape in script.CASES + script.PIVOTING_CASES
        for dtype in ("float32", "float64")
        for family in families
        for variant in script.variants(method, shape, dtype, family, sweep=True)
    }
    rows = _rows("tridiag.csv")
    assert {row["family"] for row in rows} == set(families)
    methods = {row["method"] for row in rows} - set(script.RETIRED)  # rows of variants no longer run
    assert methods == labels | set(_script("tridiag_cusparse").BASELINES) | {"jax tridiagonal_solve"}


def test_python_m_prefixsum_bench_is_still_a_command(capsys):
    from prefixsum.cli.main import main

    with pytest.raises(SystemExit) as stop:
        main(["bench", "--help"])
    assert stop.value.code == 0
    assert "--quick" in capsys.readouterr().out


def test_bench_refuses_the_simulator_without_quick():
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        bench.main(["--max-log2", "10"])


def test_cubs_version_is_read_from_the_headers_of_cuda_cccl(tmp_path, monkeypatch):
    """Issue 45: every CSV with CUB's rows names CUB's version (column ``cub``), "absent" without cuda-cccl."""
    import importlib.metadata

    header = tmp_path / "headers" / "include" / "cub" / "version.cuh"
    header.parent.mkdir(parents=True)
    header.write_text("#define CUB_VERSION 300600 // MMMmmmpp\n")
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.2.1")
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: types.SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    )
    assert metadata.cub_version() == "3.6.0 (cuda-cccl 1.2.1)"
    monkeypatch.undo()

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert metadata.cub_version() == "absent"


def test_kernel_us_each_times_nothing_on_the_simulator_but_runs_every_launch():
    from prefixsum.cli.timing import kernel_us_each

    ran = []
    found = kernel_us_each({"a": lambda: ran.append("a"), "b": lambda: ran.append("b")}, repeats=3)
    assert ran == ["a", "b"] and set(found) == {"a", "b"} and all(np.isnan(t.us) for t in found.values())


SOURCE_PAGE = """==PROF== Connected to process 1
"Kernel Name","digit_pass[abi:v1](Array<unsigned int>)"
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"
"0x10","LDG.E.64.STRONG.GPU R28, desc[UR6][R38.64]","3","400"
"0x20","ISETP.LT.U32.AND P0, PT, R29, UR4, PT","90","400"
"0x30","@P0 BRA 0x10","5","400"
"0x40","VOTE.ANY R1, PT, P0","2","100"
"0x50","LOP3.LUT R9, R9, 0x80000000, RZ, 0xc0, !PT","0","100"
"0x60","STG.E [R2.64], R9","0","100"
"0x70","EXIT","0","100"
"Kernel Name","Onesweep(int)"
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"
"0x10","LDS R1, [R2]","1","1,000"
"""


def test_sass_stalls_finds_the_poll_loop_where_the_samples_fell(tmp_path, capsys):
    """stage sort_sass's summary, on a made-up source page of two kernels: samples by opcode beside
    their share of the instructions, instructions a key, and the instruction that ran four times a
    warp (100 warps, the commonest count) named first with its runs."""
    page = tmp_path / "page.csv"
    page.write_text(SOURCE_PAGE)
    stalls = _script("sass_stalls")
    (name, rows), (other, _) = stalls.kernels(page.read_text())
    assert (name, other, len(rows)) == ("digit_pass[abi:v1](Array<unsigned int>)", "Onesweep(int)", 7)
    lines = stalls.summary(name, rows, keys=3200, top=2)
    assert lines[0] == "## digit_pass" and "warp instructions executed: 1,600; stall samples: 100" in lines[1]
    assert lines[2].endswith(": 16.0")  # 32 * 1600 warp instructions / 3200 keys
    assert lines[4].split() == ["ISETP", "90.0", "%", "25.0", "%"]  # 400 of 1600 instructions
    assert "taking 100 warps" in lines[6]
    assert lines[7].split()[:4] == ["90.0", "%", "runs", "4.00"] and "ISETP.LT.U32" in lines[7]
    assert stalls.opcode("@!P0 BRA 0x10") == "BRA"
    assert stalls.main([str(page), "--keys", "3200", "--metadata"]) == 0
    assert capsys.readouterr().out.startswith("# device ")
    (tmp_path / "empty.csv").write_text("==PROF== nothing profiled\n")
    with pytest.raises(SystemExit, match="no kernel in it"):
        stalls.main([str(tmp_path / "empty.csv")])
