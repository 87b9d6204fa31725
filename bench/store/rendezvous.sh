#!/usr/bin/env bash
# Rendezvous time (communicator creation, authenticated) on the TCP store against a one-member
# etcd on loopback, for N thread ranks (one process, a store client each) and N process ranks
# (chorus-run), and the etcd requests and bytes per rank at creation (etcd's own counters).
#   bench/store/rendezvous.sh BUILD_DIR [REPS] [N ...]      (default: 10 repetitions, N = 4 8)
# Needs the rendezvous_timer and chorus-run targets, and etcd (scripts/install-deps).
set -euo pipefail
build=${1:?usage: bench/store/rendezvous.sh BUILD_DIR [REPS] [N ...]}
reps=${2:-10}
shift $(($# >= 2 ? 2 : $#))
sizes=("$@")
((${#sizes[@]} > 0)) || sizes=(4 8)
timer=$build/tests/rendezvous_timer
run=$build/tools/chorus-run/chorus-run
for exe in "$timer" "$run"; do
  [[ -x $exe ]] || { echo "rendezvous.sh: $exe is missing (build rendezvous_timer chorus-run)" >&2; exit 2; }
done
command -v etcd >/dev/null || { echo "rendezvous.sh: no etcd (scripts/install-deps)" >&2; exit 2; }

# In memory, so that etcd's fsyncs cost nothing (not while tests run: some count /dev/shm).
dir=$(mktemp -d -p /dev/shm etcd-bench-XXXXXX)
. "$(dirname "$0")/../../scripts/etcd-one-member.sh"
trap 'kill $ETCD_PID 2>/dev/null || true; wait $ETCD_PID 2>/dev/null || true; rm -rf "$dir"' EXIT
etcd_one_member "$dir"
client=$ETCD_CLIENT_PORT
etcd_url=etcd://127.0.0.1:$client/bench
# Every job authenticated with the same key, as chorus-run's own store always is.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/key"
chmod 600 "$dir/key"
export CHORUS_AUTH_KEY_FILE=$dir/key

median() { sort -n | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else printf "%.1f\n", (v[NR/2]+v[NR/2+1])/2}'; }
# Requests (gRPC calls behind the gateway, watches included) and bytes received, so far.
counters() {
  curl -sf "http://127.0.0.1:$client/metrics" | awk '
    /^grpc_server_started_total/ {calls += $2}
    /^etcd_network_client_grpc_received_bytes_total/ {rx = $2}
    /^etcd_network_client_grpc_sent_bytes_total/ {tx = $2}
    END {printf "%d %d %d\n", calls, rx, tx}'
}
# The slowest rank of one chorus-run job.
job() {  # N STORE_ARGS...
  local n=$1; shift
  "$run" -n "$n" --timeout 60 "$@" -- "$timer" rank | sed -n 's/.*create_ms=\([0-9.]*\).*/\1/p' |
    sort -n | tail -1
}

echo "host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); etcd $(etcd --version | head -1 | cut -d' ' -f3); $reps repetitions, median (min) ms"
printf '%-10s %3s  %-16s %-16s %s\n' ranks N "tcp store" "etcd store" "etcd per rank at creation"
for n in "${sizes[@]}"; do
  tcp=$("$timer" threads "$n" tcp "$reps" | sed 's/create_ms=//')
  read -r c0 rx0 tx0 < <(counters)
  etcd=$("$timer" threads "$n" "$etcd_url-t$n" "$reps" | sed 's/create_ms=//')
  read -r c1 rx1 tx1 < <(counters)
  per="$(((c1 - c0) / (reps * n))) requests, $(((rx1 - rx0) / (reps * n))) B in, $(((tx1 - tx0) / (reps * n))) B out"
  printf '%-10s %3s  %-16s %-16s %s\n' threads "$n" "$(median <<<"$tcp") ($(sort -n <<<"$tcp" | head -1))" \
    "$(median <<<"$etcd") ($(sort -n <<<"$etcd" | head -1))" "$per"
  tcp=$(for i in $(seq "$reps"); do job "$n"; done)
  etcd=$(for i in $(seq "$reps"); do job "$n" --store "$etcd_url-p$n-$i"; done)
  printf '%-10s %3s  %-16s %-16s\n' processes "$n" "$(median <<<"$tcp") ($(sort -n <<<"$tcp" | head -1))" \
    "$(median <<<"$etcd") ($(sort -n <<<"$etcd" | head -1))"
done
