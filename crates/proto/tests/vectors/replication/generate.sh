#!/bin/sh
# Regenerate messages.json and streams.json with the official Handle.Net Java
# library. Usage: ./generate.sh [path to hsj-9.0.0/lib]
# Default: the lib directory of the Handle.Net harness named by $HANDLE_NET_PEER
# (CONTRIBUTING.md, "Tests"); the repository holds no copy of those jars.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
lib=${1:-${HANDLE_NET_PEER:+$HANDLE_NET_PEER/hsj-9.0.0/lib}}
# The vectors this writes are committed: tests read them, never this script. Without
# the Handle.Net jars there is nothing to regenerate them with: skipped, saying so
# (exit 77, the skip status of tests/skip.sh).
if [ -z "$lib" ] || [ ! -f "$lib/handle-9.0.0.jar" ]; then
  echo "SKIP generate.sh: no Handle.Net 9.0.0 jars at ${lib:-(none given)} (give the hsj-9.0.0/lib directory, or set HANDLE_NET_PEER); the committed messages.json and streams.json are unchanged" >&2
  exit 77
fi
cp="$lib/handle-9.0.0.jar:$lib/cnriutil-2.0.jar:$lib/gson-2.8.2.jar:$lib/bcprov-jdk15on-1.59.jar:$lib/commons-codec-1.11.jar"
cd "$here"
java -cp "$cp" Gen.java "$here"
