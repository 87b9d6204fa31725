#!/usr/bin/env bash
# A 3-member etcd on the emulated cluster (one member on each of hosts 2-4, network namespaces of
# scripts/cluster), and Chorus jobs of 4 ranks (2 on each of hosts 0 and 1) that rendezvous
# through it: with every member up, with the first member listed cut off (its link down), and
# after the leader is killed. Exit 0: pass, 1: fail, 77: skipped (not root, no network namespaces,
# no etcd). About 10 seconds.
#
#   tests/cluster/etcd_cluster_test.sh BUILD_DIR
#
# Its own cluster (CHORUS_CLUSTER_PREFIX=chetcd), so one someone has up is left alone.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster=$here/../../scripts/cluster
export CHORUS_CLUSTER_PREFIX=chetcd
build=${1:?usage: etcd_cluster_test.sh BUILD_DIR}
export CHORUS_BUILD_DIR=$build
worker=$build/tests/mp_worker

# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces)"
for t in ip tc ethtool curl python3; do
  command -v "$t" >/dev/null || skip "'$t' not found"
done
command -v etcd >/dev/null || skip "no etcd binary on PATH (scripts/install-deps installs etcd-server)"
[[ -x $worker ]] || skip "$worker is not built"
ip netns add "$CHORUS_CLUSTER_PREFIX-probe" 2>/dev/null || skip "'ip netns add' does not work here"
ip netns del "$CHORUS_CLUSTER_PREFIX-probe"

dir=$(mktemp -d -t etcd-cluster-XXXXXX)  # not /dev/shm: other tests count what appears there
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  "$cluster" down >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT

"$cluster" up 5 >/dev/null 2>&1 || { echo "FAIL - scripts/cluster up 5"; exit 1; }
# The job's key authenticates its records in etcd and its connections, as across real hosts.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/key"
chmod 600 "$dir/key"
addr() { echo "10.77.0.$(($1 + 1))"; }
etcd_hosts=(2 3 4)
initial=m2=http://$(addr 2):2380,m3=http://$(addr 3):2380,m4=http://$(addr 4):2380
members=$(addr 2):2379,$(addr 3):2379,$(addr 4):2379
declare -A pid_of
for h in "${etcd_hosts[@]}"; do
  # Heartbeat 20 ms, election 200 ms: a lost leader is replaced within a fraction of a second.
  "$cluster" exec "$h" etcd --name "m$h" --data-dir "$dir/m$h" --log-level warn \
    --listen-client-urls "http://$(addr "$h"):2379" --advertise-client-urls "http://$(addr "$h"):2379" \
    --listen-peer-urls "http://$(addr "$h"):2380" --initial-advertise-peer-urls "http://$(addr "$h"):2380" \
    --initial-cluster "$initial" --initial-cluster-token "$dir" \
    --heartbeat-interval 20 --election-timeout 200 >"$dir/m$h.log" 2>&1 &
  pids+=($!)
  pid_of[$h]=$!
  disown  # killed on purpose below: no "Killed" notice
done

# From host 0 (no member there): curl of one member's gateway.
member_curl() { "$cluster" exec 0 curl -sf -m 1 -X POST "http://$(addr "$1"):2379$2" -d "${3:-{\}}"; }
healthy() {
  local until=$((SECONDS + 15))
  while ((SECONDS < until)); do
    member_curl 2 /v3/kv/range '{"key":"YQ=="}' >/dev/null && member_curl 3 /v3/kv/range '{"key":"YQ=="}' >/dev/null &&
      member_curl 4 /v3/kv/range '{"key":"YQ=="}' >/dev/null && return 0
    sleep 0.1
  done
  tail -5 "$dir"/m*.log
  return 1
}
# The member that leads, as the live ones say (header.member_id == leader).
leader() {
  for h in "$@"; do
    member_curl "$h" /v3/maintenance/status | python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if s["header"]["member_id"] == s["leader"] else 1)' && { echo "$h"; return 0; }
  done
  return 1
}
# A job of 4 ranks, 2 on each of hosts 0 and 1, on the etcd store under prefix $1; every
# collective checked.
job() {
  local out
  out=$("$cluster" run-each 4 --per-host 2 --timeout 60 -- sh -c "CHORUS_RANK=\$CLUSTER_RANK CHORUS_WORLD_SIZE=4 \
    CHORUS_IFNAME=\$CLUSTER_IFNAME CHORUS_STORE=etcd://$members/$1 CHORUS_TIMEOUT=30 CHORUS_AUTH_KEY_FILE=$dir/key \
    exec $worker correct" 2>&1) || {
    echo "$out" | tail -20
    return 1
  }
  [[ $(grep -c 'status=CHORUS_OK .* wrong=0 identical=1' <<<"$out") == 4 ]] || { echo "$out" | tail -20; return 1; }
}

check "3 etcd members serve on hosts 2-4" healthy
check "4 ranks on 2 hosts rendezvous on etcd and run every collective" job before
# The first member listed cut off: every rank's client waits for its connect timeout once, then
# keeps to a member that answers.
ip -n "$CHORUS_CLUSTER_PREFIX-h2" link set "$CHORUS_CLUSTER_PREFIX-h2" down
check "the same job with the first member listed (host 2) cut off" job cut-off
ip -n "$CHORUS_CLUSTER_PREFIX-h2" link set "$CHORUS_CLUSTER_PREFIX-h2" up
check "host 2's member serves again" healthy
lead=$(leader "${etcd_hosts[@]}") || lead=
check "a leader is known" test -n "$lead"
if [[ -n $lead ]]; then
  kill -9 "${pid_of[$lead]}"
  others=()
  for h in "${etcd_hosts[@]}"; do [[ $h == "$lead" ]] || others+=("$h"); done
  check "the same job after the leader (host $lead) was killed" job after-leader-kill
  newlead=
  for _ in $(seq 20); do
    newlead=$(leader "${others[@]}") && break
    sleep 0.1
  done
  check "the new leader is one of hosts ${others[*]}" test -n "$newlead"
fi
finish
