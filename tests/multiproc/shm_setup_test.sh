#!/usr/bin/env bash
# Shared memory at setup: N ranks on this host (default 8) each create a communicator, run one
# small all-reduce and one barrier, and report the Chorus shared memory they map
# (shm_setup_probe). Checks that every rank reports, that the host's shared memory (the sum of
# the ranks' Pss over Chorus memfds) stays under LIMIT_KIB per rank (default 1024: rings are made
# only for the pairs that talk), and that nothing is left in /dev/shm. Prints the figures
# (max_create_ms: the slowest rank's creation from its own start, which includes waiting for the
# launcher to start the others; create_after_last_start_ms: from the last rank's start to the
# last rank's end of creation):
#   shm_setup_test.sh BUILD_DIR [N] [LIMIT_KIB]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
build=${1:?usage: shm_setup_test.sh BUILD_DIR [N] [LIMIT_KIB]}
n=${2:-8}
limit_kib=${3:-1024}
run=$build/tools/chorus-run/chorus-run
probe=$build/tests/shm_setup_probe
[[ -x $run && -x $probe ]] || skip "chorus-run or shm_setup_probe not built"
clear_launch_env
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

shm_files() { find /dev/shm -maxdepth 1 -mindepth 1 2>/dev/null | sort; }
shm_files >"$scratch/before"
t0=$EPOCHREALTIME
CHORUS_TRANSPORT=shm timeout 300 "$run" -n "$n" -- "$probe" >"$scratch/out" 2>"$scratch/err"
rc=$?
wall=$(seconds_since "$t0")
shm_files >"$scratch/after"

check "job of $n ranks exits 0" test "$rc" -eq 0
check "every rank reports" test "$(grep -c '^SHM ' "$scratch/out")" -eq "$n"
summary=$(awk '/^SHM /{
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    rss += f["rss_kib"]; pss += f["pss_kib"]; vsz += f["vsz_kib"]
    if (f["create_ms"] > create) create = f["create_ms"]
    if (f["start_ms"] > last_start) last_start = f["start_ms"]
    if (f["end_ms"] > last_end) last_end = f["end_ms"]
  } END { printf "%d %d %d %.1f %.1f", pss, rss, vsz, create, last_end - last_start }' "$scratch/out")
read -r pss rss vsz create after_last <<<"$summary"
echo "ranks=$n host_shm_pss_kib=$pss sum_rss_kib=$rss sum_mapped_kib=$vsz" \
  "max_create_ms=$create create_after_last_start_ms=$after_last job_wall_s=$wall load=\"$(cut -d' ' -f1-3 /proc/loadavg)\""
check "host shared memory ${pss} KiB under $((limit_kib * n)) KiB" test "$pss" -le $((limit_kib * n))
check "nothing left in /dev/shm" cmp -s "$scratch/before" "$scratch/after"
if ((failures)); then
  echo "--- stdout"; head -20 "$scratch/out"; echo "--- stderr"; head -40 "$scratch/err"
fi
finish
