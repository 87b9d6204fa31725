#!/usr/bin/env bash
# Installs the Python package with `cmake --install` and uses it from outside the build tree:
# - into a temporary prefix: 2 ranks init_process_group("chorus") through file:// and all_reduce,
#   with PYTHONPATH = the folder the install named and no LD_LIBRARY_PATH (the modules find the
#   prefix's libchorus through their RUNPATH);
# - into a venv: `import chorus` with its own python, no PYTHONPATH;
# - with DESTDIR, for the prefixes /usr and /usr/local: the folders Debian's python3 reads.
set -euo pipefail
build=$1
python=${2:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH PYTHONPATH
fail() { echo "python install test: $*" >&2; exit 1; }

# Prints the package folder `cmake --install` reports for prefix $1 (DESTDIR from the caller).
install_into() {
  cmake --install "$build" --prefix "$1" > "$tmp/install.log" || { cat "$tmp/install.log" >&2; fail "install into $1"; }
  sed -n 's/^-- chorus Python package: //p' "$tmp/install.log"
}

prefix=$tmp/prefix
site=$(install_into "$prefix")
[[ -n $site && -f $site/chorus/__init__.py && -f $site/chorus/torch.py ]] ||
  fail "no package under '$site' after cmake --install --prefix $prefix"
[[ $site == "$prefix"/lib/python3.*/dist-packages ]] || fail "unexpected package folder $site"
for module in "$site"/chorus/_*.so; do
  runpath=$(readelf -d "$module" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
  # shellcheck disable=SC2016  # a literal $ORIGIN
  [[ $runpath == *'$ORIGIN'* && $runpath != *"$build"* ]] || fail "$module has RUNPATH '$runpath'"
done

PYTHONPATH=$site "$here/run_two_ranks.sh" "$python" "$prefix" "$tmp" || fail "the installed package failed"
# The installed package says its version (the project's) and the torch it was built for.
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
(cd "$tmp" && PYTHONPATH=$site "$python" -c "
import chorus, chorus._build_info as b
assert chorus.__version__ == '$version', chorus.__version__
assert b.torch_version, 'no torch recorded'") || fail "chorus.__version__ or the recorded torch of the installed package"

# A venv (seeing Debian's torch) takes the package into its own site-packages.
"$python" -m venv --system-site-packages --without-pip "$tmp/venv"
venv_site=$(install_into "$tmp/venv")
[[ $venv_site == "$tmp/venv"/lib/python3.*/site-packages ]] || fail "venv install went to $venv_site"
# (import chorus only: the 2 ranks above already loaded chorus.torch, and torch takes seconds)
(cd "$tmp" && "$tmp/venv/bin/python" -c "import chorus; assert chorus.__file__.startswith('$venv_site')") ||
  fail "the venv's python does not import chorus from $venv_site"

# /usr and /usr/local (staged with DESTDIR): folders that Debian's python3 has on sys.path; only
# when the package is built for that python3 (not, say, a virtual environment's torch 2.x).
if ! "$python" -c 'import sys; sys.exit(sys.prefix != "/usr")'; then
  echo "python install test passed (prefixes /usr and /usr/local not checked: $python is not the system's)"
  exit 0
fi
for system_prefix in /usr /usr/local; do
  staged=$(DESTDIR=$tmp/stage install_into "$system_prefix")
  [[ -f $tmp/stage$staged/chorus/__init__.py ]] || fail "DESTDIR install for $system_prefix: no $staged/chorus"
  "$python" -c "import sys; sys.exit('$staged' not in sys.path)" ||
    fail "$python does not read $staged (the folder chosen for $system_prefix)"
done
echo "python install test passed"
