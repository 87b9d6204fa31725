#!/usr/bin/env bash
# Authentication end to end, with real processes: a key file with loose permissions is refused;
# two jobs with different keys at one store address (the second fails with an authentication
# error, the first completes with correct results); a chorus-run job is authenticated without
# any setting (its ranks get a private key file, a client without it is refused by chorus-run's
# store, the file is gone after the job); CHORUS_AUTH=required without a key refuses to run; a
# job whose ranks span hosts without a key warns once, and CHORUS_AUTH=off silences it.
#
#   auth_jobs_test.sh BUILD_DIR
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
build=${1:?usage: auth_jobs_test.sh BUILD_DIR}
run=$build/tools/chorus-run/chorus-run
store_server=$build/tools/chorus-store/chorus-store
doctor=$build/tools/chorus-doctor/chorus-doctor
bench=$build/tools/chorus-bench/chorus-bench
worker=$build/tests/mp_worker
clear_launch_env
scratch=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT
says() { grep -q -- "$2" "$1" || { echo "  $1 says: $(tail -3 "$1")"; false; }; }
silent_about() { ! grep -q -- "$2" "$1" || { echo "  $1 says: $(grep -- "$2" "$1")"; false; }; }

head -c 32 /dev/urandom >"$scratch/a.key"
head -c 32 /dev/urandom >"$scratch/b.key"
chmod 600 "$scratch/a.key" "$scratch/b.key"

# 1. A key file others may read.
cp "$scratch/a.key" "$scratch/loose.key"
chmod 644 "$scratch/loose.key"
timeout 10 "$store_server" --host 127.0.0.1 --port 0 --key-file "$scratch/loose.key" \
  >"$scratch/loose.out" 2>&1
loose_rc=$?
check "a key file with mode 0644 stops chorus-store" test "$loose_rc" -eq 1
check "the refusal names the file and its mode" \
  says "$scratch/loose.out" "key file $scratch/loose.key: mode 0644 lets the group or others read"

# 2. Two jobs, two keys, one store address.
port=$(free_port)
"$store_server" --host 127.0.0.1 --port "$port" --key-file "$scratch/a.key" >"$scratch/server.out" 2>&1 &
server_pid=$!
for ((i = 0; i < 100; i++)); do
  grep -q "listening on" "$scratch/server.out" && break
  sleep 0.1
done
store=tcp://127.0.0.1:$port
CHORUS_AUTH_KEY_FILE=$scratch/a.key timeout 60 "$run" -n 2 --store "$store" --timeout 30 -- \
  "$worker" correct >"$scratch/jobA.out" 2>&1 &
job_a=$!
t0=$EPOCHREALTIME
CHORUS_AUTH_KEY_FILE=$scratch/b.key timeout 60 "$run" -n 2 --store "$store" --timeout 30 -- \
  "$worker" correct >"$scratch/jobB.out" 2>&1
b_rc=$?
b_seconds=$(seconds_since "$t0")
wait "$job_a"
a_rc=$?
check "the job with the other key fails" test "$b_rc" -ne 0
check "... within its timeout (30 s): ${b_seconds} s" awk -v s="$b_seconds" 'BEGIN { exit !(s < 30) }'
check "... with an authentication error naming the wrong key" \
  says "$scratch/jobB.out" "authentication with server 127.0.0.1:$port failed: .*wrong key"
check "the job with the store's key completes" test "$a_rc" -eq 0
check "... with correct results on both ranks" \
  test "$(grep -c 'case=correct status=CHORUS_OK .* wrong=0 identical=1' "$scratch/jobA.out")" -eq 2
check "the store logged the refusal with the peer address" \
  says "$scratch/server.out" "chorus: authentication failed from 127.0.0.1:[0-9]*: wrong key"
kill "$server_pid" 2>/dev/null
wait "$server_pid" 2>/dev/null
server_pid=

# 3. chorus-run with no setting at all: its store and ranks share a fresh private key.
cat >"$scratch/rank.sh" <<'SCRIPT'
#!/usr/bin/env bash
doctor=$1 out=$2
[[ -n ${CHORUS_AUTH_KEY_FILE:-} ]] || { echo "no key file given"; exit 3; }
echo "$CHORUS_AUTH_KEY_FILE" >"$out/keypath"
stat -c '%a' "$CHORUS_AUTH_KEY_FILE" "$(dirname "$CHORUS_AUTH_KEY_FILE")" >"$out/modes"
env -u CHORUS_AUTH_KEY_FILE "$doctor" --live --store "$CHORUS_STORE" >"$out/nokey.out" 2>&1
"$doctor" --live --store "$CHORUS_STORE" >"$out/withkey.out" 2>&1
exit 0
SCRIPT
chmod +x "$scratch/rank.sh"
timeout 60 "$run" -n 1 -- "$scratch/rank.sh" "$doctor" "$scratch" >"$scratch/run.out" 2>&1
check "chorus-run hands its ranks a key file" test -s "$scratch/keypath"
check "... readable by its owner only, in a directory of its own" \
  test "$(tr '\n' ' ' <"$scratch/modes")" = "600 700 "
check "a client without the key is refused by chorus-run's store" \
  says "$scratch/nokey.out" "this store requires authentication"
check "... and chorus-run logs it" says "$scratch/run.out" "authentication failed from 127.0.0.1"
check "a client with the key is let in" silent_about "$scratch/withkey.out" "authentication"
check "the key file is removed when the job ends" test ! -e "$(cat "$scratch/keypath")"
timeout 60 "$run" -n 2 -- "$worker" correct >"$scratch/plain.out" 2>&1
check "an authenticated chorus-run job computes correct results" \
  test "$(grep -c 'case=correct status=CHORUS_OK .* wrong=0 identical=1' "$scratch/plain.out")" -eq 2

# 4. CHORUS_AUTH=required without a key.
port=$(free_port)
CHORUS_AUTH=required CHORUS_STORE=tcp://127.0.0.1:$port CHORUS_RANK=0 CHORUS_WORLD_SIZE=1 \
  timeout 30 "$bench" -b 8 -e 8 -n 1 -w 0 >"$scratch/required.out" 2>&1
check "CHORUS_AUTH=required without a key refuses to run" \
  says "$scratch/required.out" "CHORUS_AUTH=required, but no key is set"

# 5. Ranks on two hosts (host ids) without a key: one warning; CHORUS_AUTH=off: none.
port=$(free_port)
"$store_server" --host 127.0.0.1 --port "$port" >"$scratch/open.out" 2>&1 &
server_pid=$!
for ((i = 0; i < 100; i++)); do
  grep -q "listening on" "$scratch/open.out" && break
  sleep 0.1
done
two_hosts() {
  timeout 60 "$run" -n 2 --store "tcp://127.0.0.1:$port" --timeout 30 -- bash -c \
    'CHORUS_HOST_ID=host$CHORUS_RANK exec "$0" -b 8 -e 8 -n 1 -w 0' "$bench" >"$1" 2>&1
}
CHORUS_AUTH=auto two_hosts "$scratch/warn.out"
check "ranks on two hosts without a key: warned once" \
  test "$(grep -c 'ranks span hosts and are not authenticated' "$scratch/warn.out")" -eq 1
CHORUS_AUTH=off two_hosts "$scratch/off.out"
check "CHORUS_AUTH=off: no warning" silent_about "$scratch/off.out" "not authenticated"
check "chorus-store without a key says so" says "$scratch/open.out" "no key"

finish
