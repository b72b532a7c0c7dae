#!/usr/bin/env bash
# The release artifacts of `handled`, from a clean checkout, into one directory
# (CONTRIBUTING.md, "Releases"):
#
#   handled_<version>_<arch>.deb                 cargo-deb: binary, unit, sysusers, config
#   handled-<version>-<cpu>-linux-gnu.tar.gz     the stripped binary, the example
#                                                configuration, the unit, the sysusers
#                                                file, README, CHANGELOG, LICENSE
#   handled-<version>.cdx.json                   CycloneDX SBOM of the binary, from Cargo.lock
#   SHA256SUMS                                   of the three above (sha256sum -c SHA256SUMS)
#
# <version> is the workspace version (Cargo.toml); the script refuses to go on unless
# `handled --version` says the same and CHANGELOG.md has a section for it: `[X.Y.Z] -
# YYYY-MM-DD` for a release, `[X.Y.Z-pre]` or `[Unreleased]` for a pre-release such as
# the `-dev` version the tree carries between releases.
#
# Usage: scripts/release.sh [--allow-dirty] [--no-build] [--out-dir DIR]
#   --allow-dirty  go on with uncommitted changes or untracked files (tests; never for
#                  a published release, the binary would not be the commit it names)
#   --no-build     take the release binary already built in cargo's target directory
#                  (`cargo build --release --locked -p handled`) instead of building it;
#                  scripts/test-deb.sh uses it so that test-all builds once
#   --out-dir DIR  where the artifacts go (default: target/release-artifacts); earlier
#                  artifacts there are removed first
# Needs cargo-deb and cargo-cyclonedx (scripts/install-test-deps.sh installs both).
# Exit status: 0 done, 1 a check or a step failed, 2 wrong usage.
set -euo pipefail
caller_dir=$PWD   # a relative --out-dir is the caller's
cd "$(dirname "$0")/.."

fail() { echo "release: FAIL: $*" >&2; exit 1; }
# usage [STATUS]: the header's usage lines; 2 (wrong usage) unless told, 0 for --help.
usage() { sed -n '/^# Usage:/,/^# Exit status/s/^# \{0,1\}//p' "$0" >&2; exit "${1:-2}"; }

allow_dirty=0 build=1 out_dir=target/release-artifacts
while [ $# -gt 0 ]; do
  case $1 in
    --allow-dirty) allow_dirty=1 ;;
    --no-build) build=0 ;;
    --out-dir)
      [ $# -ge 2 ] || { echo "release: --out-dir needs a directory" >&2; usage; }
      out_dir=$(cd "$caller_dir" && realpath -m -- "$2"); shift ;;
    -h|--help) usage 0 ;;
    *) echo "release: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done

for tool in git python3 sha256sum tar gzip strip objdump dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing"
done
cargo deb --version >/dev/null 2>&1 ||
  fail "cargo-deb is missing (scripts/install-test-deps.sh installs it: cargo install --locked cargo-deb --version 3.8.0)"
cargo cyclonedx --version >/dev/null 2>&1 ||
  fail "cargo-cyclonedx is missing (scripts/install-test-deps.sh installs it: cargo install --locked cargo-cyclonedx --version 0.5.9)"

if [ -n "$(git status --porcelain)" ]; then
  if [ "$allow_dirty" = 1 ]; then
    echo "release: WARNING: the tree has uncommitted changes (--allow-dirty): not a publishable release" >&2
  else
    git status --short >&2
    fail "the tree has uncommitted changes or untracked files; commit or stash them (--allow-dirty for a test)"
  fi
fi

# The version and the target directory as cargo sees them (CARGO_TARGET_DIR,
# .cargo/config.toml and wrappers included), without building anything.
metadata=$(cargo metadata --locked --no-deps --format-version 1) ||
  fail "cargo metadata failed (is Cargo.lock up to date? cargo check --workspace updates it)"
read -r version target_dir < <(python3 -c '
import json, sys
meta = json.load(sys.stdin)
cli = [p for p in meta["packages"] if p["name"] == "handled"]
print(cli[0]["version"] if cli else "", meta["target_directory"])' <<< "$metadata")
[ -n "$version" ] || fail "no package named handled in the workspace"
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  fail "workspace version '$version' is not X.Y.Z or X.Y.Z-pre"

# CHANGELOG.md: a release has its dated section; a pre-release may still be [Unreleased].
escaped_version=${version//./\\.}
if [[ $version == *-* ]]; then
  grep -Eq "^## \[(Unreleased|$escaped_version)\]" CHANGELOG.md ||
    fail "CHANGELOG.md has neither '## [Unreleased]' nor '## [$version]'"
else
  grep -Eq "^## \[$escaped_version\] - [0-9]{4}-[0-9]{2}-[0-9]{2}\$" CHANGELOG.md ||
    fail "CHANGELOG.md has no '## [$version] - YYYY-MM-DD' section (CONTRIBUTING.md, Releases, step 2)"
fi

binary=$target_dir/release/handled
if [ "$build" = 1 ]; then
  echo "release: cargo build --release --locked -p handled (into $target_dir)"
  cargo build --release --locked -p handled
fi
[ -x "$binary" ] || fail "$binary is not built (cargo build --release --locked -p handled, or leave out --no-build)"

# `handled --version` prints "handled X.Y.Z (commit abcdef012345)".
version_line=$("$binary" --version) || fail "$binary --version failed"
[[ $version_line =~ ^handled\ ([^ ]+)\ \(commit\ ([^\)]+)\)$ ]] ||
  fail "$binary --version says '$version_line', not 'handled VERSION (commit COMMIT)'"
binary_version=${BASH_REMATCH[1]} binary_commit=${BASH_REMATCH[2]}
[ "$binary_version" = "$version" ] ||
  fail "$binary is version $binary_version, Cargo.toml says $version (rebuild it)"
head_commit=$(git rev-parse --short=12 HEAD)
if [ "$binary_commit" != "$head_commit" ]; then
  # A binary left from another commit would be published under this one's name.
  [ "$allow_dirty" = 1 ] || fail "$binary is built from commit $binary_commit, HEAD is $head_commit (rebuild it)"
  echo "release: WARNING: $binary is built from commit $binary_commit, HEAD is $head_commit (--allow-dirty)" >&2
fi

# The oldest glibc the binary runs on: the newest GLIBC_ symbol version it needs.
glibc=$(objdump -T "$binary" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -n 1)
[ -n "$glibc" ] || fail "no GLIBC_ symbol versions in $binary (not a glibc binary?)"
cpu=$(uname -m)

mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
rm -f "$out_dir"/handled_*.deb "$out_dir"/handled-*.tar.gz "$out_dir"/handled-*.cdx.json "$out_dir"/SHA256SUMS
scratch=$(mktemp -d "${TMPDIR:-/tmp}/handled-release-XXXXXX")
# cargo-cyclonedx's files (step 3) beside the crates' Cargo.toml go, whatever happens.
sbom_stem=handled-sbom-$$
trap 'rm -rf "$scratch"; find crates -name "$sbom_stem.json" -type f -delete' EXIT

# The commit's date for every file time: the same commit gives the same tarball.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct HEAD)
export SOURCE_DATE_EPOCH

# 1. The .deb (crates/cli/Cargo.toml, [package.metadata.deb]), from the binary above.
# The Debian version has `~` for the pre-release `-` (0.1.0-dev becomes 0.1.0~dev-1):
# cargo-deb would keep 0.1.0-dev-1, which dpkg sorts after 0.1.0-1, so the release
# would not upgrade a pre-release. The file is named after the workspace version.
deb_version=${version/-/\~}-1
built_deb=$(cargo deb -p handled --no-build --locked --quiet --deb-version "$deb_version" \
  --output "$scratch/deb/" | tail -n 1)
[ -f "$built_deb" ] || fail "cargo deb did not say where the package is (got: $built_deb)"
deb_arch=$(dpkg-deb --field "$built_deb" Architecture) || fail "dpkg-deb cannot read $built_deb"
deb_name=handled_${version}_${deb_arch}.deb
mv "$built_deb" "$out_dir/$deb_name"

# 2. The tarball: what a manual install needs (contrib/handled.service's header says how).
tar_base=handled-$version-$cpu-linux-gnu
stage=$scratch/$tar_base
mkdir -p "$stage"
strip --strip-all -o "$stage/handled" "$binary"
chmod 0755 "$stage/handled"
install -m 0644 contrib/deb/handled.toml "$stage/handled.toml"
install -m 0644 contrib/handled.service contrib/handled.sysusers README.md CHANGELOG.md LICENSE \
  docs/configuration.md docs/public-site.md "$stage/"
tar_name=$tar_base.tar.gz
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
  -C "$scratch" -cf - "$tar_base" | gzip -n -9 > "$out_dir/$tar_name"

# 3. The SBOM: cargo-cyclonedx writes one file per workspace member beside its
# Cargo.toml; the one of crates/cli (the binary) is kept, the others removed (trap
# above), so the tree is left as it was. All dependencies, not only the direct ones
# (--all), of this platform, build ones included; dev-dependencies are not in the
# binary and not listed.
sbom_name=handled-$version.cdx.json
target_triple=$(rustc -vV | sed -n 's/^host: //p')
cargo cyclonedx --all --format json --spec-version 1.5 --target "$target_triple" \
  --override-filename "$sbom_stem" >/dev/null ||
  fail "cargo cyclonedx failed"
[ -f "crates/cli/$sbom_stem.json" ] || fail "cargo cyclonedx wrote no crates/cli/$sbom_stem.json"
mv "crates/cli/$sbom_stem.json" "$out_dir/$sbom_name"

# 4. The checksums, names relative so `sha256sum -c SHA256SUMS` runs in the directory.
(cd "$out_dir" && sha256sum "$deb_name" "$tar_name" "$sbom_name" > SHA256SUMS)

echo "release: handled $version (commit $binary_commit), $cpu, glibc >= $glibc, in $out_dir:"
for f in "$deb_name" "$tar_name" "$sbom_name" SHA256SUMS; do
  printf '  %s\t%s\n' "$(du -h --apparent-size "$out_dir/$f" | cut -f1)" "$f"
done
