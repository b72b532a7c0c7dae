#!/usr/bin/env bash
# Black-box suite of the domain registry API against `handled serve`
# (embedded store and --ephemeral). Usage: tests/registry/run.sh [path/to/handled]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# Resolve the binary against the caller's directory, before changing directory.
export HANDLED_BIN="$(realpath -e "${1:-${CARGO_TARGET_DIR:-$here/../../target}/release/handled}")"
. "$here/../python.sh"
cd "$here"
exec "$TEST_PYTHON" -m pytest -q -p no:cacheprovider . "${@:2}"
