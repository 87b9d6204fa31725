# Sourced by the scripts and tests that need a throwaway one-member etcd on loopback:
#   . scripts/etcd-one-member.sh
#   etcd_one_member DIR [PYTHON]   starts it with its data, log and ports under DIR, waits until
#                                  it answers; sets ETCD_PID and ETCD_CLIENT_PORT; returns 1 (with
#                                  the log's tail on stderr) when it does not start.
# The caller stops it (kill "$ETCD_PID") and removes DIR.
etcd_one_member() {
  local dir=$1 py=${2:-python3} client peer
  local free='import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
  client=$("$py" -c "$free")
  peer=$("$py" -c "$free")
  etcd --name one --data-dir "$dir/data" --log-level warn \
    --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "one=http://127.0.0.1:$peer" >"$dir/log" 2>&1 &
  ETCD_PID=$!
  ETCD_CLIENT_PORT=$client
  for _ in $(seq 100); do
    curl -sf -m 1 "http://127.0.0.1:$client/health" >/dev/null && return 0
    sleep 0.1
  done
  echo "etcd did not start: $(tail -5 "$dir/log")" >&2
  return 1
}
