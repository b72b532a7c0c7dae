# PostgreSQL for run.sh (sourced): the server in the namespace, its client, §8.2's tables,
# the JDBC driver, and how literals are spelt for the bytea columns.
PG_BIN=${HANDLED_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
PG_PORT=5432
JDBC_VERSION=${JDBC_VERSION:-42.7.14}
JDBC_ARTIFACT="org.postgresql:postgresql:$JDBC_VERSION"
JDBC_JAR=${JDBC_JAR:-$HOME/.m2/repository/org/postgresql/postgresql/$JDBC_VERSION/postgresql-$JDBC_VERSION.jar}
JDBC_URL="jdbc:postgresql://127.0.0.1:$PG_PORT/handlesystem"
JDBC_DRIVER=org.postgresql.Driver
HANDLED_URL="postgres://handleserver@127.0.0.1:$PG_PORT/handlesystem"

# Names (handles, prefixes) and value types: bytea, or text in the text layout.
NAME_TYPE=bytea
[ "${LAYOUT:-bytes}" = text ] && NAME_TYPE=varchar
key() { printf "'%s'::$NAME_TYPE" "$1"; }
vtype() { key "$1"; }
blob() { printf "'%s'::bytea" "$1"; }
hexblob() { printf "'\\\\x%s'::bytea" "$1"; }
esc() { printf E; }
text_of() { if [ "$NAME_TYPE" = bytea ]; then printf "encode(%s, 'escape')" "$1"; else printf %s "$1"; fi; }

db_check() {
  [ -x "$PG_BIN/initdb" ] || skip_suite "$SUITE" "no PostgreSQL binaries (apt-get install postgresql, or set HANDLED_PG_BIN)"
  id postgres >/dev/null 2>&1 || skip_suite "$SUITE" "no postgres user to run PostgreSQL as"
}

db_start() {
  log "PostgreSQL ($PG_BIN) on 127.0.0.1:$PG_PORT inside the namespace"
  mkdir -p "$WORK/pg"; chown postgres: "$WORK/pg"
  runuser -u postgres -- "$PG_BIN/initdb" -D "$WORK/pg/data" -U postgres --auth=trust -E UTF8 --locale=C -N >"$WORK/initdb.log" 2>&1 \
    || { cat "$WORK/initdb.log"; die initdb; }
  in_ns runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $WORK/pg ${PG_SETTINGS:--c fsync=off -c shared_buffers=32MB}" start >/dev/null \
    || { cat "$WORK/pg/server.log"; die "PostgreSQL did not start"; }
}

db_stop() {
  if [ -f "$WORK/pg/data/postmaster.pid" ]; then
    ip netns exec "$HS_NETNS" runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$WORK/pg/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
}

# sql_as USER SQL: a third program on the database (tuples only, unaligned).
sql_as() {
  in_ns "$PG_BIN/psql" -X -q -t -A -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U "$1" -d "${SQL_DB:-handlesystem}" -c "$2"
}

db_tables() {
  SQL_DB=postgres sql_as postgres "create role handleserver login password 'hspass'"
  SQL_DB=postgres sql_as postgres "create database handlesystem owner handleserver encoding 'UTF8'"
  # The tables exactly as the Technical Manual's §8.2 creates them; in the text layout with
  # varchar names and types, as its §8.1.1 suggests for store_*_as_string.
  sql_as handleserver "create table nas (na $NAME_TYPE not null, primary key(na));
create table handles (handle $NAME_TYPE not null, idx int4 not null, type $NAME_TYPE, data bytea, ttl_type int2, ttl int4,
  timestamp int4, refs text, admin_read bool, admin_write bool, pub_read bool, pub_write bool, primary key(handle, idx));
create index dataindex on handles ( data );
create index handleindex on handles ( handle );
grant select on nas,handles to public;"
}
