#!/usr/bin/env bash
# The doctor on a real job (programs/stall_rank.cc): 3 ranks, rank 2 alive but stuck before its
# sixth all-reduce (#5).
#   1. CHORUS_TIMEOUT=3 and CHORUS_TRACE_DIR: the ranks fail, dumps appear, and the verdict on
#      them names rank 2.
#   2. Mismatched calls (a different collective, a different count) and a rank killed mid-job
#      (tests/multiproc/programs/mp_worker.cc): the verdict names both calls, the lost rank.
#   3. No timeout: chorus-doctor --live names rank 2 while the job hangs, and chorus-run
#      --hang-seconds 2 --hang-action stop prints the verdict from the dumps and stops the job.
#   4. Rank 2 frozen by SIGSTOP: --live names it, and its record as stale.
# Exits 77 (skip) while the library writes no dumps or progress records.
#
#   e2e_test.sh BUILD_DIR
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=doctor_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/doctor_lib.sh"
stall=$build/tests/doctor/doctor_stall_rank

# 1. Dumps after a timeout.
mkdir -p "$scratch/dumps"
t0=$EPOCHREALTIME
CHORUS_TRACE_DIR=$scratch/dumps timeout 60 "$launcher" -n 3 --timeout 3 --grace 2 -- \
  "$stall" 10 2 5 30 >"$scratch/timeout.out" 2>&1
rc=$?
echo "    timeout: exit $rc after $(seconds_since "$t0")s"
check "timeout: the job fails" [ "$rc" != 0 ]
if [[ -z $(find "$scratch/dumps" -name 'chorus-trace-*.json') ]]; then
  show "$scratch/timeout.out"
  skip "the library does not write dumps yet"
fi
"$doctor" "$scratch/dumps" >"$scratch/doctor.out" 2>&1
show "$scratch/doctor.out"
check "timeout: the verdict names rank 2 first" has '^verdict: rank 2 ' "$scratch/doctor.out"
check "timeout: the verdict names allreduce #5" has '^verdict: .*allreduce #5' "$scratch/doctor.out"
timeline_ok() {
  "$doctor" --timeline "$scratch/t.json" "$scratch/dumps" >/dev/null 2>&1  # exits 1: a problem
  python3 -m json.tool "$scratch/t.json" >/dev/null
}
check "timeout: the doctor's timeline is valid JSON" timeline_ok

# 2. Mismatches and a lost rank, from the dumps of mp_worker's cases.
worker=$build/tests/mp_worker
# doctor_on NAME MODE...: runs mp_worker MODE on 3 ranks with dumps to $scratch/NAME; the doctor's
# output in $scratch/NAME.doctor.
doctor_on() {
  local name=$1
  shift
  mkdir -p "$scratch/$name"
  CHORUS_TRACE_DIR=$scratch/$name timeout 60 "$launcher" -n 3 --timeout 5 --grace 2 -- \
    "$worker" "$@" >"$scratch/$name.out" 2>&1
  "$doctor" "$scratch/$name" >"$scratch/$name.doctor" 2>&1
  head -1 "$scratch/$name.doctor"
}
doctor_on collective mismatch-collective
check "mismatch: a different collective, both calls named" has \
  '^verdict: ranks disagree at #2: ranks 0 and 2 call allreduce\(f32, sum, 1000\), rank 1 calls broadcast\(f32, 1000, root 0\)$' \
  "$scratch/collective.doctor"
doctor_on count mismatch-count
check "mismatch: a different count, both calls named" has \
  '^verdict: ranks disagree at #2: ranks 0 and 2 call allreduce\(f32, sum, 1000\), rank 1 calls allreduce\(f32, sum, 1001\)$' \
  "$scratch/count.doctor"
doctor_on killed kill 2 1 300 500
check "lost: rank 2, killed, is named with the last call it completed" has \
  '^verdict: rank 2 was lost after completing allreduce #[0-9]+.*\(ranks 0 and 1 report it\)$' \
  "$scratch/killed.doctor"

# 3. Live, then the launcher's hang watch.
start_store || exit 1
timeout 60 "$launcher" -n 3 --store "$store" --hang-seconds 2 --hang-action stop --grace 2 -- \
  "$stall" 10 2 5 30 >"$scratch/hang.out" 2>&1 &
job_pid=$!
line=
for ((i = 0; i < 40; i++)); do
  sleep 0.25
  line=$(live_verdict)
  [[ $line == "verdict: rank 2"* ]] && break
  # The ranks register within a second or two of the start when the library publishes.
  ((i >= 16)) && [[ $line == "verdict: no progress records"* ]] && break
done
echo "    live: $line"
if [[ $line == "verdict: no progress records"* ]]; then
  kill -TERM "$job_pid"
  wait "$job_pid"
  job_pid=
  skip "the library does not publish progress records yet"
fi
check "live: the verdict names rank 2 before any timeout" \
  grep -Eq '^verdict: rank 2 has not issued allreduce #5' <<<"$line"
wait "$job_pid"
rc=$?
job_pid=
show "$scratch/hang.out"
check "hang watch: the job is stopped (124)" [ "$rc" = 124 ]
check "hang watch: the verdict names rank 2" \
  has '^verdict: rank 2 never entered allreduce #5; ranks 0 and 1 wait in it for rank 2' "$scratch/hang.out"
# 4. A rank frozen by SIGSTOP stops publishing too: --live names it as stale.
start_store || exit 1
timeout 60 "$launcher" -n 3 --store "$store" --grace 1 -- "$stall" 10 2 5 30 \
  >"$scratch/stopped.out" 2>&1 &
job_pid=$!
pid=
for ((i = 0; i < 40; i++)); do
  sleep 0.25
  line=$(live_verdict)
  [[ $line == "verdict: rank 2 has not issued"* ]] || continue
  pid=$(timeout 20 "$doctor" --live --store "$store" | sed -n 's/^  rank 2 ([^,]*, pid \([0-9]*\)).*/\1/p' | tail -1)
  break
done
check "sigstop: rank 2's pid is in the evidence" [ -n "$pid" ]
if [[ -n $pid ]]; then
  kill -STOP "$pid"
  sleep 3.5  # records are published every second: 2.5 s without one is stale
  line=$(timeout 20 "$doctor" --live --stale-seconds 2.5 --store "$store" 2>&1 | head -1)
  kill -CONT "$pid"
  echo "    sigstop: $line"
  check "sigstop: the verdict names rank 2, stale" \
    grep -Eq '^verdict: rank 2 has not issued allreduce #5 .*; rank 2 stopped publishing' <<<"$line"
fi
kill -TERM "$job_pid"
wait "$job_pid"
job_pid=
finish
