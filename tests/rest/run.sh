#!/usr/bin/env bash
# JSON API black-box suite against a handled binary: pyhandle 1.5.0's
# RESTHandleClient, HTTP-level pins of the status table, schemathesis on
# /api/openapi.json. Python packages go to a venv under target/ (idempotent).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# Resolve the binary against the caller's directory, before changing directory.
BIN="$(realpath -e "${1:-${CARGO_TARGET_DIR:-$here/../../target}/release/handled}")"
cd "$here"
VENV="${REST_VENV:-../../target/rest-venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements.txt
HANDLED_BIN="$BIN" "$VENV/bin/python" -m pytest -q -p no:cacheprovider .
