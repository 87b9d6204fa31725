#!/usr/bin/env bash
# Every all-reduce algorithm forced in turn, and the automatic choice, on the emulated cluster
# (one rank per host), in one run: the data behind "auto within 10% of the best forced algorithm"
# and behind chorus-sim's validation. Then a table (bench/compare/algo_table.py).
#
#   bench/compare/algo_sweep.sh [BUILD]
#
# Environment: NS (world sizes; default "2 4 8"), ALGOS (default "auto ring rd rhd tree oneshot
# twoshot"), RATE (1gbit), MIN (8), MAX (256M), FACTOR (4), ITERS (3), WARMUP (1),
# TUNING (a CHORUS_TUNING_FILE for every rank; default none: built-in constants), CALIBRATE=1
# (instead: chorus-bench --calibrate on the N ranks first, into tuning-nN.txt, used for that N),
# PEERS (a bench/compare/run.sh result dir of SETTING=cluster at the same rate, for the auto /
# best peer column), OUT (result dir). Needs root (scripts/cluster); the cluster is taken down at the end.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
ns=${NS:-2 4 8}
algos=${ALGOS:-auto ring rd rhd tree oneshot twoshot}
rate=${RATE:-1gbit}
out=${OUT:-$repo/build-compare/algos-$rate-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
export CHORUS_CLUSTER_PREFIX=${CHORUS_CLUSTER_PREFIX:-algo} CHORUS_BUILD_DIR=$build
trap '"$repo/scripts/cluster" down >/dev/null 2>&1 || true' EXIT

tuning_env=()
if [[ -n ${TUNING:-} ]]; then
  cp "$TUNING" "$out/tuning.txt"
  tuning_env=(env CHORUS_TUNING_FILE="$out/tuning.txt")
fi
echo "# algo_sweep: rate $rate, N = $ns, algorithms $algos, ${MIN:-8}..${MAX:-256M} x${FACTOR:-4}," \
  "iters ${ITERS:-3}; results in $out"
for n in $ns; do
  if [[ ${CALIBRATE:-0} == 1 ]]; then
    "$repo/scripts/cluster" run "$n" --rate "$rate" --timeout 600 --quiet -- \
      "$build/tools/chorus-bench/chorus-bench" --calibrate "$out/tuning-n$n.txt" >/dev/null
    tuning_env=(env CHORUS_TUNING_FILE="$out/tuning-n$n.txt")
  fi
  for a in $algos; do
    [[ $a == auto ]] && force=() || force=(--algo "$a")
    echo "## N=$n $a"
    "$repo/scripts/cluster" run "$n" --rate "$rate" --timeout 1200 --quiet -- \
      "${tuning_env[@]}" "$build/tools/chorus-bench/chorus-bench" -b "${MIN:-8}" -e "${MAX:-256M}" \
      -f "${FACTOR:-4}" -n "${ITERS:-3}" -w "${WARMUP:-1}" --in-place 0 "${force[@]}" \
      --json "$out/n$n-$a.json" >"$out/n$n-$a.log" 2>&1 || echo "   FAILED (see $out/n$n-$a.log)"
  done
done
/usr/bin/python3 "$here/algo_table.py" "$out" ${PEERS:+--peers "$PEERS" --setting "cluster-$rate"}
