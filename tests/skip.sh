# Skipping a suite that cannot run here, sourced by the suites that may:
#
#   . tests/skip.sh
#   skip_suite "suite name" "why"     # prints "SKIP suite name: why", exits 77
#
# Exit status 77 (automake's convention) tells scripts/test-all.sh that the suite
# was skipped rather than passed or failed; the reason also goes to
# $HANDLED_SKIP_FILE when it is set, for test-all's summary table.
skip_suite() {
  echo "SKIP $1: $2"
  if [ -n "${HANDLED_SKIP_FILE:-}" ]; then echo "$1: $2" >> "$HANDLED_SKIP_FILE"; fi
  exit 77
}
