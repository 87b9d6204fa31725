#!/usr/bin/env bash
# A rank of chorus-train that dies in the middle of training (--fail-rank, --fail-signal exit:
# _exit(17) after its forward pass, no goodbye): chorus-run must exit non-zero naming that rank,
# and the surviving rank must stop with an error naming the step, the collective and the lost
# peer, well before any timeout (60 s here).
set -uo pipefail
run=$1 train=$2
start=$(date +%s)
out=$("$run" -n 2 --timeout 60 -- "$train" --limit 2048 --epochs 1 --batch 32 --no-progress \
  --fail-rank 1 --fail-step 5 --fail-signal exit 2>&1)
rc=$?
elapsed=$(($(date +%s) - start))
echo "$out"
fail() { echo "train_fail_test: $*" >&2; exit 1; }
[[ $rc -ne 0 ]] || fail "chorus-run exited 0"
[[ $elapsed -lt 30 ]] || fail "took ${elapsed}s: the survivor waited instead of failing"
grep -q "chorus-run: rank 1 .*exited with status 17" <<<"$out" || fail "chorus-run did not name rank 1"
grep -Eq "chorus-train: dp step 5, bucket [0-9]+ .*\(rank 0\): .*rank 1" <<<"$out" ||
  fail "rank 0 did not report the lost rank 1 in step 5"
echo "train_fail_test: ok (${elapsed}s)"
