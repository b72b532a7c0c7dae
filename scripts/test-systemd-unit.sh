#!/usr/bin/env bash
# contrib/handled.service: `systemd-analyze verify` has nothing to say about it,
# its exposure (`systemd-analyze security`) stays low, and the settings the
# server relies on are there. Skips (exit 77, tests/skip.sh), saying why, where
# systemd-analyze is missing or cannot verify units (some containers).
# Usage: scripts/test-systemd-unit.sh [HANDLED_BINARY]   (default $CARGO_TARGET_DIR/release/handled)
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/skip.sh
unit=contrib/handled.service
binary=${1:-${CARGO_TARGET_DIR:-target}/release/handled}

for setting in User=handled ProtectSystem=strict ReadWritePaths=/var/lib/handled LimitRTPRIO=1 \
               Restart=on-failure ExecReload=; do
  grep -q "^$setting" "$unit" || { echo "FAIL: $unit lacks $setting" >&2; exit 1; }
done
if grep -q '^RestrictRealtime=yes' "$unit"; then
  echo "FAIL: RestrictRealtime=yes forbids the SCHED_FIFO refusals LimitRTPRIO=1 is there for" >&2
  exit 1
fi

if ! command -v systemd-analyze >/dev/null 2>&1; then
  skip_suite systemd-unit "systemd-analyze is missing (scripts/install-test-deps.sh installs systemd)"
fi
[ -x "$binary" ] || { echo "FAIL: $binary is not built (cargo build --release -p handled)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Can this machine verify units at all? A trivial one must pass silently.
printf '[Service]\nExecStart=/bin/true\n' > "$tmp/probe.service"
if ! probe=$(systemd-analyze verify "$tmp/probe.service" 2>&1) || [ -n "$probe" ]; then
  skip_suite systemd-unit "systemd-analyze cannot verify units here (container?): $probe"
fi

# The unit as installed, with ExecStart pointing at the binary under test
# (verify checks that it is executable).
sed "s|^ExecStart=/usr/local/bin/handled|ExecStart=$(realpath "$binary")|" "$unit" > "$tmp/handled.service"
# Warnings (unknown keys, bad values) exit 0: any output is a failure.
if ! out=$(systemd-analyze verify "$tmp/handled.service" 2>&1) || [ -n "$out" ]; then
  echo "FAIL: systemd-analyze verify $unit:" >&2
  echo "$out" >&2
  exit 1
fi
# 1.7 when written; 0 is best, 10 worst.
systemd-analyze security --offline=true --threshold=25 "$tmp/handled.service" >/dev/null 2>"$tmp/security" || {
  systemd-analyze security --offline=true "$tmp/handled.service" | tail -3 >&2
  echo "FAIL: $unit's exposure rose above 2.5" >&2
  exit 1
}
echo "ok: $unit verifies, exposure $(systemd-analyze security --offline=true "$tmp/handled.service" 2>/dev/null | grep -o 'level for [^:]*: [0-9.]*' | awk '{print $NF}')"
