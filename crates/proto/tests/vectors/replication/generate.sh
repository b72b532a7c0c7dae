#!/bin/sh
# Regenerate messages.json and streams.json with the official Handle.Net Java
# library. Usage: ./generate.sh [path to hsj-9.0.0/lib]
# Default: the Handle.Net harness (CONTRIBUTING.md, "Tests") at $HANDLE_NET_PEER,
# else at ../shared/peers/handle-net beside the repository.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../../.." && pwd)
lib=${1:-${HANDLE_NET_PEER:-$repo/../shared/peers/handle-net}/hsj-9.0.0/lib}
cp="$lib/handle-9.0.0.jar:$lib/cnriutil-2.0.jar:$lib/gson-2.8.2.jar:$lib/bcprov-jdk15on-1.59.jar:$lib/commons-codec-1.11.jar"
cd "$here"
java -cp "$cp" Gen.java "$here"
