#!/usr/bin/env bash
# chorus-run -n 2 chorus-train on 2048 samples for one epoch: exit 0 and identical parameters.
set -uo pipefail
run=$1 train=$2
out=$("$run" -n 2 --timeout 60 -- "$train" --limit 2048 --epochs 1 --batch 32 --no-progress 2>&1)
rc=$?
echo "$out"
if [[ $rc -ne 0 ]]; then echo "train_test: chorus-run exited $rc" >&2; exit 1; fi
if ! grep -q "parameters identical on all 2 ranks" <<<"$out"; then
  echo "train_test: no 'parameters identical on all 2 ranks' line" >&2
  exit 1
fi
