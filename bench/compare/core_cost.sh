#!/usr/bin/env bash
# CPU time the emulated cluster spends per byte between two hosts, for chorus-sim's
# --shared-cores / --core-gbps (docs/simulation.md): two hosts,
# 2-rank broadcasts of BYTES, and the machine's busy core-seconds (/proc/stat: everything but idle
# and iowait, every core) that ITERS more of them cost, over the bytes they moved. The hosts of the emulated cluster are
# network namespaces of this machine, so every host's network stack runs on the same cores.
#
#   bench/compare/core_cost.sh [BUILD]      prints "core_gbps X" (GB/s one core keeps up with)
#
# Waits sleep rather than poll (CHORUS_SPIN_US=0), so that the busy time is the traffic's work,
# not a rank polling for it. At a shaped rate the kernel's work per byte grows (smaller batches,
# more wake-ups): measure at the rate that the simulation describes.
#
# Environment: BYTES (64M), ITERS (20), RATE (40gbit).
# Run it on an otherwise idle machine: other work is counted as network work.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
bytes=${BYTES:-64M}
iters=${ITERS:-20}
rate=${RATE:-40gbit}
export CHORUS_CLUSTER_PREFIX=${CHORUS_CLUSTER_PREFIX:-core} CHORUS_BUILD_DIR=$build
trap '"$repo/scripts/cluster" down >/dev/null 2>&1 || true' EXIT

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
"$repo/scripts/cluster" up 2 --rate "$rate" >/dev/null
# Two runs that differ only in iterations: the difference of their busy time is the traffic's
# alone (launch, rendezvous and first-touch page faults cancel out).
measure() {
  local out=$1 n=$2 before after
  before=$(busy)
  "$repo/scripts/cluster" run 2 --rate "$rate" --quiet -- env CHORUS_SPIN_US=0 \
    "$build/tools/chorus-bench/chorus-bench" \
    --op broadcast -b "$bytes" -e "$bytes" -n "$n" -w 1 --no-check --json "$out" >/dev/null
  after=$(busy)
  echo $((after - before))
}
short=$(mktemp) long=$(mktemp)
t_short=$(measure "$short" 2)
t_long=$(measure "$long" $((iters + 2)))
/usr/bin/python3 - "$long" "$t_short" "$t_long" "$iters" "$(getconf CLK_TCK)" <<'EOF2'
import json, sys
row = json.load(open(sys.argv[1]))["rows"][0]
core_s = (float(sys.argv[3]) - float(sys.argv[2])) / float(sys.argv[5])
moved = row["bytes"] * int(sys.argv[4])
if core_s <= 0:
    sys.exit("core_cost: no busy time measured (run it on an idle machine, with more ITERS)")
print(f"# {moved / 2**20:.0f} MiB more between two emulated hosts: {core_s:.2f} core-s more busy; "
      f"one broadcast moved {row['bytes'] / row['time_us'] / 1e3:.2f} GB/s")
print(f"core_gbps {moved / core_s / 1e9:.3f}")
EOF2
rm -f "$short" "$long"
