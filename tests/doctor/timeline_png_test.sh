#!/usr/bin/env bash
# chorus-timeline-png on the timeline of the all_in fixture: a PNG, and the per-rank figures it
# prints (rank 2 busy, the others waiting). Skips (77) without matplotlib.
#
#   timeline_png_test.sh BUILD_DIR
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=doctor_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/doctor_lib.sh"
python=/usr/bin/python3
"$python" -c 'import matplotlib' 2>/dev/null || skip "python3-matplotlib is not installed"
png=$here/../../tools/chorus-doctor/chorus-timeline-png
"$doctor" --timeline "$scratch/t.json" "$here/fixtures/all_in" >/dev/null 2>&1
"$python" "$png" "$scratch/t.json" "$scratch/t.png" >"$scratch/png.out" 2>&1
check "chorus-timeline-png succeeds" [ $? = 0 ]
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
check "it writes a PNG" is_png "$scratch/t.png"
show "$scratch/png.out"
check "rank 2 is busy for 3 s (it is running the call the others wait in)" \
  has '^rank 2 \(vm\): busy 2\.99[0-9] s, waiting 0\.00[0-9] s' "$scratch/png.out"
check "rank 0 waits for 3 s" has '^rank 0 \(vm\): busy 0\.0[0-9]+ s, waiting 2\.99[0-9] s' "$scratch/png.out"
finish
