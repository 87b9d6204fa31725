#!/usr/bin/env bash
# PyTorch's own distributed_test.py against backend chorus and against gloo, side by side
# (`make test-torch-suite`). For each world size: run_suite.py with gloo, then with chorus, then
# compare.py, which prints "chorus passes N of the M tests gloo passes" and the tests gloo passes
# and chorus does not; it fails when one of those is not in exceptions.txt (each listed with why).
#
#   run-suite.sh [--torch newest|oldest|VERSION] [--venv DIR] [--build-prefix P] [--ranks "2 4"]
#                [--out DIR] [--jobs N] [-- run_suite.py arguments, e.g. -k barrier]
#
# --torch picks the venv of scripts/install-torch2 (made if missing); --venv names one directly.
# The backend is built against that torch in P-torch-<version> (default P: build; the folder
# `make test-torch` uses). Results: <out>/{gloo,chorus}-<N>.json, <out>/table-<N>.md and the
# logs (default <build folder>/torch-suite).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
torch=newest venv="" prefix=$root/build out="" ranks="2 4" jobs=2
while (($#)); do
  case "$1" in
    --torch) torch=$2; shift 2 ;;
    --venv) venv=$2; shift 2 ;;
    --build-prefix) prefix=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run-suite: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

[[ -n $venv ]] || venv=$("$root/scripts/install-torch2" "$torch" | tail -n 1)
python=$venv/bin/python
version=$("$python" -c 'import torch; print(torch.__version__.split("+")[0])')
# torch's test modules import expecttest (a PyPI package, not a torch dependency).
if ! "$python" -c 'import expecttest' 2>/dev/null; then
  echo "run-suite: installing expecttest (PyPI) into $venv" >&2
  "$python" -m pip install --quiet expecttest
fi

build=$prefix-torch-$version
out=${out:-$build/torch-suite}
mkdir -p "$out"
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHORUS_WERROR=ON \
    -DPython3_EXECUTABLE="$python" ${CMAKE_FLAGS:-}
fi
cmake --build "$build" -j "$jobs" --target chorus_py_core chorus_py_torch

status=0
for n in $ranks; do
  for backend in gloo chorus; do
    echo "run-suite: torch $version, $backend, $n ranks (log: $out/$backend-$n.log)"
    # A failing test is not a failure here: compare.py judges chorus against gloo.
    PYTHONPATH=$build/python "$python" "$here/run_suite.py" --backend "$backend" \
      --world-size "$n" --json "$out/$backend-$n.json" "$@" >"$out/$backend-$n.log" 2>&1 || true
    tail -n 1 "$out/$backend-$n.log"
    [[ -s $out/$backend-$n.json ]] || { echo "run-suite: no results (see the log)" >&2; exit 1; }
  done
  "$python" "$here/compare.py" "$out/gloo-$n.json" "$out/chorus-$n.json" \
    --table "$out/table-$n.md" --expect-exceptions "$here/exceptions.txt" || status=1
done
exit $status
