# shellcheck shell=bash disable=SC2034  # (CL_* settings are used by scripts/cluster)
# Helpers for scripts/cluster (sourced, not run). Every name here starts with cl_ / CL_.
#
# Layout for prefix P (default "chorus", N hosts):
#   namespace P-sw   bridge P-br (mtu 9000), ports P-s0 .. P-s(N-1)  (switch side of each veth)
#   namespace P-hI   veth P-hI, address 10.77.0.(I+1)/24              (host side of the veth)
# Shaping: HTB on P-hI egress (host -> switch) and on P-sI egress (switch -> host).
# Cluster settings (rate, delay, loss) are kept as the bridge's alias, so they vanish with it.

CL_PREFIX=${CHORUS_CLUSTER_PREFIX:-chorus}
if [[ ! $CL_PREFIX =~ ^[a-z][a-z0-9]{0,7}$ ]]; then
  echo "cluster: CHORUS_CLUSTER_PREFIX='$CL_PREFIX' must be 1-8 lower-case letters/digits" >&2
  exit 2
fi
CL_SWITCH=$CL_PREFIX-sw
CL_BRIDGE=$CL_PREFIX-br
CL_SUBNET=10.77.0
CL_MTU=9000
CL_MAX_HOSTS=250
CL_DEFAULT_RATE=1gbit
CL_DEFAULT_TIMEOUT=600
CL_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CL_REPO=$(cd "$CL_LIB/../.." && pwd)
CL_BUILD_DIR=${CHORUS_BUILD_DIR:-$CL_REPO/build}

cl_die() {
  local rc=$1
  shift
  echo "cluster: $*" >&2
  exit "$rc"
}

cl_log() { echo "cluster: $*" >&2; }

# cl_optarg "$@": the value of option $1 (which is $2), or die.
cl_optarg() {
  (($# >= 2)) || cl_die 2 "$1 needs a value"
  printf '%s' "$2"
}

cl_host_ns() { echo "$CL_PREFIX-h$1"; }
cl_host_dev() { echo "$CL_PREFIX-h$1"; }
cl_switch_dev() { echo "$CL_PREFIX-s$1"; }
cl_host_addr() { echo "$CL_SUBNET.$(($1 + 1))"; }

cl_tools_path() {
  local p="" t
  for t in chorus-bench chorus-run chorus-store; do
    [[ -d $CL_BUILD_DIR/tools/$t ]] && p+="$CL_BUILD_DIR/tools/$t:"
  done
  echo "$p$PATH"
}

cl_need_root() {
  [[ $(id -u) -eq 0 ]] || cl_die 1 "needs root (network namespaces, tc, ethtool): run it with sudo"
  local t
  for t in ip tc ethtool; do
    command -v "$t" >/dev/null ||
      cl_die 1 "'$t' not found: install the Debian packages iproute2 and ethtool"
  done
}

cl_check_hosts() {
  if [[ ! $1 =~ ^[0-9]+$ ]] || (($1 < 1 || $1 > CL_MAX_HOSTS)); then
    cl_die 2 "number of hosts must be 1..$CL_MAX_HOSTS, got '${1:-}'"
  fi
}

# Rates in tc units: 1gbit, 500mbit, 2.5gbit, 100kbit, 1000000bit (bits per second).
cl_check_rate() {
  [[ ${1,,} =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|tbit)$ ]] ||
    cl_die 2 "bad rate '$1' (expected e.g. 100mbit, 1gbit, 10gbit)"
  (($(cl_rate_bits "$1") >= 1000000)) || cl_die 2 "rate '$1' is below 1mbit"
}

cl_rate_bits() {
  local r=${1,,}
  awk -v r="$r" 'BEGIN {
    m = 1
    if (r ~ /tbit$/) m = 1e12; else if (r ~ /gbit$/) m = 1e9
    else if (r ~ /mbit$/) m = 1e6; else if (r ~ /kbit$/) m = 1e3
    sub(/[a-z]+$/, "", r); printf "%.0f\n", r * m }'
}

# Serialise up/down between concurrent callers.
cl_locked() {
  local dir=/run/lock
  [[ -d $dir && -w $dir ]] || dir=/tmp
  local fd
  exec {fd}>"$dir/$CL_PREFIX-cluster.lock"
  flock -w 120 "$fd" || cl_die 1 "another 'scripts/cluster' is busy (lock $dir/$CL_PREFIX-cluster.lock)"
  local rc=0
  "$@" || rc=$?
  exec {fd}>&-
  return "$rc"
}

cl_our_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$CL_PREFIX-" || true
}

cl_host_count() {
  cl_our_namespaces | grep -cE "^$CL_PREFIX-h[0-9]+$" || true
}

# Settings of the running cluster ("rate=1gbit delay= loss="), one per line; nothing (and
# success, so that `x=$(cl_meta_get rate)` survives set -e) when no cluster is up.
cl_meta() {
  ip -n "$CL_SWITCH" -d link show "$CL_BRIDGE" 2>/dev/null |
    awk '$1 == "alias" { for (i = 2; i <= NF; i++) print $i }' || true
}

cl_meta_get() { cl_meta | awk -F= -v k="$1" '$1 == k { print $2 }'; }

cl_mtu() { ip -n "$1" -o link show "$2" 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "mtu") print $(i + 1) }'; }

cl_offloads() {
  ip netns exec "$1" ethtool -k "$2" 2>/dev/null | awk '
    $1 == "tcp-segmentation-offload:" { t = $2 }
    $1 == "generic-segmentation-offload:" { g = $2 }
    $1 == "generic-receive-offload:" { r = $2 }
    END { printf "%s/%s/%s\n", t, g, r }'
}

cl_class_rate() {
  tc -n "$1" class show dev "$2" 2>/dev/null | awk '$3 == "1:10" {
    for (i = 1; i < NF; i++) if ($i == "rate") print $(i + 1) }'
}

cl_class_stats() {
  tc -n "$1" -s class show dev "$2" 2>/dev/null | awk '
    $3 == "1:10" { found = 1 }
    found && $1 == "Sent" { gsub(/,/, ""); printf "sent %s bytes %s pkts, dropped %s, overlimits %s\n", $2, $4, $7, $9; exit }'
}

# Is the netem qdisc available? Tried on the loopback of a scratch namespace.
cl_netem_available() {
  local ns=$CL_PREFIX-probe ok=1
  ip netns add "$ns" 2>/dev/null || true
  if ip netns exec "$ns" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then ok=0; fi
  ip netns del "$ns" 2>/dev/null || true
  return "$ok"
}

# ---------------------------------------------------------------------------------------- down

cl_kill_ns_processes() {
  local ns=$1 pids tries
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [[ -n $pids ]] || return 0
  cl_log "killing processes still running in $ns: $(echo "$pids" | tr '\n' ' ')"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for ((tries = 0; tries < 20; tries++)); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n $pids ]] || return 0
    sleep 0.1
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
}

cl_down() {
  local ns link
  for ns in $(cl_our_namespaces); do
    cl_kill_ns_processes "$ns"
    # Deleting a namespace destroys the veths in it, and with them their peers.
    if ! ip netns del "$ns" 2>/dev/null; then
      umount "/run/netns/$ns" 2>/dev/null || true
      rm -f "/run/netns/$ns" 2>/dev/null || true
    fi
  done
  # Links are only ever created inside our namespaces; anything named like ours in the root
  # namespace is debris from an interrupted run of another version: remove it too.
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' |
    grep -E "^$CL_PREFIX-(h[0-9]+|s[0-9]+|br)$" || true); do
    ip link del "$link" 2>/dev/null || true
  done
  local left
  left=$(cl_our_namespaces)
  [[ -z $left ]] || cl_log "warning: could not remove namespaces: $left"
  return 0
}

# ------------------------------------------------------------------------------------------ up

# cl_build N RATE BURST DELAY LOSS: make the namespaces, bridge, veths and shaping. One
# `ip netns exec` per namespace (scripts/cluster-lib/ns-setup.sh does the inside).
cl_build() {
  local n=$1 rate=$2 burst=$3 delay=$4 loss=$5 i limit quantum=$((2 * (CL_MTU + 14))) bits
  local setup=$CL_LIB/ns-setup.sh
  bits=$(cl_rate_bits "$rate")
  # Burst: 1 ms at line rate, at least 4 jumbo frames, unless --burst says otherwise. tc's
  # default (rate/HZ with a 1 GHz psched clock) is about one packet: then on a loaded machine
  # every late HTB timer is lost time, and a 1gbit stream falls to ~0.93-0.97 of the rate
  # (and chorus-bench's 128K-1M rows to ~0.5 of it). The price of 1 ms: a transfer that
  # starts on an idle link sends its first ~1 ms worth (125 KB at 1gbit) at memory speed.
  [[ -n $burst ]] || burst=$(awk -v b="$bits" -v m="$CL_MTU" 'BEGIN { x = b / 8 / 1000; if (x < 4 * (m + 14)) x = 4 * (m + 14); printf "%d\n", x }')
  # Queues (HTB leaf). Switch port: 20 ms at line rate, at least 256 KiB, a modest switch
  # buffer. Host: 1000 packets, like a NIC's default txqueuelen; TCP small queues keep local
  # senders far below it, so a host does not drop its own packets (with 20 ms, 4 ranks did).
  limit=$(awk -v b="$bits" 'BEGIN { x = b / 8 * 0.02; if (x < 262144) x = 262144; printf "%d\n", x }')
  local host_shape=("$rate" "$burst" "$quantum" 1000p "${delay:--}" "${loss:--}")
  local switch_shape=("$rate" "$burst" "$quantum" "${limit}b" "${delay:--}" "${loss:--}")
  {
    echo "netns add $CL_SWITCH"
    for ((i = 0; i < n; i++)); do echo "netns add $CL_PREFIX-h$i"; done
  } | ip -batch -
  ip netns exec "$CL_SWITCH" bash "$setup" switch "$CL_BRIDGE" "$CL_MTU" \
    "rate=$rate burst=$3 delay=$delay loss=$loss"
  local ports=()
  for ((i = 0; i < n; i++)); do
    ip netns exec "$CL_PREFIX-h$i" bash "$setup" host "$CL_PREFIX-h$i" "$CL_PREFIX-s$i" \
      "$CL_SWITCH" "$CL_SUBNET.$((i + 1))/24" "$CL_MTU" "${host_shape[@]}"
    ports+=("$CL_PREFIX-s$i")
  done
  ip netns exec "$CL_SWITCH" bash "$setup" ports "$CL_BRIDGE" "$CL_MTU" "${switch_shape[@]}" -- \
    "${ports[@]}"
}

cl_up() {
  local n=$1 rate=$2 burst=$3 delay=$4 loss=$5
  [[ -z $burst || ${burst,,} =~ ^[0-9]+(b|k|kb|m|mb)?$ ]] ||
    cl_die 2 "bad --burst '$burst' (bytes, or with k/m: 18028, 64k, 1m)"
  if [[ -n $delay || -n $loss ]]; then
    [[ -z $delay || $delay =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] ||
      cl_die 2 "bad --delay '$delay' (expected e.g. 100us, 2ms)"
    [[ -z $loss || $loss =~ ^[0-9]+(\.[0-9]+)?%$ ]] ||
      cl_die 2 "bad --loss '$loss' (expected a percentage, e.g. 0.1%)"
    cl_netem_available ||
      cl_die 3 "netem is not available on this kernel (tc: 'Specified qdisc kind is unknown'):" \
        "--delay/--loss cannot be emulated here; only rate shaping (HTB) is. Nothing was changed."
  fi
  cl_down
  local rc
  set +e
  (
    set -e
    cl_build "$n" "$rate" "$burst" "$delay" "$loss"
  )
  rc=$?
  set -e
  if ((rc != 0)); then
    cl_down
    cl_die 1 "up failed (exit $rc); removed what was made"
  fi
  cl_log "up: $n hosts ($CL_SUBNET.1-$CL_SUBNET.$n), $rate each way per host${burst:+ (burst $burst)}${delay:+, delay $delay}${loss:+, loss $loss}, mtu $CL_MTU, TSO/GSO/GRO off"
}

# Bring the cluster up unless at least N hosts are up at the requested rate.
cl_ensure_up() {
  local n=$1 rate=$2 have cur
  have=$(cl_host_count)
  cur=$(cl_meta_get rate)
  if ((have >= n)) && [[ -n $cur && (-z $rate || ${rate,,} == "${cur,,}") ]]; then
    return 0
  fi
  [[ -n $rate ]] || rate=${cur:-$CL_DEFAULT_RATE}
  local burst delay loss
  burst=$(cl_meta_get burst)
  delay=$(cl_meta_get delay)
  loss=$(cl_meta_get loss)
  cl_locked cl_up "$n" "$rate" "$burst" "$delay" "$loss"
}

# ----------------------------------------------------------------------------------------- run

CL_JOB_PIDS=()
CL_STORE_PID=""
CL_JOB_TMP=""

# On exit (normal, error or signal): whatever still runs is stopped, the temp dir removed.
cl_job_cleanup() {
  exec 2>/dev/null # no "Killed" job notices from bash
  local groups=("${CL_JOB_PIDS[@]}")
  [[ -z $CL_STORE_PID ]] || groups+=("$CL_STORE_PID")
  ((${#groups[@]} == 0)) || cl_job_stop "${groups[@]}"
  [[ -z $CL_JOB_TMP ]] || rm -rf "$CL_JOB_TMP"
}

# Does any live (non-zombie) process remain in these process groups? `kill -0 -PGID` is not
# enough: a killed grandchild is re-parented and, where PID 1 does not reap (containers), stays a
# zombie in the group for good.
cl_groups_alive() {
  local wanted=" $* "
  ps -eo pgid=,stat= | awk -v g="$wanted" 'index(g, " " $1 " ") && $2 !~ /^Z/ { found = 1 } END { exit !found }'
}

# TERM every rank's process group, give them 3 s, then KILL.
cl_job_stop() {
  local p t
  for p in "$@"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  for ((t = 0; t < 30; t++)); do
    cl_groups_alive "$@" || return 0
    sleep 0.1
  done
  for p in "$@"; do kill -KILL -- "-$p" 2>/dev/null || true; done
}

cl_start_store() {
  local bin=$CL_BUILD_DIR/tools/chorus-store/chorus-store host t line
  [[ -x $bin ]] || cl_die 1 "$bin not found: build it (ninja -C $CL_BUILD_DIR chorus-store)"
  host=$(cl_host_addr 0)
  ip netns exec "$(cl_host_ns 0)" "$bin" --host "$host" --port 0 \
    <"/dev/null" >"$CL_JOB_TMP/store.out" 2>"$CL_JOB_TMP/store.err" &
  CL_STORE_PID=$!
  for ((t = 0; t < 100; t++)); do
    line=$(grep -m1 -o 'tcp://[0-9.]*:[0-9]*' "$CL_JOB_TMP/store.out" 2>/dev/null || true)
    if [[ -n $line ]]; then
      CL_STORE_URL=$line
      return 0
    fi
    kill -0 "$CL_STORE_PID" 2>/dev/null || break
    sleep 0.1
  done
  cat "$CL_JOB_TMP/store.err" >&2
  cl_die 1 "chorus-store did not start on host 0"
}

# cl_run_job MODE N TIMEOUT QUIET PER_HOST program args...   (MODE: chorus | each)
# Rank i runs on host i / PER_HOST.
cl_run_job() {
  local mode=$1 n=$2 timeout=$3 quiet=$4 per_host=$5
  shift 5
  local hosts=$(((n + per_host - 1) / per_host))
  CL_JOB_TMP=$(mktemp -d /tmp/chorus-cluster.XXXXXX)
  trap cl_job_cleanup EXIT
  trap 'cl_log "interrupted"; exit 130' INT TERM
  # Monitor mode while starting: every rank (and the store) gets a process group of its own, so
  # that it can be killed whole. Switched off again before waiting: no job notices then.
  set -m
  if [[ $mode == chorus ]]; then
    cl_start_store
  fi
  local path i h lr lsz env_args
  path=$(cl_tools_path)
  local -A rank_of=()
  for ((i = 0; i < n; i++)); do
    h=$((i / per_host))
    lr=$((i % per_host))
    lsz=$((n - h * per_host < per_host ? n - h * per_host : per_host))
    env_args=(PATH="$path" CLUSTER_RANK="$i" CLUSTER_SIZE="$n" CLUSTER_HOST="$h"
      CLUSTER_HOSTS="$hosts" CLUSTER_LOCAL_RANK="$lr" CLUSTER_LOCAL_SIZE="$lsz"
      CLUSTER_HOST0="$(cl_host_addr 0)" CLUSTER_ADDR="$(cl_host_addr "$h")"
      CLUSTER_IFNAME="$(cl_host_dev "$h")")
    if [[ $mode == chorus ]]; then
      env_args+=(CHORUS_RANK="$i" CHORUS_WORLD_SIZE="$n" CHORUS_LOCAL_RANK="$lr"
        CHORUS_LOCAL_SIZE="$lsz" CHORUS_STORE="$CL_STORE_URL" CHORUS_IFNAME="$(cl_host_dev "$h")")
    fi
    if ((i == 0)); then
      ip netns exec "$(cl_host_ns 0)" env "${env_args[@]}" "$@" </dev/null &
    else
      (
        set +e
        # (Not ">/dev/stdout": that reopens, and truncates, a file that stdout points to.)
        if ((quiet)); then exec >/dev/null; fi
        ip netns exec "$(cl_host_ns "$h")" env "${env_args[@]}" "$@" </dev/null \
          2> >(exec sed -u "s/^/[$i] /" >&2) | sed -u "s/^/[$i] /"
        exit "${PIPESTATUS[0]}"
      ) &
    fi
    CL_JOB_PIDS+=("$!")
    rank_of[$!]=$i
  done
  set +m
  local now_us=${EPOCHREALTIME/[.,]/}
  local deadline_us=$((now_us + timeout * 1000000)) final=0 failed=-1 rc p
  local -a left=("${CL_JOB_PIDS[@]}") still
  while ((${#left[@]})); do
    still=()
    for p in "${left[@]}"; do
      if kill -0 "$p" 2>/dev/null; then
        still+=("$p")
        continue
      fi
      rc=0
      wait "$p" 2>/dev/null || rc=$?
      if ((rc != 0 && failed < 0)); then
        failed=${rank_of[$p]}
        final=$rc
        cl_log "rank $failed exited with status $rc"
      fi
    done
    left=("${still[@]+"${still[@]}"}")
    ((${#left[@]})) || break
    if ((failed >= 0)); then
      cl_log "stopping the other ${#left[@]} rank(s)"
      cl_job_stop "${left[@]}"
      break
    fi
    now_us=${EPOCHREALTIME/[.,]/}
    if ((now_us >= deadline_us)); then
      cl_log "timed out after ${timeout}s; killing ${#left[@]} rank(s) still running"
      cl_job_stop "${left[@]}"
      final=124
      break
    fi
    sleep 0.1
  done
  for p in "${left[@]}"; do wait "$p" 2>/dev/null || true; done
  CL_JOB_PIDS=()
  if [[ -n $CL_STORE_PID ]]; then
    kill -TERM "$CL_STORE_PID" 2>/dev/null || true
    wait "$CL_STORE_PID" 2>/dev/null || true
    CL_STORE_PID=""
  fi
  return "$final"
}
