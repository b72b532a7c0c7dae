#!/usr/bin/env bash
# (a) handled primary -> Handle.Net 9.0.0 mirror. The mirror is configured exactly as for a
# Handle.Net primary (txnsrcsv.json = handled's site record as GET_SITE_INFO returns it,
# privatekey replication identity, hdl-dumpfromprimary), so the stock mirror is the judge of
# handled's replication source: dump, then every kind of change pulled from its log, then every
# record compared value by value.
#
#   sudo tests/replication/handled-to-hn.sh path/to/handled
#
# handled side (its keys, docs/replication.md): replication_admins lists the mirror's identity.
. "$(dirname "$0")/lib.sh"
require_handle_net
handled_bin "${1:-}"
make_work
trap cleanup_all EXIT
INTERVAL=${REPL_INTERVAL_MS:-2000}

log "handled primary (2651) and Handle.Net mirror (2642) in netns $HS_NETNS, work dir $WORK"
cat > "$WORK/primary.toml" <<TOML
replication_admins = ["300:TEST/REPL-MIRROR"]
TOML
handled_start primary "$HANDLED" 2651 8051 "$WORK/primary.toml" --prefix TEST --admin-credentials "$WORK/admin-TEST.json"
ADMIN="handled:$WORK/admin-TEST.json"
hn_setup_mirror mirror 2642 8002 TEST/REPL-MIRROR

log "seed handled (and the mirror's replication identity TEST/REPL-MIRROR)"
{ echo "server 127.0.0.1:2651"; echo "auth $ADMIN"; hn_identity_command mirror 300:TEST/ADMIN
  seed_commands 300:TEST/ADMIN; echo "siteinfo $WORK/handled-site.json"; } | hs_tool || die "seeding handled"

log "mirror: txnsrcsv.json = handled's site record; hdl-dumpfromprimary; start"
hn_make_mirror mirror "$WORK/handled-site.json" "$INTERVAL"
hn_dump_from_primary mirror
hn_start mirror

log "changes on handled; wait for the last one on the mirror"
{ echo "server 127.0.0.1:2651"; echo "auth $ADMIN"; change_commands 300:TEST/ADMIN
  echo "server 127.0.0.1:2642"; echo "await TEST/SENTINEL 1 done 60000"; } | hs_tool > "$WORK/lag.txt" \
  || { tail -30 "$(hn_svr mirror)"/logs/error.log* >&2; die "changes did not reach the mirror"; }
echo "sentinel on the mirror after $(cat "$WORK/lag.txt") ms"
hn_mirror_healthy mirror

log "compare every record"
snapshot handled 127.0.0.1:2651 "$ADMIN"
snapshot mirror 127.0.0.1:2642 "$ADMIN"
compare_snapshots handled mirror
echo "PASS: (a) handled -> Handle.Net"
