#!/usr/bin/env bash
# torch.distributed all_reduce from Python, the chorus backend against gloo, on one host: f32,
# MIN_BYTES..MAX_BYTES, N ranks each, the two backends alternating round by round in one run; and
# the binding's own cost: the same sizes through Chorus's C API (chorus-bench --api c).
#   bench/compare/torch_backend.sh build        # NS="2 4" ROUNDS=2, 8 B .. 64 MiB
# Results: $RESULTS_DIR/torch-n<N>-r<round>-<system>.json and a table on stdout
# (bench/compare/torch_backend_table.py).
set -euo pipefail
build=${1:?usage: torch_backend.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
NS=${NS:-"2 4"}
ROUNDS=${ROUNDS:-2}
MIN_BYTES=${MIN_BYTES:-8}
MAX_BYTES=${MAX_BYTES:-64M}
STEP=${STEP:-8}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
RESULTS_DIR=${RESULTS_DIR:-bench/results/torch-backend}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
PYTHON=${PYTHON:-/usr/bin/python3}
mkdir -p "$RESULTS_DIR"
run=$build/tools/chorus-run/chorus-run
common=(-b "$MIN_BYTES" -e "$MAX_BYTES" -f "$STEP" -n "$ITERS" -w "$WARMUP")

for n in $NS; do
  for round in $(seq 1 "$ROUNDS"); do
    for system in gloo chorus chorus-c; do
      out=$RESULTS_DIR/torch-n$n-r$round-$system
      echo "== n=$n round $round: $system (load $(cut -d' ' -f1 /proc/loadavg))"
      if [[ $system == chorus-c ]]; then
        timeout "$RUN_TIMEOUT" "$run" -n "$n" -- "$build/tools/chorus-bench/chorus-bench" \
          "${common[@]}" --api c --in-place 0 --json "$out.json" > "$out.log" 2>&1
      else
        store=$(mktemp -d)
        timeout "$RUN_TIMEOUT" "$run" -n "$n" -- env TORCH_BENCH_STORE_DIR="$store" \
          PYTHONPATH="$build/python" OMP_NUM_THREADS=1 "$PYTHON" "$here/torch_bench.py" \
          "${common[@]}" --backend "$system" --json "$out.json" > "$out.log" 2>&1
        rm -rf "$store"
      fi
      tail -n +5 "$out.log" | head -n 3
    done
  done
done
"$PYTHON" "$here/torch_backend_table.py" "$RESULTS_DIR"
