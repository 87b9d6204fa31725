#!/usr/bin/env bash
# What the flight recorder costs per call: 2-rank all-reduces of 8 B and 1 KiB, over shared memory
# and over TCP loopback, with the recorder on (the default) and off (CHORUS_TRACE_ENTRIES=0),
# in interleaved runs (on off off on on off ...) so that a change in the machine's load hits both.
# Each run reports the median iteration (chorus-bench: the slowest rank per iteration) and the
# mean of its middle 80% of iterations; the script prints, per transport and size, the median
# over the runs of each, on / off, and the ratios.
#
#   bench/compare/recorder_cost.sh [BUILD]
#
# Then, where the build has it, tools/chorus-bench/recorder-ab: the same 8-byte shm all-reduce with
# the recorder on and off inside one process (two communicators split from one parent, timed in
# alternating blocks), AB_RUNS processes; it prints each process's median ratio of neighbouring
# blocks and their median. Separate runs land in different speed regimes of this machine (an
# 8-byte call takes 0.45, 0.75 or 1.0 us); one process compares both in the same regime.
#
# Environment: ROUNDS (7: runs per setting), AB_RUNS (9), ITERS (20000), WARMUP (2000), TRANSPORTS ("shm tcp"),
# PIN (1: rank r runs on CPU r, which keeps the placement of the two ranks the same in every run;
# 0: the scheduler places them).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
rounds=${ROUNDS:-7}
iters=${ITERS:-20000}
warmup=${WARMUP:-2000}
transports=${TRANSPORTS:-shm tcp}
pin=${PIN:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # transport mode round
  local entries=2000
  [ "$2" = off ] && entries=0
  local wrap=()
  ((pin)) && wrap=(sh -c 'exec taskset -c "$CHORUS_RANK" "$@"' sh)
  CHORUS_TRANSPORT=$1 CHORUS_TRACE_ENTRIES=$entries "$build/tools/chorus-run/chorus-run" -n 2 -- \
    "${wrap[@]}" "$build/tools/chorus-bench/chorus-bench" -b 8 -e 1K -f 128 -n "$iters" -w "$warmup" \
    --no-check --in-place 0 --json "$out/$1-$2-$3.json" >/dev/null
}

for ((i = 1; i <= rounds; ++i)); do
  for transport in $transports; do
    if ((i % 2)); then order="on off"; else order="off on"; fi
    for mode in $order; do run "$transport" "$mode" "$i"; done
  done
done

/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
times, means = {}, {}
for path in glob.glob(os.path.join(sys.argv[1], "*.json")):
    transport, mode, _ = os.path.basename(path)[:-5].split("-")
    for row in json.load(open(path))["rows"]:
        key = (transport, row["bytes"], mode)
        times.setdefault(key, []).append(row["time_us"])
        means.setdefault(key, []).append(row.get("trimmed_mean_us", row["time_us"]))
# median: the median iteration of each run (in the clock's steps of about 10 ns); mean: the mean
# of each run's iterations between its 10th and 90th percentiles (finer). Both: median over runs.
print(f"{'transport':>9} {'bytes':>6} {'on (us)':>9} {'off (us)':>9} {'on/off':>7}"
      f" {'mean on':>9} {'mean off':>9} {'on/off':>7}  runs")
for transport in ("shm", "tcp"):
    if (transport, 8, "on") not in times: continue
    for size in sorted({k[1] for k in times if k[0] == transport}):
        on, off = times[(transport, size, "on")], times[(transport, size, "off")]
        mon, moff = means[(transport, size, "on")], means[(transport, size, "off")]
        a, b = statistics.median(on), statistics.median(off)
        c, d = statistics.median(mon), statistics.median(moff)
        print(f"{transport:>9} {size:>6} {a:>9.3f} {b:>9.3f} {a / b:>7.3f}"
              f" {c:>9.4f} {d:>9.4f} {c / d:>7.3f}  {len(on)}+{len(off)}")
        print(f"{'':>17} on:  {' '.join(f'{t:.3f}' for t in on)}")
        print(f"{'':>17} off: {' '.join(f'{t:.3f}' for t in off)}")
PY

ab=$build/tools/chorus-bench/recorder-ab
if [[ -x $ab ]]; then
  ratios=()
  for ((i = 1; i <= ${AB_RUNS:-9}; ++i)); do
    wrap=()
    ((pin)) && wrap=(sh -c 'exec taskset -c "$CHORUS_RANK" "$@"' sh)
    line=$(CHORUS_TRANSPORT=shm "$build/tools/chorus-run/chorus-run" -n 2 -- "${wrap[@]}" "$ab" \
      --blocks 300 --json "$out/ab-$i.json")
    echo "in one process: $line"
    ratios+=("$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pair_ratio"])' "$out/ab-$i.json")")
  done
  /usr/bin/python3 -c 'import statistics,sys; v=[float(x) for x in sys.argv[1:]];
print(f"in one process, 8 B shm, on/off: median {statistics.median(v):.4f} of {len(v)} processes (range {min(v):.4f}-{max(v):.4f})")' "${ratios[@]}"
fi
