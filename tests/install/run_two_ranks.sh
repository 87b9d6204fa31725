#!/usr/bin/env bash
# run_two_ranks.sh PYTHON PREFIX TMPDIR: 2 ranks of torch_all_reduce_rank.py, each bounded in time;
# fails, printing both logs, unless both ranks report ok. PYTHONPATH comes from the caller.
set -euo pipefail
python=$1
prefix=$2
tmp=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -f "$tmp/init"
pids=()
for rank in 0 1; do
  timeout 90 "$python" "$here/torch_all_reduce_rank.py" "$prefix" "$tmp/init" $rank \
    > "$tmp/rank$rank.log" 2>&1 &
  pids+=($!)
done
status=0
for rank in 0 1; do
  if ! wait "${pids[$rank]}" || ! grep -q "rank $rank ok" "$tmp/rank$rank.log"; then status=1; fi
done
if ((status != 0)); then
  echo "2-rank all_reduce with $python from $prefix failed:" >&2
  cat "$tmp/rank0.log" "$tmp/rank1.log" >&2
fi
exit $status
