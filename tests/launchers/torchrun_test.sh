#!/usr/bin/env bash
# torchrun starts a C++ program (--no-python): Chorus reads torchrun's rank and local variables
# and meets at MASTER_PORT + 1 with no CHORUS_STORE; the all-reduce results are checked.
#
#   torchrun_test.sh CHORUS_BENCH
set -uo pipefail

bench=${1:?usage: torchrun_test.sh CHORUS_BENCH}
python=/usr/bin/python3
"$python" -c 'import torch.distributed.run' 2>/dev/null || {
  echo "SKIP: torchrun (python3-torch) is not installed"
  exit 77
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# --redirects/--tee: torchrun's worker output through files (Python 3.11's multiprocessing needs
# it here); -u CHORUS_STORE: the store must come from torchrun's variables.
env -u CHORUS_STORE -u CHORUS_RANK -u CHORUS_WORLD_SIZE timeout 120 "$python" -m torch.distributed.run \
  --standalone --nproc_per_node 2 --no_python --redirects 2 --tee 2 \
  "$bench" -b 8 -e 64K -f 16 -n 2 -w 1 >"$out" 2>&1
code=$?

failures=0
check() {
  if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; failures=$((failures + 1)); fi
}
check "torchrun exits 0 (got $code)" '[ $code -eq 0 ]'
launch=$(grep -o '# launch: .*' "$out" | head -1)
echo "$launch"
check "rank 0 was started by torchrun" '[[ $launch == *"launcher=torchrun rank=0 size=2"* ]]'
check "local rank and size from torchrun" '[[ $launch == *"local_rank=0 local_size=2"* ]]'
check "the store is MASTER_PORT + 1" '[[ $launch == *"store_from=\"MASTER_ADDR, MASTER_PORT + 1\""* ]]'
rows=$(awk '$1 ~ /^[0-9]+$/ && NF >= 9' "$out")
check "four sizes measured (8 B to 32 KiB)" '[ "$(printf "%s\n" "$rows" | grep -c .)" -eq 4 ]'
check "no wrong results" '[ -z "$(printf "%s\n" "$rows" | awk "\$8 != 0")" ]'
if ((failures > 0)); then
  cat "$out"
  exit 1
fi
