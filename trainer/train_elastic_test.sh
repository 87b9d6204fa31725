#!/usr/bin/env bash
# chorus-train --elastic under chorus-run --elastic, 4 ranks, rank 2 lost in step 5:
#  1. killed (SIGKILL), restarted: the replacement receives the state and the job ends on 4 ranks;
#  2. killed, no restarts (--max-restarts 0 --min-ranks 3): the job ends on 3 ranks;
#  3. hung (SIGSTOP), with a short CHORUS_TIMEOUT: treated as dead after the timeout, the job
#     ends on 3 ranks; resumed afterwards, the hung rank learns it was declared dead and exits.
# Each run must end with the test accuracy and "parameters identical on all N ranks".
set -uo pipefail
run=$1 train=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../tests/harness/checks.sh
source "$here/../tests/harness/checks.sh"
clear_launch_env
common=(--elastic --batch 32 --no-progress --fail-rank 2 --fail-step 5)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# The replacement is admitted at the change that follows the failure when chorus-run announced
# it before the survivors decided, else at a later step (--admit-every): the job must last
# longer than a replacement's start-up.
"$run" -n 4 --elastic --timeout 30 -- "$train" "${common[@]}" --limit 4096 --epochs 2 \
  --admit-every 2 >"$out" 2>&1
rc=$?
cat "$out"
check "with a restart: exit 0" test $rc -eq 0
check "... rank 2 killed in step 5" grep -q "chorus-train: rank 2 (pid [0-9]*) kills itself (SIGKILL) in step 5" "$out"
check "... a replacement joined" grep -Eq "membership change before step [0-9]+: [34] -> 4 ranks \(generation [12], former ranks 0,1,(3,-1|2,-1), lost (2|none), 1 joined" "$out"
check "... finished on 4 identical ranks" grep -q "^parameters identical on all 4 ranks" "$out"
check "... with a test accuracy" grep -q "^final test accuracy [0-9.]*%" "$out"

"$run" -n 4 --elastic --max-restarts 0 --min-ranks 3 --timeout 30 -- "$train" "${common[@]}" \
  --limit 3072 >"$out" 2>&1
rc=$?
cat "$out"
check "without restarts: exit 0" test $rc -eq 0
check "... the survivors went on" grep -q "membership change before step 5: 4 -> 3 ranks (generation 1, former ranks 0,1,3, lost 2, 0 joined" "$out"
check "... finished on 3 identical ranks" grep -q "^parameters identical on all 3 ranks" "$out"

# A hung rank: chorus-run cannot see it; the survivors time out on it (CHORUS_TIMEOUT 4 s).
"$run" -n 4 --elastic --max-restarts 0 --min-ranks 3 --timeout 4 -- "$train" "${common[@]}" \
  --limit 3072 --fail-signal stop >"$out" 2>&1 &
job=$!
deadline=$((SECONDS + 90))
until grep -q "^parameters identical on all" "$out" || ((SECONDS > deadline)) || ! kill -0 $job 2>/dev/null; do
  sleep 0.5
done
pid=$(sed -n 's/.*rank 2 (pid \([0-9]*\)) stops itself.*/\1/p' "$out")
[[ -n $pid ]] && kill -CONT "$pid" 2>/dev/null
timeout 60 tail --pid=$job -f /dev/null
wait $job
rc=$?
cat "$out"
check "hung rank: exit 0" test $rc -eq 0
check "... the survivors timed out on it and went on" grep -q "membership change before step 5: 4 -> 3 ranks (generation 1, former ranks 0,1,3, lost 2" "$out"
check "... finished on 3 identical ranks" grep -q "^parameters identical on all 3 ranks" "$out"
check "... resumed, it learns it was declared dead" grep -q "declared dead" "$out"
finish
