# Shared settings for the Handle.Net peer harness. Sourced by every script here.
# Everything can be overridden from the environment.

# The Handle.Net 9 binary distribution beside this file (CNRI; see its LICENSE.txt), used
# read-only: hsj-9.0.0/ where the shared harness has it, else the one directory hsj-*/
# that scripts/handle-net-harness.sh unpacked.
if [ -z "${HSJ_HOME:-}" ]; then
  HSJ_HOME=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/hsj-9.0.0
  if [ ! -d "$HSJ_HOME" ]; then
    for HSJ_HOME in "$(dirname "$HSJ_HOME")"/hsj-*; do [ -d "$HSJ_HOME" ] && break; done
  fi
fi
# Scratch area for the server directory, logs, pid files, built load generators.
HS_PEER=${HS_PEER:-${TMPDIR:-/tmp}/hs-peer}
SVR_DIR=${SVR_DIR:-$HS_PEER/svr}
RUN_DIR=${RUN_DIR:-$HS_PEER/run}
BIN_DIR=${BIN_DIR:-$HS_PEER/bin}
RESULTS_DIR=${RESULTS_DIR:-$HS_PEER/results}

# Network namespace that holds ONLY a loopback interface. The server and every
# load generator run inside it, so no packet can leave the box even if the
# server's embedded resolver tried to reach the global Handle registry.
# Set HS_NETNS= (empty) to run in the host namespace instead (still bound to 127.0.0.1).
HS_NETNS=${HS_NETNS-hsbench}

# JVM heap for the server (the public CNRI benchmark used a 4 GB heap).
HS_HEAP=${HS_HEAP:--Xms4g -Xmx4g}
HS_JAVA_OPTS=${HS_JAVA_OPTS:-}

HS_HOST=127.0.0.1
HS_PORT=${HS_PORT:-2641}          # TCP + UDP
HS_HTTP_PORT=${HS_HTTP_PORT:-8000} # HTTP and HTTPS (port unification)

# Prefix homed on the server, and the admin identity created by setup.sh.
HS_PREFIX=${HS_PREFIX:-TEST}
HS_ADMIN_HANDLE=${HS_ADMIN_HANDLE:-TEST/ADMIN}
HS_ADMIN_SECKEY_INDEX=${HS_ADMIN_SECKEY_INDEX:-301}   # HS_SECKEY
HS_ADMIN_PUBKEY_INDEX=${HS_ADMIN_PUBKEY_INDEX:-300}   # HS_PUBKEY (= admpub.bin)
HS_SECRET=${HS_SECRET:-benchsecret}
# Access logging on all interfaces ("yes"/"no"); CNRI's default answer in setup is yes.
HS_LOG_ACCESSES=${HS_LOG_ACCESSES:-no}


# Run a command inside the benchmark namespace (or directly if HS_NETNS is empty).
in_ns() {
  if [ -n "$HS_NETNS" ]; then ip netns exec "$HS_NETNS" "$@"; else "$@"; fi
}

hsj_classpath() {
  local cp="" j
  for j in "$HSJ_HOME"/lib/*.jar "$HSJ_HOME"/lib/*/*.jar; do cp="$cp:$j"; done
  echo "${cp#:}"
}
