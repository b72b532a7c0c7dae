#!/usr/bin/env bash
# Partition tests with a linearizability checker (issue 43; docs/cluster.md,
# "Partition tests"): rounds of tests/partition/multi_primary.sh, each a
# multi-primary group of three `handled` members and a proxied mirror, each in
# its own network namespace, under one nemesis.
#
# Usage: scripts/partition-test.sh [--minutes N] [--rounds R]
#                                  [--nemesis partition|pause|kill|skew|all] [--out DIR] [HANDLED]
#        scripts/partition-test.sh cassandra [--minutes N] [--rounds R]
#                                  [--nemesis cass-cut|store-cut|lb-cut|pause|kill|cass-skew|skew|all] [--out DIR] [HANDLED]
#   default: one round of 45 s per nemesis (the short run scripts/test-all.sh makes)
#   cassandra: the README's Cassandra cluster instead (tests/partition/cassandra.sh:
#     3 Cassandra nodes, 3 `handled` nodes, the balancer), Cassandra started once;
#     default one round of 30 s per nemesis; needs Java, Maven and haproxy too;
#     `all` leaves out cass-skew (a Cassandra node's clock seconds off), whose
#     replayed proposals are outside the promise (docs/cluster.md): asked by name;
#     --cache-mb N turns the nodes' coherent record cache on (docs/cluster.md,
#     "Write pending": its marks keep reads concurrent with a write linearizable)
#     HANDLED_PARTITION_TOML=TEXT is added to the nodes' configuration file, e.g.
#     $'[cassandra]\nrequest_timeout_ms = 300' for many more lost answers
#   --minutes N: each round N minutes (e.g. --minutes 5 --rounds 10 for the record)
#   HANDLED: the binary (default $CARGO_TARGET_DIR/release/handled, else target/release/handled)
# Needs root, iproute2, nftables, Go (builds tests/partition/checker) and Python 3;
# without them it says "skipped" (exit 77). Exit 1 if any round is not
# linearizable or does not converge. Each round's history, logs and verdicts stay
# in OUT/<nemesis>-<round>/ (default: a fresh directory under /tmp, removed when
# every round passed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/skip.sh"
. "$root/tests/partition/netns.sh"

seconds=45 rounds=1 nemesis=all out='' bin='' mode=multi-primary
if [ "${1:-}" = cassandra ]; then mode=cassandra seconds=30; shift; fi
while [ $# -gt 0 ]; do
  case $1 in
    --minutes) seconds=$(($2 * 60)); shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --nemesis) nemesis=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --cache-mb) export HANDLED_PARTITION_CACHE_MB=$2; shift 2 ;;
    -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
    *) bin=$1; shift ;;
  esac
done
if [ $mode = cassandra ]; then
  [ "$nemesis" = all ] && nemeses=(cass-cut store-cut lb-cut pause kill skew) || nemeses=("$nemesis")
else
  [ "$nemesis" = all ] && nemeses=(partition pause kill skew) || nemeses=("$nemesis")
fi
bin=${bin:-${CARGO_TARGET_DIR:-$root/target}/release/handled}

why=$(net_missing)
[ -z "$why" ] || skip_suite partition "$why"
command -v go >/dev/null || skip_suite partition "needs Go to build the checker (tests/partition/checker)"
command -v python3 >/dev/null || skip_suite partition "needs python3 (the clients)"
[ -x "$bin" ] || { echo "partition-test: no handled binary at $bin" >&2; exit 1; }
ip link show "${NET_TAG}br" >/dev/null 2>&1 &&
  { echo "partition-test: bridge ${NET_TAG}br exists: another run is going on (or left it: ip link del ${NET_TAG}br)" >&2; exit 1; }

keep=yes
[ -n "$out" ] || { out=$(mktemp -d "${TMPDIR:-/tmp}/partition-XXXXXX"); keep=no; }
mkdir -p "$out"
out=$(realpath "$out")
echo "partition-test: $rounds round(s) of $seconds s per nemesis (${nemeses[*]}), results in $out"
(cd "$root/tests/partition/checker" && go test ./... >/dev/null && go build -o "$out/checker" .)
export HANDLED_PARTITION_CHECKER=$out/checker

if [ $mode = cassandra ]; then
  rc=0
  "$root/tests/partition/cassandra.sh" "$bin" "$seconds" "$rounds" "$out" "${nemeses[@]}" || rc=$?
  [ $rc = 77 ] && exit 77
  echo
  column -t -s $'\t' "$out/results.tsv" 2>/dev/null || true
  [ $rc = 0 ] || { echo "partition-test: a round failed (see $out)"; exit 1; }
  echo "partition-test: every round linearizable and converged"
  [ $keep = yes ] || rm -rf "$out"
  exit 0
fi

count() { grep -c "$1" "$2" 2>/dev/null || true; }
results=$out/results.tsv
printf 'nemesis\tround\tseconds\toperations\tstrikes\tlinearizable\tconverged\tmonotonic\n' > "$results"
failed=0
for n in "${nemeses[@]}"; do
  for r in $(seq 1 "$rounds"); do
    dir=$out/$n-$r
    echo
    echo "== $n, round $r of $rounds ($seconds s)"
    rc=0
    "$root/tests/partition/multi_primary.sh" "$bin" "$n" "$seconds" "$dir" || rc=$?
    [ $rc = 77 ] && exit 77
    [ $rc = 0 ] || failed=$((failed + 1))
    ops=$(count '"invoke"' "$dir/history.jsonl")
    strikes=$(count '^strike' "$dir/nemesis.log")
    lin=$(grep -q '^linearizable' "$dir/checker.out" 2>/dev/null && echo yes || echo NO)
    conv=$(grep -q '^converge: .* agree' "$dir/converge.out" 2>/dev/null && echo yes || echo NO)
    mono=$(grep -q '^monotonic:' "$dir/monotonic.out" 2>/dev/null && echo yes || echo NO)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$r" "$seconds" "$ops" "$strikes" "$lin" "$conv" "$mono" >> "$results"
  done
done
echo
column -t -s $'\t' "$results"
[ $failed = 0 ] || { echo "partition-test: $failed round(s) failed (see $out)"; exit 1; }
echo "partition-test: every round linearizable, converged, and no copy went back"
[ $keep = yes ] || rm -rf "$out"   # tens of MB a round; kept when asked for (--out) or when a round failed
