# shellcheck shell=bash
# Network namespaces for the partition suites, sourced:
#
#   . tests/partition/netns.sh
#   net_up a b c m            # one namespace per node, veth to one bridge
#   node_ip a                 # its address (the host side is $NET_HOST_IP)
#   node_exec a CMD...        # run inside a's namespace
#   node_spawn a PIDFILE CMD  # the same, CMD's own pid in PIDFILE
#   net_cut a b               # drop everything between a and b (both ways)
#   net_isolate a             # drop everything between a and every other node
#   net_heal                  # remove every cut
#   net_kill_all              # kill -9 every process in the namespaces
#   net_down                  # remove namespaces, veths and the bridge
#
# Cuts are nftables rules inside the two namespaces, dropping silently (as a
# broken link does: connections hang until their timeouts, nothing is refused).
# The host (where the clients run) stays reachable from every node unless cut
# with net_cut NODE host. netem is not used: the kernels of these machines
# may lack it (then delays cannot be made; cuts and pauses can).

NET_PREFIX=${HANDLED_PARTITION_NET:-10.77.0}   # a /24 of the host's own
NET_TAG=${HANDLED_PARTITION_TAG:-hdp}           # names: $NET_TAG-NODE, bridge ${NET_TAG}br
NET_HOST_IP=$NET_PREFIX.254
NET_NODES=()

node_ns() { echo "$NET_TAG-$1"; }

node_ip() {
  local i
  for i in "${!NET_NODES[@]}"; do
    if [ "${NET_NODES[$i]}" = "$1" ]; then echo "$NET_PREFIX.$((i + 1))"; return; fi
  done
  if [ "$1" = host ]; then echo "$NET_HOST_IP"; return; fi
  echo "node_ip: no node $1" >&2
  return 1
}

node_exec() {
  local ns
  ns=$(node_ns "$1")
  shift
  ip netns exec "$ns" "$@"
}

# node_spawn NAME PIDFILE CMD...: CMD in NAME's namespace, its own pid (not
# that of `ip`, which forks) written to PIDFILE before it runs. Runs in the
# foreground: put it in the background with &.
node_spawn() {
  local ns pidfile=$2
  ns=$(node_ns "$1")
  shift 2
  ip netns exec "$ns" bash -c 'echo $$ > "$0"; exec "$@"' "$pidfile" "$@"
}

# What net_up needs, or why it cannot run here (empty when it can).
net_missing() {
  [ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; return; }
  command -v ip >/dev/null || { echo "needs iproute2 (ip)"; return; }
  command -v nft >/dev/null || { echo "needs nftables (nft; scripts/install-test-deps.sh installs it)"; return; }
  local probe="$NET_TAG-probe$$"
  ip netns add "$probe" 2>/dev/null || { echo "cannot create a network namespace (ip netns add)"; return; }
  if ! ip netns exec "$probe" nft add table inet probe 2>/dev/null; then
    ip netns del "$probe"
    echo "nftables does not work inside a namespace here"
    return
  fi
  ip netns del "$probe"
}

net_up() {
  local bridge="${NET_TAG}br" name ns host_if i=0
  ip link show "$bridge" >/dev/null 2>&1 && { echo "net_up: $bridge exists (another run, or leftovers: net_down)" >&2; return 1; }
  ip link add "$bridge" type bridge
  ip addr add "$NET_HOST_IP/24" dev "$bridge"
  ip link set "$bridge" up
  NET_NODES=("$@")
  for name in "$@"; do
    i=$((i + 1))
    ns=$(node_ns "$name")
    host_if="$NET_TAG-$name"
    wait_link_gone "$host_if" || return 1
    ip netns add "$ns"
    ip link add "$host_if" type veth peer name eth0 netns "$ns"
    ip link set "$host_if" master "$bridge" up
    ip -n "$ns" addr add "$NET_PREFIX.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" route add default via "$NET_HOST_IP"
    ip netns exec "$ns" nft add table inet partition
    ip netns exec "$ns" nft add chain inet partition in '{ type filter hook input priority 0; policy accept; }'
    ip netns exec "$ns" nft add chain inet partition out '{ type filter hook output priority 0; policy accept; }'
  done
}

# Drop all traffic between $1 and $2 (a node name, or host).
net_cut() {
  local a=$1 b=$2 ip_a ip_b
  ip_a=$(node_ip "$a") ip_b=$(node_ip "$b")
  for pair in "$a $ip_b" "$b $ip_a"; do
    set -- $pair
    [ "$1" = host ] && continue
    node_exec "$1" nft add rule inet partition in ip saddr "$2" drop
    node_exec "$1" nft add rule inet partition out ip daddr "$2" drop
  done
}

# Cut $1 from every other node (not from the host, where the clients are).
net_isolate() {
  local other
  for other in "${NET_NODES[@]}"; do
    [ "$other" = "$1" ] || net_cut "$1" "$other"
  done
}

net_heal() {
  local name
  for name in "${NET_NODES[@]}"; do
    node_exec "$name" nft flush chain inet partition in
    node_exec "$name" nft flush chain inet partition out
  done
}

# Kill -9 every process inside this tag's namespaces (stopped ones woken first,
# so they die at once), by the pids the kernel lists for each namespace.
net_kill_all() {
  local ns pids
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NET_TAG-" || true); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -n "$pids" ] || continue
    kill -CONT $pids 2>/dev/null || true
    kill -9 $pids 2>/dev/null || true
  done
}

# Idempotent, and run from traps: removes whatever exists of this tag's network.
# The veths are deleted first, by their host side: a namespace's own devices go
# away only some time after `ip netns del` returns, and a next round's net_up
# would find the name taken ("RTNETLINK answers: File exists").
net_down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NET_TAG-" || true); do
    ip link del "$ns" 2>/dev/null || true   # the host side of the node's veth has the namespace's name
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "${NET_TAG}br" 2>/dev/null || true
}

# Wait (at most 10 s) until no link is called $1 any more.
wait_link_gone() {
  local tries=0
  while ip link show "$1" >/dev/null 2>&1; do
    tries=$((tries + 1))
    [ $tries -lt 100 ] || { echo "net_up: link $1 still exists (another run?)" >&2; return 1; }
    sleep 0.1
  done
}
