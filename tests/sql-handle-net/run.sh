#!/usr/bin/env bash
# Handle.Net 9.0.0 on SQL storage and `handled` with `store = "sql"` on ONE PostgreSQL or
# MariaDB database, judged value by value (issue 26, "Judged by the original"):
#
#   sudo tests/sql-handle-net/run.sh path/to/release/handled [postgres|mariadb] [bytes|text|custom]
#
# The third argument picks the tables' layout: `bytes` (the manual's tables, the default),
# `text`: handles, prefixes and value types in varchar columns, Handle.Net with
# store_handle_as_string, store_na_as_string and store_handle_value_type_as_string = "yes",
# handled with the same three [sql] keys; or `custom`: the manual's tables under other
# table and column names (an application's own), read and written by both servers through
# the same fifteen custom statements (§8.1.4, custom-statements.sh).
#
# 1. a loopback-only network namespace (hssqlhn) holds everything: a throwaway PostgreSQL
#    (initdb in the work dir, 127.0.0.1:5432 inside the namespace) or MariaDB
#    (mariadb-install-db, 127.0.0.1:3306), Handle.Net 9.0.0 (the
#    shared harness, a copy of its distribution with the JDBC driver in lib/, config.dct set
#    to storage_type = "sql" as the Technical Manual §8.2 shows) and handled (store = "sql");
# 2. the tables are §8.2's (PostgreSQL) or §8.1.2's (MySQL), made with the database's client; Handle.Net's own code (the harness's
#    BootstrapAdmin) homes 0.NA/TEST and writes TEST/ADMIN into them; handled starts second;
# 3. handles are created through Handle.Net (native TCP, JSON API), through handled (native
#    TCP, JSON API) and by a third program (psql/mariadb INSERTs), then every one is resolved through
#    both servers (authenticated, restricted values included) and compared index by index:
#    type, data, TTL type and TTL, permissions, references, timestamp (compare.py of
#    tests/replication);
# 4. deletes through each server (native and JSON) and a row deleted by the third program:
#    gone from both.
#
# Skips (exit 77, tests/skip.sh) without the harness, root, Java, the database's binaries or
# the JDBC driver (org.postgresql:postgresql or org.mariadb.jdbc:mariadb-java-client, from
# ~/.m2 or fetched with Maven). The database-specific parts are in db-postgres.sh and
# db-mariadb.sh.
# KEEP_WORK=1 keeps the work directory.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DB=${2:-postgres}
LAYOUT=${3:-bytes}
case "$DB" in
  postgres) SUITE=sql-handle-net ;;
  mariadb) SUITE=sql-handle-net-mariadb ;;
  *) echo "usage: $0 path/to/handled [postgres|mariadb] [bytes|text]" >&2; exit 2 ;;
esac
case "$LAYOUT" in
  bytes) ;;
  text) SUITE=$SUITE-text ;;
  custom) SUITE=$SUITE-custom ;;
  *) echo "usage: $0 path/to/handled [postgres|mariadb] [bytes|text|custom]" >&2; exit 2 ;;
esac
. "$REPO/tests/handle-net-peer.sh"
require_handle_net_peer "$SUITE" java javac python3 curl runuser
. "$REPO/tests/skip.sh"

[ -n "${1:-}" ] || { echo "usage: $0 path/to/handled" >&2; exit 2; }
BIN=$(realpath "$1")
[ -x "$BIN" ] || { echo "no handled binary at $1" >&2; exit 2; }

# db_check, db_start, db_stop, sql_as, db_tables, JDBC_*, HANDLED_URL and the spellings
# key/vtype/blob/hexblob/esc/text_of (names and types by $LAYOUT): one file per database.
. "$HERE/db-$DB.sh"
# T_HANDLES/T_NAS and the C_* column names; custom_statements, custom_tables.
. "$HERE/custom-statements.sh"
. "$HERE/handle-net-on-sql.sh"
. "$HERE/client-cert.sh"
require_database_and_driver

export HS_NETNS=${HS_NETNS:-hssqlhn}
export HS_HEAP=${HS_HEAP:--Xms128m -Xmx384m}
export HS_PORT=2641 HS_HTTP_PORT=8000
HANDLED_PORT=2651
HANDLED_HTTP=8001
WORK=$(mktemp -d "${TMPDIR:-/tmp}/handled-sqlhn-XXXXXX")
chmod 755 "$WORK"
export HS_PEER="$WORK/hn"
handled_pid=""
cleanup() {
  [ -n "$handled_pid" ] && kill "$handled_pid" 2>/dev/null || true
  "$PEER/stop.sh" >/dev/null 2>&1 || true
  db_stop
  [ "$HS_NETNS" = hssqlhn ] && ip netns del hssqlhn 2>/dev/null || true
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "work dir kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "== $*"; }
die() { echo "FAIL: $*" >&2; exit 1; }
in_ns() { ip netns exec "$HS_NETNS" "$@"; }

log "namespace $HS_NETNS (loopback only)"
ip netns list | grep -qw "$HS_NETNS" || ip netns add "$HS_NETNS"
ip -n "$HS_NETNS" link set lo up
if ip -n "$HS_NETNS" -o link show | grep -v ': lo:' | grep -q .; then die "netns $HS_NETNS has non-loopback interfaces"; fi

db_start
db_tables
[ "$LAYOUT" = custom ] && custom_tables

handle_net_on_sql
"$PEER/start.sh" >"$WORK/start.log" 2>&1 || { cat "$WORK/start.log"; tail -30 "$SVR/error.log" 2>/dev/null; die "Handle.Net start"; }
grep -q '"startup_ms"' "$WORK/start.log" && sed 's/^/   /' "$WORK/start.log"

log "handled: store = sql on the same database, ports $HANDLED_PORT / $HANDLED_HTTP"
cat >"$WORK/handled.toml" <<TOML
server_admins = ["300:TEST/ADMIN", "301:TEST/ADMIN"]
# Client certificates (Manual §14.6.2): client-cert.sh.
https_client_certificates = true
store = "sql"
[sql]
url = "$HANDLED_URL"
# Handle.Net's tables as its set-up made them, nothing of ours: the site serial goes in the
# data directory (server-meta.json), as Handle.Net keeps its own in its server directory.
TOML
if [ "$LAYOUT" = text ]; then
  printf '%s = true\n' store_handle_as_string store_na_as_string store_handle_value_type_as_string >>"$WORK/handled.toml"
fi
if [ "$LAYOUT" = custom ]; then
  custom_statements | while IFS='=' read -r k v; do printf '%s = "%s"\n' "$k" "$v"; done >>"$WORK/handled.toml"
fi
mkdir -p "$WORK/handled-data"
# Started directly (not through a function) so that $! is handled itself.
HANDLED_SQL_PASSWORD=hspass ip netns exec "$HS_NETNS" "$BIN" serve --config "$WORK/handled.toml" --data-dir "$WORK/handled-data" \
  --listen 127.0.0.1 --port "$HANDLED_PORT" --http-port "$HANDLED_HTTP" --prefix TEST \
  >"$WORK/handled.out" 2>"$WORK/handled.err" </dev/null &
handled_pid=$!
for _ in $(seq 600); do
  grep -qx ready "$WORK/handled.out" 2>/dev/null && break
  kill -0 "$handled_pid" 2>/dev/null || { cat "$WORK/handled.err"; die "handled exited"; }
  sleep 0.1
done
grep -qx ready "$WORK/handled.out" || { cat "$WORK/handled.err"; die "handled not ready after 60 s"; }
case $DB in postgres) this_schema="current_schema()" ;; *) this_schema="database()" ;; esac
ours=$(sql_as handleserver "select count(*) from information_schema.tables where table_schema = $this_schema and table_name like 'handled%'")
[ "$ours" = 0 ] || die "handled made $ours table(s) of its own in Handle.Net's database"
grep -q '"site/serial"' "$WORK/handled-data/server-meta.json" || die "no site serial in handled-data/server-meta.json"
log "handled started writable on Handle.Net's tables alone (its site serial in its data directory)"

log "Java tools (tests/replication/java on the 9.0.0 library)"
javac -nowarn -cp "$CP" -d "$WORK/classes" "$REPO/tests/replication/java/Hs.java" "$REPO/tests/replication/java/HsTool.java" \
  >"$WORK/javac.log" 2>&1 || { cat "$WORK/javac.log"; die javac; }
mkdir -p "$WORK/client-config"
printf '{\n  "auto_update_root_info" = "no"\n}\n' >"$WORK/client-config/config.dct"
AUTH="seckey:301:TEST/ADMIN:benchsecret"
HN=127.0.0.1:$HS_PORT
HD=127.0.0.1:$HANDLED_PORT
# hs SERVER COMMAND...: HsTool lines against one server, authenticated as the admin.
hs() {
  local server=$1; shift
  { printf 'server %s\nauth %s\n' "$server" "$AUTH"; printf '%s\n' "$@"; } \
    | in_ns java -cp "$WORK/classes:$CP" -Dnet.handle.configDir="$WORK/client-config" HsTool
}
# json METHOD PORT HANDLE [BODY]: the JSON API over HTTPS (port unification on both), Basic
# authentication as 301:TEST/ADMIN; prints the HTTP status and the body.
json() {
  local args=(-sk -m 20 --retry 3 --retry-connrefused -X "$1" -u '301%3ATEST%2FADMIN:benchsecret' -w '\n%{http_code}')
  [ -z "${4:-}" ] || args+=(-H 'Content-Type: application/json' --data-binary "$4")
  in_ns curl "${args[@]}" "https://127.0.0.1:$2/api/handles/$3"
}
json_ok() {
  local out code; out=$(json "$@") || die "curl $1 $3 on port $2"
  code=$(tail -1 <<<"$out")
  case "$code" in 200|201) ;; *) die "JSON API $1 $3 on port $2: HTTP $code: $(head -n -1 <<<"$out")";; esac
}

ADM="100:HS_ADMIN:300:TEST/ADMIN"
# The same kinds of values through every path: plain, TTL relative and absolute, restricted
# (HS_SECKEY, admin-only perms), public-write, references (one with a tab in the handle).
specs() {
  echo "$ADM 1:URL:http://example.org/$1|ttl=3600 2:EMAIL:$1@example.org|abs|ttl=2000000000 \
3:HS_SECKEY:s3cret-$1 4:NOTE:private-$1|perms=1100 5:DESC:open-$1|perms=1111|ttl=0 \
6:URL:http://example.org/$1/r|refs=1:TEST/ADMIN,300:TEST/ADMIN,2:TEST/Ré%41\\x 7:10320/LOC:<locations/>|ttl=86400"
}

log "creates through Handle.Net (native TCP) and through handled (native TCP)"
hs "$HN" "create TEST/HN-NATIVE-1 $(specs hn1)" "create TEST/hn-mixed-Case $(specs hn2)" "create TEST/HN-DEL-1 $(specs hn3)"
hs "$HD" "create TEST/HD-NATIVE-1 $(specs hd1)" "create TEST/hd-mixed-Case $(specs hd2)" "create TEST/HD-DEL-1 $(specs hd3)"

log "creates through the JSON API of each"
json_body() {
  cat <<J
{"values":[
 {"index":100,"type":"HS_ADMIN","data":{"format":"admin","value":{"handle":"TEST/ADMIN","index":300,"permissions":"111111111111"}}},
 {"index":1,"type":"URL","data":{"format":"string","value":"http://example.org/$1"},"ttl":7200},
 {"index":2,"type":"EMAIL","data":{"format":"string","value":"$1@example.org"}},
 {"index":3,"type":"DESC","data":{"format":"base64","value":"AAEC/w=="}},
 {"index":4,"type":"NOTE","data":{"format":"string","value":"private $1"},"permissions":"1100"}
]}
J
}
json_ok PUT "$HS_HTTP_PORT" TEST/HN-JSON-1 "$(json_body hnj1)"
json_ok PUT "$HS_HTTP_PORT" TEST/HN-JSON-DEL "$(json_body hnj2)"
json_ok PUT "$HANDLED_HTTP" TEST/HD-JSON-1 "$(json_body hdj1)"
json_ok PUT "$HANDLED_HTTP" TEST/HD-JSON-DEL "$(json_body hdj2)"

log "rows inserted by a third program ($DB's client)"
# HS_ADMIN for 300:TEST/ADMIN with all twelve permissions (Encoder.encodeAdminRecord's bytes).
admin_hex=$(python3 -c 'import struct; h=b"TEST/ADMIN"; print((struct.pack(">H", 0x0fff) + struct.pack(">I", len(h)) + h + struct.pack(">I", 300)).hex())')
S1=$(key TEST/SQL-1) SD=$(key TEST/SQL-DEL) ADMIN_T=$(vtype HS_ADMIN) URL_T=$(vtype URL) ADMIN_D=$(hexblob "$admin_hex")
sql_as handleserver "insert into $T_HANDLES values
 ($S1, 100, $ADMIN_T, $ADMIN_D, 0, 86400, 1700000000, '', true, true, true, false),
 ($S1, 1, $URL_T, $(blob http://example.org/sql1), 0, 3600, 1700000001, '', true, true, true, false),
 ($S1, 2, $(vtype DESC), $(hexblob 00ff10), 1, 2000000000, 1700000002, '', true, true, true, true),
 ($S1, 3, $(vtype NOTE), $(blob hidden), 0, 60, 1700000003, '', true, false, false, false),
 ($S1, 4, $URL_T, $(blob http://example.org/refs), 0, 86400, 1700000004, $(esc)'1:TEST/ADMIN\t300:TEST/A\\\\tB', true, true, true, false),
 ($SD, 100, $ADMIN_T, $ADMIN_D, 0, 86400, 1700000000, '', true, true, true, false),
 ($SD, 1, $URL_T, $(blob http://example.org/sqldel), 0, 86400, 1700000000, '', true, true, true, false);"

fails=0
client_cert_checks

ALL="$CERT_HANDLES TEST/ADMIN TEST/HN-NATIVE-1 TEST/HN-MIXED-CASE TEST/HN-DEL-1 TEST/HD-NATIVE-1 TEST/HD-MIXED-CASE TEST/HD-DEL-1 \
TEST/HN-JSON-1 TEST/HN-JSON-DEL TEST/HD-JSON-1 TEST/HD-JSON-DEL TEST/SQL-1 TEST/SQL-DEL"
# snap NAME SERVER: every handle of $ALL resolved (authenticated, restricted values included).
snap() { hs "$2" "resolve $ALL" >"$WORK/$1.jsonl" || die "resolving through $1"; }
compare() {
  log "compare: $1 (Handle.Net vs handled)"
  snap "hn-$1" "$HN"; snap "hd-$1" "$HD"
  # Every handle of the round must resolve (compare.py skips unlisted errors: count them here).
  local errs; errs=$(cat "$WORK/hn-$1.jsonl" "$WORK/hd-$1.jsonl" | { grep -c '"error"' || true; })
  if [ "$errs" != "${2:-0}" ]; then
    echo "   expected ${2:-0} handle(s) not found, got $errs:"; grep -h '"error"' "$WORK/hn-$1.jsonl" "$WORK/hd-$1.jsonl" | sed 's/^/   /'
    fails=$((fails + 1))
  fi
  python3 "$REPO/tests/replication/compare.py" "$WORK/hn-$1.jsonl" "$WORK/hd-$1.jsonl" --names Handle.Net handled || fails=$((fails + 1))
}
compare created

# The rows themselves: what handled wrote must be what Handle.Net writes for the same values,
# column by column (data and timestamp apart, which differ by design between the pairs).
rows() {
  sql_as handleserver "select $C_IDX, $(text_of "$C_TYPE"), $C_TTL_TYPE, $C_TTL, $C_REFS, $C_PERMS
    from $T_HANDLES where $C_HANDLE = $(key "TEST/$1") order by $C_IDX" >"$WORK/rows-$1" || die "reading the rows of $1"
}
for pair in "HN-NATIVE-1 HD-NATIVE-1" "HN-MIXED-CASE HD-MIXED-CASE" "HN-JSON-1 HD-JSON-1"; do
  set -- $pair
  rows "$1"; rows "$2"
  if diff "$WORK/rows-$1" "$WORK/rows-$2" >"$WORK/rows.diff"; then
    echo "   rows of TEST/$1 (Handle.Net) and TEST/$2 (handled): same ($(wc -l <"$WORK/rows-$1") rows)"
  else
    echo "   rows of TEST/$1 (Handle.Net) and TEST/$2 (handled) differ:"; sed 's/^/     /' "$WORK/rows.diff"
    fails=$((fails + 1))
  fi
done

log "deletes: native through each, JSON through each, a row set deleted by $DB's client"
hs "$HD" "delete TEST/HN-DEL-1"
hs "$HN" "delete TEST/HD-DEL-1"
json_ok DELETE "$HANDLED_HTTP" TEST/HN-JSON-DEL
json_ok DELETE "$HS_HTTP_PORT" TEST/HD-JSON-DEL
sql_as handleserver "delete from $T_HANDLES where $C_HANDLE = $SD"
# 5 handles gone, on each of the two servers
compare deleted 10
for h in TEST/HN-DEL-1 TEST/HD-DEL-1 TEST/HN-JSON-DEL TEST/HD-JSON-DEL TEST/SQL-DEL; do
  for s in hn hd; do
    grep -q "\"handle\":\"$h\",\"error\"" "$WORK/$s-deleted.jsonl" || { echo "   $h still resolves through $s"; fails=$((fails + 1)); }
  done
done
left=$(sql_as handleserver "select count(*) from $T_HANDLES where $C_HANDLE in ($(key TEST/HN-DEL-1), $(key TEST/HD-DEL-1), $(key TEST/HN-JSON-DEL), $(key TEST/HD-JSON-DEL))")
[ "$left" = 0 ] || { echo "   $left row(s) of deleted handles still in the table"; fails=$((fails + 1)); }

if [ "$fails" -ne 0 ]; then
  KEEP_WORK=${KEEP_WORK:-0}
  die "$fails check(s) failed (KEEP_WORK=1 keeps $WORK)"
fi
log "PASS: Handle.Net 9.0.0 and handled on one $DB database ($LAYOUT layout) answer alike"
