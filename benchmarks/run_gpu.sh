#!/usr/bin/env bash
# Every measurement of the workbook, run from the repo root (benchmarks/README.md lists the stages):
#   bash benchmarks/run_gpu.sh [STAGE...]      no STAGE: all of them, in the order of STAGES below
#   QUICK=1 bash benchmarks/run_gpu.sh ...     tiny sizes, 2 repeats (1 on the simulator): tests the scripts
# Results go to $OUT (or benchmarks/out/); copy them into benchmarks/ to commit them. A stage that
# fails (a wrong result, a missing output) is reported and the next one runs; the exit status is
# then 1. Each GPU stage fits well within the GPU machine's 10 minutes a command (generous
# estimates for an H100 beside each, imports and compiling included); all GPU stages together take
# about 17 minutes, so run them in three commands: "scans kstep" (5 min), "hierarchical table1"
# (5 min), "tridiag householder warp" (7 min), each bringing back at most 5 files. sim_speed runs
# on any CPU. The GPU machine reaches no package index: benchmarks/device_wheels.sh fetches its wheels.
set -euo pipefail

# Each stage and the files it writes under $out: every committed result in benchmarks/ is one of
# these (tests/test_bench_harness.py checks both ways), and each stage must write all of its own.
STAGES=(notebooks scans kstep hierarchical table1 tridiag tridiag_jax householder householder_calls warp sanitize sanitize_tridiag sanitize_block tridiag_ncu lookback cub_tuning lookback_tiles lookback_ncu sanitize_lookback sanitize_sort applications compaction_tiles onesweep_tiles user_ops user_ops_speed sanitize_apps sanitize_user_ops blocks sim_speed grading transfers transfers_tune transfers_timeline transfers_tridiag host_copies scan_calls sort_calls sort_sass)
declare -A OUTPUTS=(
  [notebooks]="nbval_gpu.txt"
  [scans]="scan_throughput.csv"
  [kstep]="kstep_L.csv"
  [hierarchical]="hierarchical_bench.csv"
  [table1]="table1.csv dtypes.csv operators.csv"
  [tridiag]="tridiag.csv"
  [tridiag_jax]="tridiag_jax.csv"
  [householder]="householder.csv"
  [householder_calls]="householder_calls.csv"
  [warp]="warp_semantics_gpu.json warp_semantics_sim.json warp_semantics_compare.txt"
  [sanitize]="sanitize.txt"
  [sanitize_tridiag]="sanitize_tridiag.txt"
  [sanitize_block]="sanitize_block.txt"
  [lookback]="lookback.csv"
  [cub_tuning]="cub_tuning.csv scan_tiles.csv cub_ncu.txt"
  [sanitize_sort]="sanitize_sort.txt"
  [lookback_tiles]="lookback_tiles.csv"
  [lookback_ncu]="lookback_ncu.txt"
  [tridiag_ncu]="tridiag_ncu.txt"
  [sanitize_lookback]="sanitize_lookback.txt"
  [applications]="applications.csv"
  [compaction_tiles]="compaction_tiles.csv"
  [onesweep_tiles]="onesweep_tiles.csv onesweep_profile.txt"
  [user_ops]="user_ops_gpu.txt"
  [user_ops_speed]="user_ops_speed.csv"
  [sanitize_apps]="sanitize_apps.txt"
  [sanitize_user_ops]="sanitize_user_ops.txt"
  [blocks]="blocks_gpu.csv"
  [grading]="grading.csv"
  [sim_speed]="sim_speed.csv"
  [transfers]="transfers.csv"
  [transfers_tune]="transfers_tune.csv"
  [transfers_timeline]="transfers_timeline.csv"
  [transfers_tridiag]="transfers_tridiag.csv"
  [host_copies]="host_copies.csv"
  [scan_calls]="scan_calls.csv scan_calls_profile.txt"
  [sort_calls]="sort_call_profile.txt"
  [sort_sass]="sort_sass.txt"
)

repo=$(pwd)
# Whether this is a quick run on the simulator: a stage that needs a GPU's own tools (CUPTI, JAX)
# then writes a note instead of its file.
quick_on_simulator() {
  [[ -n ${QUICK:-} ]] && "$python" -c "import sys, prefixsum; sys.exit(not prefixsum.device_info()['simulator'])" 2>/dev/null
}
out=${OUT:-benchmarks/out}
python=${PYTHON:-python3}  # on the GPU machine, python3 is the interpreter that holds torch
quick_flag=${QUICK:+--quick}
export PYTHONUNBUFFERED=1 NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0

# GPU, about 5 minutes on 16 cores: every notebook under nbval on the GPU, then every chapter's
# students' version executed there (benchmarks/notebooks_gpu.py). nbval and its Jupyter kernel are
# not on the GPU machine: benchmarks/device_wheels.sh --nbval downloads their wheels here into
# .whl/ (carry it), and this stage installs them there when they are missing.
stage_notebooks() {
  if ! "$python" -c "import nbval, ipykernel, nbclient" 2>/dev/null; then
    [[ -d $repo/.whl ]] || { echo "stage notebooks needs nbval: run benchmarks/device_wheels.sh --nbval and carry .whl" >&2; return 1; }
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/nbval-site "$repo"/.whl/*.whl &&
      export PYTHONPATH=/tmp/nbval-site${PYTHONPATH:+:$PYTHONPATH}
  fi
  "$python" benchmarks/notebooks_gpu.py $quick_flag --out "$out/nbval_gpu.txt"
}

# GPU, about 3 minutes: every registered scan and Blelloch without padding, beside copy,
# torch.cumsum and cupy.cumsum, 2^10..2^26, float32 and int32.
stage_scans() {
  "$python" -m prefixsum bench $quick_flag --min-log2 10 --max-log2 26 --dtype float32 --dtype int32 \
    --variant ladder --variant folding --variant hillis_steele --variant blelloch \
    --variant blelloch:conflict_free=False --variant kstep --variant hierarchical \
    --csv "$out/scan_throughput.csv"
}

# GPU, about 2 minutes: the k-step scan's L sweep, 2^10..2^26, float32.
stage_kstep() {
  "$python" -m prefixsum bench $quick_flag --min-log2 10 --max-log2 26 --dtype float32 \
    --variant kstep:L=2 --variant kstep:L=4 --variant kstep:L=8 --variant kstep:L=16 \
    --variant kstep:L=32 --variant kstep:L=64 --variant kstep:L=128 \
    --csv "$out/kstep_L.csv"
}

# GPU, about 4 minutes (the checks and the whole calls on numpy arrays of 2^27 and 2^28 take most
# of it): the hierarchical scan and two other tile shapes, 2^20..2^28, float32 and int32.
stage_hierarchical() {
  "$python" -m prefixsum bench $quick_flag --min-log2 20 --max-log2 28 --dtype float32 --dtype int32 \
    --variant hierarchical --variant hierarchical:block_size=512,items_per_thread=8 \
    --variant hierarchical:items_per_thread=16 \
    --csv "$out/hierarchical_bench.csv"
}

# GPU, about 1 minute: Table 1 of Lungu, Petrosanu and Pirjan (2011) and its dtype and operator sweeps.
stage_table1() {
  "$python" benchmarks/table1.py $quick_flag --out "$out"
}

# GPU, about 6 minutes (not timed since issue 44 added the indefinite family; the pivoting
# comparison alone, --only-pivoting --sweep, took 3.7 minutes on an H100): PCR, CR, Thomas, the
# hybrid, pivoting and auto on dominant and indefinite systems against cuSPARSE's five solvers and
# JAX, nine shapes.
stage_tridiag() {
  "$python" benchmarks/tridiag.py $quick_flag --out "$out"
}

# GPU, about 2 minutes: Nsight Compute on the hybrid's kernels and cuSPARSE's gtsv2StridedBatch
# (two solves each, the first warming up) on the shapes where the hybrid's device time was above
# cuSPARSE's (issue 29: what limits it there); the clocks left as they are.
stage_tridiag_ncu() {
  if [[ -n $quick_flag ]]; then
    echo "quick: no Nsight Compute" > "$out/tridiag_ncu.txt"
    return
  fi
  local batch n dtype
  while read -r batch n dtype; do
    echo "### batch $batch x n $n, $dtype"
    ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
      --section LaunchStats --section WarpStateStats --section SchedulerStats \
      "$python" benchmarks/tridiag_ncu.py --batch "$batch" --n "$n" --dtype "$dtype" || return
  done > "$out/tridiag_ncu.txt" 2>&1 <<'SHAPES'
100 1000 float32
100 1000 float64
7 100000 float32
64 8192 float32
SHAPES
}

# GPU, about a minute: which cuSPARSE routine JAX's tridiagonal_solve runs per shape (by kernel
# name), and its kernels by CUPTI beside that routine's.
stage_tridiag_jax() {
  if quick_on_simulator; then
    echo "quick: no JAX, CuPy or CUPTI on the simulator" > "$out/tridiag_jax.csv"
    return
  fi
  "$python" benchmarks/tridiag.py $quick_flag --jax-kernels --out "$out"
}

# GPU, about 4 minutes (torch.linalg.eigh takes 7 s a call at 10,000 x 64, 8 calls per dtype):
# Householder reductions and symmetric solves against PyTorch.
stage_householder() {
  "$python" benchmarks/householder.py $quick_flag --out "$out"
}

# GPU, under a minute: what a Householder call or a symmetric solve costs beyond its kernels,
# from device arrays and from numpy arrays.
stage_householder_calls() {
  "$python" benchmarks/householder.py $quick_flag --calls --out "$out"
}

# GPU, about a minute: the warp-level calls on the GPU, then on the simulator (on this machine's
# CPU), and the comparison of the two.
stage_warp() {
  if [[ -z $quick_flag ]] && ! "$python" -c "import sys, prefixsum; sys.exit(prefixsum.device_info()['simulator'])" 2>/dev/null; then
    echo "stage warp needs a CUDA GPU for warp_semantics_gpu.json (QUICK=1 runs it on the simulator)" >&2
    return 1
  fi
  "$python" benchmarks/warp_semantics.py --out "$out/warp_semantics_gpu.json" &&
    NUMBA_ENABLE_CUDASIM=1 "$python" benchmarks/warp_semantics.py --out "$out/warp_semantics_sim.json" &&
    (cd "$out" && "$python" "$repo/benchmarks/warp_semantics.py" --compare warp_semantics_sim.json warp_semantics_gpu.json) |
    tee "$out/warp_semantics_compare.txt"
}

# GPU, about 4 minutes: every registered scan (every op, float32 and float64, with NaN) under
# compute-sanitizer's memcheck, racecheck, synccheck and initcheck, the four tools side by side;
# sanitize.txt keeps each tool's error summary and the script's verdict (the full logs stay in $out). QUICK=1 runs the script
# on the simulator without a sanitizer.
stage_sanitize() {
  sanitize sanitize benchmarks/sanitize.py
}

# GPU, about 3.5 minutes (H100, 2026-12-07): the single-pass scan against CUB (cuda.compute), torch.cumsum and a copy,
# kernels at 2^16..2^28 in four dtypes and whole calls on device and numpy arrays
# (benchmarks/lookback.py). CUB's rows need cuda-cccl (benchmarks/device_wheels.sh fetches its
# wheel; carry .whl); without it they are left out with a note.
stage_lookback() {
  "$python" benchmarks/lookback.py $quick_flag --out "$out"
}

# GPU, about 3 minutes: "lookback" in five tile shapes and the onesweep sort's variants beside
# CUB's scan and radix sort, 2^12..2^28 (benchmarks/cub_tuning.py; scan_tiles.csv, the table the
# package reads its tile per element size and length from, comes from its scan part), then
# Nsight Compute on one launch each of lookback and CUB's scan (float64, 2^24) and of the sort's
# passes, ours and CUB's (uint32, 2^24), the summary sections as text.
stage_cub_tuning() {
  "$python" benchmarks/cub_tuning.py $quick_flag --out "$out" || return
  if [[ -n $quick_flag ]]; then
    echo "quick: no Nsight Compute" > "$out/cub_ncu.txt"
    return
  fi
  ncu --clock-control none --kernel-name-base mangled -k regex:'lookback|DeviceScanKernel|digit_pass|Onesweep' -c 14 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    "$python" benchmarks/cub_tuning.py --profile > "$out/cub_ncu.txt" 2>&1
}

# GPU, about 2 minutes: "lookback" at eight tile shapes against torch.cumsum, float32 and float64,
# 2^24..2^28, CUPTI (the table its tile shape per element size is chosen from).
stage_lookback_tiles() {
  "$python" benchmarks/lookback_tiles.py $quick_flag --out "$out"
}

# GPU, about a minute: the sanitize stage for "lookback" alone, into sanitize_lookback.txt.
stage_sanitize_lookback() {
  sanitize sanitize_lookback benchmarks/sanitize.py --algorithm lookback
}

# GPU, about 6 minutes (H100, 2026-12-07: 340 s, cupyx's spline build alone 100 s): chapter 11's compaction, radix sort and splines against CUB (cuda.compute),
# torch, CuPy and scipy (benchmarks/applications.py).
stage_applications() {
  "$python" benchmarks/applications.py $quick_flag --out "$out"
}

# GPU, about 40 seconds: the one-pass compaction in five tile shapes beside torch's x[mask], 2^20..2^26
# float32 and float64 (benchmarks/compaction_tiles.py), which chose apps.selection's tiles.
stage_compaction_tiles() {
  "$python" benchmarks/compaction_tiles.py $quick_flag --out "$out"
}

# GPU, about 2 minutes: the onesweep sort's tile shapes and look-back windows by CUPTI at 2^22 and
# 2^24 (benchmarks/onesweep_tiles.py), then Nsight Compute's view of its digit passes at 2^24 (the
# summary sections only, as text) and a cProfile of the host side of whole calls at 2^20.
# GPU, about 2 minutes: Nsight Compute on one launch each of "lookback" and torch.cumsum (CUB) at
# 2^24, per dtype (issue 29: what limits the look-back scan there); the clocks left as they are.
stage_lookback_ncu() {
  if [[ -n $quick_flag ]]; then
    "$python" benchmarks/lookback_ncu.py --log2 12 --dtype float32 > "$out/lookback_ncu.txt"
    return
  fi
  local dtype
  for dtype in float32 int32 float64 int64; do
    ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
      --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
      --kernel-name-base mangled -k regex:'lookback|DeviceScanKernel' -c 2 "$python" benchmarks/lookback_ncu.py --log2 24 --dtype "$dtype" || return
  done > "$out/lookback_ncu.txt" 2>&1
}

stage_onesweep_tiles() {
  "$python" benchmarks/onesweep_tiles.py $quick_flag --out "$out" || return
  if [[ -n $quick_flag ]]; then
    echo "quick: no Nsight Compute" > "$out/onesweep_profile.txt"
    return
  fi
  ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis -k regex:'digit_pass|histogram' -c 3 \
    "$python" benchmarks/onesweep_tiles.py --profile > "$out/onesweep_profile.txt" 2>&1 &&
    "$python" benchmarks/onesweep_tiles.py --host-profile >> "$out/onesweep_profile.txt" 2>&1
}

# GPU, about a minute: Nsight Compute's source page (SASS) of one digit pass of our onesweep sort
# and one of CUB's (uint32 keys, 2^24, cub_tuning.py --profile's calls), summarized by
# benchmarks/sass_stalls.py: instructions per key, stall samples by opcode and where most fell
# (issue 45: what bounds the sort). The raw pages (2 MB each) are not kept.
stage_sort_sass() {
  if [[ -n $quick_flag ]]; then
    echo "quick: no Nsight Compute" > "$out/sort_sass.txt"
    return
  fi
  local pages kernel
  pages=$(mktemp -d)
  for kernel in digit_pass Onesweep; do
    ncu --clock-control none --kernel-name-base mangled -k regex:"$kernel" -c 1 --section SourceCounters \
      --page source --print-source sass --csv "$python" benchmarks/cub_tuning.py --profile > "$pages/$kernel.csv" || return
  done
  "$python" benchmarks/sass_stalls.py --metadata --keys 16777216 "$pages/digit_pass.csv" "$pages/Onesweep.csv" > "$out/sort_sass.txt"
}

# GPU, about a minute: every algorithm that carries a user operator, at 2^20 elements, on numba
# and CuPy arrays, checked against sequential loops (benchmarks/user_ops_gpu.py).
stage_user_ops() {
  "$python" benchmarks/user_ops_gpu.py $quick_flag --out "$out"
}

# GPU, about a minute: ps.scan((a, b), affine) and apps.segmented_scan against torch's formulations,
# and the built-in add at 2^24 against torch.cumsum, CUPTI (benchmarks/user_ops_speed.py).
stage_user_ops_speed() {
  "$python" benchmarks/user_ops_speed.py $quick_flag --out "$out"
}

# GPU, about a minute: user operators and chapter 11's applications under the four tools of
# compute-sanitizer (benchmarks/sanitize_apps.py), as stage sanitize does for the scans.
stage_sanitize_apps() {
  sanitize sanitize_apps benchmarks/sanitize_apps.py
}

# GPU, about two minutes: the sanitize_apps stage for the kernels of issue 30 alone (user operators
# on every carrier, lookback and hierarchical from their one source; the segmented scan's four
# one-pass variants), into sanitize_user_ops.txt.
stage_sanitize_user_ops() {
  sanitize sanitize_user_ops benchmarks/sanitize_apps.py --parts user_ops,segmented
}

# GPU, about a minute: the onesweep sort (every key width, values, NaNs, the rank by ballots) under
# the four tools of compute-sanitizer (sanitize_apps.py's part "sort"), into sanitize_sort.txt.
stage_sanitize_sort() {
  sanitize sanitize_sort benchmarks/sanitize_apps.py --parts sort
}

# sanitize NAME SCRIPT [ARGS...]: SCRIPT ARGS under the four tools, their summaries in NAME.txt.
sanitize() {
  local name=$1 script=$2 tool pids=() status=0
  shift 2
  if [[ -n $quick_flag ]]; then
    { echo "quick: no compute-sanitizer"; "$python" "$script" --quick "$@" | tail -n 1; } > "$out/$name.txt"
    return
  fi
  # --report-api-errors no: cuda-python probes driver entry points with cuGetProcAddress, which
  # memcheck counts as 34 "errors" (host API calls returning CUDA_ERROR_INVALID_VALUE, none a
  # kernel's); errors in kernels are still reported and counted.
  for tool in memcheck racecheck synccheck initcheck; do
    compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 1 "$python" "$script" "$@" > "$out/${name}_$tool.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  for tool in memcheck racecheck synccheck initcheck; do
    grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY|calls checked|^all results|WRONG' "$out/${name}_$tool.log" | sed "s/^/$tool: /"
  done > "$out/$name.txt"
  cat "$out/$name.txt"
  return $status
}

# GPU, about 2 minutes: ps.scan(numpy), its copies overlapped with the scan, against torch's and
# CuPy's numpy -> GPU -> numpy round trips, 2^20..2^28, float32 and int32 (benchmarks/transfers.py).
stage_transfers() {
  "$python" benchmarks/transfers.py $quick_flag --out "$out"
}

# GPU, about a minute: ps.scan(numpy) at five chunkings and two numbers of copy threads beside
# the plain way and torch's round trip, 2^19..2^22 and 2^24 float32 (the table
# prefixsum.scans.transfers' defaults come from).
stage_transfers_tune() {
  "$python" benchmarks/transfers.py $quick_flag --tune --out "$out"
}

# GPU, seconds: one ps.scan(numpy) of 2^24 float32 traced by CUPTI, copies and kernels with their
# streams and times (chapter 09's timeline). Needs torch: no quick run on the simulator.
stage_transfers_timeline() {
  if quick_on_simulator; then
    echo "quick: no CUPTI timeline on the simulator" > "$out/transfers_timeline.csv"
    return
  fi
  "$python" benchmarks/transfers.py --timeline --out "$out"
}

# GPU, under a minute: tridiag.solve(numpy), its copies overlapped with the solves, against torch's
# round trip through cuSPARSE's gtsv2StridedBatch, six batch shapes, float32 and float64, beside
# the plain way with the inputs copied from pageable memory and packed in pieces of 32 and 8 MiB,
# and 2 and 4 chunks each way (the table prefixsum.tridiag.transfers' defaults come from).
stage_transfers_tridiag() {
  "$python" benchmarks/transfers.py $quick_flag --tridiag --out "$out"
}

# GPU, under a minute: one array to the device from pageable memory, from page-locked memory,
# packed into page-locked memory on 1-8 threads, through overlap.send_packed, and by torch.
stage_host_copies() {
  "$python" benchmarks/host_copies.py $quick_flag --out "$out"
}

# GPU, under a minute: whole ps.scan calls on device arrays against torch.cumsum, their parts, and
# cProfile's view of a call (benchmarks/scan_calls.py).
stage_scan_calls() {
  "$python" benchmarks/scan_calls.py $quick_flag --parts --out "$out"
}

# GPU, under a minute: whole apps.radix_sort calls on device arrays, keys alone and with values, and
# cProfile's view of each (benchmarks/sort_call_profile.py): where a whole call's host time goes.
stage_sort_calls() {
  "$python" benchmarks/sort_call_profile.py $quick_flag > "$out/sort_call_profile.txt"
}

# GPU, about 10 seconds: the chained scans of prefixsum.mutants (blocks that talk to each other),
# correct and broken, on 16,384 blocks; the ones that would hang give up after bounded polls.
stage_blocks() {
  "$python" benchmarks/blocks_gpu.py $quick_flag --out "$out"
}

# GPU, several minutes (not timed since issue 44; under the four tools at once, the quick pivoting
# part alone did not finish in a minute on an H100): the tridiagonal solvers (the hybrid, the
# pivoting solver's every path and chunk length, auto's routing) and the Householder kernels under
# the four tools of compute-sanitizer, as stage sanitize does for the scans.
stage_sanitize_tridiag() {
  sanitize sanitize_tridiag benchmarks/sanitize_tridiag.py
}

# GPU, under a minute: the sanitize_tridiag stage for the hybrid's paths alone (the warp and block
# solvers, the partition method, hybrid_shared; issue 29's block solver), into sanitize_block.txt.
stage_sanitize_block() {
  sanitize sanitize_block benchmarks/sanitize_tridiag.py --only-hybrid
}

# CPU only (no GPU used), about 8 minutes on two cores: the grader on 40 mixed submissions of
# chapter 01 with --workers 2 (benchmarks/grading.py; it records the machine's load beside the times);
# quick: a right answer, a wrong one and a corrupt file.
stage_grading() {
  "$python" benchmarks/grading.py $quick_flag --out "$out/grading.csv"
}

# CPU only (no GPU used), about a minute on two cores: prefixsum's simulator against numba's.
stage_sim_speed() {
  NUMBA_ENABLE_CUDASIM=1 "$python" benchmarks/sim_speed.py $quick_flag --out "$out"
}

for stage in "$@"; do
  if [[ -z ${OUTPUTS[$stage]+set} ]]; then
    echo "unknown stage '$stage'; the stages are: ${STAGES[*]}" >&2
    exit 2
  fi
done
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || echo "no nvidia-smi here: GPU stages need QUICK=1"
(( $# )) || set -- "${STAGES[@]}"
failed=()
for stage in "$@"; do
  echo "=== stage $stage${quick_flag:+ (quick)}"
  for file in ${OUTPUTS[$stage]}; do
    rm -f "$out/$file"
  done
  SECONDS=0
  status=0
  "stage_$stage" || status=$?
  for file in ${OUTPUTS[$stage]}; do
    [[ -s $out/$file ]] || { echo "stage $stage did not write $out/$file" >&2; status=1; }
  done
  echo "=== stage $stage: ${SECONDS} s, $([[ $status == 0 ]] && echo ok || echo "FAILED (status $status)")"
  [[ $status == 0 ]] || failed+=("$stage")
done
if (( ${#failed[@]} )); then
  echo "failed stages: ${failed[*]}" >&2
  exit 1
fi
