# Handle.Net 9.0.0 on SQL storage (sourced by run.sh and scripts/bench-sql-vs-handle-net.sh):
# a copy of the harness's distribution with the JDBC driver in lib/ (Manual §8.1.1), the
# harness's server directory with config.dct's storage_type = "sql" and the sql_settings of
# §8.2 (with the three store_*_as_string options when $LAYOUT is text), and TEST/ADMIN
# written into the tables by Handle.Net's own storage code. Needs $WORK, $PEER, $HS_PEER,
# $JDBC_JAR/$JDBC_URL/$JDBC_DRIVER, $DB, and log, die, key, sql_as.
# handle_net_on_sql sets HSJ_HOME, SVR and CP (the server's classpath); the server is then started with
# "$PEER/start.sh".
# The database's binaries (db_check) and the JDBC driver, fetched with Maven when missing;
# skips $SUITE, saying which is missing.
require_database_and_driver() {
  db_check
  if [ ! -f "$JDBC_JAR" ] && command -v mvn >/dev/null; then
    timeout 300 mvn -q dependency:get -Dartifact="$JDBC_ARTIFACT" -Dtransitive=false >/dev/null 2>&1 || true
  fi
  [ -f "$JDBC_JAR" ] || skip_suite "$SUITE" "no JDBC driver ($JDBC_ARTIFACT from Maven Central; set JDBC_JAR)"
}

handle_net_on_sql() {
  log "Handle.Net 9.0.0: a copy of the distribution with the JDBC driver in lib/, storage_type = sql"
  cp -r "$PEER/hsj-9.0.0" "$WORK/hsj"
  cp "$JDBC_JAR" "$WORK/hsj/lib/"
  export HSJ_HOME="$WORK/hsj"
  "$PEER/setup.sh" --force >"$WORK/setup.log" 2>&1 || { cat "$WORK/setup.log"; die "harness setup"; }
  SVR="$HS_PEER/svr"
  local statements=""
  [ "${LAYOUT:-bytes}" = custom ] && statements=$(custom_statements)
  python3 - "$SVR/config.dct" "$JDBC_URL" "$JDBC_DRIVER" "${LAYOUT:-bytes}" "$statements" <<'PY'
import re, sys
p, url, driver, layout, statements = sys.argv[1:6]
t = open(p).read()
# The text layout: Handle.Net's three store_*_as_string options (Technical Manual §8.1.1);
# the custom one: its custom statements (§8.1.4), KEY=SQL lines.
as_string = "".join(f'      "{k}" = "yes"\n' for k in ("store_handle_as_string", "store_na_as_string",
    "store_handle_value_type_as_string")) if layout == "text" else ""
as_string += "".join(f'      "{k}" = "{v}"\n' for k, v in (l.split("=", 1) for l in statements.splitlines() if l))
block = f'''    "storage_type" = "sql"
    "sql_settings" = {{
      "sql_url" = "{url}"
      "sql_driver" = "{driver}"
      "sql_login" = "handleserver"
      "sql_passwd" = "hspass"
      "sql_read_only" = "no"
{as_string}    }}
'''
new, n = re.subn(r'^(    "case_sensitive" = "no"\n)', lambda m: m.group(1) + block, t, count=1, flags=re.M)
if n != 1:
    sys.exit("config.dct: no case_sensitive line in server_config")
open(p, "w").write(new)
PY
  . "$PEER/env.sh"
  CP=$(hsj_classpath)
  # Handle.Net's own storage code homes the prefix and writes TEST/ADMIN into the SQL tables.
  # Its last step, checkpointDatabase(), throws on SQL storage ("Checkpoint not supported in
  # this storage type") after the rows are written: the rows are what is checked.
  in_ns java -cp "$CP" "$PEER/bootstrap/BootstrapAdmin.java" "$SVR" TEST TEST/ADMIN 301 benchsecret 300 \
    >"$WORK/bootstrap-sql.log" 2>&1 || grep -q "Checkpoint not supported" "$WORK/bootstrap-sql.log" \
    || { cat "$WORK/bootstrap-sql.log"; die "BootstrapAdmin on SQL"; }
  [ "$(sql_as handleserver "select count(*) from ${T_HANDLES:-handles} where ${C_HANDLE:-handle} = $(key TEST/ADMIN)")" = 3 ] \
    && [ "$(sql_as handleserver "select count(*) from ${T_NAS:-nas} where ${C_NA:-na} = $(key 0.NA/TEST)")" = 1 ] \
    || die "BootstrapAdmin did not write 0.NA/TEST and TEST/ADMIN into $DB: $(cat "$WORK/bootstrap-sql.log")"
}
