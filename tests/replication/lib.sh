# Shared functions of the replication harness (sourced by the scripts beside it).
#
# Handle.Net instances are made with the harness (tests/handle-net-peer.sh finds it: setup.sh,
# start.sh, stop.sh), each with its own HS_PEER under $WORK, its own ports, all in ONE
# loopback-only network namespace ($HS_NETNS, default hsrepl) so that they can reach each
# other and a `handled` started in the same namespace. Nothing is written outside $WORK.
set -euo pipefail
REPL_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$REPL_DIR/../.." && pwd)
. "$REPO/tests/handle-net-peer.sh"
export HS_NETNS=${HS_NETNS:-hsrepl}
export HS_HEAP=${HS_HEAP:--Xms128m -Xmx384m}

log() { echo "== $*"; }
die() { echo "FAIL: $*" >&2; exit 1; }

# Skip (exit 77, a SKIP line; tests/skip.sh) when the original server or its needs are absent; sets PEER,
# HSJ_HOME and CP (the Handle.Net jars).
require_handle_net() {
  require_handle_net_peer replication java python3
  HSJ_HOME=${HSJ_HOME:-$PEER/hsj-9.0.0}
  CP="$HSJ_HOME/lib/*:$HSJ_HOME/lib/jetty/*"
}

# $WORK: scratch for every server dir, log and snapshot of one run (kept when KEEP_WORK=1).
make_work() {
  WORK=${REPL_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/handled-repl-XXXXXX")}
  mkdir -p "$WORK"
  STARTED_PIDS=()
  # so that the EXIT trap (cleanup_all) also runs when the run is interrupted
  trap 'exit 130' INT TERM
  # The namespace (start.sh makes it too, but handled may start first): loopback only.
  MADE_NETNS=
  ip netns list | grep -qw "$HS_NETNS" || { ip netns add "$HS_NETNS" && MADE_NETNS=1; }
  ip -n "$HS_NETNS" link set lo up
  if ip -n "$HS_NETNS" -o link show | grep -v ': lo:' | grep -q .; then
    die "netns $HS_NETNS has non-loopback interfaces; refusing"
  fi
}

in_ns() { ip netns exec "$HS_NETNS" "$@"; }

# The Java tools (java/*.java, on the 9.0.0 library), compiled once per run into $WORK.
# Their client configuration turns off root-info updates (the namespace has no way out).
java_tools() {
  if [ ! -d "$WORK/classes" ]; then
    javac -nowarn -cp "$CP" -d "$WORK/classes" "$REPL_DIR"/java/*.java > "$WORK/javac.log" 2>&1 \
      || { cat "$WORK/javac.log" >&2; die "javac"; }
    mkdir -p "$WORK/client-config"
    printf '{\n  "auto_update_root_info" = "no"\n}\n' > "$WORK/client-config/config.dct"
  fi
}
# hs_java CLASS [ARGS]: one of the tools inside the namespace.
hs_java() {
  java_tools
  in_ns java -cp "$WORK/classes:$CP" -Dnet.handle.configDir="$WORK/client-config" "$@"
}
# hs_tool [COMMAND LINE]: java/HsTool.java (no arguments: commands on stdin).
hs_tool() { hs_java HsTool "$@"; }

# --- Handle.Net instances -------------------------------------------------------------
# hn NAME SCRIPT [ARGS]: run one of the shared harness scripts for instance NAME.
hn() {
  local name=$1 script=$2; shift 2
  local ports; read -r ports < "$WORK/$name.ports"
  HS_PEER="$WORK/$name" HS_PORT=${ports% *} HS_HTTP_PORT=${ports#* } "$PEER/$script.sh" "$@"
}
hn_svr() { echo "$WORK/$1/svr"; }

# hn_setup NAME PORT HTTP_PORT: a fresh primary server dir (prefix TEST, admin TEST/ADMIN
# with HS_PUBKEY@300 = svr/admpriv.bin and HS_SECKEY@301 = benchsecret).
hn_setup() {
  echo "$2 $3" > "$WORK/$1.ports"
  hn "$1" setup --force > "$WORK/$1.setup.log" 2>&1 || { cat "$WORK/$1.setup.log" >&2; die "setup of $1"; }
}
hn_start() {
  hn "$1" start > "$WORK/$1.start.log" 2>&1 || { cat "$WORK/$1.start.log" >&2; die "start of $1"; }
  cat "$WORK/$1.start.log"
}
hn_stop() { [ -f "$WORK/$1.ports" ] && hn "$1" stop > /dev/null 2>&1 || true; }

# Add `key = value` (value: a quoted string or a ( list )) to config.dct's server_config,
# replacing the key if it is there. Handle.Net reads config.dct at start only.
hn_config() {
  python3 "$REPL_DIR/dct_set.py" "$(hn_svr "$1")/config.dct" server_config "$2" "$3"
}

# hn_setup_mirror NAME PORT HTTP_PORT IDENTITY: a server dir to become a mirror, with its
# replication key pair (RSA 2048, unencrypted) in replpriv.bin / replpub.bin, as the manual's
# "Mirror Server" setup makes it; it will authenticate as 300:IDENTITY (privatekey).
hn_setup_mirror() {
  hn_setup "$1" "$2" "$3"
  local svr; svr=$(hn_svr "$1")
  echo "$4" > "$WORK/$1.identity"
  echo n | java -cp "$CP" net.handle.apps.tools.KeyGenerator -alg RSA -keysize 2048 \
    "$svr/replpriv.bin" "$svr/replpub.bin" > "$WORK/$1.keygen.log" 2>&1 || { cat "$WORK/$1.keygen.log" >&2; die keygen; }
}
# hn_group_member: Handle.Net "hn" on :2641 as a member of the multi-primary group TEST/SITES
# (multiPrimary, do_replication; pulls as TEST/REPL-HN, lets TEST/REPL-HANDLED pull), its site
# record in $WORK/hn-site.bin; started.
hn_group_member() {
  hn_setup_mirror hn 2641 8000 TEST/REPL-HN
  local svr; svr=$(hn_svr hn)
  python3 - "$svr/siteinfo.json" "$svr/client-config/local_info.json" <<'PY'
import json, sys
site = json.load(open(sys.argv[1])); site["multiPrimary"] = True
json.dump(site, open(sys.argv[1], "w"), indent=2)
# The server resolves TEST/SITES at itself (the namespace has no way to the global registry).
json.dump([{"nas": ["0.NA/TEST"], "site": site}], open(sys.argv[2], "w"))
PY
  hn_config hn replication_admins '( "300:TEST/ADMIN" "301:TEST/ADMIN" "300:TEST/REPL-HANDLED" )'
  hn_config hn replication_sites_handle '"TEST/SITES"'
  hn_config hn replication_authentication '"privatekey:300:TEST/REPL-HN"'
  hn_config hn replication_interval '"1000"'
  hn_config hn do_replication '"yes"'
  "$HSJ_HOME/bin/hdl-convert-siteinfo" < "$svr/siteinfo.json" > "$WORK/hn-site.bin"
  hn_start hn
}
# hn_identity_command NAME ADMIN_REF: the HsTool line that creates mirror NAME's identity
# handle on its source (HS_PUBKEY@300 = replpub.bin).
hn_identity_command() {
  echo "create $(cat "$WORK/$1.identity") 100:HS_ADMIN:$2 300:HS_PUBKEY:@$(hn_svr "$1")/replpub.bin"
}

# hn_make_mirror NAME SOURCE_SITEINFO_JSON INTERVAL_MS: turn a stopped server set up by
# hn_setup_mirror into a mirror of the site in SOURCE_SITEINFO_JSON (copied to txnsrcsv.json).
# INTERVAL_MS empty: the code's default (30 000 ms).
hn_make_mirror() {
  local svr; svr=$(hn_svr "$1")
  cp "$2" "$svr/txnsrcsv.json"
  python3 - "$svr/siteinfo.json" <<'PY'
import json, sys
p = sys.argv[1]; s = json.load(open(p)); s["primarySite"] = False
json.dump(s, open(p, "w"), indent=2)
PY
  hn_config "$1" replication_authentication "\"privatekey:300:$(cat "$WORK/$1.identity")\""
  [ -z "$3" ] || hn_config "$1" replication_interval "\"$3\""
}

# hn_dump_from_primary NAME: bootstrap a stopped mirror with hdl-dumpfromprimary.
hn_dump_from_primary() {
  local svr; svr=$(hn_svr "$1")
  ( cd "$svr" && in_ns java -cp "$CP" -Dnet.handle.configDir="$svr/client-config" \
      net.handle.server.replication.DumpHandles "$svr" ) > "$WORK/$1.dump.log" 2>&1 \
    || { cat "$WORK/$1.dump.log" >&2; die "hdl-dumpfromprimary for $1"; }
}

# --- test data --------------------------------------------------------------------------
# The records every scenario writes on the primary before the mirror is bootstrapped
# (seed) and after it runs (changes): every action of the transaction log (create, update
# by add/modify/remove, delete, home, unhome), restricted values, both TTL kinds, a delete +
# re-create in quick succession (state-based records). $1 = admin reference for the HS_ADMIN
# values (e.g. 300:TEST/ADMIN); the prefix is $PFX (default TEST; ${PFX}2, ${PFX}3 are homed
# and unhomed on the way).
PFX=${PFX:-TEST}
seed_commands() {
  local adm=$1 p=$PFX
  cat <<EOF
create $p/R-1 100:HS_ADMIN:$adm 1:URL:http://example.org/r1 2:EMAIL:r1@example.org
create $p/R-2 100:HS_ADMIN:$adm 1:URL:http://example.org/r2|ttl=3600 5:DESC:two|abs|ttl=2000000000
create $p/R-3 100:HS_ADMIN:$adm 1:URL:http://example.org/r3 7:HS_SECKEY:s3cret 8:NOTE:private|perms=1100
create $p/R-4 100:HS_ADMIN:$adm 1:URL:http://example.org/r4
create $p/R-5 100:HS_ADMIN:$adm 1:URL:http://example.org/r5
home 0.NA/${p}2
create ${p}2/X 100:HS_ADMIN:$adm 1:URL:http://example.org/x
EOF
}
change_commands() {
  local adm=$1 p=$PFX
  cat <<EOF
create $p/N-1 100:HS_ADMIN:$adm 1:URL:http://example.org/n1
modify $p/R-1 1:URL:http://example.org/r1-changed
add $p/R-2 9:URL:http://example.org/r2-added
remove $p/R-3 8
delete $p/R-4
delete $p/R-5
create $p/R-5 100:HS_ADMIN:$adm 1:URL:http://example.org/r5-again
home 0.NA/${p}3
create ${p}3/Y 100:HS_ADMIN:$adm 1:URL:http://example.org/y
delete ${p}2/X
unhome 0.NA/${p}2
create $p/SENTINEL 100:HS_ADMIN:$adm 1:URL:done
EOF
}

# snapshot NAME HOST:PORT AUTH [REFERENCE]: every record under the test prefixes, as JSON lines;
# with REFERENCE (an earlier snapshot's NAME), the handles it has that this server did not list
# are resolved by name too, so that a server that cannot list is still compared value by value.
snapshot() {
  local out="$WORK/$1.snapshot.jsonl"
  printf 'server %s\nauth %s\nsnapshot 0.NA/%s 0.NA/%s2 0.NA/%s3\n' "$2" "$3" "$PFX" "$PFX" "$PFX" \
    | hs_tool > "$out" || die "snapshot of $1 ($2)"
  [ -n "${4:-}" ] || return 0
  local missing
  missing=$(python3 - "$WORK/$4.snapshot.jsonl" "$out" <<'PY'
import json, sys
names = lambda f: {json.loads(l)["handle"].upper(): json.loads(l)["handle"] for l in open(f) if '"handle"' in l}
ref, here = names(sys.argv[1]), names(sys.argv[2])
print(" ".join(ref[h] for h in sorted(set(ref) - set(here))))
PY
)
  [ -z "$missing" ] || printf 'server %s\nauth %s\nresolve %s\n' "$2" "$3" "$missing" | hs_tool >> "$out" \
    || die "resolving unlisted handles on $1"
}

# compare_snapshots A B: the records of snapshots A and B value by value (compare.py); fails on
# any difference.
compare_snapshots() {
  python3 "$REPL_DIR/compare.py" "$WORK/$1.snapshot.jsonl" "$WORK/$2.snapshot.jsonl" --names "$1" "$2"
}

# hn_mirror_healthy NAME: no pending redump, and say how many pulls failed.
hn_mirror_healthy() {
  local svr; svr=$(hn_svr "$1")
  [ ! -e "$svr/SERVER_NEEDS_REDUMP.txt" ] || die "$1 says it needs a redump: $(cat "$svr/SERVER_NEEDS_REDUMP.txt")"
  local errs; errs=$(cat "$svr"/logs/error.log* 2>/dev/null | grep -c "Error doing replication" || true)
  echo "$1: $errs failed pull(s) in its error log; txnstat: $(tr -d ' \n' < "$svr/txnstat.dct" 2>/dev/null)"
}

# --- handled ----------------------------------------------------------------------------
# handled_start NAME BIN PORT HTTP_PORT TOML [ARGS...]: `handled serve` inside the namespace,
# data in $WORK/NAME/data; waits for its "ready" line (60 s).
handled_start() {
  local name=$1 bin=$2 port=$3 http=$4 toml=$5; shift 5
  mkdir -p "$WORK/$name"
  # Started directly (not through a function) so that $! is handled itself.
  ip netns exec "$HS_NETNS" "$bin" serve --config "$toml" --data-dir "$WORK/$name/data" --listen 127.0.0.1 \
    --port "$port" --http-port "$http" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" < /dev/null &
  local pid=$!
  echo "$pid" > "$WORK/$name.pid"
  STARTED_PIDS+=("$pid")
  for _ in $(seq 600); do
    grep -qx ready "$WORK/$name.out" 2>/dev/null && { echo "handled $name: pid $pid, port $port"; return 0; }
    kill -0 "$pid" 2>/dev/null || { tail -20 "$WORK/$name.err" >&2; die "handled $name exited"; }
    sleep 0.1
  done
  tail -20 "$WORK/$name.err" >&2; die "handled $name not ready after 60 s"
}
handled_stop() {
  local pid; pid=$(cat "$WORK/$1.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

# handled_bin PATH: the binary under test.
handled_bin() {
  [ -n "${1:-}" ] || die "usage: $0 path/to/handled"
  HANDLED=$(realpath "$1")
  [ -x "$HANDLED" ] || die "no handled binary at $1"
}

cleanup_all() {
  local n
  for n in "$WORK"/*.ports; do [ -e "$n" ] && hn_stop "$(basename "$n" .ports)"; done
  for n in "${STARTED_PIDS[@]}"; do kill "$n" 2>/dev/null || true; done
  # A namespace this run made goes with it (one made before is left as found).
  if [ -n "${MADE_NETNS:-}" ]; then ip netns del "$HS_NETNS" 2>/dev/null || true; fi
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "work dir kept: $WORK"; else rm -rf "$WORK"; fi
}

# handled_mirror_toml FILE SOURCE IDENTITY PK8 INTERVAL_MS: configuration of a handled mirror
# pulling from SOURCE (a siteinfo.json file or host:port), authenticating as 300:IDENTITY with
# the RSA key in PK8 (PKCS#8 DER), every INTERVAL_MS.
handled_mirror_toml() {
  cat > "$1" <<TOML
replication_source = "$2"
replication_authentication = "privatekey:300:$3"
replication_private_key = "$4"
replication_interval_ms = $5
# The primary's admin administers the mirror's copy too (lists of handles and homed prefixes).
server_admins = ["300:${PFX:-TEST}/ADMIN"]
TOML
}
