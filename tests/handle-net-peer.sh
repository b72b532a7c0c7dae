# Finding the original Handle.Net 9.0.0 harness, or skipping: sourced by every suite that
# uses it (tests/proxy-compare, tests/remote-admin, tests/replication, tests/global-resolution).
#
#   . tests/handle-net-peer.sh
#   require_handle_net_peer "suite name" java python3 ...   # sets PEER, or skips (exit 77)
#   find_handle_net_peer java ...   # sets PEER, or HANDLE_NET_WHY and returns 1
#
# The harness is CNRI's Handle.Net 9 server distribution (handle.net, "Download the Handle.Net
# software"; no package registry serves it) unpacked beside the scripts of
# tests/handle-net-harness/ (setup.sh: hdl-setup-server's answers given, a site on loopback;
# start.sh, stop.sh: the server in a network namespace). It is found where
# HANDLE_NET_PEER points, else where scripts/handle-net-harness.sh makes it
# ($CARGO_TARGET_DIR/handle-net, default target/handle-net), else beside the repository at
# ../shared/peers/handle-net (one level deeper from a git worktree). Without it, root (for the
# network namespace) or a needed command, the suite is skipped (tests/skip.sh: a SKIP line,
# exit status 77) saying how to make it.

require_handle_net_peer() {
  local suite=$1; shift
  local repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if find_handle_net_peer "$@" && [ "$(id -u)" != 0 ]; then
    HANDLE_NET_WHY="needs root for the network namespace"
  fi
  if [ -n "$HANDLE_NET_WHY" ]; then
    . "$repo/tests/skip.sh"
    skip_suite "$suite" "$HANDLE_NET_WHY"
  fi
}

# find_handle_net_peer [command ...]: sets and exports PEER, or sets HANDLE_NET_WHY and
# returns 1 (for a suite that runs without the harness, only a part of it skipped). Root
# is not checked: a caller that makes its own namespace (unshare -rn) needs none.
find_handle_net_peer() {
  local repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  PEER=${HANDLE_NET_PEER:-}
  if [ -z "$PEER" ]; then
    for PEER in "${CARGO_TARGET_DIR:-$repo/target}/handle-net" "$repo/../shared/peers/handle-net" \
      "$repo/../../shared/peers/handle-net"; do
      [ -x "$PEER/setup.sh" ] && break
    done
  fi
  HANDLE_NET_WHY=
  if [ ! -x "$PEER/setup.sh" ]; then
    HANDLE_NET_WHY="no Handle.Net harness at ${HANDLE_NET_PEER:-target/handle-net or ../shared/peers/handle-net}: \
download the Handle.Net 9 server distribution from handle.net and run \
HANDLE_NET_DIST=<archive> scripts/handle-net-harness.sh (tests/handle-net-harness/README.md), or set HANDLE_NET_PEER"
  else
    local cmd
    for cmd in "$@"; do
      command -v "$cmd" >/dev/null || { HANDLE_NET_WHY="$cmd not found"; break; }
    done
  fi
  [ -z "$HANDLE_NET_WHY" ] || return 1
  export PEER
}
