#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds two programs against it: one through
# find_package(Chorus) (CMake), one through pkg-config. Runs both as 2 ranks with the installed
# chorus-run, with no LD_LIBRARY_PATH: the installed tools find libchorus through their RUNPATH.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
test -f "$prefix/include/chorus/chorus.h"
libdir=$(dirname "$(find "$prefix" -name 'libchorus.so*' | head -n1)")

# Every installed tool starts (a missing shared library fails here, before any rank runs).
for tool in chorus-run chorus-store chorus-bench chorus-sim; do
  test -x "$prefix/bin/$tool"
  if ! "$prefix/bin/$tool" --help > "$tmp/$tool-help.log" 2>&1; then
    echo "installed $tool does not start:" >&2
    cat "$tmp/$tool-help.log" >&2
    exit 1
  fi
done

mkdir -p "$tmp/app"
cp "$src/examples/allreduce_demo.c" "$tmp/app/demo.c"
cat > "$tmp/app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(app C)
find_package(Chorus REQUIRED)
add_executable(demo demo.c)
target_link_libraries(demo PRIVATE Chorus::chorus)
CMAKE
cmake -S "$tmp/app" -B "$tmp/app/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/app.log"
cmake --build "$tmp/app/build" > "$tmp/app-build.log"

# pkg-config gives no RUNPATH: the program names the library folder itself, as a user would.
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -o "$tmp/demo-pc" "$src/examples/allreduce_demo.c" $(pkg-config --cflags --libs chorus) \
  -Wl,-rpath,"$libdir"

for demo in "$tmp/app/build/demo" "$tmp/demo-pc"; do
  if ! "$prefix/bin/chorus-run" -n 2 -- "$demo" > "$tmp/run.log" 2>&1; then
    echo "installed chorus-run -n 2 -- $demo failed:" >&2
    cat "$tmp/run.log" >&2
    exit 1
  fi
  grep -q "ok" "$tmp/run.log" && ! grep -q WRONG "$tmp/run.log"
done
echo "install test passed"
