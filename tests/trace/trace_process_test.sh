#!/bin/bash
# Flight recorder across real processes (chorus-run): a rank that stops calling collectives
# (every other rank fails, dumps, and shows it waiting on the stuck rank; a signal dumps the stuck
# rank and a rank blocked in its call, promptly), and a slowed rank named by CHORUS_REPORT=1.
# Usage: trace_process_test.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
build=${1:?usage: trace_process_test.sh BUILD_DIR}
run=$build/tools/chorus-run/chorus-run
worker=$build/tests/trace_worker
py=/usr/bin/python3
[[ -x $run && -x $worker ]] || skip "build chorus-run and trace_worker first"
[[ -x $py ]] || skip "no $py to read the dumps"
clear_launch_env
scratch=$(mktemp -d "${TMPDIR:-/tmp}/chorus-trace-proc.XXXXXX")
trap 'kill "$job" 2>/dev/null; rm -rf "$scratch"' EXIT
dumps=$scratch/dumps
out=$scratch/out

# --- A stuck rank: rank 2 stops before all-reduce #5; the others time out after 3 s.
CHORUS_TRACE_DIR=$dumps CHORUS_TRACE_SIGNAL=USR1 CHORUS_TIMEOUT=3 \
  timeout 40 "$run" -n 3 -- "$worker" stall 2 6 >"$out" 2>"$scratch/err" &
job=$!
for ((i = 0; i < 200; i++)); do
  grep -q STALLED "$out" && break
  sleep 0.05
done
check "rank 2 stalls before all-reduce #5" grep -q "STALLED rank=2 before=5" "$out"
sleep 0.3
pid0=$(sed -n 's/^PID rank=0 pid=//p' "$out")
pid2=$(sed -n 's/^PID rank=2 pid=//p' "$out")
sent=$EPOCHREALTIME
kill -USR1 "$pid0" "$pid2"
signal_dumps() {
  local f
  for f in "$dumps"/chorus-trace-*-rank0.json "$dumps"/chorus-trace-*-rank2.json; do
    [[ -f $f ]] && grep -q '"reason": "signal"' "$f" || return 1
  done
}
for ((i = 0; i < 40; i++)); do
  signal_dumps && break
  sleep 0.05
done
check "USR1 dumps rank 0 (blocked in its call) and rank 2 within 2 s" signal_dumps
echo "     after $(seconds_since "$sent")s"
cp "$dumps"/chorus-trace-*-rank0.json "$scratch/signal-rank0.json" 2>/dev/null
cp "$dumps"/chorus-trace-*-rank2.json "$scratch/signal-rank2.json" 2>/dev/null
wait "$job"
rc=$?
check "the job fails (chorus-run exit $rc)" test "$rc" -ne 0
# The stuck rank comes first: in the error of the survivor that reported, and in chorus-run's
# account, ahead of the survivor's exit.
check "a survivor's error starts with the stuck rank" \
  grep -Eq "^rank [01]: allreduce #5 \(rank [01]\): rank 2 never entered allreduce #5" "$scratch/err"
verdict_first() {
  local verdict exit_line
  verdict=$(grep -n "chorus-run: verdict: rank 2 has not issued allreduce #5" "$scratch/err" | cut -d: -f1 | head -1)
  exit_line=$(grep -n "chorus-run: rank [01] (pid [0-9]*) exited" "$scratch/err" | cut -d: -f1 | head -1)
  [[ -n $verdict && -n $exit_line && $verdict -lt $exit_line ]] || { sed 's/^/  | /' "$scratch/err"; false; }
}
check "chorus-run names rank 2 before the survivor's exit" verdict_first

# inspect FILE EXPRESSION...: python3 asserts about the dump `d` (its entry N: e(N)).
inspect() {
  local file=$1
  shift
  "$py" - "$file" "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def e(n):
    found = [x for x in d["entries"] if x["number"] == n and x["collective"] == "allreduce"]
    return found[0] if found else None
for expr in sys.argv[2:]:
    if not eval(expr):
        print("  not true:", expr, "in", sys.argv[1])
        print(json.dumps(d, indent=1)[:3000])
        sys.exit(1)
PY
}
for r in 0 1; do
  f=$(ls "$dumps"/chorus-trace-*-rank$r.json 2>/dev/null)
  check "rank $r dumped on its timeout" test -n "$f"
  [[ -n $f ]] || continue
  check "rank $r: reason, error, #0..#4 done, #5 waiting" inspect "$f" \
    'd["format"] == "chorus-trace/1"' "d['rank'] == $r" 'd["size"] == 3' \
    'd["reason"] in ("timeout", "failure")' '"allreduce #5" in d["error"]' \
    'all(e(n)["state"] == "done" for n in range(5))' 'e(5)["state"] == "waiting"'
done
check "rank 0 or 1 waits on rank 2 in #5" bash -c "grep -h '\"number\": 5,' $dumps/*rank[01].json | grep -q '\"waiting_on\": 2'"
check "no timeout dump from the stuck rank" bash -c "! grep -q '\"reason\": \"timeout\"' $dumps/*rank2.json"
check "rank 2's signal dump: #4 done, no #5" inspect "$scratch/signal-rank2.json" \
  'd["reason"] == "signal"' 'e(4)["state"] == "done"' 'e(5) is None' 'd["error"] is None'
check "rank 0's signal dump: waiting on a peer in #5" inspect "$scratch/signal-rank0.json" \
  'e(5)["state"] == "waiting"' 'e(5)["waiting_on"] in (1, 2)'

# --- A slowed rank: rank 1 sleeps 4 ms before each of 40 all-reduces.
CHORUS_REPORT=1 timeout 40 "$run" -n 3 -- "$worker" slow 1 40 4 >"$out" 2>"$scratch/err"
check "the slowed job succeeds" test $? -eq 0
check "rank 0's straggler report names rank 1" \
  grep -Eq "chorus: straggler report .*: rank 1 arrived last in (9[0-9]|100)% of calls, [0-9.]+ ms behind" \
  "$scratch/err"
cat "$scratch/err"
finish
