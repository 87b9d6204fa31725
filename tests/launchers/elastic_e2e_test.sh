#!/bin/bash
# examples/elastic_allreduce under chorus-run -n 4 --elastic with rank 2 SIGKILLing itself at
# step 20: with a restart, the replacement joins and the job ends on 4 ranks; with
# --max-restarts 0 --min-ranks 3, it ends on 3. Every all-reduce result is checked by the program
# against the sum for its current membership. Skips (77) while the library's shrink is not built.
#
#   elastic_e2e_test.sh CHORUS_RUN ELASTIC_ALLREDUCE
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/checks.sh
source "$here/../harness/checks.sh"
run=${1:?usage: elastic_e2e_test.sh CHORUS_RUN ELASTIC_ALLREDUCE}
program=${2:?usage: elastic_e2e_test.sh CHORUS_RUN ELASTIC_ALLREDUCE}
scratch=$(mktemp -d /tmp/chorus-elastic-e2e.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
clear_launch_env
steps=(--steps 60 --step-ms 5)

# job NAME ARGS...: chorus-run ARGS (bounded); stdout in NAME.out, the launcher's log in NAME.log.
job() {
  local name=$1 t0=$EPOCHREALTIME
  shift
  timeout -k 5 60 "$run" "$@" >"$scratch/$name.out" 2>"$scratch/$name.log"
  code=$?
  echo "--- $name: chorus-run $* (exit $code, $(seconds_since "$t0")s)"
  show "$scratch/$name.log"
  show "$scratch/$name.out"
}
has() { grep -Eq "$2" "$scratch/$1" || { echo "    no line of $1 matches /$2/" >&2; return 1; }; }

job probe -n 2 --timeout 10 -- "$program" --steps 2 --admit-every 1 --step-ms 0
if grep -q 'not built yet' "$scratch/probe.log"; then
  skip "the library's Communicator::shrink/join are not built yet"
fi
check "without a failure: exit 0 (got $code)" [ "$code" -eq 0 ]

ELASTIC_KILL_RANK=2 ELASTIC_KILL_STEP=20 \
  job restart -n 4 --elastic --timeout 10 -- "$program" "${steps[@]}"
check "restart: exit 0 (got $code)" [ "$code" -eq 0 ]
check "restart: the launcher names the kill" has restart.log \
  '^chorus-run: rank 2 \(pid [0-9]+\) was killed by signal 9 \(Killed\); restarting it'
check "restart: the launcher logs the membership change" has restart.log \
  '^chorus-run: membership: .*size=4'
check "restart: the replacement joined (slots 0,1,3,2)" has restart.out \
  '^membership: generation=[0-9]+ size=4 slots=0,1,3,2 '
check "restart: finished on 4 ranks" has restart.out '^finished 60 steps on 4 ranks'

ELASTIC_KILL_RANK=2 ELASTIC_KILL_STEP=20 \
  job shrink -n 4 --elastic --max-restarts 0 --min-ranks 3 --timeout 10 -- "$program" "${steps[@]}"
check "no restarts: exit 0 (got $code)" [ "$code" -eq 0 ]
check "no restarts: the job continues with 3" has shrink.log 'the job continues with 3 of 4 ranks'
check "no restarts: the survivors shrank to 3 (slots 0,1,3)" has shrink.out \
  '^membership: generation=1 size=3 slots=0,1,3 '
check "no restarts: finished on 3 ranks" has shrink.out '^finished 60 steps on 3 ranks'
finish
