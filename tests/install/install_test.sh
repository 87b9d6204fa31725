#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds two programs against it: one through
# find_package(Chorus) (CMake), one through pkg-config. Runs both as 2 ranks with chorus-run.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
test -x "$tmp/prefix/bin/chorus-run"
test -f "$tmp/prefix/include/chorus/chorus.h"

mkdir -p "$tmp/app"
cp "$src/examples/allreduce_demo.c" "$tmp/app/demo.c"
cat > "$tmp/app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(app C)
find_package(Chorus REQUIRED)
add_executable(demo demo.c)
target_link_libraries(demo PRIVATE Chorus::chorus)
CMAKE
cmake -S "$tmp/app" -B "$tmp/app/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/app.log"
cmake --build "$tmp/app/build" > "$tmp/app-build.log"

export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$tmp/prefix/lib/x86_64-linux-gnu/pkgconfig"
cc -o "$tmp/demo-pc" "$src/examples/allreduce_demo.c" $(pkg-config --cflags --libs chorus)

libdir=$(dirname "$(find "$tmp/prefix" -name 'libchorus.so*' | head -n1)")
export LD_LIBRARY_PATH="$libdir"
"$tmp/prefix/bin/chorus-run" -n 2 -- "$tmp/app/build/demo" > "$tmp/run1.log"
"$tmp/prefix/bin/chorus-run" -n 2 -- "$tmp/demo-pc" > "$tmp/run2.log"
grep -q "ok" "$tmp/run1.log" && ! grep -q WRONG "$tmp/run1.log"
grep -q "ok" "$tmp/run2.log" && ! grep -q WRONG "$tmp/run2.log"
echo "install test passed"
