#!/usr/bin/env bash
# For every `handled bench scenario`, generate the HTML report from a short
# (--quick) run, open it in headless Chromium and check that every chart
# rendered: the report's inline script marks each SVG with its laid-out size,
# and the page with how many charts have a non-empty box and drawn elements.
#
# Usage: tests/bench-report/run.sh [path/to/handled]   (needs `chromium`)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/release/handled}
BIN=$(realpath "$BIN")
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
  echo "chromium is missing (apt-get install chromium)" >&2
  exit 1
fi

out=$(mktemp -d)
stub_pid=""
cleanup() {
  [ -n "$stub_pid" ] && kill "$stub_pid" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT

# registry-get targets any URL template: point it at the stub JSON server.
"$BIN" bench stub --listen 127.0.0.1:0 >"$out/stub.txt" &
stub_pid=$!
for _ in $(seq 50); do grep -q "stub serving" "$out/stub.txt" 2>/dev/null && break; sleep 0.1; done
stub_url=$(sed -n 's/^stub serving on \(http:[^ ]*\)$/\1/p' "$out/stub.txt")
[ -n "$stub_url" ] || { echo "stub server did not start" >&2; exit 1; }

passed=0
failed=0
for name in $("$BIN" bench scenario --list | awk '{print $1}'); do
  args=(--quick --html "$out/$name.html")
  [ "$name" = registry-get ] && args+=(--url "${stub_url}api/handles/{handle}")
  if ! timeout 180 "$BIN" bench scenario "$name" "${args[@]}" >"$out/$name.txt" 2>"$out/$name.err"; then
    echo "FAIL $name: scenario run failed"; cat "$out/$name.err"; failed=$((failed + 1)); continue
  fi
  if grep -Eq 'src="https?:|href="https?:' "$out/$name.html"; then
    echo "FAIL $name: the report loads something from the network"; failed=$((failed + 1)); continue
  fi
  timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$out/profile" \
    --virtual-time-budget=3000 --dump-dom "file://$out/$name.html" >"$out/$name.dom" 2>/dev/null || true
  charts=$(sed -n 's/.*<body[^>]* data-charts="\([0-9]*\)".*/\1/p' "$out/$name.dom" | head -1)
  rendered=$(sed -n 's/.*<body[^>]* data-rendered-charts="\([0-9]*\)".*/\1/p' "$out/$name.dom" | head -1)
  empty=$( (grep -o 'data-rendered="0x[0-9]*:[0-9]*"\|data-rendered="[0-9]*x0:[0-9]*"\|data-rendered="[0-9]*x[0-9]*:0"' "$out/$name.dom" || true) | wc -l)
  figures=$(grep -o '<figure>' "$out/$name.html" | wc -l)
  if [ -n "$charts" ] && [ "$charts" -gt 0 ] && [ "$charts" -eq "$figures" ] && [ "$rendered" = "$charts" ] && [ "$empty" -eq 0 ]; then
    echo "ok   $name: $rendered of $charts charts rendered"
    passed=$((passed + 1))
  else
    echo "FAIL $name: figures=$figures charts=${charts:-none} rendered=${rendered:-none} empty=$empty"
    failed=$((failed + 1))
  fi
done
echo "bench-report: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
