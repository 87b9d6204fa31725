#!/bin/bash
# Chorus vs Gloo vs PyTorch (gloo) vs Open MPI vs MPICH, All-Reduce f32 sum: local ranks over TCP
# on loopback, one rank per host of an emulated cluster (scripts/cluster), local ranks with every
# system on its best intra-host transport, or several ranks per host of the emulated cluster.
#
#   bench/compare/run.sh BUILD_DIR                      # SETTING=loopback (default)
#   SETTING=cluster bench/compare/run.sh BUILD_DIR      # rank i on host i, links shaped to $RATE
#   SETTING=host bench/compare/run.sh BUILD_DIR         # one host, shared memory where there is one
#   SETTING=hier bench/compare/run.sh BUILD_DIR         # $LAYOUTS: hosts x ranks per host
#
# BUILD_DIR is a Chorus build directory holding tools/chorus-run/chorus-run,
# tools/chorus-bench/chorus-bench (and, for the cluster, tools/chorus-store/chorus-store), e.g.
# build/; this script does not rebuild it unless BUILD_CHORUS=1, since others may be building
# there. The C++ peers (bench/compare/CMakeLists.txt: gloo_bench, mpi_bench_openmpi,
# mpi_bench_mpich, against Debian's libgloo-dev, libopenmpi-dev, libmpich-dev) are built into
# $PEER_BUILD_DIR; torch_bench.py runs with /usr/bin/python3 (Debian's python3-torch).
#
# For each N, $ROUNDS rounds of: chorus, gloo (each of $GLOO_ALGOS), torch-gloo, openmpi-tcp,
# openmpi-tcp-heap, [openmpi-tcp-ring], mpich-tcp, and on loopback openmpi-default, one after the
# other, so that machine noise shows up as round-to-round differences. JSON and logs go to
# $RESULTS_DIR (a manifest.tsv that is appended to when the directory is reused, e.g. for the
# other setting); the summary (summarize.py) is printed at the end and saved as summary.md, and
# plot.py writes one PNG per setting and N there. A run that fails is reported as FAIL in the
# tables, not dropped. See README.md for the exact launch and transport flags.
#
# SETTING=host runs chorus (default transport, i.e. shared memory, with --bound), openmpi
# (default: vader shared memory), openmpi-heap (the same with glibc kept off mmap), mpich (default:
# ch4:ucx shared memory/CMA), gloo-* and torch-gloo (TCP on lo: Gloo has nothing else); see
# README.md. SETTING=hier runs, per layout, chorus (CHORUS_ALGO unset: auto), chorus-flat
# (CHORUS_ALGO=ring), openmpi (vader within a host, TCP between hosts), openmpi-heap, openmpi-han
# (coll han, Open MPI's hierarchical collectives) and mpich (MPICH's shared memory within a host,
# UCX TCP between hosts).
#
# Environment (defaults):
#   SETTING=loopback | cluster | host | hier
#   NS="2 4"          world sizes on loopback and on one host (SETTING=host)
#   HOSTS="2 4 8"     world sizes (= hosts, one rank each) on the cluster
#   LAYOUTS="2x2 4x2" SETTING=hier: HxL = H hosts, L ranks per host (rank i on host i / L)
#   CHORUS_TCP=0      SETTING=host: 1 adds chorus-tcp (CHORUS_TRANSPORT=tcp, information only)
#   OMPI_HAN=1        SETTING=hier: 0 skips openmpi-han (recorded as not run when Open MPI lacks it)
#   RATE=1gbit        cluster link rate per host and direction (tc units)
#   ROUNDS=2 MIN_BYTES=8 MAX_BYTES=64M STEP=2 ITERS=20 WARMUP=5
#   GLOO_ALGOS="ring_chunked halving_doubling"  (add "ring": gloo::allreduce called directly,
#   PyTorch's API; in this harness it runs 10-100x slower than under PyTorch, cause not found yet,
#   and a 4-rank sweep to 64 MiB can take over 15 minutes; torch-gloo covers that API)
#   TORCH=1 (0: skip torch-gloo)  MPICH=1 (0: skip mpich-tcp)
#   MPI_HEAP=1 (0: skip openmpi-tcp-heap, Open MPI over TCP with glibc malloc kept off mmap)
#   MPI_RING=0 (1: also openmpi-tcp-ring, Open MPI's allreduce forced to its ring algorithm)
#   PEER_BUILD_DIR=<repo>/build-compare/peers  RESULTS_DIR=<repo>/bench/results/compare-<time>
#   RUN_TIMEOUT=900 (seconds per run)  MPI_BIND=none (mpirun --bind-to; chorus-run binds nothing)
#   MPI_YIELD=auto (cluster: Open MPI gets --mca mpi_yield_when_idle 1 when N > CPUs, as Open MPI
#   does by itself on an oversubscribed node, e.g. loopback N=4 here; 0: never, 1: always)
#   QUIET_LOAD (unset: don't wait) QUIET_MAX_WAIT=120: before each run, wait up to QUIET_MAX_WAIT s
#   for the 1-minute load average to fall below QUIET_LOAD (the load is recorded either way).
#   CHORUS_CLUSTER_PREFIX (default chorus): namespace prefix of the cluster (see scripts/cluster).
#   CALIBRATE=0       SETTING=cluster: 1 runs chorus-bench --calibrate on the N hosts first and gives
#   chorus that file (RESULTS_DIR/tuning-cluster-nN.txt), as a user of the cost model would
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR   (a Chorus build directory, e.g. $repo/build)" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
SETTING=${SETTING:-loopback}
RATE=${RATE:-1gbit}
case $SETTING in
  loopback | host) SIZES_N=${NS:-"2 4"} ;;
  cluster) SIZES_N=${HOSTS:-"2 4 8"} ;;
  hier)
    SIZES_N=${LAYOUTS:-"2x2 4x2"}
    for l in $SIZES_N; do
      [[ $l =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] ||
        { echo "LAYOUTS: '$l' is not HOSTSxRANKS_PER_HOST (e.g. 2x2)" >&2; exit 2; }
    done
    ;;
  *)
    echo "SETTING must be loopback, cluster, host or hier, got '$SETTING'" >&2
    exit 2
    ;;
esac
# Settings that use the emulated cluster (root, scripts/cluster up/down).
on_cluster=0
case $SETTING in cluster | hier) on_cluster=1 ;; esac
ROUNDS=${ROUNDS:-2}
MIN_BYTES=${MIN_BYTES:-8}
MAX_BYTES=${MAX_BYTES:-64M}
STEP=${STEP:-2}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
GLOO_ALGOS=${GLOO_ALGOS:-"ring_chunked halving_doubling"}
PEER_BUILD_DIR=${PEER_BUILD_DIR:-$repo/build-compare/peers}
RESULTS_DIR=${RESULTS_DIR:-$repo/bench/results/compare-$(date +%Y%m%d-%H%M%S)}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
MPI_BIND=${MPI_BIND:-none}
PYTHON=/usr/bin/python3 # Debian's python3-torch and python3-matplotlib are installed for it

crun=$build/tools/chorus-run/chorus-run
cbench=$build/tools/chorus-bench/chorus-bench
cluster=$repo/scripts/cluster
prefix=${CHORUS_CLUSTER_PREFIX:-chorus}
if [ "$on_cluster" = 1 ]; then
  rate_bps=$(awk -v r="${RATE,,}" 'BEGIN {
    m = 1
    if (r ~ /tbit$/) m = 1e12; else if (r ~ /gbit$/) m = 1e9
    else if (r ~ /mbit$/) m = 1e6; else if (r ~ /kbit$/) m = 1e3
    sub(/[a-z]+$/, "", r); printf "%.0f\n", r * m }')
  setting=$SETTING-${RATE,,} # hier: the layout is appended per layout (hier-1gbit-2x2)
else
  rate_bps=""
  setting=$SETTING
fi
base_setting=$setting
cur_hosts=0 # hosts of the cluster now up: link_bytes counts their links

# --- build ---------------------------------------------------------------------------------
if [ "${BUILD_CHORUS:-0}" = 1 ]; then
  ninja -C "$build" -j2 chorus-run chorus-bench chorus-store ||
    { echo "chorus build failed" >&2; exit 1; }
fi
for f in "$crun" "$cbench"; do
  [ -x "$f" ] || { echo "missing $f (ninja -C $build chorus-run chorus-bench)" >&2; exit 1; }
done
if [ "$on_cluster" = 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "SETTING=$SETTING needs root (network namespaces)" >&2; exit 1; }
  [ -x "$build/tools/chorus-store/chorus-store" ] ||
    { echo "missing $build/tools/chorus-store/chorus-store (ninja -C $build chorus-store)" >&2; exit 1; }
fi
mkdir -p "$RESULTS_DIR"
echo "== building peers in $PEER_BUILD_DIR"
cmake -S "$here" -B "$PEER_BUILD_DIR" -G Ninja >"$RESULTS_DIR/peers-cmake.log" 2>&1 ||
  { cat "$RESULTS_DIR/peers-cmake.log" >&2; echo "peer configure failed" >&2; }
grep -A2 -i warning "$RESULTS_DIR/peers-cmake.log" >&2
ninja -C "$PEER_BUILD_DIR" -j2 || echo "peer build failed: missing peers will show as FAIL" >&2

manifest=$RESULTS_DIR/manifest.tsv
header=$(printf 'setting\tn\tround\tsystem\trc\tjson\tlog\tload\trate_bps')
if [ ! -s "$manifest" ] || [ "$(head -1 "$manifest")" != "$header" ]; then
  echo "$header" >"$manifest"
fi
{
  echo "== $setting, $(date -Is)"
  echo "chorus build: $build ($(stat -c %y "$cbench"))"
  echo "peers build:  $PEER_BUILD_DIR"
  echo "host: $(hostname), $(nproc) cpus, $(uname -r)"
  echo "sizes $MIN_BYTES..$MAX_BYTES x$STEP, iters $ITERS, warmup $WARMUP, rounds $ROUNDS, N: $SIZES_N"
  [ "$on_cluster" = 1 ] && echo "cluster: prefix $prefix, rate $RATE ($rate_bps bit/s) per host and direction"
  mpirun.openmpi --version 2>&1 | head -1
  mpichversion 2>&1 | head -3 | tr -s '\t ' ' '
  dpkg-query -W libgloo-dev libucx0 python3-torch 2>/dev/null
} | tee -a "$RESULTS_DIR/info.txt"

common=(--min-bytes "$MIN_BYTES" --max-bytes "$MAX_BYTES" --step-factor "$STEP" --iters "$ITERS"
        --warmup "$WARMUP")
heap_env=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=17179869184)

# link_bytes H: bytes sent so far on the cluster's host links (host -> switch, hosts 0..H-1):
# the difference over a run shows that its traffic went through the shaped links (and not, say,
# through shared memory, which the namespaces do not separate).
link_bytes() {
  local i total=0 b
  for ((i = 0; i < $1; i++)); do
    b=$(ip -n "$prefix-h$i" -s link show "$prefix-h$i" 2>/dev/null | awk '/TX:/ { getline; print $1; exit }')
    total=$((total + ${b:-0}))
  done
  echo "$total"
}

# run N ROUND SYSTEM COMMAND...: runs one benchmark, records it in the manifest.
run() {
  local n=$1 round=$2 system=$3
  shift 3
  local stem="$setting-n${n}-r${round}-${system}"
  local json=$stem.json log=$stem.log
  local load waited=0 limit=$RUN_TIMEOUT
  # On the cluster, scripts/cluster's own --timeout ($RUN_TIMEOUT) fires first and cleans up.
  [ "$on_cluster" = 1 ] && limit=$((RUN_TIMEOUT + 30))
  # Optionally wait (up to QUIET_MAX_WAIT s) for the 1-minute load to drop below QUIET_LOAD.
  while [ -n "${QUIET_LOAD:-}" ] && [ "$waited" -lt "${QUIET_MAX_WAIT:-120}" ] &&
    awk -v l="$QUIET_LOAD" '{ exit !($1 >= l) }' /proc/loadavg; do
    sleep 5
    waited=$((waited + 5))
  done
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "== $setting n=$n round $round: $system (load $load)"
  rm -f "$RESULTS_DIR/$json"
  local before=""
  [ "$on_cluster" = 1 ] && before=$(link_bytes "$cur_hosts")
  # The command's last argument is the JSON path.
  timeout --kill-after=10 "$limit" "$@" "$RESULTS_DIR/$json" >"$RESULTS_DIR/$log" 2>&1
  local rc=$?
  if [ -n "$before" ]; then
    local sent=$(($(link_bytes "$cur_hosts") - before))
    echo "run.sh: $sent bytes sent on the $cur_hosts host links (host -> switch) during this run" |
      tee -a "$RESULTS_DIR/$log" | sed 's/^run.sh: /   /'
  fi
  if [ $rc -eq 0 ] && [ ! -s "$RESULTS_DIR/$json" ]; then
    echo "run.sh: exit status 0 but no JSON written" >>"$RESULTS_DIR/$log"
    rc=99
  fi
  if [ $rc -ne 0 ]; then
    echo "   FAILED rc=$rc, log: $RESULTS_DIR/$log"
    tail -5 "$RESULTS_DIR/$log" | sed 's/^/   | /'
  else
    grep -E '^ +(8|1048576|67108864) ' "$RESULTS_DIR/$log" | sed 's/^/   /'
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$setting" "$n" "$round" "$system" "$rc" "$json" \
    "$log" "$load" "$rate_bps" >>"$manifest"
}

# not_run N ROUND SYSTEM REASON: records a system that cannot run in this setting (rc "skip" in
# the manifest, the reason in its log), so that the tables say so instead of dropping it.
not_run() {
  local n=$1 round=$2 system=$3 reason=$4
  local stem="$setting-n${n}-r${round}-${system}"
  echo "== $setting n=$n round $round: $system: not run ($reason)"
  echo "not run: $reason" >"$RESULTS_DIR/$stem.log"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$setting" "$n" "$round" "$system" skip \
    "$stem.json" "$stem.log" "$(cut -d' ' -f1 /proc/loadavg)" "$rate_bps" >>"$manifest"
}

gloo_system() {
  case $1 in
    ring_chunked) echo gloo-ring-chunked ;;
    halving_doubling) echo gloo-halving-doubling ;;
    *) echo "gloo-$1" ;;
  esac
}

# --- loopback: every rank on this machine, TCP over lo ---------------------------------------
# Open MPI: pml ob1 so that the btl list is honoured (pml ucx, where enabled, would pick shared
# memory). MPICH (Debian: ch4:ucx): MPIR_CVAR_NOLOCAL=1 makes MPICH treat every rank as remote
# (no shm path of its own), UCX_TLS=tcp leaves UCX only its TCP transport (no posix/sysv shared
# memory, no cma), UCX_NET_DEVICES=lo puts it on loopback.
mpirun_lo=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to "$MPI_BIND")
# shellcheck disable=SC2054  # (tcp,self is one argument)
ompi_tcp_lo=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
mpich_lo=(mpiexec.mpich -genv MPIR_CVAR_NOLOCAL 1 -genv UCX_TLS tcp -genv UCX_NET_DEVICES lo)

# Gloo (each of $GLOO_ALGOS) and torch-gloo with N ranks on this host, over loopback TCP.
gloo_local_round() {
  local n=$1 round=$2 algo store
  for algo in $GLOO_ALGOS; do
    store=$(mktemp -d /tmp/gloo-bench-store.XXXXXX)
    GLOO_BENCH_STORE_DIR=$store run "$n" "$round" "$(gloo_system "$algo")" "$crun" -n "$n" -- \
      "$PEER_BUILD_DIR/gloo_bench" --algo "$algo" --hostname 127.0.0.1 "${common[@]}" --json
    rm -rf "$store"
  done
  if [ "${TORCH:-1}" = 1 ]; then
    store=$(mktemp -d /tmp/torch-bench-store.XXXXXX)
    TORCH_BENCH_STORE_DIR=$store GLOO_SOCKET_IFNAME=lo run "$n" "$round" torch-gloo "$crun" \
      -n "$n" -- "$PYTHON" "$here/torch_bench.py" "${common[@]}" --json
    rm -rf "$store"
  fi
}

loopback_round() {
  local n=$1 round=$2
  # TCP like every system here (auto would put ranks of one host on shared memory).
  CHORUS_TRANSPORT=tcp run "$n" "$round" chorus "$crun" -n "$n" -- "$cbench" --op allreduce --in-place 0 \
    "${common[@]}" --json
  gloo_local_round "$n" "$round"
  run "$n" "$round" openmpi-tcp "${mpirun_lo[@]}" -np "$n" "${ompi_tcp_lo[@]}" \
    "$PEER_BUILD_DIR/mpi_bench_openmpi" --system openmpi-tcp \
    --transport "pml ob1, btl tcp,self on lo, bind-to $MPI_BIND" "${common[@]}" --json
  if [ "${MPI_HEAP:-1}" = 1 ]; then
    # Open MPI's all-reduce mallocs temporary buffers of up to the message size on every call;
    # glibc serves blocks >= 32 MiB with a fresh mmap (and returns them with munmap), so each
    # call page-faults them in again, which is very slow on this VM. This series tells glibc
    # to keep everything on its heap (no mmap, no trim): Open MPI without that artefact.
    run "$n" "$round" openmpi-tcp-heap "${mpirun_lo[@]}" -np "$n" "${ompi_tcp_lo[@]}" \
      -x "${heap_env[0]}" -x "${heap_env[1]}" \
      "$PEER_BUILD_DIR/mpi_bench_openmpi" --system openmpi-tcp-heap \
      --transport "pml ob1, btl tcp,self on lo, MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=16G, bind-to $MPI_BIND" \
      "${common[@]}" --json
  fi
  if [ "${MPI_RING:-0}" = 1 ]; then
    # Open MPI's all-reduce forced to its ring algorithm (coll tuned algorithm 4).
    run "$n" "$round" openmpi-tcp-ring "${mpirun_lo[@]}" -np "$n" "${ompi_tcp_lo[@]}" \
      --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4 \
      "$PEER_BUILD_DIR/mpi_bench_openmpi" --system openmpi-tcp-ring \
      --transport "pml ob1, btl tcp,self on lo, coll tuned allreduce forced to ring, bind-to $MPI_BIND" \
      "${common[@]}" --json
  fi
  if [ "${MPICH:-1}" = 1 ]; then
    run "$n" "$round" mpich-tcp "${mpich_lo[@]}" -n "$n" \
      "$PEER_BUILD_DIR/mpi_bench_mpich" --system mpich-tcp \
      --transport "ch4:ucx, MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp UCX_NET_DEVICES=lo, no binding" \
      "${common[@]}" --json
  fi
  run "$n" "$round" openmpi-default "${mpirun_lo[@]}" -np "$n" \
    "$PEER_BUILD_DIR/mpi_bench_openmpi" --system openmpi-default \
    --transport "default transports (on-node: vader shared memory), bind-to $MPI_BIND" \
    "${common[@]}" --json
}

# --- cluster: rank i on host i (namespace $prefix-hI, 10.77.0.(i+1)), links shaped to $RATE -----
# Processes on the cluster's hosts find their own interface in $CLUSTER_IFNAME (set by
# scripts/cluster run-each / exec, and by netns-rsh.sh for the MPI launchers); commands that need
# it on their command line or in their environment go through `bash -c '...' prog args`.
# shellcheck disable=SC2054
ompi_tcp_cl=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24)
# Open MPI's launch: mpirun on host 0, orted on each host through netns-rsh.sh (our "ssh"); its
# out-of-band channel on the cluster subnet too. routed=direct: the hosts' hostname is the
# machine's ("my node: vm, target node: h1" otherwise).
ompi_launch_cl=(--mca plm_rsh_agent "$here/netns-rsh.sh" --mca routed direct
                --mca oob_tcp_if_include 10.77.0.0/24)

cluster_round() {
  local n=$1 round=$2 algo store hosts i
  local hostfile=$RESULTS_DIR/hosts-$n
  local each=("$cluster" run-each "$n" --rate "$RATE" --timeout "$RUN_TIMEOUT" --quiet --)
  hosts=""
  : >"$hostfile"
  for ((i = 0; i < n; i++)); do
    echo "h$i slots=1" >>"$hostfile"
    hosts+="${hosts:+,}h$i"
  done
  local tuning=()
  if [ "${CALIBRATE:-0}" = 1 ]; then
    local file=$RESULTS_DIR/tuning-cluster-n$n.txt
    [ -f "$file" ] || CHORUS_BUILD_DIR="$build" "$cluster" run "$n" --rate "$RATE" --quiet -- \
      chorus-bench --calibrate "$file" >/dev/null
    tuning=(env CHORUS_TUNING_FILE="$file")
  fi
  run "$n" "$round" chorus env CHORUS_BUILD_DIR="$build" "$cluster" run "$n" --rate "$RATE" \
    --timeout "$RUN_TIMEOUT" --quiet -- "${tuning[@]}" chorus-bench --op allreduce --in-place 0 "${common[@]}" \
    --json
  for algo in $GLOO_ALGOS; do
    store=$(mktemp -d /tmp/gloo-bench-store.XXXXXX)
    # shellcheck disable=SC2016  # $CLUSTER_IFNAME is expanded on each host
    GLOO_BENCH_STORE_DIR=$store run "$n" "$round" "$(gloo_system "$algo")" "${each[@]}" \
      bash -c 'exec "$0" --iface "$CLUSTER_IFNAME" "$@"' "$PEER_BUILD_DIR/gloo_bench" \
      --algo "$algo" "${common[@]}" --json
    rm -rf "$store"
  done
  if [ "${TORCH:-1}" = 1 ]; then
    store=$(mktemp -d /tmp/torch-bench-store.XXXXXX)
    # shellcheck disable=SC2016
    TORCH_BENCH_STORE_DIR=$store run "$n" "$round" torch-gloo "${each[@]}" \
      bash -c 'GLOO_SOCKET_IFNAME=$CLUSTER_IFNAME exec "$0" "$@"' "$PYTHON" \
      "$here/torch_bench.py" "${common[@]}" --json
    rm -rf "$store"
  fi
  # Each "host" has one slot, so Open MPI cannot see that the hosts share this machine's CPUs;
  # with more ranks than CPUs its busy polling then takes whole scheduler time slices (~8 ms per
  # call at N=3 on 2 CPUs). Yielding is what it does by itself when it sees oversubscription.
  local yield=${MPI_YIELD:-auto} ytxt=""
  [ "$yield" = auto ] && { [ "$n" -gt "$(nproc)" ] && yield=1 || yield=0; }
  local mpirun_cl=("$cluster" exec 0 mpirun.openmpi --allow-run-as-root --bind-to "$MPI_BIND"
                   -np "$n" --hostfile "$hostfile" "${ompi_launch_cl[@]}" "${ompi_tcp_cl[@]}")
  if [ "$yield" = 1 ]; then
    mpirun_cl+=(--mca mpi_yield_when_idle 1)
    ytxt=", mpi_yield_when_idle 1"
  fi
  run "$n" "$round" openmpi-tcp "${mpirun_cl[@]}" \
    "$PEER_BUILD_DIR/mpi_bench_openmpi" --system openmpi-tcp \
    --transport "pml ob1, btl tcp,self on 10.77.0.0/24, one rank per host, bind-to $MPI_BIND$ytxt" \
    "${common[@]}" --json
  if [ "${MPI_HEAP:-1}" = 1 ]; then
    run "$n" "$round" openmpi-tcp-heap "${mpirun_cl[@]}" -x "${heap_env[0]}" -x "${heap_env[1]}" \
      "$PEER_BUILD_DIR/mpi_bench_openmpi" --system openmpi-tcp-heap \
      --transport "pml ob1, btl tcp,self on 10.77.0.0/24, one rank per host, MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=16G, bind-to $MPI_BIND$ytxt" \
      "${common[@]}" --json
  fi
  if [ "${MPI_RING:-0}" = 1 ]; then
    run "$n" "$round" openmpi-tcp-ring "${mpirun_cl[@]}" \
      --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4 \
      "$PEER_BUILD_DIR/mpi_bench_openmpi" --system openmpi-tcp-ring \
      --transport "pml ob1, btl tcp,self on 10.77.0.0/24, one rank per host, coll tuned allreduce forced to ring, bind-to $MPI_BIND$ytxt" \
      "${common[@]}" --json
  fi
  if [ "${MPICH:-1}" = 1 ]; then
    # Hydra on host 0, its proxies on each host through netns-rsh.sh; -iface: the address the
    # proxies call back (the machine's hostname is not reachable from the hosts). -genvnone: the
    # ranks keep their own host's environment (CLUSTER_IFNAME) instead of mpiexec's (host 0's),
    # plus the -genv settings. UCX_NET_DEVICES is each host's own veth.
    # shellcheck disable=SC2016
    run "$n" "$round" mpich-tcp "$cluster" exec 0 mpiexec.mpich -launcher ssh \
      -launcher-exec "$here/netns-rsh.sh" -hosts "$hosts" -n "$n" -ppn 1 -iface "$prefix-h0" \
      -genvnone -genv MPIR_CVAR_NOLOCAL 1 -genv UCX_TLS tcp \
      bash -c 'UCX_NET_DEVICES=$CLUSTER_IFNAME exec "$0" "$@"' \
      "$PEER_BUILD_DIR/mpi_bench_mpich" --system mpich-tcp \
      --transport "ch4:ucx, MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp UCX_NET_DEVICES=<host veth>, one rank per host" \
      "${common[@]}" --json
  fi
}

# --- host: every rank on this machine, each system on its best intra-host transport ------------
# Chorus: default transport (CHORUS_TRANSPORT unset = auto: shared memory between ranks of one
# host), with --bound (memory-bandwidth bound of this machine, see tools/chorus-bench). Open MPI
# and MPICH: no transport flags (Open MPI: ob1 + vader shared memory; MPICH ch4:ucx: UCX shared
# memory and CMA, and MPICH's own node-local path). Gloo and torch-gloo: TCP on lo, their only
# transport.
host_round() {
  local n=$1 round=$2
  run "$n" "$round" chorus "$crun" -n "$n" -- "$cbench" --op allreduce --in-place 0 --bound "${common[@]}" --json
  if [ "${CHORUS_TCP:-0}" = 1 ]; then
    CHORUS_TRANSPORT=tcp run "$n" "$round" chorus-tcp "$crun" -n "$n" -- "$cbench" --op allreduce --in-place 0 \
      --bound "${common[@]}" --json
  fi
  run "$n" "$round" openmpi "${mpirun_lo[@]}" -np "$n" \
    "$PEER_BUILD_DIR/mpi_bench_openmpi" --system openmpi \
    --transport "default transports (on-node: ob1 + vader shared memory), bind-to $MPI_BIND" \
    "${common[@]}" --json
  run "$n" "$round" openmpi-heap "${mpirun_lo[@]}" -np "$n" -x "${heap_env[0]}" -x "${heap_env[1]}" \
    "$PEER_BUILD_DIR/mpi_bench_openmpi" --system openmpi-heap \
    --transport "default transports (on-node: ob1 + vader shared memory), MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=16G, bind-to $MPI_BIND" \
    "${common[@]}" --json
  if [ "${MPICH:-1}" = 1 ]; then
    run "$n" "$round" mpich mpiexec.mpich -n "$n" \
      "$PEER_BUILD_DIR/mpi_bench_mpich" --system mpich \
      --transport "ch4:ucx, default settings (shared memory: UCX posix/sysv + CMA), no binding" \
      "${common[@]}" --json
    # MPICH's best setting too: glibc kept from handing its per-call temporaries back to the OS.
    run "$n" "$round" mpich-heap mpiexec.mpich -n "$n" -genv "${heap_env[0]%%=*}" \
      "${heap_env[0]#*=}" -genv "${heap_env[1]%%=*}" "${heap_env[1]#*=}" \
      "$PEER_BUILD_DIR/mpi_bench_mpich" --system mpich-heap \
      --transport "ch4:ucx, default settings, MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=16G, no binding" \
      "${common[@]}" --json
  fi
  gloo_local_round "$n" "$round"
}

# --- hier: H hosts of the cluster, L ranks on each (rank i on host i / L) -------------------------
# Open MPI: hostfile "hI slots=L", launched as on the cluster (netns-rsh.sh); pml ob1 with btl
# self,vader,tcp: vader (shared memory) between the ranks of one host (one orted per host, so
# Open MPI sees them as node-local), TCP on the cluster subnet between hosts. Not pml ucx: UCX
# would reach the other namespaces through the shared /dev/shm. Vader names its segments
# <dir>/vader_segment.<hostname>.<job>.<local rank>, and every emulated host has this machine's
# hostname and /dev/shm: local rank 0 of h0 and of h1 would map the same file (segfaults in
# mca_btl_vader_poll_handle_frag). Each host's ranks therefore get a directory of their own
# (OMPI_MCA_btl_vader_backing_directory=/dev/shm/ompi-vader-<host veth>, set per rank by
# $ompi_vader_dir, which reads the host's CLUSTER_IFNAME).
# shellcheck disable=SC2054
ompi_hier=(--mca pml ob1 --mca btl self,vader,tcp --mca btl_tcp_if_include 10.77.0.0/24)
# shellcheck disable=SC2016
ompi_vader_dir=(bash -c 'd=/dev/shm/ompi-vader-$CLUSTER_IFNAME; mkdir -p "$d";
  OMPI_MCA_btl_vader_backing_directory=$d exec "$0" "$@"')

hier_round() {
  local hosts=$1 per=$2 round=$3
  local n=$((hosts * per)) i
  local hostfile=$RESULTS_DIR/hosts-${hosts}x$per
  : >"$hostfile"
  for ((i = 0; i < hosts; i++)); do echo "h$i slots=$per" >>"$hostfile"; done
  local crun_cl=(env CHORUS_BUILD_DIR="$build" "$cluster" run "$n" --per-host "$per"
                 --rate "$RATE" --timeout "$RUN_TIMEOUT" --quiet --)
  run "$n" "$round" chorus "${crun_cl[@]}" chorus-bench --op allreduce --in-place 0 "${common[@]}" --json
  CHORUS_ALGO=ring run "$n" "$round" chorus-flat "${crun_cl[@]}" chorus-bench --op allreduce --in-place 0 \
    "${common[@]}" --json
  # Several ranks per host always share its 2 CPUs here: yield when N > CPUs (see cluster).
  local yield=${MPI_YIELD:-auto} ytxt=""
  [ "$yield" = auto ] && { [ "$n" -gt "$(nproc)" ] && yield=1 || yield=0; }
  local mpirun_h=("$cluster" exec 0 mpirun.openmpi --allow-run-as-root --bind-to "$MPI_BIND"
                  -np "$n" --hostfile "$hostfile" "${ompi_launch_cl[@]}" "${ompi_hier[@]}")
  if [ "$yield" = 1 ]; then
    mpirun_h+=(--mca mpi_yield_when_idle 1)
    ytxt=", mpi_yield_when_idle 1"
  fi
  local what="pml ob1, btl self,vader,tcp (vader within a host, tcp on 10.77.0.0/24 between hosts), vader segments in /dev/shm/ompi-vader-<host>, ${hosts}x$per, bind-to $MPI_BIND$ytxt"
  local ompi_bench=("${ompi_vader_dir[@]}" "$PEER_BUILD_DIR/mpi_bench_openmpi")
  run "$n" "$round" openmpi "${mpirun_h[@]}" "${ompi_bench[@]}" \
    --system openmpi --transport "$what" "${common[@]}" --json
  if [ "${MPI_HEAP:-1}" = 1 ]; then
    run "$n" "$round" openmpi-heap "${mpirun_h[@]}" -x "${heap_env[0]}" -x "${heap_env[1]}" \
      "${ompi_bench[@]}" --system openmpi-heap \
      --transport "$what, MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=16G" "${common[@]}" --json
  fi
  if [ "${OMPI_HAN:-1}" = 1 ]; then
    if ompi_info 2>/dev/null | grep -q 'MCA coll: han'; then
      # coll han: Open MPI's hierarchical collectives (within a node, then across nodes); off by
      # default (priority 0), chosen for MPI_COMM_WORLD with priority 100.
      run "$n" "$round" openmpi-han "${mpirun_h[@]}" --mca coll_han_priority 100 \
        "${ompi_bench[@]}" --system openmpi-han \
        --transport "$what, coll han (priority 100)" "${common[@]}" --json
    else
      not_run "$n" "$round" openmpi-han "this Open MPI has no coll han component (ompi_info)"
    fi
  fi
  if [ "${MPICH:-1}" = 1 ]; then
    # Hydra as on the cluster, -ppn L. No MPIR_CVAR_NOLOCAL: MPICH's own shared memory between
    # the ranks of one host (Hydra's host list tells it which ranks share a node). UCX_TLS=tcp:
    # UCX itself would use shared memory across the namespaces (shared /dev/shm, same hostname).
    # shellcheck disable=SC2016
    run "$n" "$round" mpich "$cluster" exec 0 mpiexec.mpich -launcher ssh \
      -launcher-exec "$here/netns-rsh.sh" -hosts "$(seq -s, -f 'h%g' 0 $((hosts - 1)))" -n "$n" \
      -ppn "$per" -iface "$prefix-h0" -genvnone -genv UCX_TLS tcp \
      bash -c 'UCX_NET_DEVICES=$CLUSTER_IFNAME exec "$0" "$@"' \
      "$PEER_BUILD_DIR/mpi_bench_mpich" --system mpich \
      --transport "ch4:ucx, MPICH shared memory within a host, UCX_TLS=tcp UCX_NET_DEVICES=<host veth> between hosts, ${hosts}x$per" \
      "${common[@]}" --json
  fi
}

# shellcheck disable=SC2317  # (called by the EXIT trap)
cleanup() {
  if [ "$on_cluster" = 1 ]; then
    rm -rf "/dev/shm/ompi-vader-$prefix-h"*
    echo "== scripts/cluster down"
    "$cluster" down
  fi
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

for n in $SIZES_N; do
  if [ "$on_cluster" = 1 ]; then
    cur_hosts=${n%x*} # hier: HxL
    [ "$SETTING" = hier ] && setting=$base_setting-$n
    echo "== scripts/cluster up $cur_hosts --rate $RATE"
    if ! "$cluster" up "$cur_hosts" --rate "$RATE"; then
      echo "cluster up failed: every system at $n will show as FAIL" >&2
    fi
  fi
  for round in $(seq 1 "$ROUNDS"); do
    case $SETTING in
      cluster) cluster_round "$n" "$round" ;;
      hier) hier_round "${n%x*}" "${n#*x}" "$round" ;;
      host) host_round "$n" "$round" ;;
      *) loopback_round "$n" "$round" ;;
    esac
  done
done

echo
"$PYTHON" "$here/summarize.py" "$RESULTS_DIR" | tee "$RESULTS_DIR/summary.md"
status=$?
"$PYTHON" "$here/plot.py" "$RESULTS_DIR" || echo "plot.py failed" >&2
echo "results: $RESULTS_DIR"
exit $status
