#!/usr/bin/env bash
# Black-box suite of the domain registry API against `handled serve`
# (embedded store and --ephemeral). Usage: tests/registry/run.sh [path/to/handled]
set -euo pipefail
cd "$(dirname "$0")"
export HANDLED_BIN="$(realpath "${1:-../../target/release/handled}")"
exec python3 -m pytest -q -p no:cacheprovider . "${@:2}"
