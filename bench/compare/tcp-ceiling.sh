#!/bin/bash
# What plain TCP reaches on the emulated cluster when every host sends one stream to the next
# (the traffic pattern of a ring all-reduce), and how busy the machine's CPUs are meanwhile:
# the ceiling any library's busbw can reach here.
#
#   bench/compare/tcp-ceiling.sh [N ...]      (default: 2 4 8; RATE=1gbit SECONDS_PER_RUN=8)
#
# Needs root and iperf3 (scripts/install-deps --bench). Uses scripts/cluster with its prefix
# ($CHORUS_CLUSTER_PREFIX) and takes the cluster down at the end.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../../scripts/cluster
prefix=${CHORUS_CLUSTER_PREFIX:-chorus}
rate=${RATE:-1gbit}
secs=${SECONDS_PER_RUN:-8}
tmp=$(mktemp -d)
trap 'pkill -f "iperf3 -s -p 5201" 2>/dev/null; "$cluster" down >/dev/null 2>&1; rm -rf "$tmp"' EXIT

cpu() { awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat; }

printf '%-4s %-10s %-30s %s\n' N "cpu busy" "per stream (fraction of $rate)" "mean"
for n in "${@:-2 4 8}"; do
  "$cluster" up "$n" --rate "$rate" >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log" >&2; exit 1; }
  for ((i = 0; i < n; i++)); do
    ip netns exec "$prefix-h$i" iperf3 -s -p 5201 -D >/dev/null 2>&1
  done
  sleep 1
  before=$(cpu)
  for ((i = 0; i < n; i++)); do
    ip netns exec "$prefix-h$i" iperf3 -c "10.77.0.$(((i + 1) % n + 1))" -p 5201 -t "$secs" -J \
      >"$tmp/$i.json" 2>&1 &
  done
  wait
  after=$(cpu)
  pkill -f "iperf3 -s -p 5201" 2>/dev/null
  busy=$(echo "$before $after" | awk '{b = $3 - $1; i = $4 - $2; printf "%.0f%%", 100 * b / (b + i)}')
  rates=$(/usr/bin/python3 - "$tmp" "$n" "$rate" <<'PY'
import json, re, sys
d, n, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
m = re.fullmatch(r"([\d.]+)([kmg]?)bit", rate.lower())
bps = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
fr = [json.load(open(f"{d}/{i}.json"))["end"]["sum_received"]["bits_per_second"] / bps
      for i in range(n)]
print(" ".join(f"{f:.3f}" for f in fr), f"{sum(fr) / n:.3f}", sep="\t")
PY
  )
  printf '%-4s %-10s %-30s %s\n' "$n" "$busy" "${rates%%$'\t'*}" "${rates##*$'\t'}"
  sleep 1
done
