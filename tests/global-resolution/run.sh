#!/usr/bin/env bash
# The global resolver against the official Java client's own global resolution
# (issue 31): a Handle System of handled servers on loopback, inside a network
# namespace with only a loopback interface, so that no packet can leave the
# machine (the Java client falls back to the real GHR's addresses when its
# bootstrap_handles cannot be read). world.py builds the system and compares.
#
#   tests/global-resolution/run.sh [handled-binary]
#
# Skips (exit 77) without java, the client jars in the local Maven repository
# (fetched with Maven when missing), python3, or unprivileged network namespaces.
# With the Handle.Net harness (tests/handle-net-peer.sh) the original server homes a
# prefix and its proxy resolves the same set; without it only that part is skipped.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$repo/tests/skip.sh"
bin=${1:-$repo/target/release/handled}
[ -x "$bin" ] || skip_suite global-resolution "no handled binary at $bin (cargo build --release)"
command -v java >/dev/null || skip_suite global-resolution "no java"
command -v python3 >/dev/null || skip_suite global-resolution "no python3"
m2=${MAVEN_REPO:-$HOME/.m2/repository}
cp=""
# The client and its dependencies, as Maven resolves them for tests/interop-java
# (BouncyCastle is optional there); fetched from Maven Central when missing.
if [ ! -f "$m2/net/handle/handle-client/9.3.1/handle-client-9.3.1.jar" ] && command -v mvn >/dev/null; then
  timeout 300 mvn -q -B dependency:get -Dartifact=net.handle:handle-client:9.3.1 -Dmaven.repo.local="$m2" \
    >/dev/null 2>&1 || true
fi
for jar in net/handle/handle-client/9.3.1/handle-client-9.3.1.jar com/google/code/gson/gson/2.10/gson-2.10.jar \
    net/cnri/cnriutil/2.0/cnriutil-2.0.jar commons-codec/commons-codec/1.13/commons-codec-1.13.jar; do
  [ -f "$m2/$jar" ] || skip_suite global-resolution "no $m2/$jar (from Maven Central: mvn dependency:get -Dartifact=net.handle:handle-client:9.3.1)"
  cp="$cp${cp:+:}$m2/$jar"
done
# The harness's scripts run inside our namespace (world.py, handle_net.py): they need
# java and, for start.sh's readiness checks, ss, curl and bc.
. "$repo/tests/handle-net-peer.sh"
if find_handle_net_peer java ss curl bc; then export HANDLE_NET_PEER=$PEER; else export HANDLE_NET_WHY; unset HANDLE_NET_PEER; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/global-resolution.XXXXXX")
echo "global-resolution: logs in $work (kept if it fails)"
if [ -z "${HANDLED_IN_NETNS:-}" ]; then
  unshare -rn true 2>/dev/null || skip_suite global-resolution "no unprivileged network namespace (unshare -rn)"
  rc=0
  env HANDLED_IN_NETNS=1 unshare -rn sh -c 'ip link set lo up && exec python3 "$0" "$@"' \
    "$here/world.py" "$bin" "$cp" "$work" || rc=$?
else
  rc=0
  python3 "$here/world.py" "$bin" "$cp" "$work" || rc=$?
fi
case $rc in 0|77) rm -rf "$work" ;; esac
exit "$rc"
