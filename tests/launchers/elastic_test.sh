#!/bin/bash
# chorus-run --elastic with stand-in ranks (elastic_fake_rank.sh, no library): restarts, the
# joiner announced in the store, a job that goes on without a rank, one that falls below
# --min-ranks, a rank killed by SIGKILL, the membership log, and the options' errors.
#
#   elastic_test.sh CHORUS_RUN
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../harness/checks.sh
source "$here/../harness/checks.sh"
run=${1:?usage: elastic_test.sh CHORUS_RUN}
rank=$here/elastic_fake_rank.sh
scratch=$(mktemp -d /tmp/chorus-elastic-test.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
clear_launch_env

# job NAME ARGS...: runs chorus-run (bounded) with ARGS; its stdout goes to $scratch/NAME.out,
# its stderr (the launcher's log) to $scratch/NAME.log, its exit status to $code, its time to
# $took (seconds).
job() {
  local name=$1 t0=$EPOCHREALTIME
  shift
  timeout -k 5 30 "$run" "$@" >"$scratch/$name.out" 2>"$scratch/$name.log"
  code=$?
  took=$(seconds_since "$t0")
  echo "--- $name: chorus-run $* (exit $code, ${took}s)"
  show "$scratch/$name.log"
}
logged() { grep -Eq "$2" "$scratch/$1.log" || { echo "    no line matches /$2/" >&2; return 1; }; }
printed() { grep -Eq "$2" "$scratch/$1.out" || { echo "    no output matches /$2/" >&2; return 1; }; }
# A key of the file store, as the library's file store keeps it ("k" + the key in hex).
store_value() { cat "$1/k$(printf '%s' "$2" | od -An -tx1 | tr -d ' \n')" 2>/dev/null; }

# A rank that fails on its first start is restarted; the replacement joins, the job ends well.
store=$scratch/store-restart
ELASTIC_FAKE="2:fail 2:publish" job restart -n 4 --elastic --store "file://$store" -- "$rank"
check "restart: exit 0 (got $code)" [ "$code" -eq 0 ]
check "restart: the log names the failure" logged restart \
  '^chorus-run: rank 2 \(pid [0-9]+\) exited with status 3; restarting it \(restart 1 of 3\)$'
check "restart: the log names the replacement" logged restart \
  '^chorus-run: rank 2 restarted as pid [0-9]+ \(CHORUS_JOIN=1 CHORUS_RESTART=1\); 2 restart\(s\) left$'
check "restart: the replacement got CHORUS_JOIN=1 CHORUS_RESTART=1" printed restart \
  '^rank=2 join=1 restart=1 store=file://'
check "restart: 5 starts in all" [ "$(grep -c '^rank=' "$scratch/restart.out")" -eq 5 ]
check "restart: chorus/elastic/expected_joiners is 1" \
  [ "$(store_value "$store" chorus/elastic/expected_joiners)" = 1 ]
check "restart: chorus/elastic/restarts_left is 2" \
  [ "$(store_value "$store" chorus/elastic/restarts_left)" = 2 ]
check "restart: the membership change is logged" logged restart \
  '^chorus-run: membership: generation=1 size=4 former=0,1,3,-1 lost=2 joined=1$'

check "restart: the admitted replacement is left alone" \
  bash -c "! grep -q 'declared dead' '$scratch/restart.log'"

# A rank the survivors declared dead (stuck: it would sleep 30 s) but still running is killed,
# and the job goes on without it.
store=$scratch/store-declared
ELASTIC_FAKE="2:hang 0:declare" ELASTIC_FAKE_CHANGE="generation=1 size=3 former=0,1,3 lost=2 joined=0" \
  job declared -n 4 --elastic --max-restarts 0 --min-ranks 3 --store "file://$store" -- "$rank"
check "declared dead: exit 0 (got $code)" [ "$code" -eq 0 ]
check "declared dead: the launcher kills it" logged declared \
  '^chorus-run: rank 2 \(pid [0-9]+\) was declared dead by the survivors \(generation 1\) but is still running; killing it \(SIGKILL\)$'
check "declared dead: the job continues with 3" logged declared 'continues with 3 of 4 ranks'
check "declared dead: no 30 s wait (${took}s)" awk "BEGIN { exit !($took < 15) }"

# The same with the store chorus-run hosts, a rank killed by SIGKILL, and the hang watch on (it
# shares the supervisor's tick with the membership poll).
ELASTIC_FAKE="1:kill" CHORUS_TRACE_DIR=$scratch/traces job sigkill -n 3 --elastic --tag-output --hang-seconds 30 -- "$rank"
check "SIGKILL: exit 0 (got $code)" [ "$code" -eq 0 ]
check "SIGKILL: the log names the signal" logged sigkill \
  '^chorus-run: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\); restarting it'
check "SIGKILL: the replacement ran on the hosted store" printed sigkill \
  '^\[1\] rank=1 join=1 restart=1 store=tcp://127.0.0.1:'

# No restarts: the job goes on with 3 of 4 ranks.
ELASTIC_FAKE="2:fail" job continue -n 4 --elastic --max-restarts 0 --min-ranks 3 -- "$rank"
check "no restarts, --min-ranks 3: exit 0 (got $code)" [ "$code" -eq 0 ]
check "no restarts, --min-ranks 3: the log names the failure" logged continue \
  '^chorus-run: rank 2 \(pid [0-9]+\) exited with status 3 \(no restarts: --max-restarts 0\)$'
check "no restarts, --min-ranks 3: the job continues with 3" logged continue \
  '^chorus-run: the job continues with 3 of 4 ranks \(--min-ranks 3\)$'
check "no restarts, --min-ranks 3: nothing restarted" [ "$(grep -c '^rank=' "$scratch/continue.out")" -eq 4 ]

# Restarts run out: rank 3 fails on every start; with 2 restarts it is then lost.
ELASTIC_FAKE="3:always" job exhausted -n 4 --elastic --max-restarts 2 -- "$rank"
check "restarts exhausted: exit 0 (got $code)" [ "$code" -eq 0 ]
check "restarts exhausted: the second restart has CHORUS_RESTART=2" printed exhausted \
  '^rank=3 join=1 restart=2 '
check "restarts exhausted: then no restarts left" logged exhausted \
  'exited with status 3; no restarts left \(all 2 used\)$'
check "restarts exhausted: the job continues with 3" logged exhausted 'continues with 3 of 4 ranks'
check "restarts exhausted: the crash loop is named" logged exhausted \
  '^chorus-run: rank 3 failed again [0-9]+ ms after its restart \(a crash loop\? 0 restart\(s\) left\)$'

# Below --min-ranks: the job stops, naming every failure, with the first one's status.
ELASTIC_FAKE="1:always 2:always" ELASTIC_FAKE_SLEEP=20 \
  job below -n 4 --elastic --max-restarts 0 --min-ranks 3 -- "$rank"
check "below --min-ranks: exit 3 (got $code)" [ "$code" -eq 3 ]
check "below --min-ranks: the log names both failures" logged below \
  '^chorus-run: only 2 of 4 ranks left, fewer than --min-ranks 3; failures: rank [12] \(pid [0-9]+\) exited with status 3; rank [12] \(pid [0-9]+\) exited with status 3; stopping the 2 ranks$'
# The survivors would sleep 20 s: SIGTERM ends them at once.
check "below --min-ranks: the others were stopped at once (${took}s)" awk "BEGIN { exit !($took < 10) }"

# Every rank fails (as on a usage error): the job fails, naming the failures, with or without
# restarts.
for restarts in 0 1; do
  ELASTIC_FAKE="0:always 1:always" job "allfail$restarts" -n 2 --elastic --max-restarts "$restarts" -- "$rank"
  check "every rank fails, --max-restarts $restarts: exit 3 (got $code)" [ "$code" -eq 3 ]
  check "every rank fails, --max-restarts $restarts: the log names the failures" logged "allfail$restarts" \
    '^chorus-run: only 0 of 2 ranks left, fewer than --min-ranks 1; failures: rank [01] \(pid [0-9]+\) exited with status 3; rank [01] \(pid [0-9]+\) exited with status 3'
done

# A replacement that the others never admit (they finish first) is stopped, and the job ends
# well, instead of waiting for the replacement's join() to time out.
ELASTIC_FAKE="2:fail 2:unadmitted" job unadmitted -n 3 --elastic --grace 1 -- "$rank"
check "replacement not admitted: exit 0 (got $code)" [ "$code" -eq 0 ]
check "replacement not admitted: the log says so" logged unadmitted \
  '^chorus-run: every other rank finished \(exit 0\) before the replacement\(s\) rank 2 \(pid [0-9]+\) were admitted; the job is done; stopping the 1 rank$'
check "replacement not admitted: no 20 s wait (${took}s)" awk "BEGIN { exit !($took < 12) }"

# A replacement that dies before it registered as a joiner takes its announcement back; one that
# registered does not.
store=$scratch/store-unregistered
ELASTIC_FAKE="3:always" job unregistered -n 4 --elastic --max-restarts 2 --store "file://$store" -- "$rank"
check "replacements dead before registering: expected_joiners back to 0" \
  [ "$(store_value "$store" chorus/elastic/expected_joiners)" = 0 ]
check "replacements dead before registering: the log says so" logged unregistered \
  '^chorus-run: the replacement of rank 3 \(pid [0-9]+\) ended before it registered as a joiner; taking back its announcement in chorus/elastic/expected_joiners$'
store=$scratch/store-registered
ELASTIC_FAKE="3:register" job registered -n 4 --elastic --max-restarts 1 --store "file://$store" -- "$rank"
check "replacement dead after registering: expected_joiners stays 1" \
  [ "$(store_value "$store" chorus/elastic/expected_joiners)" = 1 ]

# One launcher per host (--first-rank, --world-size), two here on one file store: each gives its
# ranks their job ranks, and kills only its own rank when the survivors declare one dead. Rank 0
# hangs; the others' change leaves it out: launcher A kills it, launcher B (ranks 2 and 3, alive
# for 3 s) leaves its ranks alone.
store=$scratch/store-hosts
ELASTIC_FAKE="0:hang 2:declare" ELASTIC_FAKE_SLEEP=3 \
  ELASTIC_FAKE_CHANGE="generation=1 size=3 former=1,2,3 lost=0 joined=0" \
  job hostB -n 2 --first-rank 2 --world-size 4 --elastic --max-restarts 0 --store "file://$store" -- "$rank" &
ELASTIC_FAKE="0:hang 2:declare" ELASTIC_FAKE_SLEEP=3 \
  job hostA -n 2 --world-size 4 --elastic --max-restarts 0 --store "file://$store" -- "$rank"
wait
check "one launcher per host: job ranks 2 and 3 of 4 on the second" \
  bash -c "grep -q '^rank=2 ' '$scratch/hostB.out' && grep -q '^rank=3 ' '$scratch/hostB.out'"
check "one launcher per host: the first kills its rank 0, declared dead" logged hostA \
  '^chorus-run: rank 0 \(pid [0-9]+\) was declared dead by the survivors \(generation 1\) but is still running'
check "one launcher per host: the second kills nothing" \
  bash -c "! grep -q 'declared dead' '$scratch/hostB.log'"
job usage3 -n 2 --world-size 4 -- "$rank"
check "--world-size without --store: usage error" logged usage3 '^chorus-run: --world-size larger than -n needs --store$'
job usage4 -n 2 --first-rank 3 --world-size 4 --store "file://$store" -- "$rank"
check "--first-rank beyond --world-size: usage error" logged usage4 '^chorus-run: ranks 3..4 do not fit in --world-size 4$'

# Spares: started beside the ranks as joiners that may wait long, with the last rank's
# environment; the cap on the job's size is published where the C++ communicator and the torch
# backend's default group meet; every process learns of the spares. The spare ends with the job.
store=$scratch/store-spares
job spares -n 2 --elastic --spares 1 --store "file://$store" -- "$rank"
check "spares: exit 0 (got $code)" [ "$code" -eq 0 ]
check "spares: the log names the spare" logged spares \
  '^chorus-run: spare 1 of 1 started as pid [0-9]+ \(CHORUS_JOIN=1 CHORUS_SPARE=1\)'
check "spares: the spare got CHORUS_JOIN=1, CHORUS_SPARE=1, CHORUS_JOIN_WAIT=0" printed spares \
  '^rank=1 join=1 restart=0 store=file://[^ ]* spare=1 join_wait=0 spares=1$'
check "spares: the ranks got CHORUS_SPARES=1 and no CHORUS_JOIN" printed spares \
  '^rank=0 join= restart= store=file://[^ ]* spare= join_wait= spares=1$'
check "spares: 3 starts in all" [ "$(grep -c '^rank=' "$scratch/spares.out")" -eq 3 ]
check "spares: chorus/elastic/max_size is 2" \
  [ "$(store_value "$store" chorus/elastic/max_size)" = 2 ]
check "spares: torch/chorus/elastic/max_size is 2" \
  [ "$(store_value "$store" torch/chorus/elastic/max_size)" = 2 ]
check "spares: no replacement announced (the spares are the replacements)" \
  [ -z "$(store_value "$store" chorus/elastic/restarts_left)" ]
# A spare that fails with no restarts left is no lost rank: the job keeps its 2 (--min-ranks 2).
store=$scratch/store-spare-lost
ELASTIC_FAKE="spare:always" ELASTIC_FAKE_SLEEP=2 \
  job spare_lost -n 2 --elastic --spares 1 --max-restarts 0 --min-ranks 2 --store "file://$store" -- "$rank"
check "spare lost: exit 0 (got $code)" [ "$code" -eq 0 ]
check "spare lost: said so" logged spare_lost \
  '^chorus-run: a spare \(pid [0-9]+\) exited with status 3 while it waited to join; not restarted \(no restarts left\)$'
# A rank lost with no restarts while a spare waits: the spare takes its place, so the job still
# has 2 (--min-ranks 2) and goes on (it was stopped as if down to 1).
store=$scratch/store-spare-fills
ELASTIC_FAKE="1:kill" ELASTIC_FAKE_SLEEP=2 \
  job spare_fills -n 2 --elastic --spares 1 --max-restarts 0 --min-ranks 2 --store "file://$store" -- "$rank"
check "spare fills a hole: exit 0 (got $code)" [ "$code" -eq 0 ]
check "spare fills a hole: the job continues with 2" logged spare_fills \
  '^chorus-run: the job continues with 2 of 2 ranks \(--min-ranks 2\)$'

# Options.
job usage1 -n 4 --elastic --min-ranks 5 -- "$rank"
check "--min-ranks larger than -n: usage error" [ "$code" -eq 2 ]
check "--min-ranks larger than -n: says so" logged usage1 '^chorus-run: --min-ranks 5 is larger than -n 4$'
job usage2 -n 4 --max-restarts 1 -- "$rank"
check "--max-restarts without --elastic: usage error" logged usage2 '^chorus-run: --max-restarts needs --elastic$'
job usage5 -n 4 --spares 1 -- "$rank"
check "--spares without --elastic: usage error" logged usage5 '^chorus-run: --spares needs --elastic$'
job help --help
check "--help describes --elastic" grep -q 'CHORUS_JOIN=1' "$scratch/help.out"

# Without --elastic nothing changes: the first failure stops the job.
ELASTIC_FAKE="2:fail" ELASTIC_FAKE_SLEEP=20 job plain -n 4 -- "$rank"
check "without --elastic: exit 3 (got $code)" [ "$code" -eq 3 ]
check "without --elastic: the others are stopped" logged plain 'stopping the other 3 ranks'
finish
