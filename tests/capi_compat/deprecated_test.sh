#!/bin/bash
# Every name of version 0.1 that 0.2 deprecated warns, naming its replacement, in C and in C++;
# old_names.c builds with no other warning. Usage: deprecated_test.sh CC CXX INCLUDE_DIR old_names.c
set -u
export LC_ALL=C  # plain quotes in the compilers' messages
cc=$1 cxx=$2 include=$3 src=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for lang in c c++; do
  compiler=$cc
  [ "$lang" = c++ ] && compiler=$cxx
  "$compiler" -x "$lang" -fsyntax-only -Wall -Wextra -I"$include" "$src" 2>"$tmp/$lang.txt"
  for name in chorus_init chorus_init_from_env chorus_init_with_options \
      chorus_init_from_env_with_options chorus_destroy chorus_rank chorus_world_size \
      chorus_abort chorus_dump_trace chorus_wait chorus_test chorus_allreduce chorus_iallreduce \
      chorus_call_options chorus_all_reduce_opts chorus_iall_reduce_opts CHORUS_F32 CHORUS_F64 \
      CHORUS_F16 CHORUS_BF16 CHORUS_I8 CHORUS_U8 CHORUS_I32 CHORUS_I64 CHORUS_SUM CHORUS_PROD \
      CHORUS_MIN CHORUS_MAX CHORUS_AVG; do
    # C names the identifier ('chorus_init'), C++ the declaration ('int chorus_rank(...)').
    if ! grep -q -E "'([^']* )?$name(\([^']*)?' is deprecated: use " "$tmp/$lang.txt"; then
      echo "FAIL ($lang): no deprecation warning for $name"
      fail=1
    fi
  done
  if grep 'warning:' "$tmp/$lang.txt" | grep -v -q 'is deprecated: use '; then
    echo "FAIL ($lang): a warning other than a deprecation:"
    grep 'warning:' "$tmp/$lang.txt" | grep -v 'is deprecated: use '
    fail=1
  fi
done
[ $fail = 0 ] && echo "every 0.1 name warns with its replacement, in C and C++"
exit $fail
