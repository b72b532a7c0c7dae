#!/usr/bin/env bash
# Server instructions per request at two revisions, counted by callgrind:
# UDP, TCP (persistent), the HTTP tunnel, the JSON API, and durable creates.
# Counts do not depend on what else the machine runs, so a refactoring can be
# checked for regressions on a busy or shared box, where throughput cannot.
#
#   scripts/bench-instructions.sh BEFORE AFTER [requests per workload]
#
# Each revision is built (release) in a temporary worktree sharing one target
# directory. Each workload gets a fresh server under callgrind on an embedded
# store bootstrapped natively first (so no RSA key is made under valgrind);
# 300 warm-up requests, then the counters are zeroed, N requests run (4
# clients), and the dump's total is divided by N. Prints a markdown table.
#
# ROUNDS=3: each workload that many times per revision, alternating; the table
# lists every run and compares medians (UDP falls into two modes by how
# requests batch: compare runs of one mode). WORKLOADS="udp create": a subset.
# KEEP=DIR: keep the callgrind files there (DIR/REV.WORKLOAD.RUN), to read
# with callgrind_annotate; with PROFILE=profiling the builds carry line tables
# (Cargo.toml's [profile.profiling]), so the profiles name functions.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BEFORE AFTER [requests]" >&2; exit 2; }
command -v valgrind > /dev/null || { echo "valgrind is needed (apt install valgrind)" >&2; exit 2; }
before=$1 after=$2 n=${3:-3000}
rounds=${ROUNDS:-1} profile=${PROFILE:-release} keep=${KEEP:-}
[ -z "$keep" ] || mkdir -p "$keep"
work=$(mktemp -d)
export CARGO_INCREMENTAL=0 CARGO_TARGET_DIR=$work/target
port=25641 http=25800
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  for rev in "$before" "$after"; do git worktree remove --force "$work/src-$rev" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

for rev in "$before" "$after"; do
  git worktree add -q --detach "$work/src-$rev" "$rev"
  (cd "$work/src-$rev" && cargo build -q --profile "$profile" -p handled)
  cp "$CARGO_TARGET_DIR/$profile/handled" "$work/handled-$rev"
done

wait_ready() { # output file
  for _ in $(seq 600); do grep -q ready "$1" 2> /dev/null && return 0; sleep 0.5; done
  echo "server did not start: $(tail -3 "$1")" >&2
  return 1
}

serve_args() { # data dir
  echo serve --data-dir "$1" --listen 127.0.0.1 --port $port --http-port $http --prefix TEST \
    --admin-credentials "$1/admin.json"
}

# Ir of N requests of one workload on one binary.
count() { # binary workload [name to keep the profile under]
  local bin=$1 workload=$2 dir=$work/data-$RANDOM
  mkdir -p "$dir"
  # Bootstrap natively (server key, admin handle), then serve under callgrind.
  "$bin" $(serve_args "$dir") > "$dir/boot.out" 2>&1 &
  local boot=$!
  wait_ready "$dir/boot.out"
  kill "$boot"
  wait "$boot" 2> /dev/null || true
  (cd "$dir" && exec valgrind -q --tool=callgrind --callgrind-out-file="$dir/cg.out" \
    "$bin" $(serve_args "$dir") > "$dir/serve.out" 2>&1) &
  local pid=$!
  pids+=("$pid")
  wait_ready "$dir/serve.out"
  local vg
  vg=$(pgrep -f "callgrind-out-file=$dir/cg.out" | head -1)
  # --warmup 0: the bench warms up for 1 s by default, and requests made in
  # that second (as many as the machine allows) would fall into the count.
  local args=(--host 127.0.0.1 -c 4 --timeout 30 --quiet --warmup 0)
  case $workload in
    udp) args+=(--port $port --transport udp) ;;
    tcp) args+=(--port $port --transport tcp-persistent) ;;
    http) args+=(--port $http --transport http) ;;
    json) args+=(--port $http --transport json-api) ;;
    create) args+=(--port $port --transport tcp-persistent --ops create --credentials "$dir/admin.json") ;;
  esac
  "$bin" bench "${args[@]}" -n 300 > /dev/null
  callgrind_control -z "$vg" > /dev/null
  "$bin" bench "${args[@]}" -n "$n" > "$dir/bench.out"
  callgrind_control -d "$vg" > /dev/null
  sleep 1
  local ir
  ir=$(cat "$dir"/cg.out.* 2> /dev/null | awk '/^(summary|totals):/ {print $2; exit}')
  kill "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  [ -n "$ir" ] || { echo "no callgrind dump for $workload" >&2; return 1; }
  [ -z "$keep" ] || [ -z "${3:-}" ] || cat "$dir"/cg.out.* > "$keep/$3"
  echo $((ir / n))
}

echo "Server instructions per request (callgrind Ir, $n requests after 300 warm-up, 4 clients)"
echo
echo "| workload | $before | $after | after / before |"
echo "|---|---:|---:|---:|"
median() { tr ' ' '\n' | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for workload in ${WORKLOADS:-udp tcp http json create}; do
  a=() b=()
  for r in $(seq "$rounds"); do
    a+=("$(count "$work/handled-$before" $workload "$before.$workload.$r")")
    b+=("$(count "$work/handled-$after" $workload "$after.$workload.$r")")
  done
  ma=$(echo "${a[*]}" | median) mb=$(echo "${b[*]}" | median)
  echo "| $workload | ${a[*]} | ${b[*]} | $(python3 -c "print(f'{$mb / $ma:.3f}')") |"
done
