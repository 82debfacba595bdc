#!/usr/bin/env bash
# cluster.sh: an emulated cluster of H hosts on one machine, one network namespace per host.
#
#   scripts/cluster.sh up H [--rate RATE] [--burst BYTES] [--latency TIME]
#   scripts/cluster.sh down
#   scripts/cluster.sh status
#
# `up H` creates the network namespaces braid-h0 .. braid-h{H-1} and a bridge braid-br in
# the root namespace with address 10.77.0.254/24. Host i gets a veth pair: the root end,
# braid-v<i>, is a port of the bridge; the other end is eth0 inside braid-h<i> with address
# 10.77.0.<i+1>/24 (lo is up too). With --rate (tc's units: 100mbit, 1gbit, 25gbit, 1gbps)
# a tbf qdisc limits BOTH ends of each host's veth: eth0 in the namespace shapes what the
# host sends, braid-v<i> what it receives. --burst (bytes; default 4 ms at RATE, at least
# 128 KiB) and --latency (tc time; default 50ms, the most a packet may wait in the queue)
# tune it. `up` runs `down` first, so it also clears whatever an earlier, killed run left.
#
# Processes run on host i with `ip netns exec braid-h<i> CMD`, or braidrun --hosts
# braid-h0:R,braid-h1:R -- CMD (see README.md). The root namespace reaches every host
# through braid-br (10.77.0.254), so a bootstrap root in it listens there.
#
# Bridged frames cross the host's iptables when br_netfilter is loaded, and a FORWARD
# policy of DROP (Docker sets one) would drop them: `up` sets net.bridge.bridge-nf-call-
# {iptables,ip6tables,arptables} to 0 where they exist and are not 0, saves the old values
# under /run/braid-cluster, and `down` restores them.
#
# `down` kills whatever still runs inside a braid-h* namespace (the ranks of a job whose
# launcher was killed), then removes the veths, the namespaces and the bridge. It is safe
# when nothing exists. `status` lists what exists.
#
# Needs root and iproute2 (`ip`; `tc` for --rate). Exit status: 0 done, 1 failed, 2 usage,
# 77 this machine cannot do it (not root, no `ip netns`, no veth/bridge/tbf support): a test
# harness reads 77 as "skip". up and down take /run/lock/braid-cluster.lock, so concurrent
# calls do not interleave.
set -euo pipefail

readonly NS_PREFIX=braid-h
readonly BRIDGE=braid-br
readonly VETH_PREFIX=braid-v # root end of host i's veth, a bridge port
readonly PEER_PREFIX=braid-p # the namespace end before it is moved and renamed eth0
readonly SUBNET=10.77.0
readonly BRIDGE_ADDR=$SUBNET.254/24
readonly MAX_HOSTS=253
readonly STATE_DIR=/run/braid-cluster
readonly LOCK_FILE=/run/lock/braid-cluster.lock
readonly SKIP=77

say() { echo "cluster.sh: $*" >&2; }
die() {
  say "$*"
  exit 1
}
skip() {
  say "$*"
  exit "$SKIP"
}

usage() {
  cat <<EOF
usage: cluster.sh up H [--rate RATE] [--burst BYTES] [--latency TIME]
       cluster.sh down
       cluster.sh status
Emulates H hosts as network namespaces ${NS_PREFIX}0..${NS_PREFIX}{H-1} (eth0 = $SUBNET.<i+1>/24)
joined by the bridge $BRIDGE ($BRIDGE_ADDR) in the root namespace. --rate (e.g. 1gbit)
shapes both directions of every host's link with tbf. Needs root; exit 77 where this
machine cannot run it.
EOF
}

usage_error() {
  say "$*"
  usage >&2
  exit 2
}

require_root_and_ip() {
  if ((EUID != 0)); then
    skip "must run as root: network namespaces, veths and bridges need CAP_NET_ADMIN (try sudo)"
  fi
  command -v ip >/dev/null 2>&1 || skip "'ip' not found: install iproute2"
  ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here (iproute2 or kernel without network namespaces)"
}

lock() {
  mkdir -p "$(dirname "$LOCK_FILE")"
  exec 9>"$LOCK_FILE"
  if command -v flock >/dev/null 2>&1; then
    flock -w 120 9 || die "another cluster.sh has held $LOCK_FILE for 2 minutes"
  fi
}

# Names of the braid-h<N> namespaces that exist.
namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NS_PREFIX}[0-9]+\$" | sort -V || true
}

# Root-namespace veth ends of ours (braid-p<N> only exists if an `up` died half way).
root_veths() {
  ip -o link show type veth 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
    grep -E "^(${VETH_PREFIX}|${PEER_PREFIX})[0-9]+\$" || true
}

bridge_exists() { ip link show "$BRIDGE" >/dev/null 2>&1; }

disable_bridge_netfilter() {
  local key file
  mkdir -p "$STATE_DIR"
  for key in bridge-nf-call-iptables bridge-nf-call-ip6tables bridge-nf-call-arptables; do
    file=/proc/sys/net/bridge/$key
    [[ -e $file ]] || continue # br_netfilter not loaded: bridged frames skip iptables
    [[ $(<"$file") == 0 ]] && continue
    [[ -e $STATE_DIR/$key ]] || cat "$file" >"$STATE_DIR/$key"
    if ! echo 0 2>/dev/null >"$file"; then
      say "warning: cannot set net.bridge.$key=0; iptables may drop traffic between hosts"
    fi
  done
}

restore_bridge_netfilter() {
  local saved key
  for saved in "$STATE_DIR"/bridge-nf-call-*; do
    [[ -e $saved ]] || continue
    key=$(basename "$saved")
    if [[ -e /proc/sys/net/bridge/$key ]]; then
      cat "$saved" 2>/dev/null >"/proc/sys/net/bridge/$key" || say "warning: cannot restore net.bridge.$key"
    fi
    rm -f "$saved"
  done
}

# Stops what still runs in a namespace: TERM, then KILL after 2 s.
kill_inside() {
  local ns=$1 pids i
  pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ' || true)
  [[ -n ${pids// /} ]] || return 0
  say "stopping processes still running in $ns: $pids"
  # shellcheck disable=SC2086 # one pid a word
  kill -TERM $pids 2>/dev/null || true
  for ((i = 0; i < 20; i++)); do
    [[ -n $(ip netns pids "$ns" 2>/dev/null) ]] || return 0
    sleep 0.1
  done
  pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ' || true)
  # shellcheck disable=SC2086
  [[ -z ${pids// /} ]] || kill -KILL $pids 2>/dev/null || true
}

down() {
  local ns link
  for ns in $(namespaces); do kill_inside "$ns"; done
  # Deleting one end of a veth deletes both, even while a process holds the namespace.
  for link in $(root_veths); do ip link del "$link" 2>/dev/null || true; done
  for ns in $(namespaces); do ip netns del "$ns" || say "warning: cannot delete namespace $ns"; done
  if bridge_exists; then ip link del "$BRIDGE" || say "warning: cannot delete bridge $BRIDGE"; fi
  restore_bridge_netfilter
}

# tc rate ("1gbit", "100mbit", "1.5gbps", "800000bit", bare number = bit/s) -> bytes/s.
rate_bytes_per_sec() {
  local rate=${1,,}
  [[ $rate =~ ^([0-9]+(\.[0-9]+)?)([kmgt]?)(i?)(bit|bps)?$ ]] || return 1
  local num=${BASH_REMATCH[1]} prefix=${BASH_REMATCH[3]} binary=${BASH_REMATCH[4]} unit=${BASH_REMATCH[5]}
  awk -v n="$num" -v p="$prefix" -v b="$binary" -v u="$unit" 'BEGIN {
    base = (b == "i") ? 1024 : 1000; m = 1
    if (p == "k") m = base; else if (p == "m") m = base^2; else if (p == "g") m = base^3; else if (p == "t") m = base^4
    v = n * m; if (u != "bps") v /= 8
    if (v < 1) exit 1
    printf "%d\n", v }'
}

# EXIT trap of `up`: a failed or skipped `up` leaves nothing behind.
undo_failed_up() {
  local rc=$?
  if ((rc != 0)); then down; fi
  exit "$rc"
}

up() {
  local hosts=$1 rate=$2 burst=$3 latency=$4
  local i ns veth peer bps
  if [[ -n $rate ]]; then
    command -v tc >/dev/null 2>&1 || skip "'tc' not found (iproute2): --rate needs it"
    bps=$(rate_bytes_per_sec "$rate") || usage_error "invalid --rate '$rate' (expected e.g. 100mbit, 1gbit, 2gbps)"
    if [[ -z $burst ]]; then
      burst=$((bps / 250))
      ((burst >= 131072)) || burst=131072
    fi
  fi
  down
  # From here on a failure removes whatever was made; a skip (77) keeps its status.
  trap undo_failed_up EXIT
  disable_bridge_netfilter
  ip link add "$BRIDGE" type bridge 2>/dev/null || skip "cannot create bridge $BRIDGE (kernel without bridge support?)"
  ip addr add "$BRIDGE_ADDR" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for ((i = 0; i < hosts; i++)); do
    ns=$NS_PREFIX$i veth=$VETH_PREFIX$i peer=$PEER_PREFIX$i
    if ! ip netns add "$ns"; then
      ((i == 0)) && skip "cannot create network namespace $ns (no CAP_SYS_ADMIN in this container?)"
      die "cannot create network namespace $ns"
    fi
    if ! ip link add "$veth" type veth peer name "$peer"; then
      ((i == 0)) && skip "cannot create a veth pair (kernel without veth support?)"
      die "cannot create veth $veth"
    fi
    ip link set "$peer" netns "$ns"
    ip -n "$ns" link set "$peer" name eth0
    ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip link set "$veth" master "$BRIDGE"
    ip link set "$veth" up
    if [[ -n $rate ]]; then
      # eth0 inside the namespace: what host i sends (upload); braid-v<i>: what it receives.
      if ! tc -n "$ns" qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency "$latency"; then
        ((i == 0)) && skip "cannot add a tbf qdisc (kernel without sch_tbf?)"
        die "cannot add a tbf qdisc to eth0 in $ns"
      fi
      tc qdisc replace dev "$veth" root tbf rate "$rate" burst "$burst" latency "$latency"
    fi
  done
  trap - EXIT
  echo "cluster.sh: $hosts hosts up: ${NS_PREFIX}0..$NS_PREFIX$((hosts - 1)) ($SUBNET.1..$SUBNET.$hosts) on $BRIDGE ($BRIDGE_ADDR)${rate:+, every link shaped to $rate each way (tbf burst $burst latency $latency)}"
}

status() {
  local ns found=0
  if bridge_exists; then
    found=1
    echo "bridge $BRIDGE: $(ip -o -4 addr show dev "$BRIDGE" | awk '{print $4}' | tr '\n' ' ')($(ip -o link show "$BRIDGE" | grep -o 'state [A-Z]*'))"
  fi
  for ns in $(namespaces); do
    found=1
    local n=${ns#"$NS_PREFIX"} addr qd
    addr=$(ip -n "$ns" -o -4 addr show dev eth0 2>/dev/null | awk '{print $4}' || true)
    qd=$(tc -n "$ns" qdisc show dev eth0 2>/dev/null | awk '$2 == "tbf" {print "tbf", $8, "up"}' || true)
    local down_qd
    down_qd=$(tc qdisc show dev "$VETH_PREFIX$n" 2>/dev/null | awk '$2 == "tbf" {print "tbf", $8, "down"}' || true)
    echo "namespace $ns: eth0 ${addr:-(none)} <-> $VETH_PREFIX$n${qd:+; $qd}${down_qd:+; $down_qd}"
  done
  local link
  for link in $(root_veths); do
    found=1
    [[ $link == "$VETH_PREFIX"* ]] && grep -qw "$NS_PREFIX${link#"$VETH_PREFIX"}" <<<"$(ip netns list)" && continue
    echo "veth $link (no namespace)"
  done
  ((found)) || echo "no braid cluster (no $BRIDGE, no ${NS_PREFIX}* namespaces)"
}

main() {
  set_option() {
    case $1 in
      rate) rate=$2 ;;
      burst) burst=$2 ;;
      latency) latency=$2 ;;
    esac
  }
  (($# >= 1)) || usage_error "missing command"
  local cmd=$1
  shift
  case $cmd in
    up)
      local hosts="" rate="" burst="" latency=50ms
      while (($#)); do
        case $1 in
          --rate | --burst | --latency)
            (($# >= 2)) || usage_error "$1 needs a value"
            set_option "${1#--}" "$2"
            shift 2
            ;;
          --rate=* | --burst=* | --latency=*)
            local name=${1%%=*}
            set_option "${name#--}" "${1#*=}"
            shift
            ;;
          -*) usage_error "unknown option '$1'" ;;
          *)
            [[ -z $hosts ]] || usage_error "unexpected argument '$1'"
            hosts=$1 && shift
            ;;
        esac
      done
      if ! [[ $hosts =~ ^[0-9]+$ ]] || ((10#$hosts < 1 || 10#$hosts > MAX_HOSTS)); then
        usage_error "up needs the number of hosts, 1 to $MAX_HOSTS"
      fi
      hosts=$((10#$hosts))
      [[ -z $burst || $burst =~ ^[0-9]+$ ]] || usage_error "--burst takes a number of bytes"
      [[ -n $rate || -z $burst ]] || usage_error "--burst needs --rate"
      require_root_and_ip
      lock
      up "$hosts" "$rate" "$burst" "$latency"
      ;;
    down)
      (($# == 0)) || usage_error "down takes no arguments"
      require_root_and_ip
      lock
      down
      ;;
    status)
      (($# == 0)) || usage_error "status takes no arguments"
      command -v ip >/dev/null 2>&1 || skip "'ip' not found: install iproute2"
      status
      ;;
    -h | --help | help) usage ;;
    *) usage_error "unknown command '$cmd'" ;;
  esac
}

main "$@"
