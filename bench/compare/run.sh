#!/bin/bash
# Chorus vs Gloo vs Open MPI, All-Reduce f32 sum, local ranks over TCP loopback.
#
#   bench/compare/run.sh BUILD_DIR
#
# BUILD_DIR is a Chorus build directory holding tools/chorus-run/chorus-run and
# tools/chorus-bench/chorus-bench (e.g. build/; this script does not rebuild it unless
# BUILD_CHORUS=1, since others may be building there). The peers (bench/compare/CMakeLists.txt,
# against Debian's libgloo-dev and libopenmpi-dev) are built into $PEER_BUILD_DIR.
#
# For each N in $NS, $ROUNDS rounds of: chorus, gloo (each of $GLOO_ALGOS), openmpi-tcp, openmpi-tcp-heap,
# openmpi-default, one after the other, so that machine noise shows up as round-to-round
# differences. JSON and logs go to $RESULTS_DIR; the summary (summarize.py) is printed at the end
# and saved as summary.md. A run that fails is reported as FAIL in the tables, not dropped.
#
# Environment (defaults): NS="2 4" ROUNDS=2 MIN_BYTES=8 MAX_BYTES=64M STEP=2 ITERS=20 WARMUP=5
#   GLOO_ALGOS="ring_chunked halving_doubling"  (also: ring = gloo::allreduce, PyTorch's API)
#   MPI_HEAP=1 (0: skip openmpi-tcp-heap, Open MPI over TCP with glibc malloc kept off mmap)
#   MPI_RING=0 (1: also openmpi-tcp-ring, Open MPI's allreduce forced to its ring algorithm)
#   PEER_BUILD_DIR=<repo>/build-compare/peers  RESULTS_DIR=<repo>/bench/results/compare-<time>
#   RUN_TIMEOUT=900 (seconds per run)  MPI_BIND=none (mpirun --bind-to; chorus-run binds nothing)
#   QUIET_LOAD (unset: don't wait) QUIET_MAX_WAIT=120: before each run, wait up to QUIET_MAX_WAIT s
#   for the 1-minute load average to fall below QUIET_LOAD (the load is recorded either way).
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR   (a Chorus build directory, e.g. $repo/build)" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
NS=${NS:-"2 4"}
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

crun=$build/tools/chorus-run/chorus-run
cbench=$build/tools/chorus-bench/chorus-bench

# --- build ---------------------------------------------------------------------------------
if [ "${BUILD_CHORUS:-0}" = 1 ]; then
  ninja -C "$build" -j2 chorus-run chorus-bench || { echo "chorus build failed" >&2; exit 1; }
fi
for f in "$crun" "$cbench"; do
  [ -x "$f" ] || { echo "missing $f (ninja -C $build chorus-run chorus-bench)" >&2; exit 1; }
done
mkdir -p "$RESULTS_DIR"
echo "== building peers in $PEER_BUILD_DIR"
cmake -S "$here" -B "$PEER_BUILD_DIR" -G Ninja >"$RESULTS_DIR/peers-cmake.log" 2>&1 ||
  { cat "$RESULTS_DIR/peers-cmake.log" >&2; echo "peer configure failed" >&2; }
ninja -C "$PEER_BUILD_DIR" -j2 || echo "peer build failed: missing peers will show as FAIL" >&2

manifest=$RESULTS_DIR/manifest.tsv
printf 'n\tround\tsystem\trc\tjson\tlog\tload\n' >"$manifest"
{
  echo "chorus build: $build ($(stat -c %y "$cbench"))"
  echo "peers build:  $PEER_BUILD_DIR"
  echo "host: $(hostname), $(nproc) cpus, $(uname -r)"
  echo "sizes $MIN_BYTES..$MAX_BYTES x$STEP, iters $ITERS, warmup $WARMUP, rounds $ROUNDS"
  mpirun --version 2>&1 | head -1
  dpkg-query -W libgloo-dev 2>/dev/null
} | tee "$RESULTS_DIR/info.txt"

common=(--min-bytes "$MIN_BYTES" --max-bytes "$MAX_BYTES" --step-factor "$STEP" --iters "$ITERS"
        --warmup "$WARMUP")
mpirun_base=(mpirun --allow-run-as-root --oversubscribe --bind-to "$MPI_BIND")
# pml ob1 so that the btl list is honoured (pml ucx, where enabled, would pick shared memory).
mpi_tcp=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)

# run N ROUND SYSTEM COMMAND...: runs one benchmark, records it in the manifest.
run() {
  local n=$1 round=$2 system=$3
  shift 3
  local stem="n${n}-r${round}-${system}"
  local json=$stem.json log=$stem.log
  local load waited=0
  # Optionally wait (up to QUIET_MAX_WAIT s) for the 1-minute load to drop below QUIET_LOAD.
  while [ -n "${QUIET_LOAD:-}" ] && [ "$waited" -lt "${QUIET_MAX_WAIT:-120}" ] &&
    awk -v l="$QUIET_LOAD" '{ exit !($1 >= l) }' /proc/loadavg; do
    sleep 5
    waited=$((waited + 5))
  done
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "== n=$n round $round: $system (load $load)"
  # The command's last argument is the JSON path.
  timeout --kill-after=10 "$RUN_TIMEOUT" "$@" "$RESULTS_DIR/$json" >"$RESULTS_DIR/$log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "   FAILED rc=$rc, log: $RESULTS_DIR/$log"
    tail -5 "$RESULTS_DIR/$log" | sed 's/^/   | /'
  else
    grep -E '^ +(8|1048576|67108864) ' "$RESULTS_DIR/$log" | sed 's/^/   /'
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$round" "$system" "$rc" "$json" "$log" "$load" \
    >>"$manifest"
}

for n in $NS; do
  for round in $(seq 1 "$ROUNDS"); do
    run "$n" "$round" chorus "$crun" -n "$n" -- "$cbench" --op allreduce "${common[@]}" --json
    for algo in $GLOO_ALGOS; do
      store=$(mktemp -d /tmp/gloo-bench-store.XXXXXX)
      case $algo in
        ring_chunked) sys=gloo-ring-chunked ;;
        halving_doubling) sys=gloo-halving-doubling ;;
        *) sys=gloo-$algo ;;
      esac
      GLOO_BENCH_STORE_DIR=$store run "$n" "$round" "$sys" "$crun" -n "$n" -- \
        "$PEER_BUILD_DIR/gloo_bench" --algo "$algo" "${common[@]}" --json
      rm -rf "$store"
    done
    run "$n" "$round" openmpi-tcp "${mpirun_base[@]}" -np "$n" "${mpi_tcp[@]}" \
      "$PEER_BUILD_DIR/mpi_bench" --system openmpi-tcp \
      --transport "pml ob1, btl tcp,self on lo, bind-to $MPI_BIND" "${common[@]}" --json
    if [ "${MPI_HEAP:-1}" = 1 ]; then
      # Open MPI's all-reduce mallocs temporary buffers of up to the message size on every call;
      # glibc serves blocks >= 32 MiB with a fresh mmap (and returns them with munmap), so each
      # call page-faults them in again, which is very slow on this VM. This series tells glibc
      # to keep everything on its heap (no mmap, no trim): Open MPI without that artefact.
      run "$n" "$round" openmpi-tcp-heap "${mpirun_base[@]}" -np "$n" "${mpi_tcp[@]}" \
        -x MALLOC_MMAP_MAX_=0 -x MALLOC_TRIM_THRESHOLD_=17179869184 \
        "$PEER_BUILD_DIR/mpi_bench" --system openmpi-tcp-heap \
        --transport "pml ob1, btl tcp,self on lo, MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=16G, bind-to $MPI_BIND" \
        "${common[@]}" --json
    fi
    if [ "${MPI_RING:-0}" = 1 ]; then
      # Open MPI's all-reduce forced to its ring algorithm (coll tuned algorithm 4).
      run "$n" "$round" openmpi-tcp-ring "${mpirun_base[@]}" -np "$n" "${mpi_tcp[@]}" \
        --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4 \
        "$PEER_BUILD_DIR/mpi_bench" --system openmpi-tcp-ring \
        --transport "pml ob1, btl tcp,self on lo, coll tuned allreduce forced to ring, bind-to $MPI_BIND" \
        "${common[@]}" --json
    fi
    run "$n" "$round" openmpi-default "${mpirun_base[@]}" -np "$n" \
      "$PEER_BUILD_DIR/mpi_bench" --system openmpi-default \
      --transport "default transports (on-node: vader shared memory), bind-to $MPI_BIND" \
      "${common[@]}" --json
  done
done

echo
/usr/bin/python3 "$here/summarize.py" "$RESULTS_DIR" | tee "$RESULTS_DIR/summary.md"
status=$?
echo "results: $RESULTS_DIR"
exit $status
