#!/usr/bin/env bash
# tx_wrap.sh CMD...: runs CMD and then prints, on stderr, the bytes this emulated host's interface
# ($CLUSTER_IFNAME, from scripts/cluster) sent meanwhile: "tx_bytes rank R: B" (headers and
# every message included: the wire cost, whatever the program counts itself).
set -uo pipefail
stat=/sys/class/net/${CLUSTER_IFNAME:-none}/statistics/tx_bytes
before=$(cat "$stat" 2>/dev/null || echo "")
"$@"
rc=$?
after=$(cat "$stat" 2>/dev/null || echo "")
if [[ -n $before && -n $after ]]; then
  echo "tx_bytes rank ${CLUSTER_RANK:-?}: $((after - before))" >&2
fi
exit $rc
