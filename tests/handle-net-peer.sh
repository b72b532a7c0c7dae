# Finding the original Handle.Net 9.0.0 harness, or skipping: sourced by every suite that
# uses it (tests/proxy-compare, tests/remote-admin, tests/replication).
#
#   . tests/handle-net-peer.sh
#   require_handle_net_peer "suite name" java python3 ...   # sets PEER, or skips (exit 77)
#
# The harness is not part of this repository: it sits beside it, at ../shared/peers/handle-net
# (one level deeper from a git worktree), or wherever HANDLE_NET_PEER points. It is CNRI's
# Handle.Net 9.0.0 server distribution (handle.net, "Download the Handle.Net software") unpacked
# as hsj-9.0.0/, with scripts that make a server directory (setup.sh: hdl-setup-server's answers
# given, a site on loopback), start and stop it in a network namespace (start.sh, stop.sh);
# tests/proxy-compare/README.md describes them. Without it, root (for the network namespace) or
# a needed command, the suite is skipped (tests/skip.sh: a SKIP line, exit status 77).

require_handle_net_peer() {
  local suite=$1; shift
  local repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  PEER=${HANDLE_NET_PEER:-}
  if [ -z "$PEER" ]; then
    for PEER in "$repo/../shared/peers/handle-net" "$repo/../../shared/peers/handle-net"; do
      [ -d "$PEER" ] && break
    done
  fi
  local why=
  if [ ! -x "$PEER/setup.sh" ]; then
    why="no Handle.Net harness at ${HANDLE_NET_PEER:-../shared/peers/handle-net beside the repository} (set HANDLE_NET_PEER)"
  elif [ "$(id -u)" != 0 ]; then why="needs root for the network namespace"
  else
    local cmd
    for cmd in "$@"; do
      command -v "$cmd" >/dev/null || { why="$cmd not found"; break; }
    done
  fi
  if [ -n "$why" ]; then
    . "$repo/tests/skip.sh"
    skip_suite "$suite" "$why"
  fi
  export PEER
}
