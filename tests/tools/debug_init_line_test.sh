#!/usr/bin/env bash
# CHORUS_DEBUG=1: every rank's first line at creation names the library's version and whether
# its connections authenticate (and with which CHORUS_AUTH mode) and encrypt.
#
#   debug_init_line_test.sh BUILD_DIR VERSION
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
build=${1:?usage: debug_init_line_test.sh BUILD_DIR VERSION}
version=${2:?usage: debug_init_line_test.sh BUILD_DIR VERSION}
run=$build/tools/chorus-run/chorus-run
bench=$build/tools/chorus-bench/chorus-bench
clear_launch_env
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# job ENV...: a 2-rank chorus-bench of one 8-byte all-reduce under CHORUS_DEBUG=1.
job() { env CHORUS_DEBUG=1 "$@" "$run" -n 2 -- "$bench" -b 8 -e 8 -n 1 -w 0 >"$out" 2>&1; }
# init_lines PATTERN: both ranks' init lines match it, and each comes before any other line of
# that rank's library output.
init_lines() {
  local r first
  for r in 0 1; do
    first=$(grep -m1 "^chorus\[$r\]: " "$out")
    [[ $first =~ ^chorus\[$r\]:\ init:\ chorus\ $version,\ rank\ $r\ of\ 2\;\ $1 ]] || {
      echo "    rank $r's first line: $first"
      show "$out"
      return 1
    }
  done
}

# chorus-run gives its ranks a key of its own.
default_job() { job && init_lines 'authentication on \(CHORUS_AUTH=auto, key file .*fingerprint [0-9a-f]+.*\); encryption off'; }
check "chorus-run's own key: authentication on (auto), encryption off" default_job
off_job() { job CHORUS_AUTH=off && init_lines 'authentication off \(CHORUS_AUTH=off\); encryption off'; }
check "CHORUS_AUTH=off: authentication off (off)" off_job
encrypted_job() { job CHORUS_AUTH=required CHORUS_ENCRYPT=1 && init_lines 'authentication on \(CHORUS_AUTH=required, .*; encryption on \(CHORUS_ENCRYPT=1: AES-256-GCM'; }
check "CHORUS_AUTH=required CHORUS_ENCRYPT=1: authentication on (required), encryption on" \
  encrypted_job
quiet_job() { env CHORUS_DEBUG=0 "$run" -n 2 -- "$bench" -b 8 -e 8 -n 1 -w 0 >"$out" 2>&1 && ! grep -q ': init:' "$out"; }
check "CHORUS_DEBUG=0: no init line" quiet_job
finish
