#!/usr/bin/env bash
# Makes the Handle.Net harness the comparison suites use from a Handle.Net 9 server
# distribution you downloaded (tests/handle-net-harness/README.md says why and from where).
# Usage: HANDLE_NET_DIST=path/to/handle-9.x.y-distribution.tar.gz scripts/handle-net-harness.sh [DIR]
#        (DIR defaults to $CARGO_TARGET_DIR/handle-net, i.e. target/handle-net, where the
#        suites look; elsewhere, export HANDLE_NET_PEER=DIR for them.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
me=scripts/handle-net-harness.sh
die() { echo "$me: $*" >&2; exit 1; }

dist=${HANDLE_NET_DIST:-}
[ -n "$dist" ] || die "set HANDLE_NET_DIST to the Handle.Net 9 server distribution archive (.tar.gz or .zip) downloaded from handle.net"
[ -f "$dist" ] || die "no such file: $dist"
dir=${1:-${CARGO_TARGET_DIR:-$root/target}/handle-net}
command -v java >/dev/null || die "java is missing (Java 17 runs Handle.Net 9; apt-get install openjdk-17-jdk-headless)"

unpacked=$(mktemp -d "${TMPDIR:-/tmp}/handle-net-dist-XXXXXX")
trap 'rm -rf "$unpacked"' EXIT
case $dist in
  *.tar.gz | *.tgz) tar -xzf "$dist" -C "$unpacked" ;;
  *.zip) command -v unzip >/dev/null || die "unzip is missing (apt-get install unzip)"; unzip -q "$dist" -d "$unpacked" ;;
  *) die "$dist: expected a .tar.gz, .tgz or .zip archive" ;;
esac
# The archive holds one directory (hsj-9.x.y) with bin/hdl-setup-server in it.
setup=$(find "$unpacked" -maxdepth 3 -path '*/bin/hdl-setup-server' -type f | head -1)
[ -n "$setup" ] || die "$dist holds no bin/hdl-setup-server: is it the Handle.Net server distribution?"
hsj=$(dirname "$(dirname "$setup")")
name=$(basename "$hsj")
[[ $name == hsj-* ]] || name=hsj-$name

mkdir -p "$dir"
rm -rf "${dir:?}/$name"
cp -r "$root/tests/handle-net-harness/." "$dir/"
mv "$hsj" "$dir/$name"
chmod +x "$dir"/*.sh "$dir/$name"/bin/*
echo "Handle.Net harness ready in $dir ($name)."
[ "$dir" = "${CARGO_TARGET_DIR:-$root/target}/handle-net" ] || echo "The suites find it with: export HANDLE_NET_PEER=$dir"
