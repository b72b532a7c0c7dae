#!/usr/bin/env bash
# The Debian package (crates/cli/Cargo.toml, [package.metadata.deb]): built by cargo-deb
# from the release binary, installed with dpkg -i, then checked as installed (handled
# --version from /usr/bin is the build's, the binary is stripped, the unit, its drop-in,
# the sysusers file, the configuration and the handled user are there), its size said,
# and purged again (KEEP_DEB=1 keeps it installed). Skips (exit 77) without dpkg or root.
# Usage: scripts/test-deb.sh   (after cargo build --release -p handled)
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/skip.sh
command -v dpkg >/dev/null 2>&1 || skip_suite deb "dpkg is missing (not a Debian system)"
[ "$(id -u)" = 0 ] || skip_suite deb "dpkg -i needs root"
command -v cargo-deb >/dev/null 2>&1 ||
  { echo "FAIL: cargo-deb is missing (scripts/install-test-deps.sh installs it)" >&2; exit 1; }
binary=${CARGO_TARGET_DIR:-target}/release/handled
[ -x "$binary" ] || { echo "FAIL: $binary is not built (cargo build --release -p handled)" >&2; exit 1; }
if [ -e /usr/bin/handled ] && ! dpkg -S /usr/bin/handled >/dev/null 2>&1; then
  echo "FAIL: /usr/bin/handled exists and no package owns it; not overwriting it" >&2
  exit 1
fi

# --no-build: the package carries the binary the other suites tested.
deb=$(cargo deb -p handled --no-build --locked --quiet | tail -n 1)
[ -f "$deb" ] || { echo "FAIL: cargo deb did not say where the package is (got: $deb)" >&2; exit 1; }
dpkg -i "$deb"
[ "${KEEP_DEB:-}" = 1 ] || trap 'dpkg --purge handled >/dev/null' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
built=$("$binary" --version)
installed=$(/usr/bin/handled --version)
[ "$installed" = "$built" ] || fail "installed handled --version says '$installed', the build '$built'"
if readelf --sections --wide /usr/bin/handled | grep -q -e '\.symtab' -e '\.debug_'; then
  fail "/usr/bin/handled is not stripped"
fi
for f in /usr/lib/systemd/system/handled.service /usr/lib/systemd/system/handled.service.d/package.conf \
         /usr/lib/sysusers.d/handled.conf /etc/handled/handled.toml; do
  [ -f "$f" ] || fail "$f is not installed"
done
grep -q '^ExecStart=/usr/bin/handled serve' /usr/lib/systemd/system/handled.service.d/package.conf ||
  fail "the drop-in does not start /usr/bin/handled"
getent passwd handled >/dev/null || fail "no handled user after install"
# The configuration the package ships loads and serves (in memory, OS-chosen ports).
log=$(mktemp)
/usr/bin/handled serve --config /etc/handled/handled.toml --ephemeral --port 0 --http-port 0 > "$log" 2>&1 &
server=$!
for _ in $(seq 100); do
  grep -q '^ready$' "$log" && break
  kill -0 "$server" 2>/dev/null || fail "handled serve with /etc/handled/handled.toml stopped: $(cat "$log")"
  sleep 0.2
done
grep -q '^ready$' "$log" || fail "handled serve with /etc/handled/handled.toml was not ready in 20 s"
kill "$server"; wait "$server" 2>/dev/null || true
rm -f "$log"

size() { du -h --apparent-size "$1" | cut -f1; }
echo "deb: $(basename "$deb") $(size "$deb"); /usr/bin/handled $(size /usr/bin/handled) stripped" \
  "(the build's $(size "$binary")); installed: $installed"
