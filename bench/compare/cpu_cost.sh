#!/usr/bin/env bash
# The CPU cost table of docs/performance.md ("CPU cost per byte") in one command: All-Reduce f32
# sum at 1 MiB and 64 MiB, Chorus and every peer side by side (run.sh's alternating rounds), on
# TCP loopback (N = 2, 4), on one host with each system's best intra-host transport (N = 2, 4)
# and on the emulated cluster at 1 Gbit/s (N = 2, 4, 8; needs root), all into one result
# directory, then the summary with its CPU-cost tables (busbw beside cpu_ns_per_byte, and the
# ratios chorus / best peer).
#
#   bench/compare/cpu_cost.sh BUILD_DIR
#
# Environment (defaults): RESULTS_DIR (bench/results/cpu-cost-<time>), ROUNDS (2), ITERS (10),
# WARMUP (2), RATE (1gbit), SETTINGS ("loopback host cluster"), NS ("2 4"), HOSTS ("2 4 8");
# everything else is passed to run.sh (e.g. TORCH=0, MPICH=0, GLOO_ALGOS).
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
export RESULTS_DIR=${RESULTS_DIR:-$repo/bench/results/cpu-cost-$(date +%Y%m%d-%H%M%S)}
export ROUNDS=${ROUNDS:-2} ITERS=${ITERS:-10} WARMUP=${WARMUP:-2} RATE=${RATE:-1gbit}
# 1 MiB and 64 MiB only: a step of 64 from 1 MiB.
export MIN_BYTES=1M MAX_BYTES=64M STEP=64
export NS=${NS:-"2 4"} HOSTS=${HOSTS:-"2 4 8"}
mkdir -p "$RESULTS_DIR" || exit 2
status=0
for setting in ${SETTINGS:-loopback host cluster}; do
  if [ "$setting" = cluster ] && [ "$(id -u)" != 0 ]; then
    echo "cpu_cost.sh: the cluster needs root; skipped" >&2
    continue
  fi
  echo "== $setting (log: $RESULTS_DIR/run-$setting.log)"
  SETTING=$setting "$here/run.sh" "$1" >"$RESULTS_DIR/run-$setting.log" 2>&1 || status=1
done
/usr/bin/python3 "$here/summarize.py" "$RESULTS_DIR" "$((1 << 20))" "$((64 << 20))" |
  tee "$RESULTS_DIR/summary.md"
echo "results: $RESULTS_DIR"
exit $status
