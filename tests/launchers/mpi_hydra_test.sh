#!/usr/bin/env bash
# MPICH's Hydra (mpiexec.hydra) on this host, 3 ranks, Chorus launched as a user would:
# `mpiexec.hydra -n 3 -genv CHORUS_STORE tcp://127.0.0.1:<port> prog`.
# Exit 0: pass, 1: fail, 77: skipped (no mpiexec.hydra or mpiexec.mpich).
#
#   tests/launchers/mpi_hydra_test.sh CHORUS_BENCH PLACEMENT_PROBE
#
# Checks: chorus-bench's all-reduce correct on every size; rank and local rank from Hydra's
# variables, every peer on shared memory (mpi_placement_probe). Loopback only, no root needed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"

if (($# != 2)); then
  echo "usage: $0 CHORUS_BENCH PLACEMENT_PROBE" >&2
  exit 2
fi
bench=$1
probe=$2
hydra=$(command -v mpiexec.hydra || command -v mpiexec.mpich || true)
[[ -n $hydra ]] || skip "mpiexec.hydra / mpiexec.mpich not found (Debian package mpich)"
command -v ss >/dev/null || skip "'ss' not found (Debian package iproute2)"
for f in "$bench" "$probe"; do
  [[ -x $f ]] || { echo "FAIL - $f is not built" >&2; exit 1; }
done
clear_launch_env
scratch=$(mktemp -d /tmp/chorus-mpi-hydra.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

# hydra3 ARGS...: 3 ranks on this host, the store on rank 0 at 127.0.0.1 and a free port.
hydra3() {
  local port
  port=$(free_port)
  timeout -k 5 30 "$hydra" -n 3 -genv CHORUS_STORE "tcp://127.0.0.1:$port" "$@"
}

# 1. chorus-bench: results per size, rank 0's launch line.
out=$scratch/bench.out
rc=0
t0=$EPOCHREALTIME
hydra3 "$bench" --op allreduce -b 8 -e 256K -f 8 -n 2 -w 1 >"$out" 2>&1 || rc=$?
took_since "$t0"
show "$out"
bench_passed() { [[ $rc == 0 ]] && grep -q 'ranks=3' "$out" && bench_ok "$out" 6; }
check "$(basename "$hydra") -n 3 chorus-bench: exit 0, 6 sizes (8 B .. 256 KiB), #wrong 0 on every row" \
  bench_passed
check "rank 0's launch line: launcher=\"MPICH (Hydra)\" rank=0 size=3 local_rank=0 local_size=3" \
  grep -q '^# launch: launcher="MPICH (Hydra)" rank=0 size=3 local_rank=0 local_size=3 store=tcp://127.0.0.1:' "$out"

# 2. Ranks and transports, as Chorus sees them.
out=$scratch/probe.out
rc=0
t0=$EPOCHREALTIME
hydra3 "$probe" >"$out" 2>&1 || rc=$?
took_since "$t0"
show "$out"
ns=$(stat -L -c %i /proc/self/ns/net)
expected="rank=0 size=3 netns=$ns local=0/3 to=self,shm,shm launcher=MPICH (Hydra)
rank=1 size=3 netns=$ns local=1/3 to=shm,self,shm launcher=MPICH (Hydra)
rank=2 size=3 netns=$ns local=2/3 to=shm,shm,self launcher=MPICH (Hydra)"
check "ranks 0..2 with local rank i/3 from Hydra, shared memory between every pair" \
  bash -c "[[ $rc == 0 && \$(cat '$out') == '$expected' ]]"
finish
