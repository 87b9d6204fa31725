#!/usr/bin/env bash
# The chaos campaign's machinery (bench/chaos/chaos.py, `make chaos`) on a short run, so that it
# cannot rot: 4 emulated hosts, etcd on 3 of them, elastic CNN training with authentication and
# encryption, checked collectives beside it, and two faults: a rank killed (its launcher restarts
# it) and the etcd leader killed (restarted). No clean run, so no accuracy check. Exit 0: pass,
# 1: fail, 77: skipped (not root, no network namespaces, no etcd, no Fashion-MNIST, tools not
# built). About a minute.
#
#   tests/cluster/chaos_test.sh BUILD_DIR
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: chaos_test.sh BUILD_DIR}
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
clear_launch_env
[[ -d /usr/share/datasets/fashion-mnist ]] || skip "no Fashion-MNIST (dataset-fashion-mnist)"
command -v python3 >/dev/null || skip "no python3"
out=$(mktemp -d -t chorus-chaos-XXXXXX)
trap 'rm -rf "$out"' EXIT

python3 "$here/../../bench/chaos/chaos.py" --build "$build" --prefix chtest --out "$out" \
  --seed 1 --seconds 90 --no-clean --events kill_rank kill_etcd_leader --max-events 2 \
  --limit 38400 --epochs 1 --gap-min 2 --gap-max 3 --inject-window 20 >"$out/stdout" 2>&1
rc=$?
cat "$out/stdout"
((rc == 77)) && exit 77
check "the campaign passes (exit $rc)" test "$rc" -eq 0
report() { python3 -c "import json, sys; r = json.load(open('$out/report.json')); sys.exit(0 if ($1) else 1)"; }
check "report.json: both faults injected" report "sorted(e['kind'] for e in r['events']) == ['kill_etcd_leader', 'kill_rank']"
check "report.json: the killed rank was replaced (first step on all hosts again)" \
  report "all(e['recovered'] is not None for e in r['events'] if e['kind'] == 'kill_rank')"
check "report.json: etcd elected a new leader" \
  report "all(e['detected'] is not None for e in r['events'] if e['kind'] == 'kill_etcd_leader')"
check "report.json: step times around each fault from the metrics file" \
  report "all(e['steps']['steady_median_s'] for e in r['events'])"
check "report.json: checked collectives ran, none wrong" report "r['bench']['rounds'] > 0 and r['bench']['wrong'] == 0"
check "report.md: the table of faults" grep -q '^| 1 | round0 |' "$out/report.md"
finish
