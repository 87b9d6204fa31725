#!/usr/bin/env bash
# PyTorch training on an etcd store: `chorus-run --store etcd://...` hands the store to the ranks,
# the chorus group meets there (not in torch's env:// store in rank 0), a rank is killed mid-step,
# and the survivors agree on the new membership through etcd (its compare-and-set) and end
# bit-identical. Skipped (77) without etcd or without a torch that shrinks a group in place.
#   etcd_store_test.sh PYTHON CHORUS_RUN EXAMPLE
set -euo pipefail
py=$1 run=$2 example=$3
command -v etcd >/dev/null || { echo "skip: no etcd (scripts/install-deps)"; exit 77; }
"$py" -c 'import chorus.torch, sys; sys.exit(0 if chorus.torch.can_shrink() else 77)' \
  || { echo "skip: this torch cannot shrink a group in place"; exit 77; }

. "$(dirname "$0")/../../../scripts/etcd-one-member.sh"
dir=$(mktemp -d)
trap 'kill $ETCD_PID 2>/dev/null || true; wait $ETCD_PID 2>/dev/null || true; rm -rf "$dir"' EXIT
etcd_one_member "$dir" "$py"
client=$ETCD_CLIENT_PORT

out=$dir/out
timeout -k 5 100 "$run" -n 3 --elastic --max-restarts 0 --min-ranks 2 \
  --store "etcd://127.0.0.1:$client/job" -- "$py" "$example" --synthetic --batch 16 --steps 8 \
  --timeout 30 --fail-rank 1 --fail-step 3 2>&1 | tee "$out"
grep -q "3 -> 2 ranks (lost 1)" "$out" || { echo "FAIL: no membership change 3 -> 2"; exit 1; }
grep -q "parameters: bit-identical on all 2 ranks" "$out" || { echo "FAIL: survivors differ"; exit 1; }
# The group's rendezvous and membership lived in etcd.
keys=$(curl -sf -m 5 -X POST "http://127.0.0.1:$client/v3/kv/range" \
  -d "{\"key\": \"$(printf 'job/torch/' | base64)\", \"range_end\": \"$(printf 'job/torch0' | base64)\", \"count_only\": true}")
echo "etcd: $keys"
grep -q '"count":"[1-9]' <<<"$keys" || { echo "FAIL: no key of the torch group in etcd"; exit 1; }
echo "ok: trained on etcd, lost rank 1, 2 survivors bit-identical"
