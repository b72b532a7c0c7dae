#!/usr/bin/env bash
# Runs the Java interop suite (CNRI handle-client 9.3.1 against handled). Builds nothing:
# the handled binary must exist already (cargo build --release).
#
#   tests/interop-java/run.sh [path/to/handled] [extra mvn args, e.g. -Dtest=ResolutionTest]
#
# The binary defaults to $HANDLED_BIN, else $CARGO_TARGET_DIR (default <repo>/target)/release/handled.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${HANDLED_BIN:-${CARGO_TARGET_DIR:-$here/../../target}/release/handled}"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  bin="$1"
  shift
fi
bin="$(realpath -m "$bin")"
if [ ! -x "$bin" ]; then
  echo "interop-java: handled binary not found or not executable: $bin (build it first: cargo build --release)" >&2
  exit 2
fi

cd "$here" || exit 2
rm -rf target/surefire-reports
# The JDK warns in four lines each time a test JVM installs the suite's loopback-only
# network guard (NetworkGuard.java calls System::setSecurityManager, deprecated since
# Java 17); that is expected, so those lines are left out.
mvn -q -B -Dstyle.color=never test -Dhandled.bin="$bin" "$@" 2>&1 |
  grep -v -e 'WARNING: A terminally deprecated method in java.lang.System has been called$' \
    -e 'WARNING: System::setSecurityManager has been called by org.handled.interop.NetworkGuard ' \
    -e 'WARNING: Please consider reporting this to the maintainers of org.handled.interop.NetworkGuard$' \
    -e 'WARNING: System::setSecurityManager will be removed in a future release$'
rc=${PIPESTATUS[0]}

# mvn -q prints nothing on success: print a one-line summary from the Surefire reports.
tests=0 failures=0 errors=0 skipped=0
for f in target/surefire-reports/TEST-*.xml; do
  [ -e "$f" ] || continue
  line="$(grep -m1 -o '<testsuite [^>]*>' "$f")"
  for k in tests failures errors skipped; do
    v="$(printf '%s' "$line" | grep -o " $k=\"[0-9]*\"" | grep -o '[0-9]*')"
    eval "$k=\$(( $k + ${v:-0} ))"
  done
done
failed=$((failures + errors))
echo # mvn may leave a colour-reset sequence without a newline
echo "interop-java: $((tests - failed - skipped)) passed, $failed failed, $skipped skipped"
if [ "$rc" -ne 0 ]; then
  echo "interop-java: server logs and client output under $here/target/interop/" >&2
fi
exit "$rc"
