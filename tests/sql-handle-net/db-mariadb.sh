# MariaDB for run.sh (sourced): the server in the namespace (Debian's mariadb-server, run
# as `mysql`, Debian's default character set and case-insensitive collation), its client,
# §8.1.2's MySQL tables verbatim, the JDBC driver, and how literals are spelt.
MARIADB_BIN=${HANDLED_MARIADB_BIN:-/usr/sbin}
MARIADB_PORT=3306
JDBC_VERSION=${JDBC_VERSION:-3.5.7}
JDBC_ARTIFACT="org.mariadb.jdbc:mariadb-java-client:$JDBC_VERSION"
JDBC_JAR=${JDBC_JAR:-$HOME/.m2/repository/org/mariadb/jdbc/mariadb-java-client/$JDBC_VERSION/mariadb-java-client-$JDBC_VERSION.jar}
JDBC_URL="jdbc:mariadb://127.0.0.1:$MARIADB_PORT/handlesystem"
JDBC_DRIVER=org.mariadb.jdbc.Driver
HANDLED_URL="mariadb://handleserver@127.0.0.1:$MARIADB_PORT/handlesystem"

key() { printf "'%s'" "$1"; }
vtype() { key "$1"; }
blob() { printf "'%s'" "$1"; }
hexblob() { printf "X'%s'" "$1"; }
esc() { :; }
text_of() { printf "%s" "$1"; }

mariadb_program() {
  local p
  for p in "$MARIADB_BIN/$1" "/usr/sbin/$1" "/usr/bin/$1"; do [ -x "$p" ] && { echo "$p"; return; }; done
  return 1
}

db_check() {
  for p in mariadbd mariadb-install-db mariadb; do
    mariadb_program "$p" >/dev/null || skip_suite "$SUITE" "no $p (apt-get install mariadb-server, or set HANDLED_MARIADB_BIN)"
  done
  id mysql >/dev/null 2>&1 || skip_suite "$SUITE" "no mysql user to run MariaDB as"
}

db_start() {
  log "MariaDB on 127.0.0.1:$MARIADB_PORT inside the namespace"
  mkdir -p "$WORK/db"; chown mysql: "$WORK/db"
  runuser -u mysql -- "$(mariadb_program mariadb-install-db)" --no-defaults --datadir="$WORK/db/data" \
    --auth-root-authentication-method=normal --skip-test-db >"$WORK/install-db.log" 2>&1 \
    || { cat "$WORK/install-db.log"; die mariadb-install-db; }
  in_ns runuser -u mysql -- "$(mariadb_program mariadbd)" --no-defaults --datadir="$WORK/db/data" \
    --socket="$WORK/db/mariadbd.sock" --pid-file="$WORK/db/mariadbd.pid" --log-error="$WORK/db/server.log" \
    --port="$MARIADB_PORT" --skip-networking=0 --bind-address=127.0.0.1 --skip-name-resolve \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    --innodb-flush-log-at-trx-commit=0 --innodb-buffer-pool-size=64M --skip-log-bin --performance-schema=0 \
    </dev/null >/dev/null 2>&1 &
  local _
  for _ in $(seq 300); do
    SQL_DB= sql_as root "select 1" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  cat "$WORK/db/server.log"; die "MariaDB did not start"
}

db_stop() {
  [ -f "$WORK/db/mariadbd.pid" ] || return 0
  local pid; pid=$(cat "$WORK/db/mariadbd.pid")
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
}

# sql_as USER SQL: a third program on the database (tab-separated, no column names).
sql_as() {
  local pw=(); [ "$1" = root ] || pw=(-phspass)
  in_ns "$(mariadb_program mariadb)" --no-defaults --batch --skip-column-names --protocol=tcp -h 127.0.0.1 \
    -P "$MARIADB_PORT" -u "$1" "${pw[@]}" -e "$2" ${SQL_DB-handlesystem}
}

db_tables() {
  SQL_DB= sql_as root "create database handlesystem character set utf8mb4;
create user handleserver@'127.0.0.1' identified by 'hspass';
grant all on handlesystem.* to handleserver@'127.0.0.1';"
  # The tables exactly as the Technical Manual's §8.1.2 creates them on MySQL; in the text
  # layout with a varchar type, as its §8.1.1 suggests for store_*_as_string.
  local type_column=blob
  [ "${LAYOUT:-bytes}" = text ] && type_column="varchar(255)"
  sql_as handleserver "create table nas (
na varchar(255) not null,
PRIMARY KEY(na)
);
create table handles (
handle varchar(255) not null,
idx int4 not null,
type $type_column,
data blob,
ttl_type int2,
ttl int4,
timestamp int4,
refs blob,
admin_read bool,
admin_write bool,
pub_read bool,
pub_write bool,
PRIMARY KEY(handle, idx)
);"
}
