#!/usr/bin/env bash
# Chorus under a real Slurm: a private one-node Slurm (scripts/slurm-local) for the time of the
# test, then, in sequence on it:
#   - srun -n 2 and srun -n 4 of chorus-bench: every row's #wrong is 0, and rank 0's launch line
#     says launcher=Slurm with the right size and local size, and a store at the port derived
#     from the job and step ids;
#   - sbatch --wait of slurm_train.sbatch: chorus-train on 2 ranks ends with identical parameters;
#   - srun -n 2 of mp_worker with rank 1 killed: srun fails, naming task 1, and rank 0's error
#     names the lost rank 1.
# No CHORUS_STORE anywhere: each job's ranks find their store from the job's own variables.
#
#   tests/launchers/slurm_test.sh CHORUS_BENCH MP_WORKER [CHORUS_TRAIN]
#
# Without CHORUS_TRAIN (built only with LibTorch) the sbatch check is skipped. Exit 0: pass,
# 1: fail, 77: skipped (not root, or Slurm or munge not installed). CHORUS_SLURM_TEST_KEEP=1 keeps
# the scratch directory (configuration, daemon logs, job output) for a look afterwards.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
slurm_local=$here/../../scripts/slurm-local
bench=${1:?usage: slurm_test.sh CHORUS_BENCH MP_WORKER [CHORUS_TRAIN]}
worker=${2:?usage: slurm_test.sh CHORUS_BENCH MP_WORKER [CHORUS_TRAIN]}
train=${3:-}
keep=${CHORUS_SLURM_TEST_KEEP:-0}

# shellcheck source-path=SCRIPTDIR source=../harness/checks.sh
source "$here/../harness/checks.sh"
[[ $(id -u) -eq 0 ]] || skip "needs root (slurmd starts job steps as their user)"
for c in munged mungekey slurmctld slurmd srun sbatch sinfo scancel; do
  command -v "$c" >/dev/null ||
    skip "'$c' not found (Debian packages slurmctld slurmd slurm-client munge: scripts/install-deps)"
done
# The node is this machine under its short name; the store address derived from the job names it.
getent hosts "$(hostname -s)" >/dev/null ||
  skip "this machine's name '$(hostname -s)' does not resolve (/etc/hosts): a job's first host could not be reached"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/chorus-slurm-test.XXXXXX")
cleanup() {
  "$slurm_local" down "$scratch/slurm" >/dev/null
  if [[ $keep == 1 ]]; then echo "kept $scratch"; else rm -rf "$scratch"; fi
}
trap cleanup EXIT
# A signal ends the step under way and goes through the EXIT trap: the daemons are not our
# children any more, only the trap stops them.
step_pid=
interrupted() {
  [[ -z $step_pid ]] || kill -TERM "$step_pid" 2>/dev/null
  exit 143
}
trap interrupted TERM INT HUP

# bounded SECONDS OUT command...: run it under timeout with its output in OUT, as a background job
# that the shell waits for (a signal interrupts that wait at once, not a foreground command).
bounded() {
  local seconds=$1 out=$2 rc
  shift 2
  timeout "$seconds" "$@" >"$out" 2>&1 &
  step_pid=$!
  wait "$step_pid"
  rc=$?
  step_pid=
  return "$rc"
}

bad() { # bad MESSAGE [OUTPUT]: explain a failed check, with the output that shows it
  echo "  $1"
  [[ -z ${2:-} ]] || while IFS= read -r line; do echo "  | $line"; done <<<"$2"
  return 1
}

# --- the checks --------------------------------------------------------------------------------

# srun -n N chorus-bench: a small all-reduce sweep, results checked on every row.
bench_under_srun() {
  local n=$1 out rc=0 rows wrong launch
  bounded 30 "$scratch/bench$n.out" srun --ntasks="$n" "$bench" --op allreduce -b 8 -e 1M -f 4 -n 3 -w 1 ||
    rc=$?
  out=$(<"$scratch/bench$n.out")
  ((rc == 0)) || { bad "srun exited $rc" "$out"; return 1; }
  # Table rows start with the size in bytes; column 8 is #wrong.
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13' <<<"$out" | wc -l)
  wrong=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 && ($9 != "0" || $13 != "0")' <<<"$out")
  ((rows == 9)) || { bad "expected 9 result rows (8 B to 1 MiB), got $rows" "$out"; return 1; }
  [[ -z $wrong ]] || { bad "rows with wrong results" "$out"; return 1; }
  launch=$(grep '^# launch: ' <<<"$out")
  [[ $(grep -c . <<<"$launch") -eq 1 ]] || { bad "expected one '# launch:' line (rank 0's)" "$out"; return 1; }
  for field in launcher=Slurm rank=0 "size=$n" local_rank=0 "local_size=$n" \
    "store=tcp://$(hostname -s):" 'store_from="Slurm job'; do
    [[ " ${launch#\# launch: } " == *" $field"* ]] || { bad "launch line lacks '$field'" "$launch"; return 1; }
  done
  # The port comes from the job and step ids: 20000 + (job * 16 + step) mod 12000.
  [[ $launch =~ store=tcp://[^:]+:([0-9]+)\ store_from=\"Slurm\ job\ ([0-9]+)\ step\ ([0-9]+) ]] ||
    { bad "cannot read the store port, job and step from the launch line" "$launch"; return 1; }
  local port=${BASH_REMATCH[1]} job=${BASH_REMATCH[2]} step=${BASH_REMATCH[3]}
  ((port == 20000 + (job * 16 + step) % 12000)) ||
    { bad "store port $port is not the one derived from job $job step $step" "$launch"; return 1; }
}

# sbatch --wait: chorus-train on 2 ranks through srun inside the batch script.
train_under_sbatch() {
  local log=$scratch/train.out rc=0 out
  bounded 60 "$scratch/sbatch.out" sbatch --wait --output="$log" "$here/slurm_train.sbatch" "$train" ||
    rc=$?
  out=$(<"$scratch/sbatch.out")
  [[ -f $log ]] && out+=$'\n'$(<"$log")
  ((rc == 0)) || { bad "sbatch --wait exited $rc" "$out"; return 1; }
  grep -q "^parameters identical on all 2 ranks" <<<"$out" ||
    { bad "no 'parameters identical on all 2 ranks' line" "$out"; return 1; }
}

# srun -n 2 mp_worker kill 1: rank 1 SIGKILLs itself while both loop on 16 MiB all-reduces.
rank_killed_under_srun() {
  local out rc=0
  bounded 30 "$scratch/kill.out" srun --ntasks=2 "$worker" kill 1 16 300 1000 || rc=$?
  out=$(<"$scratch/kill.out")
  ((rc != 0 && rc != 124)) || { bad "srun exited $rc (expected a failure, not 0 or a timeout)" "$out"; return 1; }
  grep -q "^KILL rank=1" <<<"$out" || { bad "rank 1 did not get to kill itself" "$out"; return 1; }
  grep -Eq "srun: error: .*task 1: Killed" <<<"$out" || { bad "srun did not report task 1 killed" "$out"; return 1; }
  grep -Eq "^RESULT rank=0 case=first status=CHORUS_ERR_[A-Z_]+ .*msg=.*rank 1\b" <<<"$out" ||
    { bad "rank 0's error does not name rank 1" "$out"; return 1; }
}

# --- run ---------------------------------------------------------------------------------------

# Each job finds its place and its store from Slurm's variables alone: those of any other launcher
# left in this environment (srun passes it on) would take precedence.
unset CHORUS_STORE CHORUS_RANK CHORUS_WORLD_SIZE CHORUS_LOCAL_RANK CHORUS_LOCAL_SIZE \
  OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE \
  PMI_RANK PMI_SIZE MPI_LOCALRANKID MPI_LOCALNRANKS TORCHELASTIC_RUN_ID MASTER_ADDR MASTER_PORT \
  RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
t0=$EPOCHREALTIME
if ! bounded 90 "$scratch/up.out" "$slurm_local" up "$scratch/slurm"; then
  echo "FAIL - bring up a private Slurm:"
  cat "$scratch/up.out"
  exit 1
fi
echo "ok   - private Slurm up ($(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')s)"
eval "$("$slurm_local" env "$scratch/slurm")"

check "srun -n 2 chorus-bench: results right, launch line" bench_under_srun 2
check "srun -n 4 chorus-bench: results right, launch line" bench_under_srun 4
if [[ -n $train && -x $train ]]; then
  check "sbatch --wait: chorus-train on 2 ranks, parameters identical" train_under_sbatch
else
  echo "skip - sbatch --wait chorus-train (chorus-train not built: it needs LibTorch)"
fi
check "srun -n 2, rank 1 killed: srun fails, rank 0 names rank 1" rank_killed_under_srun

finish
