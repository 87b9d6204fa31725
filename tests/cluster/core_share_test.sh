#!/usr/bin/env bash
# Core sharing is a property of the machine: 4 ranks in 2 emulated hosts (network namespaces,
# each with its own host name, as containers on one machine have) on this machine's cores must
# all choose the yielding wait policy when they outnumber the cores, and none of them when the
# cores suffice. Exit 0: pass, 1: fail, 77: skipped (not root, no network namespaces, no unshare).
#
#   tests/cluster/core_share_test.sh [BUILD_DIR]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster=$here/../../scripts/cluster
build=${1:-${CHORUS_BUILD_DIR:-$here/../../build}}

# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
clear_launch_env
export CHORUS_CLUSTER_PREFIX=chorusc CHORUS_BUILD_DIR=$build
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces)"
for t in ip tc ethtool unshare nproc; do
  command -v "$t" >/dev/null || skip "'$t' not found"
done
ip netns add "$CHORUS_CLUSTER_PREFIX-probe" 2>/dev/null || skip "'ip netns add' does not work here"
ip netns del "$CHORUS_CLUSTER_PREFIX-probe"
unshare --uts true 2>/dev/null || skip "'unshare --uts' does not work here"
trap '"$cluster" down >/dev/null 2>&1' EXIT

out=$(mktemp)
# run RANKS CORES: RANKS ranks, 2 per emulated host, each host with its own host name, every
# rank pinned to CPUs 0..CORES-1; prints how many ranks chose to yield and how many did not.
run() {
  local ranks=$1 cores=$2
  CHORUS_DEBUG=all timeout 120 "$cluster" run "$ranks" --per-host 2 --timeout 100 --quiet -- \
    unshare --uts bash -c 'hostname "emu-$CLUSTER_HOST" && exec taskset -c "0-$0" "$@"' \
    "$((cores - 1))" "$CHORUS_BUILD_DIR/tools/chorus-bench/chorus-bench" -b 8 -e 8 -n 2 -w 1 \
    >"$out" 2>&1
  echo "$(grep -c 'waits poll .*, yielding' "$out") $(grep -c 'waits poll .* without yielding' "$out")"
}

cores=$(nproc)
ranks=$(((cores / 2 + 1) * 2)) # the fewest ranks, 2 per host, that outnumber the cores
got=$(run "$ranks" "$cores")
check "$ranks ranks in $((ranks / 2)) namespaces on $cores cores all yield (got yield/spin: $got)" \
  test "$got" = "$ranks 0"
got=$(run 4 4)
if ((cores >= 4)); then
  check "4 ranks in 2 namespaces on 4 cores do not yield (got yield/spin: $got)" test "$got" = "0 4"
fi
got=$(run 4 1)
check "4 ranks in 2 namespaces pinned to one core all yield (got yield/spin: $got)" \
  test "$got" = "4 0"
((failures)) && tail -20 "$out"
rm -f "$out"
finish
