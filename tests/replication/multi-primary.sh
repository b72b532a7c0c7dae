#!/usr/bin/env bash
# (d) Multi-primary (Technical Manual §7.3): a Handle.Net 9.0.0 primary and a handled primary
# in one group, each pulling the other's log, both taking writes. Creates on each reach the
# other; the same handles changed on both while they cannot see each other settle on the
# later change on both; a delete wins over an older modify even when the modify arrives
# later; then every record is compared value by value.
#
#   sudo tests/replication/multi-primary.sh path/to/handled
#
# Who cannot see whom is made by stopping a server, or by starting it unable to pull (Handle.Net
# with do_replication = no, handled with an identity the other refuses), so no outcome depends
# on when a pull happens to run; "has pulled up to here" is a sentinel handle created last.
# The group: TEST/SITES holds Handle.Net's HS_SITE at index 1 and handled's at index 2 (their
# priorities). Handle.Net is the first member (its TEST/ADMIN and 0.NA/TEST reach handled by
# replication); handled joins with an empty store.
. "$(dirname "$0")/lib.sh"
require_handle_net
handled_bin "${1:-}"
make_work
trap cleanup_all EXIT
HN=127.0.0.1:2641
HD=127.0.0.1:2651

log "Handle.Net primary ($HN) and handled primary ($HD) in netns $HS_NETNS, work dir $WORK"
hn_group_member
SVR=$(hn_svr hn)
ADMIN="pubkey:300:TEST/ADMIN:$SVR/admpriv.bin"

# handled_member [IDENTITY_INDEX]: handled as a member; another index than 300 is an identity
# Handle.Net refuses (it then serves its log but cannot pull).
handled_member() {
  cat > "$WORK/hd.toml" <<TOML
server_admins = ["300:TEST/ADMIN", "301:TEST/ADMIN"]
replication_admins = ["300:TEST/REPL-HN"]
replication_sites_handle = "TEST/SITES"
multi_primary = true
replication_resolver = "$HN"
replication_authentication = "privatekey:${1:-300}:TEST/REPL-HANDLED"
replication_private_key = "$WORK/handled-repl.pk8"
replication_interval_ms = 1000
replication_timeout_ms = 20000
TOML
  handled_start hd "$HANDLED" 2651 8051 "$WORK/hd.toml" --prefix TEST
}
# on SERVER COMMANDS...: HsTool lines against SERVER as TEST/ADMIN.
on() { local s=$1; shift; { echo "server $s"; echo "auth $ADMIN"; printf '%s\n' "$@"; } | hs_tool > /dev/null; }
# expect SERVER HANDLE URL|-: the record is already so (no waiting), or fail saying what.
expect() {
  on "$1" "await $2 1 $3 1" || die "on $1, $2 is not ${3/#-/deleted}"
}
hn_restart() {
  hn_stop hn
  hn_config hn do_replication "\"$1\""
  hn_start hn
}

log "seed Handle.Net: the replication identities, its admin handle logged"
{ echo "server $HN"; echo "auth $ADMIN"
  echo "keygen $WORK/handled-repl.pk8 $WORK/handled-repl.pub"
  echo "create TEST/REPL-HANDLED 100:HS_ADMIN:300:TEST/ADMIN 300:HS_PUBKEY:@$WORK/handled-repl.pub"
  echo "create TEST/REPL-HN 100:HS_ADMIN:300:TEST/ADMIN 300:HS_PUBKEY:@$SVR/replpub.bin"
  echo "add TEST/ADMIN 400:DESC:group-admin"; } | hs_tool > /dev/null || die "seeding Handle.Net"

log "handled joins; TEST/SITES names both"
handled_member
{ echo "server $HD"; echo "siteinfo $WORK/hd-site.json"; } | hs_tool > /dev/null || die "handled's site record"
"$HSJ_HOME/bin/hdl-convert-siteinfo" < "$WORK/hd-site.json" > "$WORK/hd-site.bin"
on $HN "create TEST/SITES 100:HS_ADMIN:300:TEST/ADMIN 1:HS_SITE:@$WORK/hn-site.bin 2:HS_SITE:@$WORK/hd-site.bin" \
  "create TEST/S0 1:URL:s0" || die "TEST/SITES"
on $HD "await TEST/S0 1 s0 60000" || { tail -20 "$WORK/hd.err" >&2; die "Handle.Net's log did not reach handled"; }

log "creates on each reach the other"
on $HN "create TEST/on-hn 1:URL:on-hn" "create TEST/x 1:URL:first" "create TEST/y 1:URL:first" \
  "create TEST/z 1:URL:first" "create TEST/w 1:URL:first" || die "creates on Handle.Net"
on $HD "create TEST/on-hd 1:URL:on-hd" || die "create on handled"
on $HD "await TEST/w 1 first 60000" "await TEST/on-hn 1 on-hn 60000" || die "Handle.Net's creates did not reach handled"
on $HN "await TEST/on-hd 1 on-hd 60000" \
  || { grep -i replicat "$SVR"/logs/error.log* | tail -5 >&2; die "handled's create did not reach Handle.Net"; }

log "x, y changed on Handle.Net, then (later) on handled, neither seeing the other's"
handled_stop hd
on $HN "modify TEST/x 1:URL:from-hn" "modify TEST/y 1:URL:from-hn" "create TEST/S1 1:URL:s1" || die "changes on Handle.Net"
hn_stop hn
handled_member
on $HD "modify TEST/x 1:URL:from-hd" "delete TEST/y" "create TEST/S2 1:URL:s2" || die "changes on handled"
log "Handle.Net back, not pulling: handled takes its log and keeps its own later changes"
hn_restart no
on $HD "await TEST/S1 1 s1 60000" || die "handled did not pull Handle.Net's log"
expect $HD TEST/x from-hd
expect $HD TEST/y -
log "Handle.Net pulling again: it takes handled's later changes"
hn_restart yes
on $HN "await TEST/S2 1 s2 60000" || die "Handle.Net did not pull handled's log"
expect $HN TEST/x from-hd
expect $HN TEST/y -

log "z, w changed on handled, then (later) on Handle.Net, neither seeing the other's"
hn_stop hn
on $HD "modify TEST/z 1:URL:from-hd" "modify TEST/w 1:URL:from-hd" "create TEST/S3 1:URL:s3" || die "changes on handled"
handled_stop hd
hn_start hn
on $HN "modify TEST/z 1:URL:from-hn" "delete TEST/w" "create TEST/S4 1:URL:s4" || die "changes on Handle.Net"
log "handled back, unable to pull: Handle.Net takes its log (older changes, handled's values)"
handled_member 399
on $HN "await TEST/S3 1 s3 60000" || die "Handle.Net did not pull handled's log"
expect $HN TEST/z from-hn
# Handle.Net 9.0.0 keeps no date for a deleted handle: the older modify brings w back there
# (handled keeps the delete's date, so it did not above; docs/multi-primary.md). Checked, so
# that a Handle.Net that changes this is noticed; then w is deleted again there to settle.
on $HN "await TEST/w 1 from-hd 1" \
  || die "Handle.Net no longer resurrects a deleted handle with an older modify: update docs/multi-primary.md"
echo "as known: Handle.Net brought the deleted TEST/w back with handled's older modify"
on $HN "delete TEST/w" "create TEST/S5 1:URL:s5" || die "deleting w again on Handle.Net"
log "handled pulling again: it takes Handle.Net's later changes"
handled_stop hd
handled_member
on $HD "await TEST/S5 1 s5 60000" || die "handled did not pull Handle.Net's later log"
expect $HD TEST/z from-hn
expect $HD TEST/w -

log "compare every record"
snapshot hn $HN "$ADMIN"
snapshot hd $HD "$ADMIN" hn
compare_snapshots hn hd
echo "PASS: (d) multi-primary, Handle.Net + handled"
