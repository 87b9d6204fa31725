#!/usr/bin/env bash
# chorus-store's command line (CLI11, like the other tools): --host/--port/--key-file in both
# "--flag value" and "--flag=value" forms, usage errors exit 2 naming the problem, --help lists
# the flags with their defaults, and without --key-file the server takes CHORUS_AUTH_KEY_FILE.
#
#   store_cli_test.sh BUILD_DIR
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
build=${1:?usage: store_cli_test.sh BUILD_DIR}
store=$build/tools/chorus-store/chorus-store
clear_launch_env
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
out=$scratch/out

usage_error() {  # usage_error TEXT ARGS...: exit status 2 and TEXT in the output
  local text=$1
  shift
  "$store" "$@" >"$out" 2>&1
  local rc=$?
  if [[ $rc != 2 ]] || ! grep -q -- "$text" "$out"; then
    echo "    rc=$rc"
    show "$out"
    return 1
  fi
}
check "--port 70000 is refused" usage_error "65535" --port 70000
check "--port abc is refused" usage_error "--port" --port abc
check "an unknown flag is refused" usage_error "--bogus" --bogus
check "--host without a value is refused" usage_error "--host" --host

help_lists_flags() {
  "$store" --help >"$out" 2>&1 || { show "$out"; return 1; }
  if ! grep -q -- "--key-file" "$out" || ! grep -q "29500" "$out" || ! grep -q "0.0.0.0" "$out"
  then
    show "$out"
    return 1
  fi
}
check "--help lists the flags and their defaults" help_lists_flags

# A key file with mode 0644 stops the server before it listens (exit 1), from the flag in its
# "=" form and from the environment alike: both reach the server's key settings.
refused_key() {  # refused_key COMMAND...: exit status 1 naming the key file
  "$@" >"$out" 2>&1
  local rc=$?
  if [[ $rc != 1 ]] || ! grep -q "loose.key" "$out"; then
    echo "    rc=$rc"
    show "$out"
    return 1
  fi
}
head -c 32 /dev/urandom >"$scratch/loose.key"
chmod 0644 "$scratch/loose.key"
check "--key-file=F reaches the key settings" \
  refused_key timeout 10 "$store" --host=127.0.0.1 --port=0 --key-file="$scratch/loose.key"
check "CHORUS_AUTH_KEY_FILE is the fallback of --key-file" \
  refused_key env CHORUS_AUTH_KEY_FILE="$scratch/loose.key" timeout 10 "$store" --host 127.0.0.1 \
  --port 0
finish
