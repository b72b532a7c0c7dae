#!/usr/bin/env bash
# Admin console (/admin) end to end in headless Chromium (Debian's, through
# Playwright for Python; no browser download): sign-in with a secret key and
# with private key files, a wrong secret and a non-admin refused, create /
# edit / search / delete a handle, the status page. Needs the test virtual
# environment with pytest and playwright (tests/python.sh, scripts/install-test-deps.sh). CONSOLE_SCREENSHOTS=DIR also
# saves the screenshots of docs/console/ there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
BIN="$(realpath -e "${1:-${CARGO_TARGET_DIR:-$here/../../target}/release/handled}")"
. "$here/../python.sh"
if ! "$TEST_PYTHON" -c 'import playwright.sync_api, pytest' >/dev/null 2>&1; then
  echo "tests/console: $TEST_VENV needs pytest and playwright: run scripts/install-test-deps.sh" >&2
  exit 1
fi
cd "$here"
HANDLED_BIN="$BIN" "$TEST_PYTHON" -m pytest -q -p no:cacheprovider test_console.py
