#!/usr/bin/env bash
# The release artifacts and the Debian package. scripts/release.sh runs on the release
# binary already built (--no-build, --allow-dirty: the tree under test) into a scratch
# directory; then its artifacts are checked: SHA256SUMS verifies and names the three, the
# tarball holds the binary (its --version the build's), the example configuration, the
# unit and the sysusers file, the binary needs no newer glibc than README says, and the
# SBOM describes handled at its version and lists tokio at Cargo.lock's version. The .deb
# (crates/cli/Cargo.toml, [package.metadata.deb]) is then installed with dpkg -i and
# checked as installed (handled --version from /usr/bin is the build's, the binary is
# stripped, the unit, its drop-in, the sysusers file, the configuration and the handled
# user are there, the configuration serves), its size said, and purged again (KEEP_DEB=1
# keeps it installed). Skips (exit 77) without dpkg or root.
# Usage: scripts/test-deb.sh   (after cargo build --release --locked -p handled)
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/skip.sh
command -v dpkg >/dev/null 2>&1 || skip_suite deb "dpkg is missing (not a Debian system)"
[ "$(id -u)" = 0 ] || skip_suite deb "dpkg -i needs root"
for tool in cargo-deb cargo-cyclonedx; do
  command -v "$tool" >/dev/null 2>&1 ||
    { echo "FAIL: $tool is missing (scripts/install-test-deps.sh installs it)" >&2; exit 1; }
done
binary=${CARGO_TARGET_DIR:-target}/release/handled
[ -x "$binary" ] || { echo "FAIL: $binary is not built (cargo build --release -p handled)" >&2; exit 1; }
if [ -e /usr/bin/handled ] && ! dpkg -S /usr/bin/handled >/dev/null 2>&1; then
  echo "FAIL: /usr/bin/handled exists and no package owns it; not overwriting it" >&2
  exit 1
fi

fail() { echo "FAIL: $*" >&2; exit 1; }
artifacts=$(mktemp -d "${TMPDIR:-/tmp}/test-deb-XXXXXX")
installed_here=0   # purge only a package this run installed
cleanup() {
  rm -rf "$artifacts"
  if [ "$installed_here" = 1 ] && [ "${KEEP_DEB:-}" != 1 ]; then dpkg --purge handled >/dev/null; fi
}
trap cleanup EXIT

# --no-build: the artifacts carry the binary the other suites tested.
scripts/release.sh --no-build --allow-dirty --out-dir "$artifacts/out"
built=$("$binary" --version)
version=$(sed -n 's/^handled \([^ ]*\) (commit .*/\1/p' <<< "$built")
[ -n "$version" ] || fail "$binary --version says '$built'"
out=$artifacts/out
deb=$out/handled_${version}_$(dpkg --print-architecture).deb
tar_base=handled-$version-$(uname -m)-linux-gnu
sbom=$out/handled-$version.cdx.json
for f in "$deb" "$out/$tar_base.tar.gz" "$sbom" "$out/SHA256SUMS"; do
  [ -f "$f" ] || fail "release.sh made no $(basename "$f") (in $out: $(ls "$out"))"
done
(cd "$out" && sha256sum --check --strict --quiet SHA256SUMS) || fail "SHA256SUMS does not verify"
[ "$(cut -d' ' -f3 "$out/SHA256SUMS" | LC_ALL=C sort)" = \
  "$(printf '%s\n' "$(basename "$deb")" "$tar_base.tar.gz" "handled-$version.cdx.json" | LC_ALL=C sort)" ] ||
  fail "SHA256SUMS does not name exactly the three artifacts: $(cat "$out/SHA256SUMS")"

tar -xzf "$out/$tar_base.tar.gz" -C "$artifacts"
for f in handled handled.toml handled.service handled.sysusers README.md LICENSE; do
  [ -f "$artifacts/$tar_base/$f" ] || fail "the tarball has no $tar_base/$f"
done
[ "$("$artifacts/$tar_base/handled" --version)" = "$built" ] ||
  fail "the tarball's handled --version is not the build's ($built)"
# README's promise ("glibc 2.NN or newer") holds for this binary.
needed=$(objdump -T "$artifacts/$tar_base/handled" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -n 1)
promised=$(grep -o 'glibc [0-9][0-9.]* or newer' README.md | head -n 1 | cut -d' ' -f2)
[ -n "$promised" ] || fail "README.md names no 'glibc X.Y or newer'"
[ "$(printf '%s\n' "$needed" "$promised" | sort -V | tail -n 1)" = "$promised" ] ||
  fail "the binary needs glibc $needed, README.md promises $promised"

# The SBOM: CycloneDX, describing handled at this version, listing tokio as Cargo.lock pins it.
tokio_locked=$(grep -A1 '^name = "tokio"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')
python3 - "$sbom" "$version" "$tokio_locked" <<'PY' || fail "the SBOM $(basename "$sbom") is not as expected"
import json, sys
path, version, tokio = sys.argv[1:]
bom = json.load(open(path))
assert bom.get("bomFormat") == "CycloneDX", "bomFormat is not CycloneDX"
top = bom["metadata"]["component"]
assert (top["name"], top["version"]) == ("handled", version), f"describes {top['name']} {top['version']}"
found = {c["version"] for c in bom.get("components", []) if c["name"] == "tokio"}
assert found == {tokio}, f"tokio versions listed: {found}, Cargo.lock: {tokio}"
print(f"sbom: {len(bom['components'])} components, tokio {tokio}")
PY

dpkg -i "$deb"
installed_here=1
# A pre-release's Debian version sorts before its release (0.1.0~dev-1 < 0.1.0-1).
deb_version=$(dpkg-query --show --showformat='${Version}' handled)
[ "$deb_version" = "${version/-/\~}-1" ] || fail "the package's Debian version is $deb_version"
installed=$(/usr/bin/handled --version)
[ "$installed" = "$built" ] || fail "installed handled --version says '$installed', the build '$built'"
if readelf --sections --wide /usr/bin/handled | grep -q -e '\.symtab' -e '\.debug_'; then
  fail "/usr/bin/handled is not stripped"
fi
for f in /usr/lib/systemd/system/handled.service /usr/lib/systemd/system/handled.service.d/package.conf \
         /usr/lib/sysusers.d/handled.conf /etc/handled/handled.toml; do
  [ -f "$f" ] || fail "$f is not installed"
done
grep -q '^ExecStart=/usr/bin/handled serve' /usr/lib/systemd/system/handled.service.d/package.conf ||
  fail "the drop-in does not start /usr/bin/handled"
getent passwd handled >/dev/null || fail "no handled user after install"
# The configuration the package ships loads and serves (in memory, OS-chosen ports).
log=$(mktemp)
/usr/bin/handled serve --config /etc/handled/handled.toml --ephemeral --port 0 --http-port 0 > "$log" 2>&1 &
server=$!
for _ in $(seq 100); do
  grep -q '^ready$' "$log" && break
  kill -0 "$server" 2>/dev/null || fail "handled serve with /etc/handled/handled.toml stopped: $(cat "$log")"
  sleep 0.2
done
grep -q '^ready$' "$log" || fail "handled serve with /etc/handled/handled.toml was not ready in 20 s"
kill "$server"; wait "$server" 2>/dev/null || true
rm -f "$log"

size() { du -h --apparent-size "$1" | cut -f1; }
echo "deb: $(basename "$deb") $(size "$deb"); /usr/bin/handled $(size /usr/bin/handled) stripped" \
  "(the build's $(size "$binary")); installed: $installed"
