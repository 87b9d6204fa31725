# shellcheck shell=bash
# Helpers for the test scripts (tests/launchers, tests/cluster, tests/multiproc): sourced.
# check/finish print one ok/FAIL line per check and a summary; skip exits 77 (ctest SKIP_RETURN_CODE).

skip() {
  echo "SKIP: $*"
  exit 77
}

failures=0
# check DESCRIPTION command...: runs the command, prints ok/FAIL with its time, counts failures.
check() {
  local what=$1 t0=$EPOCHREALTIME rc=0 took
  shift
  "$@" || rc=$?
  took=$(seconds_since "$t0")
  if ((rc == 0)); then
    echo "ok   - $what (${took}s)"
  else
    echo "FAIL - $what (exit $rc, ${took}s)"
    failures=$((failures + 1))
  fi
}

finish() {
  if ((failures)); then
    echo "$failures check(s) failed"
    exit 1
  fi
  echo "all checks passed"
}

# A launch of the test inherits nothing that would tell Chorus another rank, size or store.
clear_launch_env() {
  local v
  for v in "${!CHORUS_@}" "${!OMPI_@}" "${!PMI_@}" "${!PMIX_@}" "${!SLURM_@}" "${!MPI_LOCAL@}"; do
    [[ $v == CHORUS_CLUSTER_PREFIX ]] || unset "$v"
  done
}

# A TCP port nothing listens on right now (in this network namespace). Drawn from 61000-64999:
# clear of the store ports Slurm jobs derive (20000-31999), of scripts/slurm-local's daemons
# (10000-19999) and of the kernel's ephemeral range (32768-60999), so tests running side by side
# never meet at one port.
free_port() {
  local p i
  for ((i = 0; i < 50; i++)); do
    p=$((61000 + RANDOM % 4000))
    if [[ -z $(ss -Htln "sport = :$p" 2>/dev/null) ]]; then
      echo "$p"
      return 0
    fi
  done
  echo "no free port found" >&2
  return 1
}

# bench_rows FILE: chorus-bench's table rows (lines that start with the size in bytes; nccl-tests'
# columns: size count type redop root, then time algbw busbw #wrong out of place ($6-$9) and in
# place ($10-$13); with --chorus-columns then algo ($14) and cpu).
bench_rows() { awk '$1 ~ /^[0-9]+$/ && NF >= 13' "$1"; }

# bench_ok FILE ROWS: exactly ROWS table rows, every one with #wrong 0 out of place (column 9) and
# in place (column 13; N/A for a collective without that form).
bench_ok() {
  local rows bad
  rows=$(bench_rows "$1" | wc -l)
  bad=$(bench_rows "$1" | awk '$9 != "0" || ($13 != "0" && $13 != "N/A")' | wc -l)
  if ((rows != $2 || bad != 0)); then
    echo "    expected $2 rows with #wrong 0, got $rows rows, $bad with wrong results:" >&2
    sed 's/^/    | /' "$1" >&2
    return 1
  fi
}

# seconds_since T0: seconds (2 decimals) since $EPOCHREALTIME was T0.
seconds_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }

# took_since T0: logs how long the launch that started at T0 took.
took_since() { echo "    launch took $(seconds_since "$1")s"; }

# show FILE: the file indented, for the log.
show() { sed 's/^/    | /' "$1"; }
