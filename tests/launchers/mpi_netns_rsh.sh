#!/usr/bin/env bash
# Open MPI's "ssh" into an emulated host (plm_rsh_agent): bench/compare/netns-rsh.sh, with a
# temporary directory of the host's own for the daemon it starts there.
#
#   mpi_netns_rsh.sh [ssh options] HOST command [args...]
#
# Why: every emulated host has this machine's hostname and /tmp, so mpirun and each orted would
# all use the session directory /tmp/ompi.<hostname>.<uid>/jf.<job family>: they race to create
# it ("mkdir ... File exists", orte_init fails, about one launch in ten here) and the first to
# finish deletes it under the others. With TMPDIR=<mpirun's TMPDIR or /tmp>/ompi-host-HOST each
# daemon has its own.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
args=("$@")
# The host is the first word that is neither an ssh option nor an option's value.
i=0
while ((i < ${#args[@]})); do
  case ${args[i]} in
    -[bcDEeFIiJLlmOoPpQRSWw]) i=$((i + 2)) ;; # ssh options that take a value
    -*) i=$((i + 1)) ;;
    *) break ;;
  esac
done
host=${args[i]:-}
if [[ ! $host =~ ^[A-Za-z0-9._-]+$ ]]; then
  echo "mpi_netns_rsh.sh: no usable host in: $*" >&2
  exit 255
fi
export TMPDIR=${TMPDIR:-/tmp}/ompi-host-$host
mkdir -p "$TMPDIR"
exec "$here/../../bench/compare/netns-rsh.sh" "$@"
