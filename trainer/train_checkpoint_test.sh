#!/usr/bin/env bash
# Checkpoints: 2 ranks for 12 steps, then a resume for 12 more (crossing the end of epoch 1 at
# step 16), must reach bit-identical parameters to 24 steps without interruption; the temporary
# file of an interrupted write is ignored; a corrupted or truncated checkpoint is refused with a
# clear error, never used.
set -uo pipefail
run=$1 train=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../tests/harness/checks.sh
source "$here/../tests/harness/checks.sh"
clear_launch_env
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common=(--limit 1024 --epochs 3 --batch 32 --no-progress --check-every 0)
train2() { "$run" -n 2 --timeout 60 -- "$train" "${common[@]}" "$@" 2>&1; }
hash_of() { sed -n 's/^parameters identical on all 2 ranks (hash \([0-9a-f]*\))$/\1/p' <<<"$1"; }

whole=$(train2 --max-steps 24)
echo "$whole"
first=$(train2 --max-steps 12 --checkpoint "$dir/ck" --checkpoint-every 12)
echo "$first"
# A write interrupted at step 99 left its temporary file: not a checkpoint.
head -c 1000 "$dir/ck/checkpoint-12.bin" >"$dir/ck/checkpoint-99.bin.tmp"
resumed=$(train2 --max-steps 24 --checkpoint "$dir/ck" --checkpoint-every 12 --resume)
echo "$resumed"
h_whole=$(hash_of "$whole") h_resumed=$(hash_of "$resumed")
check "uninterrupted run ends with identical replicas" test -n "$h_whole"
check "the resumed run says where it resumed" grep -q "resumed from $dir/ck/checkpoint-12.bin (step 12" <<<"$resumed"
check "resumed parameters are bit-identical to the uninterrupted run's ($h_whole vs $h_resumed)" \
  test "$h_whole" = "$h_resumed"
check "the same final accuracy" test "$(grep 'final test accuracy' <<<"$whole" | cut -d, -f1)" = \
  "$(grep 'final test accuracy' <<<"$resumed" | cut -d, -f1)"
check "checkpoints written at steps 12 and 24" test -f "$dir/ck/checkpoint-24.bin"

# Flip one byte of the newest checkpoint (step 24): the resume must fail, naming the file.
/usr/bin/python3 -c "
import sys
f = open(sys.argv[1], 'r+b'); f.seek(5000); b = f.read(1); f.seek(5000); f.write(bytes([b[0] ^ 1]))
" "$dir/ck/checkpoint-24.bin"
corrupt=$(train2 --max-steps 30 --checkpoint "$dir/ck" --resume)
rc=$?
echo "$corrupt"
check "a corrupted checkpoint fails the run" test $rc -ne 0
check "... with a clear error" grep -q "checkpoint $dir/ck/checkpoint-24.bin: checksum mismatch" <<<"$corrupt"
# A truncated one (the rename makes that unlikely from the writer, not from a copy): the same
# refusal; checked with one rank alone, which reads the checkpoint the same way.
truncate -s 100000 "$dir/ck/checkpoint-24.bin"
truncated=$("$train" "${common[@]}" --checkpoint "$dir/ck" --resume 2>&1)
rc=$?
echo "$truncated"
check "a truncated checkpoint fails the run too" test $rc -ne 0
check "... with a clear error" grep -q "checkpoint-24.bin: checksum mismatch" <<<"$truncated"
finish
