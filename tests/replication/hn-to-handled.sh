#!/usr/bin/env bash
# (b) Handle.Net 9.0.0 primary -> handled mirror. The primary is configured as for a Handle.Net
# mirror (the mirror's identity in replication_admins, its HS_PUBKEY in a handle on the
# primary); handled pulls the dump, then every kind of change from the primary's log; then
# every record is compared value by value.
#
#   sudo tests/replication/hn-to-handled.sh path/to/handled
#
# handled side (its keys, docs/replication.md): replication_source = the primary's
# siteinfo.json, replication_authentication = privatekey:300:TEST/REPL-HANDLED with the
# PKCS#8 key in replication_private_key, replication_interval_ms.
. "$(dirname "$0")/lib.sh"
require_handle_net
handled_bin "${1:-}"
make_work
trap cleanup_all EXIT
INTERVAL=${REPL_INTERVAL_MS:-2000}

log "Handle.Net primary (2641) and handled mirror (2651) in netns $HS_NETNS, work dir $WORK"
hn_setup primary 2641 8000
hn_config primary replication_admins '( "300:TEST/ADMIN" "301:TEST/ADMIN" "300:TEST/REPL-HANDLED" )'
hn_start primary
ADMIN="pubkey:300:TEST/ADMIN:$(hn_svr primary)/admpriv.bin"
log "seed the primary (and handled's replication identity TEST/REPL-HANDLED)"
{ echo "server 127.0.0.1:2641"; echo "auth $ADMIN"
  echo "keygen $WORK/handled-repl.pk8 $WORK/handled-repl.pub"
  echo "create TEST/REPL-HANDLED 100:HS_ADMIN:300:TEST/ADMIN 300:HS_PUBKEY:@$WORK/handled-repl.pub"
  seed_commands 300:TEST/ADMIN; } | hs_tool || die "seeding the primary"

log "handled mirror: dump, then pulls every $INTERVAL ms"
handled_mirror_toml "$WORK/mirror.toml" "$(hn_svr primary)/siteinfo.json" TEST/REPL-HANDLED "$WORK/handled-repl.pk8" "$INTERVAL"
handled_start mirror "$HANDLED" 2651 8051 "$WORK/mirror.toml"
{ echo "server 127.0.0.1:2651"; echo "await TEST/R-5 1 http://example.org/r5 60000"; } | hs_tool > /dev/null \
  || { tail -20 "$WORK/mirror.err" >&2; die "the dump did not reach handled"; }

log "changes on the primary; wait for the last one on handled"
{ echo "server 127.0.0.1:2641"; echo "auth $ADMIN"; change_commands 300:TEST/ADMIN
  echo "server 127.0.0.1:2651"; echo "await TEST/SENTINEL 1 done 60000"; } | hs_tool > "$WORK/lag.txt" \
  || { tail -20 "$WORK/mirror.err" >&2; die "changes did not reach handled"; }
echo "sentinel on handled after $(cat "$WORK/lag.txt") ms"

log "compare every record"
snapshot primary 127.0.0.1:2641 "$ADMIN"
snapshot handled 127.0.0.1:2651 "$ADMIN"
compare_snapshots primary handled
echo "PASS: (b) Handle.Net -> handled"
