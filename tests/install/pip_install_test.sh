#!/usr/bin/env bash
# `pip install .` of the source tree, as a user of PyPI's torch does it, checked end to end:
#  1. a temporary venv that sees the torch venv's packages through a .pth file (no copy of torch's
#     GBs, and pip's build isolation hides them from the build as it would a venv's own torch);
#  2. `pip install .` (scikit-build-core from PyPI, in pip's isolated build environment); the
#     package holds libchorus and the modules with RUNPATH $ORIGIN and records the torch it was
#     built for; chorus.__version__ is the project's;
#  3. 2 ranks init_process_group("chorus") and all_reduce through it, with no PYTHONPATH and no
#     LD_LIBRARY_PATH (run_two_ranks.sh);
#  4. the refusal of another torch: the package under the oldest torch's venv when there is one
#     (else under a recorded torch version altered), an ImportError that names both versions;
#  5. a venv without torch: pip install . fails at configure with a message that says what to do;
#  6. `pip wheel .` gives a wheel with the same content (skipped with QUICK=1).
#   tests/install/pip_install_test.sh [SOURCE]    (make test-pip)
# Environment: TORCH_VENV (default: the newest torch venv of scripts/install-torch2), OTHER_VENV
# (a venv with another torch, default: the oldest's), QUICK=1, CMAKE_BUILD_PARALLEL_LEVEL.
# The CMake build folder is $SOURCE/build-pip, kept between runs (scikit-build-core's build-dir),
# and compilers go through ccache when it is installed, so a rerun rebuilds little. pip's wheel
# cache is bypassed (a wheel of another torch's build would be reused for the same source folder).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$(cd "$here/../.." && pwd)}
cache=${CHORUS_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/chorus}
torch_venv=${TORCH_VENV:-$("$src/scripts/install-torch2" --print newest | tail -n 1)}
other_venv=${OTHER_VENV:-$("$src/scripts/install-torch2" --print oldest | tail -n 1)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH PYTHONPATH
fail() { echo "pip install test: $*" >&2; exit 1; }
[[ -x $torch_venv/bin/python ]] || fail "no torch venv at $torch_venv (scripts/install-torch2)"

# 1. The venv, on the torch venv's base interpreter; the .pth puts torch's site-packages after
#    its own.
venv=$tmp/venv
"$torch_venv/bin/python" -m venv "$venv"
purelib() { "$1" -c "import sysconfig; print(sysconfig.get_path('purelib'))"; }
site=$(purelib "$venv/bin/python")
purelib "$torch_venv/bin/python" > "$site/torch-venv.pth"
torch_version=$(cd "$tmp" && "$venv/bin/python" -c "import torch; print(torch.__version__)")

# 2. pip install . The HTTP cache is kept (scikit-build-core and pybind11 download once), the
#    wheel cache cleared before each build.
pip_args=(--cache-dir "$cache/pip" --config-settings=build-dir="$src/build-pip")
launcher=()
if command -v ccache > /dev/null; then
  # c++ and cc, the compilers a plain CMake build picks (scikit-build-core's pick, g++, would
  # miss ccache's entries: it hashes the compiler's name).
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
            -DCMAKE_CXX_COMPILER=c++ -DCMAKE_C_COMPILER=cc)
fi
export CMAKE_ARGS="-DCHORUS_WERROR=ON ${launcher[*]} ${CMAKE_ARGS:-}"
pip_build() {  # pip_build LOG ARGS...: runs pip, prints the log's end if it fails
  local log=$1
  shift
  rm -rf "$cache/pip/wheels"
  if ! "$venv/bin/pip" "$@" "${pip_args[@]}" "$src" > "$log" 2>&1; then
    tail -n 40 "$log" >&2
    fail "pip $* $src failed (log above)"
  fi
}
start=$SECONDS
pip_build "$tmp/pip-install.log" install
echo "pip install test: pip install . took $((SECONDS - start)) s against torch $torch_version"
for f in "$site"/chorus/libchorus.so.* "$site"/chorus/_torch.*.so "$site"/chorus/_core.*.so; do
  [[ -f $f ]] || fail "$f missing in the installed package"
done
for module in "$site"/chorus/_*.so; do
  # shellcheck disable=SC2016  # a literal $ORIGIN
  readelf -d "$module" | grep -q 'RUNPATH.*\[\$ORIGIN\]' || fail "$module: RUNPATH is not \$ORIGIN"
done
project_version=$(sed -n 's/^project(Chorus VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
(cd "$tmp" && "$venv/bin/python" - "$project_version" "$torch_version" << 'EOF') ||
  fail "version check"
import sys
import chorus, chorus._build_info as info
assert chorus.__version__ == sys.argv[1], f"chorus.__version__ {chorus.__version__}"
assert info.torch_version == sys.argv[2], f"recorded torch {info.torch_version} != {sys.argv[2]}"
EOF

# 3. Two ranks through the installed package.
"$here/run_two_ranks.sh" "$venv/bin/python" "$venv" "$tmp"

# 4. Another torch is refused at import, with both versions in the message.
refusal() {  # refusal PYTHON BUILT_FOR: import chorus.torch must raise that ImportError
  local out
  if out=$(cd "$tmp" && PYTHONPATH=$site "$1" -c "import chorus.torch" 2>&1); then
    fail "$1 imported chorus.torch of another torch"
  fi
  local expected="ImportError: chorus.torch: .* was built for torch $2 .* but this Python imports torch"
  grep -q "$expected" <<< "$out" ||
    fail "no clear refusal of another torch; got: $out"
}
if [[ -x $other_venv/bin/python && $other_venv != "$torch_venv" ]]; then
  refusal "$other_venv/bin/python" "$torch_version"
  echo "pip install test: refused under $other_venv"
else
  sed -i 's/^torch_version = .*/torch_version = "0.0.1"/' "$site/chorus/_build_info.py"
  refusal "$venv/bin/python" 0.0.1
  echo "pip install test: refused a recorded torch 0.0.1 ($other_venv: no venv)"
fi

# 5. A venv without torch: pip install . stops at configure with what to do.
"$torch_venv/bin/python" -m venv "$tmp/bare"
rm -rf "$cache/pip/wheels"
if "$tmp/bare/bin/pip" install --cache-dir "$cache/pip" "$src" > "$tmp/pip-bare.log" 2>&1; then
  fail "pip install . succeeded in a venv without torch"
fi
expected="cannot import torch: ModuleNotFoundError.* install torch 2.7 or later there first"
tr -s ' \n' ' ' < "$tmp/pip-bare.log" | grep -q "$expected" ||
  { tail -n 30 "$tmp/pip-bare.log" >&2; fail "no clear error without torch (log above)"; }

# 6. pip wheel . : the same files as the installed package.
if [[ ${QUICK:-0} != 1 ]]; then
  start=$SECONDS
  pip_build "$tmp/pip-wheel.log" wheel --no-deps -w "$tmp/wheels"
  echo "pip install test: pip wheel . took $((SECONDS - start)) s"
  wheel=$(echo "$tmp"/wheels/chorus-"$project_version"-*.whl)
  [[ -f $wheel ]] || fail "pip wheel made no chorus-$project_version wheel in $tmp/wheels"
  "$venv/bin/python" - "$wheel" << 'EOF' || fail "the wheel's content"
import re, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for pattern in (r"chorus/libchorus\.so\.\d+", r"chorus/_torch\..*\.so", r"chorus/_core\..*\.so",
                r"chorus/_build_info\.py", r"chorus/torch\.py"):
    assert any(re.fullmatch(pattern, n) for n in names), f"{pattern} not in the wheel: {names}"
extra = [n for n in names if not n.startswith(("chorus/", "chorus-"))]
assert not extra, f"the wheel holds more than the package: {extra}"
EOF
fi
echo "pip install test passed"
