#!/usr/bin/env bash
# chorus-run --hang-seconds on a torch job: rank 1 of 2 stalls before an all_reduce of the world
# or of a new_group (check_user_reports.py hang, hang_subgroup); the hang watch must see the backend's progress records, collect
# both ranks' dumps, print the verdict naming rank 1 and stop the job (124).
#
#   hang_watch_test.sh CHORUS_RUN PYTHON PYTHONPATH [hang|hang_subgroup]
set -uo pipefail
launcher=$1 python=$2 pythonpath=$3 scenario=${4:-hang}
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
t0=$SECONDS
TMPDIR=$scratch PYTHONPATH=$pythonpath${PYTHONPATH:+:$PYTHONPATH} OMP_NUM_THREADS=1 \
  timeout 90 "$launcher" -n 2 --hang-seconds 1 --hang-action stop --grace 1 -- \
  "$python" "$here/check_user_reports.py" "$scenario" >"$scratch/out" 2>&1
rc=$?
cat "$scratch/out"
failed=0
fail() { echo "FAIL: $*"; failed=1; }
[ "$rc" = 124 ] || fail "chorus-run exited $rc, expected 124 (--hang-action stop)"
grep -Eq '^verdict: rank 1 ' "$scratch/out" || fail "no verdict naming rank 1"
dumps=$(find "$scratch" -name 'chorus-trace-*-rank*.json' | wc -l)
[ "$dumps" -ge 2 ] || fail "$dumps dumps in the trace directory, expected one per rank"
echo "hang_watch_test $scenario: exit $rc after $((SECONDS - t0)) s, $dumps dumps"
exit $failed
