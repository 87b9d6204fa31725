#!/usr/bin/env bash
# torchrun starts a C++ program (--no-python): Chorus reads torchrun's rank and local variables
# and meets at MASTER_PORT + 1 with no CHORUS_STORE; the all-reduce results are checked.
#
#   torchrun_test.sh CHORUS_BENCH
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
bench=${1:?usage: torchrun_test.sh CHORUS_BENCH}
python=/usr/bin/python3
"$python" -c 'import torch.distributed.run' 2>/dev/null || skip "torchrun (python3-torch) is not installed"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# --redirects/--tee: torchrun's worker output through files (Python 3.11's multiprocessing needs
# it here). No CHORUS_STORE: the store must come from torchrun's variables.
clear_launch_env
timeout 120 "$python" -m torch.distributed.run \
  --standalone --nproc_per_node 2 --no_python --redirects 2 --tee 2 \
  "$bench" -b 8 -e 64K -f 16 -n 2 -w 1 >"$out" 2>&1
code=$?

check "torchrun exits 0 (got $code)" [ $code -eq 0 ]
launch=$(grep -o '# launch: .*' "$out" | head -1)
echo "$launch"
has() { [[ $launch == *"$1"* ]]; }
check "rank 0 was started by torchrun" has "launcher=torchrun rank=0 size=2"
check "local rank and size from torchrun" has "local_rank=0 local_size=2"
check "the store is MASTER_PORT + 1" has 'store_from="MASTER_ADDR, MASTER_PORT + 1"'
check "four sizes (8 B to 32 KiB), every #wrong 0" bench_ok "$out" 4
((failures == 0)) || show "$out"
finish
