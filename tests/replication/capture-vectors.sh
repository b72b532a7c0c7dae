#!/usr/bin/env bash
# Regenerate vectors/: real replication bytes from a Handle.Net 9.0.0 primary holding the
# small data set of lib.sh (seed_commands, then change_commands: every transaction action).
#
#   sudo tests/replication/capture-vectors.sh [OUTDIR]     (default tests/replication/vectors/handle-net-9.0.0)
#
# java/Capture.java does the requests through a recording relay; see vectors/README.md.
. "$(dirname "$0")/lib.sh"
require_handle_net
make_work
trap cleanup_all EXIT
OUT=$(realpath -m "${1:-$REPL_DIR/vectors/handle-net-9.0.0}")

log "Handle.Net primary (2641) in netns $HS_NETNS, work dir $WORK"
hn_setup primary 2641 8000
hn_start primary
ADMIN="pubkey:300:TEST/ADMIN:$(hn_svr primary)/admpriv.bin"
{ echo "server 127.0.0.1:2641"; echo "auth $ADMIN"; seed_commands 300:TEST/ADMIN; change_commands 300:TEST/ADMIN; } \
  | hs_tool || die "writing the data set"

log "capture into $OUT"
rm -rf "$OUT"; mkdir -p "$OUT"
hs_java Capture 127.0.0.1:2641 "$ADMIN" "$OUT"
cp "$(hn_svr primary)/siteinfo.json" "$OUT/siteinfo.json"
ls -l "$OUT"
