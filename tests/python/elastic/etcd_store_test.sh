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

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
dir=$(mktemp -d)
client=$(free_port)
peer=$(free_port)
etcd --name t --data-dir "$dir/data" --log-level warn --unsafe-no-fsync \
  --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
  --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
  --initial-cluster "t=http://127.0.0.1:$peer" >"$dir/log" 2>&1 &
etcd_pid=$!
trap 'kill $etcd_pid 2>/dev/null || true; wait $etcd_pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  curl -sf -m 1 "http://127.0.0.1:$client/health" >/dev/null && break
  sleep 0.1
done
curl -sf -m 1 "http://127.0.0.1:$client/health" >/dev/null \
  || { echo "etcd did not start: $(tail -5 "$dir/log")"; exit 1; }

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
