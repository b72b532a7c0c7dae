#!/usr/bin/env bash
# Every bench HTML report, as a person reads it: for each `handled bench
# scenario` (a --quick run) and for a plain `handled bench --html` run, open the
# report in headless Chromium and check what a person relies on
# (check_report.py: title and metadata, tables as tables, every chart rendered,
# readable axes). With SCREENSHOTS=DIR, also save a screenshot of each page
# there (docs/bench-reports/ holds the committed ones).
#
# Usage: tests/bench-report/run.sh [path/to/handled]   (needs `chromium`)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-${CARGO_TARGET_DIR:-target}/release/handled}
BIN=$(realpath "$BIN")
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
  echo "chromium is missing (scripts/install-test-deps.sh installs it)" >&2
  exit 1
fi

out=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$out"
}
trap cleanup EXIT

chrome() {
  timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$out/profile" \
    --virtual-time-budget=3000 "$@" 2>/dev/null
}

# registry-get targets any URL template: point it at the stub JSON server.
"$BIN" bench stub --listen 127.0.0.1:0 >"$out/stub.txt" &
pids+=($!)
for _ in $(seq 50); do grep -q "stub serving" "$out/stub.txt" 2>/dev/null && break; sleep 0.1; done
stub_url=$(sed -n 's/^stub serving on \(http:[^ ]*\)$/\1/p' "$out/stub.txt")
[ -n "$stub_url" ] || { echo "stub server did not start" >&2; exit 1; }

# The plain (non-scenario) report needs a server.
HANDLED_LOG=info "$BIN" serve --ephemeral --port 0 --http-port 0 2>"$out/serve.txt" &
pids+=($!)
for _ in $(seq 50); do grep -q " on udp " "$out/serve.txt" 2>/dev/null && break; sleep 0.1; done
udp=$(sed -n 's/.* on udp \([^ ]*\) .*/\1/p' "$out/serve.txt" | head -1)
[ -n "$udp" ] || { echo "server did not start"; cat "$out/serve.txt"; exit 1; } >&2

passed=0
failed=0
check() { # NAME: the report $out/NAME.html
  local name=$1
  if grep -Eq 'src="https?:|href="https?:' "$out/$name.html"; then
    echo "FAIL $name: the report loads something from the network"; failed=$((failed + 1)); return
  fi
  chrome --dump-dom "file://$out/$name.html" >"$out/$name.dom" || true
  if reasons=$(python3 tests/bench-report/check_report.py "$out/$name.dom"); then
    echo "ok   $name"
    passed=$((passed + 1))
  else
    echo "FAIL $name:"; echo "$reasons"; failed=$((failed + 1))
  fi
  if [ -n "${SCREENSHOTS:-}" ]; then
    mkdir -p "$SCREENSHOTS"
    chrome --hide-scrollbars --window-size=1100,1800 --screenshot="$(realpath "$SCREENSHOTS")/$name.png" \
      "file://$out/$name.html" >/dev/null || true
  fi
}

for name in $("$BIN" bench scenario --list | awk '{print $1}'); do
  args=(--quick --html "$out/$name.html")
  [ "$name" = registry-get ] && args+=(--url "${stub_url}api/handles/{handle}")
  if ! timeout 180 "$BIN" bench scenario "$name" "${args[@]}" >"$out/$name.txt" 2>"$out/$name.err"; then
    echo "FAIL $name: scenario run failed"; cat "$out/$name.err"; failed=$((failed + 1)); continue
  fi
  check "$name"
done

if timeout 60 "$BIN" bench --host "${udp%:*}" --port "${udp##*:}" --transport udp -c 4 -d 2 \
  --html "$out/plain.html" >"$out/plain.txt" 2>"$out/plain.err"; then
  check plain
else
  echo "FAIL plain: bench run failed"; cat "$out/plain.err"; failed=$((failed + 1))
fi
echo "bench-report: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
