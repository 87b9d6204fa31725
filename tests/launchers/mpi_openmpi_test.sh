#!/usr/bin/env bash
# Open MPI's mpirun across 2 emulated hosts (scripts/cluster), 2 ranks on each, Chorus launched
# as a user would: `mpirun -np 4 --hostfile H -x CHORUS_STORE=tcp://<host 0>:<port> prog`.
# Exit 0: pass, 1: fail, 77: skipped (not root, no network namespaces, no mpirun.openmpi).
#
#   tests/launchers/mpi_openmpi_test.sh CHORUS_BENCH PLACEMENT_PROBE
#
# Checks: chorus-bench's all-reduce correct on every size and the hierarchical algorithm chosen;
# ranks 0,1 on host 0 and 2,3 on host 1, shared memory within a host and TCP across
# (mpi_placement_probe); a rank killed mid-run ends the job, the survivors' errors name it.
#
# mpirun runs on host 0 and starts a daemon on each host through bench/compare/netns-rsh.sh, an
# "ssh" that enters the host's network namespace and gives each daemon a
# temporary directory of its own. The cluster has a prefix of its own (chorusm-*), and a lock
# keeps two runs of this test (say, from two checkouts) apart.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
cluster=$repo/scripts/cluster
rsh=$here/../../bench/compare/netns-rsh.sh
export CHORUS_CLUSTER_PREFIX=chorusm
p=$CHORUS_CLUSTER_PREFIX

if (($# != 2)); then
  echo "usage: $0 CHORUS_BENCH PLACEMENT_PROBE" >&2
  exit 2
fi
bench=$1
probe=$2
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces)"
command -v mpirun.openmpi >/dev/null || skip "mpirun.openmpi not found (Debian package openmpi-bin)"
for t in ip tc ethtool ss; do
  command -v "$t" >/dev/null || skip "'$t' not found (Debian packages iproute2, ethtool)"
done
ip netns add "$p-probe" 2>/dev/null || skip "'ip netns add' does not work here"
ip netns del "$p-probe"
for f in "$bench" "$probe"; do
  [[ -x $f ]] || { echo "FAIL - $f is not built" >&2; exit 1; }
done

clear_launch_env
exec {lock}>"/tmp/chorus-launchers-$p.lock"
flock -w 120 "$lock" || { echo "FAIL - another run holds /tmp/chorus-launchers-$p.lock" >&2; exit 1; }
scratch=$(mktemp -d /tmp/chorus-mpi-openmpi.XXXXXX)
cleanup() {
  "$cluster" down >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT
# The ranks authenticate with a key file they all read, as the README shows for mpirun.
(umask 077 && head -c 32 /dev/urandom >"$scratch/job.key")

check "scripts/cluster up 2 ($p-h0 10.77.0.1, $p-h1 10.77.0.2)" "$cluster" up 2
printf 'h0 slots=2\nh1 slots=2\n' >"$scratch/hosts"

# mpirun4 PORT ARGS...: mpirun on host 0, ranks 0,1 on h0 and 2,3 on h1 (Open MPI fills each
# host's slots in turn), the store on rank 0 at 10.77.0.1:PORT (a port of host 0's own namespace).
# TMPDIR: mpirun's session directory in the scratch directory, the daemons' below it.
mpirun4() {
  local port=$1
  shift
  TMPDIR=$scratch timeout -k 5 40 "$cluster" exec 0 mpirun.openmpi --allow-run-as-root -np 4 \
    --hostfile "$scratch/hosts" --mca plm_rsh_agent "$rsh" --mca routed direct \
    --mca oob_tcp_if_include 10.77.0.0/24 -x "CHORUS_STORE=tcp://10.77.0.1:$port" \
    -x "CHORUS_AUTH_KEY_FILE=$scratch/job.key" "$@"
}

# 1. chorus-bench: results and algorithm per size, rank 0's launch line.
out=$scratch/bench.out
rc=0
t0=$EPOCHREALTIME
mpirun4 29501 "$bench" --op allreduce -b 8 -e 256K -f 8 -n 2 -w 1 --chorus-columns >"$out" 2>&1 || rc=$?
took_since "$t0"
show "$out"
bench_passed() { [[ $rc == 0 ]] && grep -q 'ranks=4' "$out" && bench_ok "$out" 6; }
check "mpirun -np 4 chorus-bench: exit 0, 6 sizes (8 B .. 256 KiB), #wrong 0 on every row" \
  bench_passed
hier_rows=$(bench_rows "$out" | awk '$14 == "hier" { printf "%s ", $1 }')
echo "    hier chosen at: ${hier_rows:-no size}"
check "the cost model chooses the hierarchical all-reduce (algo column 'hier')" \
  test -n "$hier_rows"
check "rank 0's launch line: launcher=\"Open MPI\" rank=0 size=4 local_rank=0 local_size=2" \
  grep -q '^# launch: launcher="Open MPI" rank=0 size=4 local_rank=0 local_size=2 store=tcp://10.77.0.1:29501 ' "$out"

# 2. Placement and transports, as Chorus sees them.
out=$scratch/probe.out
rc=0
t0=$EPOCHREALTIME
mpirun4 29502 "$probe" >"$out" 2>&1 || rc=$?
took_since "$t0"
show "$out"
ns0=$(ip netns exec "$p-h0" stat -L -c %i /proc/self/ns/net)
ns1=$(ip netns exec "$p-h1" stat -L -c %i /proc/self/ns/net)
expected="rank=0 size=4 netns=$ns0 local=0/2 to=self,shm,tcp,tcp launcher=Open MPI
rank=1 size=4 netns=$ns0 local=1/2 to=shm,self,tcp,tcp launcher=Open MPI
rank=2 size=4 netns=$ns1 local=0/2 to=tcp,tcp,self,shm launcher=Open MPI
rank=3 size=4 netns=$ns1 local=1/2 to=tcp,tcp,shm,self launcher=Open MPI"
# The probe's lines only: mpirun adds warnings of its own now and then (a setpgid that lost a race
# with its child's exec, "plm:rsh: Warning: setpgid(...) failed in parent").
check "ranks 0,1 on host 0 and 2,3 on host 1, local rank i/2 (Open MPI's), shm within a host, tcp across" \
  bash -c "[[ $rc == 0 && \$(grep '^rank=' '$out') == '$expected' ]]"

# 3. Rank 3 (host 1) killed with SIGKILL while the ranks run all-reduces of 1 MiB.
out=$scratch/kill.out
rc=0
t0=$EPOCHREALTIME
# shellcheck disable=SC2016  # expanded by each rank's shell
mpirun4 29503 -x CHORUS_TIMEOUT=20 bash -c \
  'if [[ $OMPI_COMM_WORLD_RANK == 3 ]]; then (sleep 2; kill -9 $$) & fi; exec "$@"' rank \
  "$bench" --op allreduce -b 1M -e 1M -n 100000 -w 1 >"$out" 2>&1 || rc=$?
took=$(seconds_since "$t0")
show "$out"
named=$(grep -c '^chorus-bench: .*lost connection to rank 3 ' "$out" || true)
echo "    mpirun exit $rc after ${took}s; $named survivor(s) named rank 3"
check "a killed rank fails the job promptly (mpirun exit non-zero, well before the 40 s timeout)" \
  bash -c "(($rc != 0 && ${took%.*} < 30))"
check "the survivors' errors name the killed rank ('lost connection to rank 3')" \
  test "$named" -ge 1
# mpirun's own verdict names whichever process it saw end first: rank 3 (signal 9) or a survivor
# that had already exited with its error, so it is logged, not checked.
if grep -q 'process rank 3 .*signal 9' "$out"; then
  echo "    mpirun's verdict: rank 3 killed by signal 9"
elif grep -q 'exited with non-zero status' "$out"; then
  echo "    mpirun's verdict: a survivor's non-zero exit came first"
else
  echo "    mpirun's verdict: none recognised"
fi

check "scripts/cluster down" "$cluster" down
finish
