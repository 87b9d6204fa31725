# shellcheck shell=bash
# Shared by the doctor test scripts: the tools, a scratch directory, a private store server.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
build=${1:?usage: $(basename "$0") BUILD_DIR}
# shellcheck disable=SC2034  # used by the scripts that source this file
launcher=$build/tools/chorus-run/chorus-run
doctor=$build/tools/chorus-doctor/chorus-doctor
store_server=$build/tools/chorus-store/chorus-store
scratch=$(mktemp -d)
export TMPDIR=$scratch  # chorus-run's trace directories go here too
clear_launch_env
server_pid=
job_pid=
cleanup() {
  [[ -n $job_pid ]] && kill -KILL "$job_pid" 2>/dev/null
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT

# start_store: a new chorus-store on a free loopback port (a store serves one job); its URL in
# $store.
start_store() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  "$store_server" --host 127.0.0.1 --port 0 >"$scratch/store.out" 2>&1 &
  server_pid=$!
  local i
  for ((i = 0; i < 50; i++)); do
    store=$(grep -o 'tcp://[0-9.]*:[0-9]*' "$scratch/store.out" 2>/dev/null)
    [[ -n $store ]] && return 0
    sleep 0.1
  done
  echo "chorus-store did not start:" >&2
  show "$scratch/store.out" >&2
  return 1
}

# has LINE_PATTERN FILE: the file has a line matching the extended regular expression.
has() {
  grep -Eq -- "$1" "$2" || {
    echo "    no line matches: $1" >&2
    show "$2" >&2
    return 1
  }
}

# trace_dir FILE: the directory chorus-run printed for the traces.
trace_dir() { sed -n 's/^chorus-run: the ranks.* traces go to //p' "$1" | head -1; }

# live_verdict: chorus-doctor --live's first line for $store.
live_verdict() { timeout 20 "$doctor" --live --quiet-seconds 0.5 --store "$store" 2>&1 | head -1; }
