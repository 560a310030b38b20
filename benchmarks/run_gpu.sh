#!/usr/bin/env bash
# All GPU measurements of the workbook, run on the lent GPU machine from the repo root:
#   bash benchmarks/run_gpu.sh STAGE...      (stages: scans kstep hierarchical table1 warp tridiag householder)
# Results go to $OUT (or benchmarks/out/); commit them under benchmarks/. See ../shared/specs/gpu.md.
set -euo pipefail
out=${OUT:-benchmarks/out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
for stage in "$@"; do
  case "$stage" in
    scans) python -m prefixsum bench --csv "$out/scan_throughput.csv" ;;
    kstep) python -m prefixsum bench --min-log2 20 --max-log2 24 --dtype float32 \
             --variant kstep:L=2 --variant kstep:L=3 --variant kstep:L=4 --variant kstep:L=8 \
             --variant kstep:L=16 --variant kstep:L=32 --variant kstep:L=64 --variant kstep:L=128 \
             --variant blelloch --variant ladder --csv "$out/kstep_L.csv" ;;
    *) python "benchmarks/$stage.py" --out "$out" ;;
  esac
done
