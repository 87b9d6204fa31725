#!/usr/bin/env bash
# Time from the kill -9 of a rank of chorus-train --elastic (in step 10, after its forward pass)
# to the first optimizer step completed by the new membership, under chorus-run --elastic on this
# host: without a replacement (the survivors go on) and with one (chorus-run restarts the rank; the
# time then includes the replacement's start-up: LibTorch, the data, join, the state copy).
# Usage: measure_recovery.sh CHORUS_RUN CHORUS_TRAIN [RUNS] [SIZES...]
set -uo pipefail
run=$1 train=$2 runs=${3:-3}
shift 3 2>/dev/null || shift $#
sizes=("$@")
((${#sizes[@]})) || sizes=(2 4)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "ranks replacement run recovery_ms size_after"
for n in "${sizes[@]}"; do
  for replacement in no yes; do
    for ((i = 1; i <= runs; i++)); do
      if [[ $replacement == yes ]]; then
        extra=()
      else
        extra=(--max-restarts 0 --min-ranks 1)
      fi
      "$run" -n "$n" --elastic "${extra[@]}" --timeout 30 -- "$train" --elastic --limit 8192 \
        --batch 32 --no-progress --admit-every 2 --fail-rank $((n - 1)) --fail-step 10 >"$out" 2>&1
      killed=$(sed -n 's/.*kills itself (SIGKILL) in step .* at unix time \([0-9]*\) ms.*/\1/p' "$out")
      # The change that admitted the replacement (with one), else the first change.
      if [[ $replacement == yes ]]; then
        gen=$(sed -n 's/.*membership change before step .*(generation \([0-9]*\), .* 1 joined.*/\1/p' "$out" | head -1)
      else
        gen=1
      fi
      line=$(grep "first step of the new membership completed .*generation $gen)" "$out" | head -1)
      done_ms=$(sed -n 's/.* at unix time \([0-9]*\) ms.*/\1/p' <<<"$line")
      size=$(sed -n 's/.*(step [0-9]*, \([0-9]*\) ranks.*/\1/p' <<<"$line")
      if [[ -n $killed && -n $done_ms ]]; then
        echo "$n $replacement $i $((done_ms - killed)) $size"
      else
        echo "$n $replacement $i failed"
        cat "$out" >&2
      fi
    done
  done
done
