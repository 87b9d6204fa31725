#!/bin/bash
# A stand-in for ssh that "logs in" to a host of the emulated cluster (scripts/cluster): it runs
# the command inside that host's network namespace, on this machine. For MPI launchers:
#
#   mpirun   --mca plm_rsh_agent bench/compare/netns-rsh.sh ...        (Open MPI)
#   mpiexec.mpich -launcher ssh -launcher-exec bench/compare/netns-rsh.sh ...   (MPICH Hydra)
#
#   netns-rsh.sh [ssh options] HOST command [args...]
#
# HOST: hI (host I), <prefix>-hI (its namespace name), or the host's address 10.77.0.(I+1). The
# command runs as ssh would run it, i.e. its words joined with spaces and given to a shell
# (bash -c), inside namespace <prefix>-hI (prefix: $CHORUS_CLUSTER_PREFIX, default "chorus"),
# through `scripts/cluster exec I`, so with the host's CLUSTER_RANK, CLUSTER_SIZE, CLUSTER_HOST0,
# CLUSTER_ADDR and CLUSTER_IFNAME set. Leading ssh options (-x, -q, -T, -o OPT, -l USER, -p PORT,
# ...) are ignored. Nothing leaves the machine: the namespaces are local.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cluster=$(cd "$here/../.." && pwd)/scripts/cluster
prefix=${CHORUS_CLUSTER_PREFIX:-chorus}

while (($#)); do
  case $1 in
    -[bcDEeFIiJLlmOoPpQRSWw]) shift 2 ;; # ssh options that take a value
    -*) shift ;;
    *) break ;;
  esac
done
if (($# < 2)); then
  echo "usage: netns-rsh.sh [ssh options] HOST command [args...]" >&2
  exit 255
fi
host=$1
shift
case $host in
  h[0-9]*) i=${host#h} ;;
  "$prefix"-h[0-9]*) i=${host#"$prefix"-h} ;;
  10.77.0.[0-9]*) i=$((${host#10.77.0.} - 1)) ;;
  *) i="" ;;
esac
if [[ ! $i =~ ^[0-9]+$ ]]; then
  echo "netns-rsh.sh: unknown host '$host' (expected hI, $prefix-hI or 10.77.0.(I+1))" >&2
  exit 255
fi
# Every emulated host has this machine's hostname and /tmp, so mpirun and each Open MPI daemon
# would share the session directory /tmp/ompi.<hostname>.<uid>/jf.<job family>: they race to
# create it (orte_init fails, about one launch in ten) and the first to finish deletes it under
# the others. A temporary directory per host keeps them apart.
export TMPDIR=${TMPDIR:-/tmp}/ompi-host-h$i
mkdir -p "$TMPDIR"
# Like ssh: the remote side gets one command line, run by a shell.
exec "$cluster" exec "$i" bash -c "$*"
