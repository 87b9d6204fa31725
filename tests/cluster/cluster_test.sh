#!/usr/bin/env bash
# Quick checks of scripts/cluster (a few seconds). Exit 0: pass, 1: fail, 77: skipped (not root,
# or network namespaces / tc / ethtool unavailable).
#
#   tests/cluster/cluster_test.sh [BUILD_DIR]
#
# With a BUILD_DIR holding chorus-bench and chorus-store (default <repo>/build), it also runs a
# small Chorus all-reduce across two emulated hosts through `scripts/cluster run`.
#
# It uses a cluster of its own (CHORUS_CLUSTER_PREFIX=chorust: namespaces chorust-*), so a
# cluster someone has up under the default prefix "chorus" is left alone.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster=$here/../../scripts/cluster
export CHORUS_CLUSTER_PREFIX=chorust
export CHORUS_BUILD_DIR=${1:-${CHORUS_BUILD_DIR:-$here/../../build}}
p=$CHORUS_CLUSTER_PREFIX

# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces)"
for t in ip tc ethtool; do
  command -v "$t" >/dev/null || skip "'$t' not found (Debian packages iproute2, ethtool)"
done
ip netns add "$p-probe" 2>/dev/null || skip "'ip netns add' does not work here"
ip netns del "$p-probe"

leftovers() { # our namespaces, plus links named like ours in the root namespace
  ip netns list | awk '{print $1}' | grep -E "^$p-"
  ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -E "^$p-"
}
reaches() { # reaches FROM_HOST ADDR: ping, or a TCP probe where ping is not installed
  if command -v ping >/dev/null; then
    "$cluster" exec "$1" ping -c 1 -W 2 -M "do" -s 8972 "$2" >/dev/null # a full 9000-byte frame
  else
    "$cluster" exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1 | grep -q refused
  fi
}
trap '"$cluster" down >/dev/null 2>&1' EXIT

check "down with nothing up succeeds" "$cluster" down
check "up 2 --rate 500mbit succeeds" "$cluster" up 2 --rate 500mbit
check "status reports 500mbit" bash -c "'$cluster' status | grep -q 'rate=500mbit'"
check "up 2 again (replaces the cluster, default 1gbit) succeeds" "$cluster" up 2
check "namespaces $p-h0, $p-h1, $p-sw exist" bash -c \
  "[[ \$(ip netns list | awk '{print \$1}' | grep -cxE '$p-(h0|h1|sw)') == 3 ]]"
check "host 0 reaches host 1 (10.77.0.2) with 9000-byte frames" reaches 0 10.77.0.2
check "host 1 reaches host 0 (10.77.0.1)" reaches 1 10.77.0.1
check "exec runs in the host's namespace" bash -c \
  "'$cluster' exec 1 ip -o -4 addr show dev $p-h1 | grep -q 'inet 10.77.0.2/24'"
check "exec passes CLUSTER_RANK and propagates the exit code" bash -c \
  "[[ \$('$cluster' exec 1 printenv CLUSTER_RANK) == 1 ]] && ! '$cluster' exec 0 false"
check "host egress shaped to 1Gbit (tc -s class show)" bash -c \
  "tc -n $p-h0 -s class show dev $p-h0 | grep -q 'rate 1Gbit ceil 1Gbit'"
check "switch egress to host 1 shaped to 1Gbit" bash -c \
  "tc -n $p-sw -s class show dev $p-s1 | grep -q 'rate 1Gbit ceil 1Gbit'"
check "TSO/GSO/GRO off and MTU 9000 on both ends" bash -c \
  "'$cluster' status | awk '\$1 == 0 || \$1 == 1' | grep -c 'off/off/off' | grep -qx 2 &&
   ip netns exec $p-sw ethtool -k $p-s0 | grep -q 'generic-segmentation-offload: off' &&
   ip -n $p-sw link show $p-br | grep -q 'mtu 9000'"
check "nothing was created in the root namespace" bash -c "! ip -o link show | grep -q '$p-'"
check "run-each runs one command per host with CLUSTER_* set" bash -c \
  "out=\$('$cluster' run-each 2 --timeout 10 -- sh -c 'echo \$CLUSTER_RANK/\$CLUSTER_SIZE/\$CLUSTER_ADDR/\$CLUSTER_HOST0');
   grep -qx '0/2/10.77.0.1/10.77.0.1' <<<\"\$out\" && grep -qx '\[1\] 1/2/10.77.0.2/10.77.0.1' <<<\"\$out\""
check "run-each propagates a failing rank's exit code and stops the others" bash -c \
  "start=\$SECONDS; '$cluster' run-each 2 --timeout 20 -- sh -c '[ \$CLUSTER_RANK = 1 ] && exit 5; sleep 30';
   rc=\$?; [[ \$rc == 5 && \$((SECONDS - start)) -lt 10 ]]"
check "run-each times out with exit 124" bash -c \
  "'$cluster' run-each 2 --timeout 1 -- sleep 30 2>/dev/null; [[ \$? == 124 ]]"
# 2 hosts x 2 ranks: rank i on host i / 2, in that host's namespace (its own address).
check "run-each 4 --per-host 2: ranks 0,1 on host 0 and 2,3 on host 1, CLUSTER_LOCAL_* set" bash -c \
  "out=\$('$cluster' run-each 4 --per-host 2 --timeout 10 -- sh -c 'echo \$CLUSTER_RANK \$CLUSTER_HOST/\$CLUSTER_HOSTS \$CLUSTER_LOCAL_RANK/\$CLUSTER_LOCAL_SIZE \$CLUSTER_IFNAME \$(ip -o -4 addr show dev \$CLUSTER_IFNAME | grep -o \"10\\.77\\.0\\.[0-9]*\")' | sed 's/^\\[[0-9]\\] //' | sort);
   [[ \$out == \$'0 0/2 0/2 $p-h0 10.77.0.1\\n1 0/2 1/2 $p-h0 10.77.0.1\\n2 1/2 0/2 $p-h1 10.77.0.2\\n3 1/2 1/2 $p-h1 10.77.0.2' ]]"
bench=$CHORUS_BUILD_DIR/tools/chorus-bench/chorus-bench
if [[ -x $bench && -x $CHORUS_BUILD_DIR/tools/chorus-store/chorus-store ]]; then
  check "run 2: a Chorus all-reduce across two hosts, rank 0's table shown, no wrong results" \
    bash -c "out=\$('$cluster' run 2 --timeout 60 -- chorus-bench --op allreduce -b 8 -e 64K -n 2 -w 1) &&
      grep -q 'ranks=2' <<<\"\$out\" &&
      [[ \$(awk '\$1 ~ /^[0-9]+\$/ && \$9 == 0 && \$13 == 0' <<<\"\$out\" | wc -l) == 14 ]]"
  check "run propagates a rank's failure (bad chorus-bench flag)" bash -c \
    "'$cluster' run 2 --timeout 30 -- chorus-bench --op nonsense >/dev/null 2>&1; [[ \$? != 0 ]]"
  check "run 3 --per-host 2: CHORUS_RANK, CHORUS_LOCAL_RANK/SIZE and CHORUS_IFNAME per rank" bash -c \
    "out=\$('$cluster' run 3 --per-host 2 --timeout 10 -- sh -c 'echo \$CHORUS_RANK/\$CHORUS_WORLD_SIZE \$CHORUS_LOCAL_RANK/\$CHORUS_LOCAL_SIZE \$CHORUS_IFNAME' | sed 's/^\\[[0-9]\\] //' | sort);
     [[ \$out == \$'0/3 0/2 $p-h0\\n1/3 1/2 $p-h0\\n2/3 0/1 $p-h1' ]]"
else
  echo "skip - Chorus job checks: $bench or chorus-store not built"
fi
check "up --delay fails clearly when netem is missing" bash -c "
  if tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then tc qdisc del dev lo root; exit 0; fi
  out=\$('$cluster' up 2 --delay 1ms 2>&1); rc=\$?
  [[ \$rc != 0 ]] && grep -q 'netem is not available on this kernel' <<<\"\$out\""
check "a refused --delay left the cluster as it was" bash -c "ip netns list | grep -q '^$p-h1'"
check "bad arguments are refused" bash -c \
  "! '$cluster' up 0 2>/dev/null && ! '$cluster' up 2 --rate fast 2>/dev/null && ! '$cluster' frob 2>/dev/null"
# A process left running in a host: down must still remove everything.
"$cluster" exec 1 sleep 60 &
sleep 0.3
check "down succeeds (with a process still running in a host)" "$cluster" down
wait 2>/dev/null
no_leftovers() { [[ -z $(leftovers) ]]; }
check "down leaves no $p- namespaces or links" no_leftovers
check "down twice is fine" "$cluster" down
check "status says down (exit 1)" bash -c "'$cluster' status | grep -q down; [[ \${PIPESTATUS[0]} == 1 ]]"

finish
