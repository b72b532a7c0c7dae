#!/usr/bin/env bash
# (c) Migration from Handle.Net to handled without a redump anywhere:
#   1. Handle.Net primary P (prefix MIG) with two mirrors: handled M and Handle.Net N.
#   2. Every kind of change on P reaches M and N; P and M compared value by value.
#   3. P retired; M promoted (offline `handled promote`, restarted as a primary that lists N's
#      identity in replication_admins); N's txnsrcsv.json pointed at M.
#   4. More changes on M reach N, which must go on from its last transaction id (no
#      NEED_TO_REDUMP); M and N compared value by value.
#   5. The Java interop suite (tests/interop-java) on copies of M's data directory.
#
#   sudo tests/replication/migration.sh path/to/handled
#
# The prefix is MIG so that the interop suite's own prefix (TEST) is free on M's store.
. "$(dirname "$0")/lib.sh"
require_handle_net
handled_bin "${1:-}"
make_work
trap cleanup_all EXIT
INTERVAL=${REPL_INTERVAL_MS:-2000}
export HS_PREFIX=MIG HS_ADMIN_HANDLE=MIG/ADMIN PFX=MIG

log "P = Handle.Net primary (2641), N = Handle.Net mirror (2642), M = handled mirror (2651); work dir $WORK"
hn_setup primary 2641 8000
hn_setup_mirror mirror 2642 8002 MIG/REPL-MIRROR
hn_config primary replication_admins '( "300:MIG/ADMIN" "301:MIG/ADMIN" "300:MIG/REPL-MIRROR" "300:MIG/REPL-HANDLED" )'
hn_make_mirror mirror "$(hn_svr primary)/siteinfo.json" "$INTERVAL"
hn_start primary
ADMIN="pubkey:300:MIG/ADMIN:$(hn_svr primary)/admpriv.bin"
{ echo "server 127.0.0.1:2641"; echo "auth $ADMIN"; hn_identity_command mirror 300:MIG/ADMIN
  echo "keygen $WORK/handled-repl.pk8 $WORK/handled-repl.pub"
  echo "create MIG/REPL-HANDLED 100:HS_ADMIN:300:MIG/ADMIN 300:HS_PUBKEY:@$WORK/handled-repl.pub"
  seed_commands 300:MIG/ADMIN; } | hs_tool || die "seeding P"
hn_dump_from_primary mirror
hn_start mirror
handled_mirror_toml "$WORK/m-mirror.toml" "$(hn_svr primary)/siteinfo.json" MIG/REPL-HANDLED "$WORK/handled-repl.pk8" "$INTERVAL"
handled_start handled "$HANDLED" 2651 8051 "$WORK/m-mirror.toml" --prefix MIG --admin-credentials "$WORK/m-admin.json"

log "changes on P reach M and N"
{ echo "server 127.0.0.1:2641"; echo "auth $ADMIN"; change_commands 300:MIG/ADMIN
  echo "server 127.0.0.1:2651"; echo "await MIG/SENTINEL 1 done 60000"
  echo "server 127.0.0.1:2642"; echo "await MIG/SENTINEL 1 done 60000"; } | hs_tool > /dev/null \
  || { tail -20 "$WORK/handled.err" >&2; die "changes on P did not reach both mirrors"; }
snapshot primary 127.0.0.1:2641 "$ADMIN"
snapshot handled 127.0.0.1:2651 "$ADMIN"
compare_snapshots primary handled

log "retire P; promote M; point N at M"
hn_stop primary
handled_stop handled
in_ns "$HANDLED" promote --data-dir "$WORK/handled/data" || die "handled promote"
cat > "$WORK/m-primary.toml" <<TOML
replication_admins = ["300:MIG/REPL-MIRROR"]
TOML
handled_start handled "$HANDLED" 2651 8051 "$WORK/m-primary.toml" --prefix MIG --admin-credentials "$WORK/m-admin.json"
hn_stop mirror
echo "siteinfo $WORK/m-site.json" | { echo "server 127.0.0.1:2651"; cat; } | hs_tool || die "site record of M"
cp "$WORK/m-site.json" "$(hn_svr mirror)/txnsrcsv.json"
hn_start mirror

log "changes on M (the new primary) reach N without a redump"
{ echo "server 127.0.0.1:2651"; echo "auth $ADMIN"
  echo "create MIG/AFTER-1 100:HS_ADMIN:300:MIG/ADMIN 1:URL:http://example.org/after1"
  echo "modify MIG/R-1 1:URL:http://example.org/r1-after-migration"
  echo "delete MIG/N-1"
  echo "home 0.NA/MIG4"
  echo "create MIG/SENTINEL-2 100:HS_ADMIN:300:MIG/ADMIN 1:URL:done"
  echo "server 127.0.0.1:2642"; echo "await MIG/SENTINEL-2 1 done 60000"; } | hs_tool > /dev/null \
  || { tail -30 "$(hn_svr mirror)"/logs/error.log* >&2; die "changes on M did not reach N"; }
hn_mirror_healthy mirror
snapshot handled-promoted 127.0.0.1:2651 "$ADMIN"
snapshot mirror 127.0.0.1:2642 "$ADMIN"
compare_snapshots handled-promoted mirror

log "Java interop suite on copies of M's data directory"
handled_stop handled
HANDLED_TEST_DATA_FROM="$WORK/handled/data" "$REPO/tests/interop-java/run.sh" "$HANDLED" \
  || die "interop suite on the promoted mirror's store"
echo "PASS: (c) migration Handle.Net -> handled (promoted) -> Handle.Net mirror"
