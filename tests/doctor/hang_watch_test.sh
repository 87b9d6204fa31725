#!/usr/bin/env bash
# chorus-run --hang-seconds with stand-in ranks (programs/fake_progress_rank.cc) that publish
# progress records and dump on SIGUSR1 as docs/trace-format.md says: the launcher's side alone,
# independent of the library. Also chorus-doctor --live on a job's TCP store.
#
#   hang_watch_test.sh BUILD_DIR
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=doctor_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/doctor_lib.sh"
fake=$build/tests/doctor/doctor_fake_progress_rank
verdict='^verdict: rank 2 never entered allreduce #5; ranks 0 and 1 wait in it for rank 2$'

# 1. --hang-action stop: one verdict, the job stopped, 124.
t0=$EPOCHREALTIME
timeout 60 "$launcher" -n 3 --hang-seconds 1 --hang-action stop --grace 1 -- "$fake" 2 30 \
  >"$scratch/stop.out" 2>&1
rc=$?
took=$(seconds_since "$t0")
echo "    stop: exit $rc after ${took}s"
check "stop: exit status 124" [ "$rc" = 124 ]
check "stop: the verdict names rank 2" has "$verdict" "$scratch/stop.out"
check "stop: the job is stopped" has "^chorus-run: --hang-action stop; stopping the 3 ranks" "$scratch/stop.out"
check "stop: within 10 s of the start" awk -v t="$took" 'BEGIN { exit !(t < 10) }'
dir=$(trace_dir "$scratch/stop.out")
check "stop: the trace directory is new, under TMPDIR, with 3 dumps" \
  test "${dir#"$scratch"/chorus-trace-}" != "$dir" -a "$(find "$dir" -name 'chorus-trace-*-rank*.json' | wc -l)" = 3

# 2. report (the default): the verdict once, the job runs on and ends well.
CHORUS_TRACE_DIR=$scratch/mine timeout 60 "$launcher" -n 3 --hang-seconds 1 -- "$fake" 2 3 \
  >"$scratch/report.out" 2>&1
rc=$?
check "report: the job runs to its end (exit 0)" [ "$rc" = 0 ]
check "report: the verdict names rank 2" has "$verdict" "$scratch/report.out"
check "report: one verdict for one hang" [ "$(grep -c '^verdict:' "$scratch/report.out")" = 1 ]
check "report: says the job keeps running" has "keeps running" "$scratch/report.out"
check "report: CHORUS_TRACE_DIR from the environment is used" \
  [ "$(trace_dir "$scratch/report.out")" = "$scratch/mine" ]

# 3. chorus-doctor --live on the TCP store of a running job, before any timeout.
start_store || exit 1
timeout 60 "$launcher" -n 3 --store "$store" --hang-seconds 600 -- "$fake" 2 4 \
  >"$scratch/live.out" 2>&1 &
job_pid=$!
line=
for ((i = 0; i < 40; i++)); do
  sleep 0.25
  line=$(live_verdict)
  [[ $line == "verdict: rank 2 has not issued"* ]] && break
done
echo "    live: $line"
check "live: names rank 2 as not having issued allreduce #5" \
  grep -Eq '^verdict: rank 2 has not issued allreduce #5 for [0-9.]+ s; ranks 0 and 1 wait in it for rank 2' <<<"$line"
wait "$job_pid"
check "live: the job was not disturbed (exit 0)" [ $? = 0 ]
job_pid=
finish
