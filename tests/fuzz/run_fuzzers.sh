#!/usr/bin/env bash
# Runs every libFuzzer harness built in BUILD_DIR for SECONDS each, starting from the seed corpus
# (tests/fuzz/corpus/<harness>, read only) and writing new inputs and crashes under SCRATCH (not the
# repository). Prints one line per harness: executions, coverage (edges) and features.
#   tests/fuzz/run_fuzzers.sh BUILD_DIR SECONDS SCRATCH [HARNESS...]
# Exits 1 when any harness found a crash; the crashing inputs are in SCRATCH/crashes/.
set -uo pipefail

if (($# < 3)); then
  echo "usage: $0 BUILD_DIR SECONDS SCRATCH [HARNESS...]" >&2
  exit 2
fi
build=$1
seconds=$2
scratch=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
harnesses=("$@")
if ((${#harnesses[@]} == 0)); then
  harnesses=(frame_decoder hello handshake store_server store_server_keyed store_client tuning_file
    store_url options record)
fi

mkdir -p "$scratch/crashes"
failed=0
summary=()
for h in "${harnesses[@]}"; do
  bin=$build/${h}_fuzz
  if [[ ! -x $bin ]]; then
    echo "run_fuzzers: $bin is missing (build $build first)" >&2
    exit 2
  fi
  mkdir -p "$scratch/corpus/$h"
  log=$scratch/$h.log
  echo "== $h: ${seconds}s (log: $log)"
  # -timeout: an input that takes longer is a hang; -rss_limit_mb bounds memory per run.
  # The first corpus directory receives the new inputs; the seeds are only read.
  "$bin" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$scratch/crashes/$h-" "$scratch/corpus/$h" "$here/corpus/$h" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)
  verdict=ok
  if ((rc != 0)); then
    verdict="FOUND A CRASH (exit $rc), inputs: $scratch/crashes/$h-*"
    failed=1
  fi
  summary+=("$h: ${execs:-?} executions, ${cov:-no coverage line}, $verdict")
done
echo
echo "== summary (new inputs under $scratch/corpus)"
printf '%s\n' "${summary[@]}"
exit $failed
