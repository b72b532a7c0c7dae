#!/usr/bin/env bash
# Coverage-guided fuzzing of the inputs a peer or an operator's file reaches
# (docs/fuzzing.md). libFuzzer through the libfuzzer-sys crate, built on the
# pinned stable toolchain with LLVM's SanitizerCoverage pass switched on by
# plain -C flags: no nightly, no cargo-fuzz, no sanitizer runtime.
#
#   scripts/fuzz.sh --list                 the targets
#   scripts/fuzz.sh TARGET SECONDS [ARGS]  fuzz TARGET; ARGS go to libFuzzer
#   scripts/fuzz.sh --smoke [SECONDS]      every target for SECONDS (default 15)
#   scripts/fuzz.sh --build                build every target, run none
#   scripts/fuzz.sh --replay TARGET FILE.. run TARGET on FILEs (a crash, a corpus)
#
# The committed seeds (fuzz/corpus/TARGET) are copied into a working corpus
# under the target directory, so a run never writes into the repository; a
# crash lands in $TARGET_DIR/fuzz-artifacts/TARGET/ and the run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/skip.sh

fuzz_dir=fuzz
targets() { for f in "$fuzz_dir"/fuzz_targets/*.rs; do basename "$f" .rs; done; }

usage() {
  sed -n '7,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# libfuzzer-sys compiles libFuzzer (C++) with the system's compiler.
need_cxx() {
  command -v c++ >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fuzz: installing g++ (libFuzzer is C++) with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ >/dev/null
  fi
  command -v c++ >/dev/null 2>&1 || skip_suite fuzz "no C++ compiler to build libFuzzer (apt-get install g++)"
}

host=$(rustc -vV | sed -n 's/^host: //p')
# What cargo-fuzz passes with `--sanitizer none`, all stable: edge counters,
# the PC table libFuzzer reports coverage from, and comparison tracing so it
# learns magic numbers. `--cfg fuzzing` is what libfuzzer-sys and the crates
# expect; debug assertions and overflow checks stay on, as under cargo-fuzz.
fuzz_rustflags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"

target_dir() {
  cargo metadata --manifest-path "$fuzz_dir/Cargo.toml" --format-version 1 --no-deps --locked |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])'
}

# The cargo profile: release for campaigns, smoke for --smoke (fuzz/Cargo.toml says why).
profile=release

# build [TARGET]: the instrumented binaries. `--target` keeps the flags off
# build scripts and proc macros, which run on the host and must not need
# libFuzzer's symbols.
build() {
  need_cxx
  local bins=()
  [ $# -gt 0 ] && bins=(--bin "$1")
  RUSTFLAGS="$fuzz_rustflags" cargo build --manifest-path "$fuzz_dir/Cargo.toml" --locked --profile "$profile" \
    --target "$host" "${bins[@]}"
}

# run TARGET SECONDS [ARGS]: fuzz one built target.
run() {
  local name=$1 seconds=$2; shift 2
  local dir bin corpus artifacts
  dir=$(target_dir)
  bin=$dir/$host/$profile/$name
  corpus=$dir/fuzz-corpus/$name
  artifacts=$dir/fuzz-artifacts/$name/
  mkdir -p "$corpus" "$artifacts"
  [ -d "$fuzz_dir/corpus/$name" ] && cp -n "$fuzz_dir/corpus/$name"/* "$corpus"/ 2>/dev/null || true
  echo "fuzz: $name for ${seconds}s (corpus $corpus)"
  # -timeout: a single input slower than this is a finding (the template
  # bounds promise ~20 ms); -rss_limit_mb: so is a blown memory bound.
  # libFuzzer exits 77 on a crash by default, which test-all reads as SKIP.
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -error_exitcode=1 -timeout_exitcode=1 \
    -artifact_prefix="$artifacts" "$@" "$corpus"
}

[ $# -ge 1 ] || usage
case $1 in
  --list) targets ;;
  --build) build ;;
  --smoke)
    seconds=${2:-15}
    profile=smoke
    started=$SECONDS
    build
    echo "fuzz: built in $((SECONDS - started))s"
    failed=()
    for t in $(targets); do
      run "$t" "$seconds" || failed+=("$t")
    done
    echo "fuzz: smoke done in $((SECONDS - started))s"
    if [ ${#failed[@]} -gt 0 ]; then
      echo "fuzz: FAILED: ${failed[*]} (inputs under $(target_dir)/fuzz-artifacts/)" >&2
      exit 1
    fi
    ;;
  --replay)
    [ $# -ge 3 ] || usage
    name=$2; shift 2
    build "$name"
    "$(target_dir)/$host/$profile/$name" "$@"
    ;;
  -*) usage ;;
  *)
    [ $# -ge 2 ] || usage
    name=$1 seconds=$2; shift 2
    [ -f "$fuzz_dir/fuzz_targets/$name.rs" ] || { echo "fuzz: no target $name (scripts/fuzz.sh --list)" >&2; exit 2; }
    build "$name"
    run "$name" "$seconds" "$@"
    ;;
esac
