#!/usr/bin/env bash
# Measures how close one plain TCP stream between two emulated hosts gets to the shaped rate.
#
#   tests/cluster/measure_shaping.sh [--rate R] [--seconds S] [--repeat K]
#
# Brings up its own 2-host cluster (prefix "chorusm", so a cluster you have up is left alone),
# runs iperf3 (or a python3 socket stream when iperf3 is missing) from host 0 to host 1, and prints
#   goodput fraction = TCP payload bits/s / shaped rate       (iperf3's own number)
#   wire fraction    = bytes through host 0's HTB class / s / shaped rate  (Ethernet frames)
# The best possible goodput fraction with MTU 9000 is 8948/9014 = 0.993 (0.991 with TCP
# timestamps). Removes its cluster at the end. Needs root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster=$here/../../scripts/cluster
export CHORUS_CLUSTER_PREFIX=${CHORUS_CLUSTER_PREFIX:-chorusm}
rate=1gbit
seconds=10
repeat=1
while (($#)); do
  case "$1" in
    --rate) rate=$2 && shift ;;
    --seconds) seconds=$2 && shift ;;
    --repeat) repeat=$2 && shift ;;
    *) echo "usage: $0 [--rate R] [--seconds S] [--repeat K]" >&2 && exit 2 ;;
  esac
  shift
done
omit=2
p=$CHORUS_CLUSTER_PREFIX
tmp=$(mktemp -d)
trap '"$cluster" down >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

"$cluster" up 2 --rate "$rate"
bits=$(awk -v r="${rate,,}" 'BEGIN { m = 1; if (r ~ /tbit$/) m = 1e12; else if (r ~ /gbit$/) m = 1e9;
  else if (r ~ /mbit$/) m = 1e6; else if (r ~ /kbit$/) m = 1e3; sub(/[a-z]+$/, "", r); print r * m }')
echo "offloads on $p-h0 (tso/gso/gro): $(ip netns exec "$p-h0" ethtool -k "$p-h0" |
  awk '$1 ~ /^(tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload):$/ { printf "%s ", $2 }')"
echo "mtu: $(ip -n "$p-h0" -o link show "$p-h0" | grep -o 'mtu [0-9]*')"

class_bytes() { tc -n "$p-h0" -s class show dev "$p-h0" | awk '$1 == "Sent" { print $2; exit }'; }

python_stream() { # python_stream SECONDS OMIT > goodput bits/s (payload, after the omitted seconds)
  "$cluster" exec 1 /usr/bin/python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.2", 5299)); s.listen(1); c, _ = s.accept(); b = bytearray(1 << 20)
while c.recv_into(b): pass' &
  local srv=$!
  sleep 0.5
  "$cluster" exec 0 /usr/bin/python3 -c '
import socket, sys, time
total, omit = float(sys.argv[1]), float(sys.argv[2])
s = socket.create_connection(("10.77.0.2", 5299)); buf = b"x" * (1 << 20)
t0 = time.monotonic(); start = None
while True:
    now = time.monotonic()
    if start is None and now - t0 >= omit: start, sent = now, 0
    if now - t0 >= total: break
    s.sendall(buf)
    if start is not None: sent += len(buf)
print(sent * 8 / (time.monotonic() - start))' "$((seconds + omit))" "$omit"
  wait "$srv" || true
}

for ((k = 0; k < repeat; k++)); do
  # Wire bytes are sampled over the steady part: from 1 s after the omitted start to 1 s before
  # the end.
  (
    # (Each reading is timed at the middle of the tc call; no forks between the clock and tc.)
    sleep $((omit + 1))
    t0a=$EPOCHREALTIME
    a=$(class_bytes)
    t0b=$EPOCHREALTIME
    sleep $((seconds - 2))
    t1a=$EPOCHREALTIME
    b=$(class_bytes)
    t1b=$EPOCHREALTIME
    awk -v a="$a" -v b="$b" -v t0="$t0a" -v u0="$t0b" -v t1="$t1a" -v u1="$t1b" \
      'BEGIN { print (b - a) * 8 / ((t1 + u1) / 2 - (t0 + u0) / 2) }' >"$tmp/wire"
  ) &
  sampler=$!
  if command -v iperf3 >/dev/null; then
    tool=iperf3
    "$cluster" exec 1 iperf3 -s -1 -B 10.77.0.2 -p 5201 >/dev/null &
    srv=$!
    sleep 0.5
    "$cluster" exec 0 iperf3 -c 10.77.0.2 -p 5201 -t "$seconds" -O "$omit" -J >"$tmp/out.json"
    wait "$srv" || true
    read -r good sent < <(/usr/bin/python3 -c 'import json,sys; e = json.load(open(sys.argv[1]))["end"]; print(e["sum_received"]["bits_per_second"], e["sum_sent"]["bits_per_second"])' "$tmp/out.json")
    echo "iperf3 sender side: $(awk -v s="$sent" -v r="$bits" 'BEGIN { printf "%.1f Mbit/s = %.3f of rate", s / 1e6, s / r }')"
  else
    tool=python3
    good=$(python_stream "$seconds" "$omit")
  fi
  wait "$sampler"
  wire=$(cat "$tmp/wire")
  awk -v g="$good" -v w="$wire" -v r="$bits" -v t="$tool" -v rate="$rate" -v s="$seconds" 'BEGIN {
    printf "rate %s, %s %ds: goodput %.1f Mbit/s = %.3f of rate; wire %.1f Mbit/s = %.3f of rate\n",
      rate, t, s, g / 1e6, g / r, w / 1e6, w / r }'
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
