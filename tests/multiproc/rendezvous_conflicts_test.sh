#!/usr/bin/env bash
# Misconfigured launches end at once, on every rank involved, with the conflict named:
# two processes that claim one rank, ranks that disagree on the world size, a store that already
# served a job; and a rank that waits alone names the ranks that never came.
#
#   rendezvous_conflicts_test.sh BUILD_DIR
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
build=${1:?usage: rendezvous_conflicts_test.sh BUILD_DIR}
bench=$build/tools/chorus-bench/chorus-bench
store_server=$build/tools/chorus-store/chorus-store
scratch=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT


# start NAME STORE RANK SIZE: one rank of chorus-bench in the background, output in NAME.out.
# The timeout is long (30 s): every case below must end well before it.
pids=()
start() {
  CHORUS_TIMEOUT=30 CHORUS_STORE=$2 CHORUS_RANK=$3 CHORUS_WORLD_SIZE=$4 \
    timeout 60 "$bench" -b 8 -e 8 -n 1 -w 0 >"$scratch/$1.out" 2>&1 &
  pids+=($!)
}
# await_ranks: waits for the started ranks; their exit codes in $codes, the seconds in $elapsed.
await_ranks() {
  local t0=$EPOCHREALTIME
  codes=()
  for p in "${pids[@]}"; do
    wait "$p"
    codes+=($?)
  done
  pids=()
  elapsed=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", b - a }')
}
says() { grep -q -- "$2" "$scratch/$1.out" || { echo "  $1 says: $(tail -2 "$scratch/$1.out")"; false; }; }
failed_fast() { [[ ${codes[0]} -ne 0 && ${codes[1]} -ne 0 && $elapsed -lt 10 ]] || { echo "  exit codes ${codes[*]} after ${elapsed} s"; false; }; }

# 1. Two processes both start as rank 0 of 2 (no rank 1 at all).
store=tcp://127.0.0.1:$(free_port)
start first "$store" 0 2
sleep 0.3
start second "$store" 0 2
await_ranks
check "two claimants of rank 0: both fail within 10 s" failed_fast
for who in first second; do
  check "two claimants of rank 0: the $who names the conflict and both processes" \
    says "$who" "rank 0 is claimed by two processes: $(hostname) pid [0-9]* and $(hostname) pid [0-9]*"
done

# 2. Rank 0 expects 2 ranks, rank 1 expects 3.
store=tcp://127.0.0.1:$(free_port)
start zero "$store" 0 2
start one "$store" 1 3
await_ranks
check "world sizes 2 and 3: both fail within 10 s" failed_fast
for who in zero one; do
  check "world sizes 2 and 3: rank $who names both sizes" \
    says "$who" "rank 1 (.*) says the world has 3 ranks, rank 0 (.*) says 2"
done

# 3. A store server that already served a finished job.
port=$(free_port)
"$store_server" --host 127.0.0.1 --port "$port" >"$scratch/server.out" 2>&1 &
server_pid=$!
store=tcp://127.0.0.1:$port
# The server must listen before the first job starts: else that job's rank 0 hosts a store of its
# own, and the second job finds a fresh one.
server_listens() {
  local i
  for ((i = 0; i < 100; i++)); do
    grep -q "listening on" "$scratch/server.out" && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  sed 's/^/  | /' "$scratch/server.out"
  return 1
}
check "the chorus-store server listens" server_listens
start job1-rank0 "$store" 0 2
start job1-rank1 "$store" 1 2
await_ranks
check "the first job on a chorus-store server runs" [ "${codes[*]}" = "0 0" ]
start job2-rank0 "$store" 0 2
start job2-rank1 "$store" 1 2
await_ranks
check "a second job on the same store: both ranks fail within 10 s" failed_fast
for r in 0 1; do
  check "a second job on the same store: rank $r says the store holds another job" \
    says "job2-rank$r" "rank $r already belongs to a job on this store"
done

# 4. Rank 0 of 3 alone, with a short timeout: it names the ranks that never came.
CHORUS_TIMEOUT=1 CHORUS_STORE=tcp://127.0.0.1:$(free_port) CHORUS_RANK=0 CHORUS_WORLD_SIZE=3 \
  timeout 30 "$bench" -b 8 -e 8 -n 1 >"$scratch/alone.out" 2>&1
check "a rank alone fails" [ $? -ne 0 ]
check "a rank alone names the missing ranks" says alone "timed out waiting for ranks 1, 2 to join (1 of 3 came)"

finish
