#!/usr/bin/env bash
# (e) Proxied mirroring (Technical Manual §7.3, replication_pull_other_transactions): a Handle.Net
# 9.0.0 primary and a handled primary in one group (as in multi-primary.sh), and a Handle.Net
# mirror that pulls every queue from the handled member alone (replication_site_handle_value =
# 2:TEST/SITES): handled's own queue and the queue it keeps of Handle.Net
# (replication_keep_other_transactions). Creates and changes on both members reach the mirror;
# then every record is compared with both members. (A handled proxied mirror of this Handle.Net
# primary cannot be: its site key is DSA, see docs/multi-primary.md.)
#
#   sudo tests/replication/proxied.sh path/to/handled
. "$(dirname "$0")/lib.sh"
require_handle_net
handled_bin "${1:-}"
make_work
trap cleanup_all EXIT
HN=127.0.0.1:2641
HD=127.0.0.1:2651
HM=127.0.0.1:2671

log "Handle.Net primary ($HN), handled primary ($HD), Handle.Net proxied mirror ($HM) in netns $HS_NETNS"
hn_group_member
SVR=$(hn_svr hn)
hn_setup_mirror hnm 2671 8071 TEST/REPL-HNM
ADMIN="pubkey:300:TEST/ADMIN:$SVR/admpriv.bin"
on() { local s=$1; shift; { echo "server $s"; echo "auth $ADMIN"; printf '%s\n' "$@"; } | hs_tool > /dev/null; }

{ echo "server $HN"; echo "auth $ADMIN"
  echo "keygen $WORK/handled-repl.pk8 $WORK/handled-repl.pub"
  echo "create TEST/REPL-HANDLED 100:HS_ADMIN:300:TEST/ADMIN 300:HS_PUBKEY:@$WORK/handled-repl.pub"
  echo "create TEST/REPL-HN 100:HS_ADMIN:300:TEST/ADMIN 300:HS_PUBKEY:@$SVR/replpub.bin"
  hn_identity_command hnm 300:TEST/ADMIN
  echo "add TEST/ADMIN 400:DESC:group-admin"; } \
  | hs_tool > /dev/null || die "seeding Handle.Net"

cat > "$WORK/hd.toml" <<TOML
server_admins = ["300:TEST/ADMIN", "301:TEST/ADMIN"]
replication_admins = ["300:TEST/REPL-HN", "300:TEST/REPL-HNM"]
replication_sites_handle = "TEST/SITES"
multi_primary = true
replication_resolver = "$HN"
replication_authentication = "privatekey:300:TEST/REPL-HANDLED"
replication_private_key = "$WORK/handled-repl.pk8"
replication_interval_ms = 1000
replication_timeout_ms = 20000
TOML
handled_start hd "$HANDLED" 2651 8051 "$WORK/hd.toml" --prefix TEST
{ echo "server $HD"; echo "siteinfo $WORK/hd-site.json"; } | hs_tool > /dev/null || die "handled's site record"
"$HSJ_HOME/bin/hdl-convert-siteinfo" < "$WORK/hd-site.json" > "$WORK/hd-site.bin"
on $HN "create TEST/SITES 100:HS_ADMIN:300:TEST/ADMIN 1:HS_SITE:@$WORK/hn-site.bin 2:HS_SITE:@$WORK/hd-site.bin" \
  "create TEST/S0 1:URL:s0" || die "TEST/SITES"
on $HD "await TEST/S0 1 s0 60000" || { tail -20 "$WORK/hd.err" >&2; die "Handle.Net's log did not reach handled"; }

log "the Handle.Net proxied mirror: dumped from handled, then every queue from handled (2:TEST/SITES)"
MSVR=$(hn_svr hnm)
python3 - "$MSVR/siteinfo.json" "$MSVR/client-config/local_info.json" "$SVR/siteinfo.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s["primarySite"] = False
json.dump(s, open(sys.argv[1], "w"), indent=2)
# TEST/SITES is resolved at the Handle.Net primary.
json.dump([{"nas": ["0.NA/TEST"], "site": json.load(open(sys.argv[3]))}], open(sys.argv[2], "w"))
PY
hn_config hnm replication_authentication '"privatekey:300:TEST/REPL-HNM"'
hn_config hnm replication_site_handle_value '"2:TEST/SITES"'
hn_config hnm replication_pull_other_transactions '"yes"'
hn_config hnm replication_interval '"1000"'
hn_dump_from_primary hnm
hn_start hnm

log "creates and changes on both members reach the mirror"
on $HN "create TEST/on-hn 1:URL:on-hn" "create TEST/x 1:URL:first" || die "creates on Handle.Net"
on $HD "create TEST/on-hd 1:URL:on-hd" "create TEST/y 1:URL:first" || die "creates on handled"
on $HN "await TEST/on-hd 1 on-hd 60000" || die "handled's creates did not reach Handle.Net"
hm_log() { grep -i -E "replicat|redump|queue" "$MSVR"/logs/error.log* 2>/dev/null | tail -8 >&2; }
on $HM "await TEST/on-hd 1 on-hd 60000" || { hm_log; die "handled's create did not reach the mirror"; }
on $HM "await TEST/on-hn 1 on-hn 60000" \
  || { hm_log; die "Handle.Net's create did not reach the mirror through handled"; }
on $HN "modify TEST/x 1:URL:from-hn" "delete TEST/on-hd" "create TEST/S1 1:URL:s1" || die "changes on Handle.Net"
on $HD "modify TEST/y 1:URL:from-hd" || die "changes on handled"
on $HD "await TEST/S1 1 s1 60000" || die "Handle.Net's changes did not reach handled"
# Handle.Net pulls handled's queue on its own interval: the compare below needs this too.
on $HN "await TEST/y 1 from-hd 60000" || die "handled's change did not reach Handle.Net"
on $HM "await TEST/S1 1 s1 60000" "await TEST/x 1 from-hn 60000" "await TEST/y 1 from-hd 60000" \
  || { hm_log; die "the later changes did not reach the mirror"; }
on $HM "await TEST/on-hd 1 - 60000" || die "the delete on Handle.Net did not reach the mirror"

log "compare every record"
snapshot hn $HN "$ADMIN"
snapshot hd $HD "$ADMIN" hn
snapshot hm $HM "$ADMIN" hn
compare_snapshots hn hd
compare_snapshots hn hm
hn_mirror_healthy hnm
echo "PASS: (e) proxied mirroring: a Handle.Net mirror pulls every queue from handled"
