#!/usr/bin/env bash
# Reference scenario: Handle.Net 9.0.0 primary -> Handle.Net 9.0.0 mirror, configured as the
# Technical Manual (ch. 7.1, 7.2) says. Seed records, bootstrap the mirror with
# hdl-dumpfromprimary, start it, make changes of every kind on the primary, wait until the
# mirror has the last one, and compare every record value by value.
#
#   sudo tests/replication/hn-to-hn.sh
#
# This proves the harness (config, identities, comparison) on the original alone; the
# handled scenarios reuse every step of it.
. "$(dirname "$0")/lib.sh"
require_handle_net
make_work
trap cleanup_all EXIT
INTERVAL=${REPL_INTERVAL_MS:-2000}

log "Handle.Net primary (2641) and mirror (2642) in netns $HS_NETNS, work dir $WORK"
hn_setup primary 2641 8000
hn_setup_mirror mirror 2642 8002 TEST/REPL-MIRROR
hn_config primary replication_admins '( "300:TEST/ADMIN" "301:TEST/ADMIN" "300:TEST/REPL-MIRROR" )'
hn_make_mirror mirror "$(hn_svr primary)/siteinfo.json" "$INTERVAL"

hn_start primary
ADMIN="pubkey:300:TEST/ADMIN:$(hn_svr primary)/admpriv.bin"
log "seed the primary (and the mirror's replication identity TEST/REPL-MIRROR)"
{ echo "server 127.0.0.1:2641"; echo "auth $ADMIN"; hn_identity_command mirror 300:TEST/ADMIN
  seed_commands 300:TEST/ADMIN; } | hs_tool || die "seeding the primary"

log "hdl-dumpfromprimary, then start the mirror (replication_interval $INTERVAL ms)"
hn_dump_from_primary mirror
hn_start mirror

log "changes on the primary; wait for the last one on the mirror"
{ echo "server 127.0.0.1:2641"; echo "auth $ADMIN"; change_commands 300:TEST/ADMIN
  echo "server 127.0.0.1:2642"; echo "await TEST/SENTINEL 1 done 60000"; } | hs_tool > "$WORK/lag.txt" \
  || die "changes did not reach the mirror"
echo "sentinel on the mirror after $(cat "$WORK/lag.txt") ms"
hn_mirror_healthy mirror

log "compare every record"
snapshot primary 127.0.0.1:2641 "$ADMIN"
snapshot mirror 127.0.0.1:2642 "$ADMIN"
compare_snapshots primary mirror
echo "PASS: Handle.Net -> Handle.Net"
