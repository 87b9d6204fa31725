#!/usr/bin/env bash
# The ring's larger segments across hosts, on and off in alternating runs of one build: on the
# emulated cluster, chorus-bench with CHORUS_TCP_SEGMENT_BYTES=0 and then with the default (or
# $ON), per world size and round; prints busbw (GB/s) and CPU per byte (ns/B) per size.
#
#   bench/compare/tcp_segment_ab.sh BUILD_DIR
#
# Environment (defaults): HOSTS ("2 4 8"), ROUNDS (3), RATE (1gbit), ITERS (4), ON (unset: the
# default size), OUT (a new directory under /tmp). Needs root (scripts/cluster).
set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
bench=$(cd "$1" && pwd)/tools/chorus-bench/chorus-bench
[ -x "$bench" ] || { echo "missing $bench" >&2; exit 2; }
out=${OUT:-$(mktemp -d /tmp/tcp-segment-ab.XXXXXX)}
mkdir -p "$out"
cd "$repo" || exit 2
trap 'scripts/cluster down >/dev/null 2>&1' EXIT
for ((round = 1; round <= ${ROUNDS:-3}; ++round)); do
  for n in ${HOSTS:-2 4 8}; do
    scripts/cluster up "$n" --rate "${RATE:-1gbit}" >/dev/null || exit 1
    for setting in off on; do
      f=$out/n$n-$setting-r$round.json
      if [ "$setting" = off ]; then value=0; else value=${ON:-}; fi
      env ${value:+CHORUS_TCP_SEGMENT_BYTES=$value} timeout 600 scripts/cluster run "$n" -- \
        "$bench" -b 1M -e 64M -f 4 -n "${ITERS:-4}" -w 1 --no-check --in-place 0 --json "$f" \
        >"$out/n$n-$setting-r$round.log" 2>&1 || { echo "n=$n $setting round $round: failed"; continue; }
      /usr/bin/python3 - "$f" "$n" "$setting" "$round" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
rows = rows["rows"] if isinstance(rows, dict) else rows
cells = "  ".join(f"{r['bytes'] >> 20}M {r['busbw']:.4f} GB/s {r['cpu_ns_per_byte']:.2f} ns/B" for r in rows)
print(f"n={sys.argv[2]} {sys.argv[3]:>3} round {sys.argv[4]}: {cells}")
PY
    done
  done
done
echo "results: $out"
