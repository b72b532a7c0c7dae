#!/bin/sh
# Regenerate messages.json and streams.json with the official Handle.Net Java
# library. Usage: ./generate.sh [path to hsj-9.0.0/lib]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
lib=${1:-/work/shared/peers/handle-net/hsj-9.0.0/lib}
cp="$lib/handle-9.0.0.jar:$lib/cnriutil-2.0.jar:$lib/gson-2.8.2.jar:$lib/bcprov-jdk15on-1.59.jar:$lib/commons-codec-1.11.jar"
cd "$here"
java -cp "$cp" Gen.java "$here"
