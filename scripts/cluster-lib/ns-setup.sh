#!/usr/bin/env bash
# Run by scripts/cluster through `ip netns exec NS bash ns-setup.sh ...`: sets up the inside of
# one namespace in a single process tree (one namespace entry per host instead of dozens).
#
#   ns-setup.sh switch BRIDGE MTU ALIAS
#       the switch namespace: no IPv6, lo up, bridge (no STP, no forward delay), offloads off
#   ns-setup.sh host DEV PEER SWITCH_NS ADDR/LEN MTU SHAPE...
#       a host namespace: no IPv6, lo up, veth DEV here with its PEER created in SWITCH_NS,
#       offloads off, address, DEV's egress shaped (host -> switch), DEV up
#   ns-setup.sh ports BRIDGE MTU SHAPE... -- PORT...
#       in the switch namespace: each PORT offloads off, into BRIDGE, egress shaped
#       (switch -> host), up
# SHAPE is: RATE BURST QUANTUM LIMIT DELAY LOSS; LIMIT is the leaf queue's size, "<n>b" (bytes,
# bfifo) or "<n>p" (packets, pfifo); DELAY/LOSS are "-" when unused (else a netem leaf).
set -euo pipefail

quiet() {
  # No IPv6 (router solicitations, MLD) on the emulated links: only the hosts' IPv4 traffic.
  sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 \
    >/dev/null 2>&1 || true
  ip link set lo up
}

offloads_off() {
  local dev=$1 state
  ethtool -K "$dev" tso off gso off gro off 2>/dev/null || true
  state=$(ethtool -k "$dev" | awk '
    $1 == "tcp-segmentation-offload:" { t = $2 }
    $1 == "generic-segmentation-offload:" { g = $2 }
    $1 == "generic-receive-offload:" { r = $2 }
    END { printf "%s/%s/%s\n", t, g, r }')
  if [[ $state != off/off/off ]]; then
    echo "cluster: could not turn TSO/GSO/GRO off on $dev (tso/gso/gro = $state)" >&2
    return 1
  fi
}

# shape DEV MTU RATE BURST QUANTUM LIMIT DELAY LOSS: HTB root, one class, fifo (or netem) leaf.
shape() {
  local dev=$1 mtu=$2 rate=$3 burst=$4 quantum=$5 limit=$6 delay=$7 loss=$8 leaf
  if [[ $delay != - || $loss != - ]]; then
    leaf="netem"
    [[ $delay == - ]] || leaf+=" delay $delay"
    [[ $loss == - ]] || leaf+=" loss $loss"
    if [[ $limit == *p ]]; then
      leaf+=" limit ${limit%p}"
    else
      leaf+=" limit $((${limit%b} / (mtu + 14) + 100))"
    fi
  elif [[ $limit == *p ]]; then
    leaf="pfifo limit ${limit%p}"
  else
    leaf="bfifo limit ${limit%b}"
  fi
  tc -batch - <<EOF
qdisc replace dev $dev root handle 1: htb default 10
class add dev $dev parent 1: classid 1:10 htb rate $rate ceil $rate burst $burst cburst $burst quantum $quantum
qdisc add dev $dev parent 1:10 handle 10: $leaf
EOF
}

what=$1
shift
case "$what" in
  switch)
    bridge=$1 mtu=$2 alias=$3
    quiet
    ip link add "$bridge" type bridge stp_state 0 forward_delay 0 mcast_snooping 0
    ip link set "$bridge" mtu "$mtu" alias "$alias"
    ethtool -K "$bridge" tso off gso off gro off >/dev/null 2>&1 || true
    ip link set "$bridge" up
    ;;
  host)
    dev=$1 peer=$2 switch_ns=$3 addr=$4 mtu=$5
    shift 5
    quiet
    # Both ends are created directly in their namespaces: nothing appears in the root one.
    ip link add "$dev" mtu "$mtu" type veth peer name "$peer" netns "$switch_ns" mtu "$mtu"
    offloads_off "$dev"
    ip addr add "$addr" dev "$dev"
    shape "$dev" "$mtu" "$@"
    ip link set "$dev" up
    ;;
  ports)
    bridge=$1 mtu=$2
    shift 2
    shape_args=()
    while [[ $1 != -- ]]; do
      shape_args+=("$1")
      shift
    done
    shift
    for port in "$@"; do
      offloads_off "$port"
      ip link set "$port" master "$bridge"
      shape "$port" "$mtu" "${shape_args[@]}"
      ip link set "$port" up
    done
    ip link set "$bridge" mtu "$mtu"
    ;;
  *)
    echo "ns-setup.sh: unknown step '$what'" >&2
    exit 2
    ;;
esac
