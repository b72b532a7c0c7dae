#!/usr/bin/env bash
# Every test of the project: house style, the Rust tests, then the black-box
# suites against the release binary. Every step runs even when an earlier one
# failed (a rerun costs half an hour); a table at the end says what passed,
# failed or was skipped and why, and the exit status is 1 if any step failed.
#
# A suite that cannot run here (no Handle.Net harness, no systemd-analyze, ...)
# exits 77 after writing its reason to $HANDLED_SKIP_FILE (see
# tests/handle-net-peer.sh); that is a SKIP, not a failure.
#
# TEST_ALL_ONLY="fmt clippy" runs only the steps named (e.g. the ones that
# failed); the others are listed as skipped.
set -uo pipefail
cd "$(dirname "$0")/.."

# Cargo's output directory, honoured by every step; absolute because suites cd.
CARGO_TARGET_DIR=$(realpath -m "${CARGO_TARGET_DIR:-target}")
export CARGO_TARGET_DIR
# One build per run: incremental caches would only take disk (gigabytes) and time.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
BIN=$CARGO_TARGET_DIR/release/handled
export HANDLED_BIN=$BIN
work=$(mktemp -d "${TMPDIR:-/tmp}/test-all-XXXXXX")
trap 'rm -rf "$work"' EXIT

# Free space where the build goes, at the start and in the summary: a full disk
# shows up as a linker "Bus error" or "No space left on device" inside a step.
disk_free() { df -h --output=avail "$(dirname "$CARGO_TARGET_DIR")" | tail -1 | tr -d ' '; }
echo "test-all: target $CARGO_TARGET_DIR, $(disk_free) free"

names=() results=() times=() reasons=()
failed=0
release_built=unknown

# step NAME DESCRIPTION COMMAND...: run COMMAND and record PASS, FAIL or SKIP.
step() {
  local name=$1 description=$2; shift 2
  echo
  echo "== $name: $description"
  local skip_file=$work/skip started=$SECONDS rc result reason=
  : > "$skip_file"
  if [ -n "${TEST_ALL_ONLY:-}" ] && [[ " $TEST_ALL_ONLY " != *" $name "* ]]; then
    rc=77
    echo "not in TEST_ALL_ONLY" > "$skip_file"
  elif [ "${NEEDS_BIN:-}" = 1 ] && { [ ! -x "$BIN" ] || [ "$release_built" = no ]; }; then
    # Never a stale binary from an earlier build.
    rc=77
    echo "no release binary: the release-build step did not pass" > "$skip_file"
  else
    # Kept for the summary's excerpt of a failed step (a CI log shows only its
    # tail). Not a pipe: a daemon a step leaves holding its output open would
    # keep a pipe's `tee` and so the step from ending.
    HANDLED_SKIP_FILE=$skip_file "$@" > >(tee "$work/log-$name") 2>&1
    rc=$?
  fi
  case $rc in
    0)
      result=PASS
      # Tests inside a passing step that could not run here (cargo tests note
      # them through handled_testenv::skipped): named, never silent.
      if [ -s "$skip_file" ]; then
        reason="$(wc -l < "$skip_file") tests skipped: $(sort "$skip_file" | uniq -c | sed 's/^ *//' | tr '\n' ';' | sed 's/;$//')"
      fi
      ;;
    77)
      result=SKIP
      reason=$(tr '\n' ' ' < "$skip_file" | sed 's/ *$//')
      reason=${reason:-no reason given}
      ;;
    *) result=FAIL reason="exit status $rc"; failed=$((failed + 1)) ;;
  esac
  names+=("$name") results+=("$result") times+=($((SECONDS - started))) reasons+=("$reason")
  echo "== $name: $result${reason:+ ($reason)}"
}

# The suites after the release build need its binary.
suite() { NEEDS_BIN=1 step "$@"; }

step deps "install what is missing (scripts/install-test-deps.sh)" scripts/install-test-deps.sh
step fmt "cargo fmt --check" cargo fmt --all -- --check
step clippy "clippy, warnings denied" cargo clippy --workspace --all-targets --locked -- -D warnings
step module-cycles "no import cycles between modules" scripts/module-cycles.py
step links "every relative link and file reference in the Markdown resolves" scripts/check-links.py
step scripts "unit tests of the Python scripts (tests/scripts)" python3 -m unittest discover -s tests/scripts
# Once, in a copy of the repository alone (no sibling shared/ directory): the
# same tests as in the checkout, since none reads shared/ (their data is copied
# in, each with a note on where it came from); twice cost CI ~7 minutes.
step cargo-test "cargo test (workspace) in a copy of the repository alone (no sibling shared/ directory)" \
  scripts/test-standalone.sh
# A target that stops building or trips at once is caught here; real campaigns
# are longer (docs/fuzzing.md).
step fuzz "every fuzz target for 6 s (scripts/fuzz.sh --smoke)" scripts/fuzz.sh --smoke 6
step release-build "the release binary for the black-box suites ($BIN)" \
  cargo build --release --locked -p handled
[ "${results[-1]}" = FAIL ] && release_built=no
suite systemd-unit "contrib/handled.service: systemd-analyze verify and security" \
  scripts/test-systemd-unit.sh "$BIN"
suite deb "the release artifacts (scripts/release.sh --no-build: .deb, tarball, SBOM, SHA256SUMS) checked; the .deb installed with dpkg -i, handled --version checked, purged" \
  scripts/test-deb.sh
suite bench-report "bench HTML report per scenario, opened in headless Chromium" \
  tests/bench-report/run.sh "$BIN"
suite registry "domain registry black-box suite (embedded store and --ephemeral)" \
  tests/registry/run.sh "$BIN"
suite rest "JSON API black-box suite (pyhandle, HTTP status/body pins, schemathesis on /api/openapi.json)" \
  tests/rest/run.sh "$BIN"
suite console "admin console in headless Chromium (Playwright: sign-in, edit, search, delete, status)" \
  tests/console/run.sh "$BIN"
suite proxy-compare "web handle proxy beside the original Handle.Net 9.0.0 (tests/proxy-compare)" \
  env OUT="$work/proxy-compare.md" tests/proxy-compare/run.sh "$BIN"
suite status-handle "status handle 0.SITE/status beside the original Handle.Net 9.0.0 (tests/status-handle)" \
  tests/status-handle/compare.sh "$BIN"
suite templates "template handles beside the original Handle.Net 9.0.0 (tests/templates)" \
  tests/templates/compare.sh "$BIN"
suite sql-handle-net "Handle.Net 9.0.0 (storage_type sql) and handled (store sql) on one PostgreSQL (tests/sql-handle-net)" \
  tests/sql-handle-net/run.sh "$BIN"
suite sql-handle-net-mariadb "Handle.Net 9.0.0 (storage_type sql) and handled (store sql) on one MariaDB (tests/sql-handle-net)" \
  tests/sql-handle-net/run.sh "$BIN" mariadb
suite sql-handle-net-text "Handle.Net 9.0.0 and handled on one PostgreSQL, names and types in text columns (store_*_as_string; tests/sql-handle-net)" \
  tests/sql-handle-net/run.sh "$BIN" postgres text
suite sql-handle-net-custom "Handle.Net 9.0.0 and handled on one PostgreSQL, both through the same custom statements on tables of other names (tests/sql-handle-net)" \
  tests/sql-handle-net/run.sh "$BIN" postgres custom
suite sql-handle-net-mariadb-custom "Handle.Net 9.0.0 and handled on one MariaDB, both through the same custom statements on tables of other names (tests/sql-handle-net)" \
  tests/sql-handle-net/run.sh "$BIN" mariadb custom
suite global-resolution "the global resolver against the Java client's own global resolution, in a loopback-only namespace (tests/global-resolution)" \
  tests/global-resolution/run.sh "$BIN"
suite hostile "every attack of tests/hostile against one server, ordinary clients probing throughout" \
  tests/hostile/run_all.py "$BIN"
suite remote-admin "the Java admin suite against a server whose admins live on a registry server" \
  tests/remote-admin/run.sh "$BIN"
suite remote-admin-hn "an admin held on the original Handle.Net server" \
  tests/remote-admin/against-handle-net.sh "$BIN"
suite replication "replication judged by the original Handle.Net 9.0.0 (both directions, migration)" \
  tests/replication/run.sh "$BIN"
suite interop-java "net.handle:handle-client against the release binary" \
  tests/interop-java/run.sh "$BIN"
suite partition "a multi-primary group of three and a proxied mirror, each in a network namespace, 45 s under each nemesis (partition, pause, kill -9, clock skew): porcupine per handle, convergence, no copy going back (scripts/partition-test.sh)" \
  scripts/partition-test.sh "$BIN"
suite partition-cassandra "the README's Cassandra cluster (3 Cassandra nodes, 3 handled nodes, the balancer), each in a network namespace, 30 s under each nemesis (a Cassandra node cut off, a handled node cut from Cassandra, the balancer cut from a node, pause, kill -9, a handled node's clock off): porcupine per handle across all nodes, convergence (scripts/partition-test.sh cassandra)" \
  scripts/partition-test.sh cassandra "$BIN"
suite partition-cassandra-cache "the same with the nodes' coherent record cache on (64 MB): its write-pending marks keep reads concurrent with a write linearizable (docs/cluster.md)" \
  scripts/partition-test.sh cassandra --cache-mb 64 "$BIN"
suite cassandra-cluster "store conformance, then registry, JSON API and Java suites through a balancer in front of 3 nodes" \
  tests/cluster/run.sh "$BIN"

passed=0 skipped=0
echo
echo "== summary"
# The step column as wide as the longest name (sql-handle-net-mariadb-custom).
width=4
for n in "${names[@]}"; do [ "${#n}" -gt "$width" ] && width=${#n}; done
printf '%-*s %-6s %8s  %s\n' "$width" step result time "reason"
for i in "${!names[@]}"; do
  printf '%-*s %-6s %5d:%02d  %s\n' "$width" "${names[$i]}" "${results[$i]}" \
    $((times[i] / 60)) $((times[i] % 60)) "${reasons[$i]}"
  case ${results[$i]} in PASS) passed=$((passed + 1)) ;; SKIP) skipped=$((skipped + 1)) ;; esac
done
# What each failed step said, where a log's tail would otherwise hide it.
for i in "${!names[@]}"; do
  [ "${results[$i]}" = FAIL ] || continue
  log=$work/log-${names[$i]}
  echo
  echo "== ${names[$i]} failed: the lines of its log that say why (of $(wc -l < "$log") lines)"
  grep -nE "panicked at|FAILED|^failures:|^error|Error:|assert|[Tt]imed? ?out|No space left|NOT LINEARIZABLE|  why: " "$log" | tail -60
  echo "-- its last lines:"
  tail -15 "$log"
done
echo
echo "test-all: $passed passed, $failed failed, $skipped skipped ($(disk_free) free at the end)"
[ "$failed" = 0 ]
