#!/usr/bin/env bash
# The Java client's admin suite (tests/interop-java, Admin*Test) against a server whose
# administrators live on another server (issue 17.3): the harness starts A on 127.0.0.2 as the
# global registry (homes 0.NA and ADM, holds ADM/ADMIN's keys) and B on 127.0.0.1 with
# server_admins = 300/301/302:ADM/ADMIN and root_info = A's site record; the tests talk to B as
# ADM/ADMIN, so B verifies every answer at A (VERIFY_CHALLENGE, certified public-key lookups).
#
#   tests/remote-admin/run.sh [path/to/handled] [extra mvn args]
#
# Builds nothing: the binary defaults to $HANDLED_BIN, else $CARGO_TARGET_DIR (default <repo>/target)/release/handled.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin=()
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  bin=("$1")
  shift
fi
# A later -Dtest=... among the extra arguments narrows the selection.
HANDLED_TEST_REMOTE_ADMIN=1 exec "$here/../interop-java/run.sh" "${bin[@]}" -Dtest='Admin*Test' "$@"
