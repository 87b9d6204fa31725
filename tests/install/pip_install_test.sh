#!/usr/bin/env bash
# `pip install .` of the source tree into a temporary venv that sees Debian's torch (offline: no
# build isolation is needed), then 2 ranks all_reduce through that venv's chorus.torch, with no
# PYTHONPATH and no LD_LIBRARY_PATH: libchorus travels inside the package. The CMake build folder
# (build-pip/ in the source tree) is kept, so a second run rebuilds little.
#   tests/install/pip_install_test.sh [SOURCE]    (make test-pip)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$(cd "$here/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH PYTHONPATH
venv=$tmp/venv
/usr/bin/python3 -m venv --system-site-packages "$venv"
if ! "$venv/bin/pip" install --no-index "$src" > "$tmp/pip.log" 2>&1; then
  tail -n 40 "$tmp/pip.log" >&2
  echo "pip install test: pip install $src failed (log above)" >&2
  exit 1
fi
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_path('platlib'))")
for f in "$site"/chorus/libchorus.so.* "$site"/chorus/_torch.*.so; do
  [[ -f $f ]] || { echo "pip install test: $f missing in the installed package" >&2; exit 1; }
done
"$here/run_two_ranks.sh" "$venv/bin/python" "$venv" "$tmp"
echo "pip install test passed"
