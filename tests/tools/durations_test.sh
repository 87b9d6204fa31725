#!/usr/bin/env bash
# Every duration a tool takes on its command line accepts fractional seconds (chorus-run
# --timeout 2.5 once said "Value 2.5 not in range"): chorus-run --timeout, --grace and
# --hang-seconds; chorus-bench -T (nccl-tests' --timeout); chorus-doctor --watch,
# --stale-seconds and --quiet-seconds; chorus-sim --run-limit-s. (chorus-store and
# chorus-train take no durations.)
#
#   durations_test.sh BUILD_DIR
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
build=${1:?usage: durations_test.sh BUILD_DIR}
run=$build/tools/chorus-run/chorus-run
doctor=$build/tools/chorus-doctor/chorus-doctor
sim=$build/tools/chorus-sim/chorus-sim
clear_launch_env
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# The ranks see the value as given, which CHORUS_TIMEOUT reads as 2.5 s.
rank_timeout() {
  "$run" -n 2 --timeout 2.5 --grace 0.5 --hang-seconds 1.5 -- sh -c 'echo "T=$CHORUS_TIMEOUT"' \
    >"$out" 2>&1 && [[ $(grep -c '^T=2\.5$' "$out") == 2 ]] || { show "$out"; false; }
}
check "chorus-run --timeout 2.5 --grace 0.5 --hang-seconds 1.5: CHORUS_TIMEOUT=2.5 in each rank" \
  rank_timeout
# A fractional timeout reaches the library: a rank that waits for a peer that never comes fails
# after about 1.5 s (the default is minutes).
short_timeout() {
  local t0=$EPOCHREALTIME took
  "$run" -n 2 --timeout 1.5 -- sh -c \
    '[ "$CHORUS_RANK" = 1 ] && exit 0; exec "$0" -b 8 -e 8 -n 1 -w 0' \
    "$build/tools/chorus-bench/chorus-bench" >"$out" 2>&1 && { show "$out"; return 1; }
  took=$(seconds_since "$t0")
  echo "    failed after ${took}s"
  awk -v t="$took" 'BEGIN { exit !(t > 1 && t < 10) }'
}
check "chorus-run --timeout 1.5: a rank whose peer never comes fails in seconds" short_timeout
# The same through chorus-bench's own -T 1.5 (no CHORUS_TIMEOUT).
bench_timeout() {
  local t0=$EPOCHREALTIME took
  "$run" -n 2 -- sh -c '[ "$CHORUS_RANK" = 1 ] && exit 0; exec "$0" -T 1.5 -b 8 -e 8 -n 1 -w 0' \
    "$build/tools/chorus-bench/chorus-bench" >"$out" 2>&1 && { show "$out"; return 1; }
  took=$(seconds_since "$t0")
  echo "    failed after ${took}s"
  awk -v t="$took" 'BEGIN { exit !(t > 1 && t < 10) }'
}
check "chorus-bench -T 1.5: a rank whose peer never comes fails in seconds" bench_timeout

# Not parse errors: the doctor goes on to complain that --live has no store.
doctor_durations() {
  "$doctor" --live --watch 0.5 --stale-seconds 2.5 --quiet-seconds 0.5 >"$out" 2>&1
  grep -q -- "--live takes --store" "$out" || { show "$out"; false; }
}
check "chorus-doctor --watch 0.5 --stale-seconds 2.5 --quiet-seconds 0.5: accepted" \
  doctor_durations
sim_duration() {
  "$sim" --hosts 1 --ranks-per-host 2 -b 8 -e 8 -q --run-limit-s 2.5 >"$out" 2>&1 ||
    { show "$out"; false; }
}
check "chorus-sim --run-limit-s 2.5: accepted" sim_duration
finish
