#!/usr/bin/env bash
# Less traffic: 2 ranks with --compress bf16 and with --mode diloco for a few steps. The metrics
# CSV has the bytes sent and the training time per step and the --eval-every accuracies; bf16
# sends about half the bytes of its float32 gradients; the replicas end bit-identical (sync
# always; diloco after its final averaging).
set -uo pipefail
run=$1 train=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../tests/harness/checks.sh
source "$here/../tests/harness/checks.sh"
clear_launch_env
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--limit 1024 --batch 32 --no-progress --max-steps 16 --eval-every 8)
train2() { "$run" -n 2 --timeout 90 -- "$train" "${common[@]}" "$@" 2>&1; }

# column NAME FILE: the values of that CSV column, one per line.
column() {
  awk -F, -v name="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
                         c { print $c }' "$2"
}
# bytes_sent over bytes (the float32 payload of the steps that sent), summed over the steps.
sent_ratio() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "bytes") b = i; if ($i == "bytes_sent") s = i }; next }
           { sb += $b; ss += $s } END { if (sb > 0) printf "%.3f\n", ss / sb; else print "none" }' "$1"
}

bf16=$(train2 --compress bf16 --metrics "$dir/bf16.csv")
echo "$bf16"
check "bf16: replicas bit-identical" grep -q "parameters identical on all 2 ranks" <<<"$bf16"
check "bf16: the metrics have bytes_sent, wall_s, train_s" \
  grep -q "test_accuracy,bytes_sent,wall_s,train_s" "$dir/bf16.csv"
check "bf16: 16 steps, accuracy at steps 8 and 16" \
  test "$(column test_accuracy "$dir/bf16.csv" | grep -c .)" -eq 2
ratio=$(sent_ratio "$dir/bf16.csv")
echo "bf16: bytes sent / float32 bytes reduced = $ratio"
# A ring all-reduce of n bytes sends n (N-1)/N * 2 = n per rank at N = 2: bf16 about half.
check "bf16: about half the float32 bytes on the wire ($ratio)" \
  awk -v r="$ratio" 'BEGIN { exit !(r > 0.3 && r < 0.7) }'
check "bf16: the summary reports bytes sent per rank per step" \
  grep -q "bytes sent per rank per step: [1-9]" <<<"$bf16"

diloco=$(train2 --mode diloco --sync-every 4 --outer-lr 0.7 --outer-momentum 0.9 \
  --metrics "$dir/diloco.csv")
echo "$diloco"
check "diloco: replicas bit-identical at the end" \
  grep -q "parameters identical on all 2 ranks" <<<"$diloco"
check "diloco: final accuracy reported" grep -q "final test accuracy [1-9]" <<<"$diloco"
# Syncs at every 4th step only: 4 of 16 steps reduce anything, the others nothing.
sending=$(column bytes "$dir/diloco.csv" | awk '$1 > 0' | wc -l)
check "diloco: 4 of 16 steps reduce bytes (saw $sending)" test "$sending" -eq 4
finish
