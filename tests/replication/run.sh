#!/usr/bin/env bash
# Every replication scenario with the real Handle.Net 9.0.0 as the judge (see README.md):
#   reference  Handle.Net -> Handle.Net          (hn-to-hn.sh)
#   (a)        handled -> Handle.Net mirror      (handled-to-hn.sh)
#   (b)        Handle.Net -> handled mirror      (hn-to-handled.sh)
#   (c)        migration: handled mirror promoted, Handle.Net mirror re-pointed, interop suite
#   (d)        multi-primary: a Handle.Net and a handled primary in one group (multi-primary.sh)
#   (e)        proxied mirroring: a Handle.Net mirror pulls every queue from the handled member (proxied.sh)
#
#   sudo tests/replication/run.sh path/to/handled
#
# Skips (exit 77, a SKIP line) without the Handle.Net harness, root or Java. Exit 1 when any
# scenario failed.
. "$(dirname "$0")/lib.sh"
require_handle_net
handled_bin "${1:-}"

declare -a results
failed=0
scenario() {
  local name=$1; shift
  echo; echo "######## $name"
  local rc=0
  "$@" || rc=$?
  case $rc in
    0) results+=("PASS  $name") ;;
    77) results+=("SKIP  $name") ;;
    *) results+=("FAIL  $name"); failed=1 ;;
  esac
}
scenario "reference: Handle.Net -> Handle.Net" "$REPL_DIR/hn-to-hn.sh"
scenario "(a) handled -> Handle.Net mirror" "$REPL_DIR/handled-to-hn.sh" "$HANDLED"
scenario "(b) Handle.Net -> handled mirror" "$REPL_DIR/hn-to-handled.sh" "$HANDLED"
scenario "(c) migration via a promoted handled mirror" "$REPL_DIR/migration.sh" "$HANDLED"
scenario "(d) multi-primary: Handle.Net + handled" "$REPL_DIR/multi-primary.sh" "$HANDLED"
scenario "(e) proxied mirroring: Handle.Net mirror of a handled member" "$REPL_DIR/proxied.sh" "$HANDLED"

echo; echo "######## replication summary"
printf '%s\n' "${results[@]}"
exit $failed
