#!/usr/bin/env bash
# Local Apache Cassandra 5.0 for developing and testing handled's Cassandra store.
#
# The jars come from Maven Central through `mvn` (nothing else is downloaded) and
# every node binds to loopback only: node N listens on ${HANDLED_CASSANDRA_NET}.N
# (127.0.0.N by default), CQL on port 9042, storage on 7000, local JMX on 127.0.0.1.
#
# Usage: scripts/cassandra.sh COMMAND [ARGS]
#   fetch            resolve cassandra-all and its runtime jars into the cache (once)
#   lib              print the directory of those jars (to compile against them)
#   start N          start node N in the background; wait for CQL and "Startup complete"
#   up N             start nodes 1..N one after another (each joins once the previous is UN)
#   stop N           stop node N (SIGTERM, SIGKILL after $HANDLED_CASSANDRA_STOP_TIMEOUT s)
#   kill N           SIGKILL node N (crash simulation); its data stays for a restart
#   down             stop every node started from the data directory
#   status           pid, address, state and RSS of every node of the data directory
#   nodetool N ARGS  run nodetool against node N (e.g. `nodetool 1 status`)
#   wipe [N]         delete the data of node N, or of every node (they must be stopped)
#
# Environment (defaults in brackets):
#   HANDLED_CASSANDRA_VERSION        Cassandra version [5.0.9]
#   HANDLED_CASSANDRA_HOME           cache root [$HOME/.cache/handled/cassandra]; jars in its lib/
#   HANDLED_CASSANDRA_DATA           node directories [$HANDLED_CASSANDRA_HOME/nodes]
#   HANDLED_CASSANDRA_HEAP           JVM heap per node, -Xms = -Xmx [1G]; 512M is enough for tests
#   HANDLED_CASSANDRA_FAST=1         test-only boot: 1 s ring delay, no wait for gossip to settle
#   HANDLED_CASSANDRA_NET            first three octets of node addresses [127.0.0]
#   HANDLED_CASSANDRA_SEEDS          seed list [${HANDLED_CASSANDRA_NET}.1]
#   HANDLED_CASSANDRA_JMX_PORT       JMX port for `start N` [7099 + 100*N]; recorded per node
#   HANDLED_CASSANDRA_CLUSTER        cluster name [handled-local]
#   HANDLED_CASSANDRA_RF             replication factor used to allocate tokens [3]
#   HANDLED_CASSANDRA_START_TIMEOUT  seconds to wait for a node to start [300]
#   HANDLED_CASSANDRA_STOP_TIMEOUT   seconds to wait after SIGTERM before SIGKILL [60]
#   HANDLED_CASSANDRA_MAVEN_REPO     Maven local repository for `fetch` [Maven's own, ~/.m2/repository]
#   HANDLED_CASSANDRA_NETNS=1        the node runs in a network namespace of its own (tests/partition): any address
#   HANDLED_CASSANDRA_JVM_OPTS       more JVM arguments, whitespace-separated (tests/partition's clock)
#   HANDLED_CASSANDRA_CLASSPATH      put before the Cassandra jars on the class path (the same)
set -euo pipefail

VERSION=${HANDLED_CASSANDRA_VERSION:-5.0.9}
CACHE=${HANDLED_CASSANDRA_HOME:-${HOME:?HOME is not set}/.cache/handled/cassandra}
LIB=$CACHE/lib
DATA=${HANDLED_CASSANDRA_DATA:-$CACHE/nodes}
HEAP=${HANDLED_CASSANDRA_HEAP:-1G}
NET=${HANDLED_CASSANDRA_NET:-127.0.0}
SEEDS=${HANDLED_CASSANDRA_SEEDS:-$NET.1}
CLUSTER=${HANDLED_CASSANDRA_CLUSTER:-handled-local}
RF=${HANDLED_CASSANDRA_RF:-3}
START_TIMEOUT=${HANDLED_CASSANDRA_START_TIMEOUT:-300}
STOP_TIMEOUT=${HANDLED_CASSANDRA_STOP_TIMEOUT:-60}
CQL_PORT=9042
STORAGE_PORT=7000

me=${0##*/}
die() { echo "$me: $*" >&2; exit 1; }
say() { echo "$me: $*"; }
now() { date +%s%3N; }  # milliseconds
since() { local ms=$(( $(now) - $1 )); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }

usage() { sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found on PATH; $2"; }

need_java() {
  need java "install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless)"
  local v
  v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  [ "${v:-0}" -ge 17 ] || die "Cassandra $VERSION needs Java 17 or newer; 'java' is version ${v:-unknown}"
}

need_jars() {
  [ -f "$LIB/.complete-$VERSION" ] || die "no Cassandra $VERSION jars in $LIB; run '$0 fetch' first"
}

node_number() {
  if ! [[ ${1:-} =~ ^[1-9][0-9]{0,2}$ ]] || [ "$1" -gt 254 ]; then
    die "node number must be 1..254, got '${1:-}'"
  fi
}

node_dir() { echo "$DATA/node$1"; }
node_ip() { echo "$NET.$1"; }

# True when something accepts TCP connections on HOST PORT.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# Who listens on HOST:PORT (best effort, for error messages).
listener() {
  command -v ss >/dev/null 2>&1 || return 0
  ss -Htlnp 2>/dev/null | awk -v a="$1:$2" -v b="0.0.0.0:$2" '$4 == a || $4 == b {print $NF}' | head -1
}

# The PID recorded for node N, if that process is still alive and is this node's Cassandra.
live_pid() {
  local d pid
  d=$(node_dir "$1")
  [ -f "$d/pid" ] || return 1
  pid=$(cat "$d/pid")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  # Guard against PID reuse: the command line must name this node's configuration.
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$d/conf/cassandra.yaml" || return 1
  echo "$pid"
}

rss_mib() { awk '/^VmRSS:/ {printf "%d MiB", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }

show_log() {
  local d
  d=$(node_dir "$1")
  for f in "$d/logs/system.log" "$d/logs/stdout.log"; do
    if [ -s "$f" ]; then
      echo "---- last lines of $f" >&2
      tail -n "${2:-30}" "$f" >&2
    fi
  done
}

# ---------------------------------------------------------------- fetch

cmd_fetch() {
  if [ -f "$LIB/.complete-$VERSION" ]; then
    say "Cassandra $VERSION jars already in $LIB ($(find "$LIB" -name '*.jar' | wc -l) jars)"
    return
  fi
  need_java
  need mvn "install Apache Maven (e.g. apt-get install maven); jars come from Maven Central"
  mkdir -p "$CACHE"
  local work t0 repo=()
  work=$(mktemp -d "$CACHE/fetch.XXXXXX")
  # shellcheck disable=SC2064  # expand $work now
  trap "rm -rf '$work'" EXIT
  if [ -n "${HANDLED_CASSANDRA_MAVEN_REPO:-}" ]; then
    repo=("-Dmaven.repo.local=$HANDLED_CASSANDRA_MAVEN_REPO")
  fi
  cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>org.handled.local</groupId>
  <artifactId>cassandra-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>$VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
  say "resolving org.apache.cassandra:cassandra-all:$VERSION with Maven"
  t0=$(now)
  if ! (cd "$work" && mvn -B -q "${repo[@]}" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$work/lib" >"$work/mvn.log" 2>&1); then
    tail -n 40 "$work/mvn.log" >&2
    die "Maven could not resolve cassandra-all:$VERSION (log above)"
  fi
  ls "$work"/lib/jamm-*.jar >/dev/null 2>&1 || die "resolved jars lack jamm (the memory agent Cassandra needs)"
  touch "$work/lib/.complete-$VERSION"
  # Publish atomically; another fetch may have won the race meanwhile.
  if [ -e "$LIB" ] && [ ! -f "$LIB/.complete-$VERSION" ]; then
    rm -rf "$LIB"
  fi
  mv -T "$work/lib" "$LIB" 2>/dev/null || true
  [ -f "$LIB/.complete-$VERSION" ] || die "could not install jars into $LIB"
  say "fetched $(find "$LIB" -name '*.jar' | wc -l) jars ($(du -sh "$LIB" | cut -f1)) into $LIB in $(since "$t0") s"
}

# ---------------------------------------------------------------- node configuration

write_config() {
  local n=$1 d ip
  d=$(node_dir "$n")
  ip=$(node_ip "$n")
  mkdir -p "$d"/{conf,data,commitlog,saved_caches,hints,cdc_raw,logs,triggers}
  cat >"$d/conf/cassandra.yaml" <<EOF
# Written by scripts/cassandra.sh for node $n; rewritten at every start.
cluster_name: $CLUSTER
num_tokens: 16
allocate_tokens_for_local_replication_factor: $RF
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$SEEDS"
listen_address: $ip
rpc_address: $ip
storage_port: $STORAGE_PORT
native_transport_port: $CQL_PORT
start_native_transport: true
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
data_file_directories: [ $d/data ]
commitlog_directory: $d/commitlog
saved_caches_directory: $d/saved_caches
hints_directory: $d/hints
cdc_raw_directory: $d/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
concurrent_reads: 16
concurrent_writes: 16
concurrent_counter_writes: 16
concurrent_compactors: 1
# Linearizable lightweight transactions (the Cassandra transaction log relies on them; docs/cluster.md).
paxos_variant: v2
EOF
  cat >"$d/conf/logback.xml" <<EOF
<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$d/logs/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
EOF
  cat >"$d/conf/logback-tools.xml" <<EOF
<configuration scan="false">
  <appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%-5level %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="STDERR"/></root>
</configuration>
EOF
}

# Module access Cassandra needs on Java 17 (from its conf/jvm17-server.options).
module_flags() {
  local e
  for e in java.base/jdk.internal.misc java.management.rmi/com.sun.jmx.remote.internal.rmi \
           java.rmi/sun.rmi.registry java.rmi/sun.rmi.server java.sql/java.sql \
           java.base/java.lang.ref jdk.unsupported/sun.misc jdk.compiler/com.sun.tools.javac.file \
           jdk.attach/sun.tools.attach; do
    printf -- '--add-exports\n%s=ALL-UNNAMED\n' "$e"
  done
  for e in java.base/java.lang.module java.base/jdk.internal.loader java.base/jdk.internal.ref \
           java.base/jdk.internal.reflect java.base/jdk.internal.math java.base/jdk.internal.module \
           java.base/jdk.internal.util.jar jdk.management/com.sun.management.internal \
           java.base/sun.nio.ch java.base/java.io java.base/java.lang.reflect \
           jdk.compiler/com.sun.tools.javac java.base/java.lang java.base/java.util; do
    printf -- '--add-opens\n%s=ALL-UNNAMED\n' "$e"
  done
}

# JVM arguments of node N, one per line.
server_flags() {
  local n=$1 d jmx
  d=$(node_dir "$n")
  jmx=$2
  cat <<EOF
-Xms$HEAP
-Xmx$HEAP
-Xss512k
-XX:+UseG1GC
-XX:+ParallelRefProcEnabled
-XX:MaxTenuringThreshold=1
-XX:G1HeapRegionSize=16m
-XX:G1RSetUpdatingPauseTimePercent=5
-XX:MaxGCPauseMillis=300
-XX:InitiatingHeapOccupancyPercent=70
-XX:+PerfDisableSharedMem
-XX:+ExitOnOutOfMemoryError
-XX:+HeapDumpOnOutOfMemoryError
-XX:HeapDumpPath=$d/logs
-Djava.net.preferIPv4Stack=true
-Djdk.attach.allowAttachSelf=true
-Dio.netty.tryReflectionSetAccessible=true
-Dio.netty.allocator.useCacheForAllThreads=true
-Dio.netty.allocator.maxOrder=11
-javaagent:$(find "$LIB" -maxdepth 1 -name 'jamm-*.jar' | head -1)
-Dcassandra.jmx.local.port=$jmx
-Dcom.sun.management.jmxremote.authenticate=false
-Dlogback.configurationFile=file://$d/conf/logback.xml
-Dcassandra.logdir=$d/logs
-Djava.io.tmpdir=$d/tmp
-Dcassandra.storagedir=$d
-Dcassandra.triggers_dir=$d/triggers
-Dcassandra.config=file://$d/conf/cassandra.yaml
-Dcassandra-foreground=yes
EOF
  module_flags
  # shellcheck disable=SC2086  # whitespace-separated on purpose
  [ -z "${HANDLED_CASSANDRA_JVM_OPTS:-}" ] || printf '%s\n' $HANDLED_CASSANDRA_JVM_OPTS
  if [ "${HANDLED_CASSANDRA_FAST:-0}" = 1 ]; then
    # Test-only: skip most of the 30 s gossip ring delay that dominates a fresh boot.
    printf '%s\n' -Dcassandra.ring_delay_ms=1000 -Dcassandra.skip_wait_for_gossip_to_settle=0
  fi
}

# ---------------------------------------------------------------- start / stop

cmd_start() {
  local n=$1 d ip jmx pid
  node_number "$n"
  d=$(node_dir "$n")
  ip=$(node_ip "$n")
  if pid=$(live_pid "$n"); then
    say "node$n already running (pid $pid) on $ip:$CQL_PORT"
    return
  fi
  need_java
  need_jars
  [[ $HEAP =~ ^[0-9]+[KkMmGg]$ ]] || die "HANDLED_CASSANDRA_HEAP must look like 512M or 1G, got '$HEAP'"
  jmx=${HANDLED_CASSANDRA_JMX_PORT:-$((7099 + 100 * n))}
  if ! [[ $jmx =~ ^[0-9]{1,5}$ ]] || [ "$jmx" -gt 65535 ]; then
    die "JMX port '$jmx' of node$n is out of range; set HANDLED_CASSANDRA_JMX_PORT"
  fi
  # In a namespace of its own (the partition harness), the node's address is that namespace's.
  [[ $ip =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || [ "${HANDLED_CASSANDRA_NETNS:-0}" = 1 ] ||
    die "$ip is not a loopback address; nodes bind to loopback only"
  local hp host port who
  for hp in "$ip:$CQL_PORT" "$ip:$STORAGE_PORT" "127.0.0.1:$jmx"; do
    host=${hp%:*}
    port=${hp##*:}
    if port_open "$host" "$port"; then
      who=$(listener "$host" "$port")
      die "port $hp is already in use${who:+ ($who)}; another Cassandra" \
          "(see '$0 status' and HANDLED_CASSANDRA_DATA) or another service holds it"
    fi
  done
  write_config "$n"
  echo "$jmx" >"$d/jmx_port"
  local attempt=1
  while :; do
    launch "$n" "$jmx" && break
    # A joining node that heard from no seed in time (the ring delay is short
    # with HANDLED_CASSANDRA_FAST, and the box may be loaded) exits before it
    # takes a place in the ring; starting it again is what an operator does.
    if [ "$attempt" -lt 3 ] &&
       grep -Eq "Unable to contact any seeds|Unable to gossip with any peers" "$d/logs/stdout.log" 2>/dev/null; then
      say "node$n heard from no seed in time (attempt $attempt); starting it again"
      attempt=$((attempt + 1))
      continue
    fi
    show_log "$n"
    die "node$n died during startup; full log in $d/logs"
  done
}

# launch N JMX: start node N's JVM and wait for "Startup complete" and its CQL
# port. Returns 1 if the process exits first; dies on the start timeout.
launch() {
  local n=$1 jmx=$2 d ip pid t0 deadline flags
  d=$(node_dir "$n")
  ip=$(node_ip "$n")
  mapfile -t flags < <(server_flags "$n" "$jmx")
  # Keep the previous run's log (e.g. before a crash) as system.log.1.
  [ ! -s "$d/logs/system.log" ] || mv -f "$d/logs/system.log" "$d/logs/system.log.1"
  # The native libraries the JVM unpacks (lz4, snappy) go with the node, not into
  # the machine's /tmp, where every node of every run left two behind.
  mkdir -p "$d/tmp"
  t0=$(now)
  nohup java "${flags[@]}" -cp "${HANDLED_CASSANDRA_CLASSPATH:+$HANDLED_CASSANDRA_CLASSPATH:}$d/conf:$LIB/*" \
    org.apache.cassandra.service.CassandraDaemon \
    </dev/null >"$d/logs/stdout.log" 2>&1 &
  pid=$!
  echo "$pid" >"$d/pid"
  say "node$n starting (pid $pid) on $ip, heap $HEAP${HANDLED_CASSANDRA_FAST:+, fast=$HANDLED_CASSANDRA_FAST}, log $d/logs/system.log"
  deadline=$(( $(date +%s) + START_TIMEOUT ))
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$d/pid"
      say "node$n (pid $pid) exited during startup"
      return 1
    fi
    if grep -q "Startup complete" "$d/logs/system.log" 2>/dev/null && port_open "$ip" "$CQL_PORT"; then
      break
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      show_log "$n"
      die "node$n (pid $pid) not up after ${START_TIMEOUT} s (still running; '$0 stop $n' to stop it)"
    fi
    sleep 0.25
  done
  say "node$n up: pid $pid, CQL $ip:$CQL_PORT, JMX 127.0.0.1:$jmx, boot $(since "$t0") s, RSS $(rss_mib "$pid")"
}

# Wait until nodetool on node N reports node M as UN (up, normal).
wait_un() {
  local n=$1 m=$2 ip deadline
  ip=$(node_ip "$m")
  deadline=$(( $(date +%s) + START_TIMEOUT ))
  until cmd_nodetool "$n" status 2>/dev/null | awk -v ip="$ip" '$1 == "UN" && $2 == ip {ok=1} END {exit !ok}'; do
    [ "$(date +%s)" -lt "$deadline" ] || { show_log "$m"; die "node$m ($ip) not UN after ${START_TIMEOUT} s"; }
    live_pid "$m" >/dev/null || { show_log "$m"; die "node$m died while joining"; }
    sleep 2
  done
}

cmd_up() {
  local count=$1 n t0
  node_number "$count"
  t0=$(now)
  for n in $(seq 1 "$count"); do
    # Nodes bootstrap one at a time: Cassandra refuses concurrent range movements.
    cmd_start "$n"
    wait_un 1 "$n"
  done
  say "$count node(s) up in $(since "$t0") s"
  [ "$count" -eq 1 ] || cmd_nodetool 1 status
}

# Send SIGTERM to node N's recorded process (if alive); echo its pid.
term_node() {
  local pid
  pid=$(live_pid "$1") || return 1
  kill -TERM "$pid" 2>/dev/null || true
  echo "$pid"
}

# Wait for PIDs to exit, SIGKILL what outlives the stop timeout.
reap() {
  local deadline pid alive
  deadline=$(( $(date +%s) + STOP_TIMEOUT ))
  while :; do
    alive=()
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    [ ${#alive[@]} -gt 0 ] || return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "$me: still alive after ${STOP_TIMEOUT} s, sending SIGKILL to ${alive[*]}" >&2
      kill -KILL "${alive[@]}" 2>/dev/null || true
      sleep 0.5
      return 0
    fi
    sleep 0.2
  done
}

cmd_stop() {
  local n=$1 pid
  node_number "$n"
  if ! pid=$(term_node "$n"); then
    rm -f "$(node_dir "$n")/pid"
    say "node$n is not running"
    return
  fi
  reap "$pid"
  rm -f "$(node_dir "$n")/pid"
  say "node$n (pid $pid) stopped"
}

cmd_kill() {
  local n=$1 pid
  node_number "$n"
  pid=$(live_pid "$n") || die "node$n is not running"
  kill -KILL "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$(node_dir "$n")/pid"
  say "node$n (pid $pid) killed with SIGKILL"
}

# Node numbers that have a directory under $DATA.
known_nodes() {
  local d
  for d in "$DATA"/node*; do
    [ -d "$d" ] || continue
    d=${d##*/node}
    [[ $d =~ ^[0-9]+$ ]] && echo "$d"
  done | sort -n
}

cmd_down() {
  local n pid pids=() names=()
  for n in $(known_nodes); do
    if pid=$(term_node "$n"); then
      pids+=("$pid")
      names+=("node$n")
    else
      rm -f "$(node_dir "$n")/pid"
    fi
  done
  if [ ${#pids[@]} -eq 0 ]; then
    say "no node of $DATA is running"
    return
  fi
  reap "${pids[@]}"
  for n in $(known_nodes); do rm -f "$(node_dir "$n")/pid"; done
  say "stopped ${names[*]} (pids ${pids[*]})"
}

cmd_status() {
  local n pid any=0 d
  printf '%-7s %-8s %-15s %-8s %s\n' NODE PID ADDRESS STATE RSS
  for n in $(known_nodes); do
    any=1
    d=$(node_dir "$n")
    if pid=$(live_pid "$n"); then
      if port_open "$(node_ip "$n")" "$CQL_PORT"; then state=up; else state=starting; fi
      printf '%-7s %-8s %-15s %-8s %s\n' "node$n" "$pid" "$(node_ip "$n")" "$state" "$(rss_mib "$pid")"
    else
      printf '%-7s %-8s %-15s %-8s %s\n' "node$n" - "$(node_ip "$n")" stopped -
    fi
  done
  [ "$any" = 1 ] || echo "(no node in $DATA)"
}

cmd_nodetool() {
  local n=$1 d jmx flags
  shift
  node_number "$n"
  need_java
  need_jars
  d=$(node_dir "$n")
  [ -f "$d/jmx_port" ] || die "node$n was never started from $DATA"
  jmx=$(cat "$d/jmx_port")
  mapfile -t flags < <(module_flags)
  java "${flags[@]}" -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlogback.configurationFile="file://$d/conf/logback-tools.xml" \
    -cp "$d/conf:$LIB/*" org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "$jmx" "$@"
}

cmd_wipe() {
  local n
  if [ $# -gt 0 ]; then
    node_number "$1"
    ! live_pid "$1" >/dev/null || die "node$1 is running; stop it first"
    rm -rf "$(node_dir "$1")"
    say "removed $(node_dir "$1")"
    return
  fi
  for n in $(known_nodes); do
    ! live_pid "$n" >/dev/null || die "node$n is running; '$0 down' first"
  done
  rm -rf "$DATA"
  say "removed $DATA"
}

cmd=${1:-}
[ $# -eq 0 ] || shift
need_arg() { [ $# -ge 1 ] || die "'$cmd' needs a node number (see '$0 help')"; }
case "$cmd" in
  fetch) cmd_fetch ;;
  lib) echo "$LIB" ;;
  start) need_arg "$@"; cmd_start "$1" ;;
  up) need_arg "$@"; cmd_up "$1" ;;
  stop) need_arg "$@"; cmd_stop "$1" ;;
  kill) need_arg "$@"; cmd_kill "$1" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  nodetool) need_arg "$@"; cmd_nodetool "$@" ;;
  wipe) cmd_wipe "$@" ;;
  help | -h | --help) usage ;;
  *) [ -z "$cmd" ] || echo "$me: unknown command '$cmd'" >&2; usage ;;
esac
