#!/usr/bin/env bash
# Proves that the repository tests on its own: copies the working tree's files
# (tracked and untracked, minus ignored ones, so uncommitted work is included)
# into a directory with no `shared` sibling and runs `cargo test --workspace
# --locked` there, against the original target directory so dependencies are
# not rebuilt. The copy is removed afterwards.
#
#   scripts/test-standalone.sh [extra `cargo test` arguments]
#
# Two details keep the shared target directory honest:
# * Cargo names a workspace crate's artifacts and checks their freshness from
#   paths relative to the workspace root, so a copy elsewhere would overwrite
#   the checkout's test binaries (which embed CARGO_MANIFEST_DIR) or reuse them
#   (and read files from the checkout). A config file beside the copy gives
#   every workspace member a profile override (codegen-units 255 instead of
#   256: no effect on the code), so its artifacts get names of their own;
#   registry dependencies keep theirs and are reused.
# * The copy lives at a fixed path, removed after each run, so binaries reused
#   from the previous standalone run point at the same place. A lock keeps two
#   runs apart.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=$(realpath -m "${CARGO_TARGET_DIR:-$root/target}")
work=${TMPDIR:-/tmp}/handled-standalone-$(id -u)
copy=$work/handled

exec 9>"$work.lock"
flock 9
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$copy" "$work/.cargo"

# Files as they are now; tracked files deleted in the working tree are skipped.
git ls-files -z -co --exclude-standard \
  | while IFS= read -r -d '' f; do if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi; done \
  | tar -c --null --no-recursion -T - -f - \
  | tar -x -f - -C "$copy"
[ ! -e "$work/shared" ] || { echo "unexpected $work/shared" >&2; exit 1; }

cargo metadata --no-deps --format-version 1 --manifest-path "$copy/Cargo.toml" \
  | python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    print("[profile.dev.package.%s]\ncodegen-units = 255\n" % json.dumps(p["name"]))' \
  > "$work/.cargo/config.toml"

echo "standalone copy: $copy ($(find "$copy" -type f | wc -l) files), target: $target"
(cd "$copy" && CARGO_TARGET_DIR=$target cargo test --workspace --locked --no-fail-fast "$@")
echo "standalone tests passed in ${SECONDS}s"
