#!/usr/bin/env bash
# Every replication scenario with the real Handle.Net 9.0.0 as the judge (see README.md):
#   reference  Handle.Net -> Handle.Net          (hn-to-hn.sh)
#   (a)        handled -> Handle.Net mirror      (handled-to-hn.sh)
#   (b)        Handle.Net -> handled mirror      (hn-to-handled.sh)
#   (c)        migration: handled mirror promoted, Handle.Net mirror re-pointed, interop suite
#
#   sudo tests/replication/run.sh path/to/handled
#
# Skips (exit 0, a SKIP: line) without the Handle.Net harness, root or Java; a scenario whose
# handled side the binary does not have yet (no replication_admins / replication_source key in
# it) is skipped with a SKIP: line too. Exit 1 when any scenario that ran failed.
. "$(dirname "$0")/lib.sh"
require_handle_net
handled_bin "${1:-}"

declare -a results
failed=0
scenario() {
  local name=$1; shift
  echo; echo "######## $name"
  if "$@"; then results+=("PASS  $name"); else results+=("FAIL  $name"); failed=1; fi
}
has_key() { grep -aq "$1" "$HANDLED"; }

scenario "reference: Handle.Net -> Handle.Net" "$REPL_DIR/hn-to-hn.sh"
if has_key replication_admins; then
  scenario "(a) handled -> Handle.Net mirror" "$REPL_DIR/handled-to-hn.sh" "$HANDLED"
else
  echo "SKIP: (a) handled -> Handle.Net: $HANDLED has no replication source (no replication_admins key)"
  results+=("SKIP  (a) handled -> Handle.Net mirror")
fi
if has_key replication_source; then
  scenario "(b) Handle.Net -> handled mirror" "$REPL_DIR/hn-to-handled.sh" "$HANDLED"
  if has_key replication_admins; then
    scenario "(c) migration via a promoted handled mirror" "$REPL_DIR/migration.sh" "$HANDLED"
  fi
else
  echo "SKIP: (b), (c): $HANDLED has no replication mirror (no replication_source key)"
  results+=("SKIP  (b) Handle.Net -> handled mirror" "SKIP  (c) migration")
fi

echo; echo "######## replication summary"
printf '%s\n' "${results[@]}"
exit $failed
