#!/usr/bin/env bash
# Reference figures for BENCHMARKS.md "Replication with Handle.Net": Handle.Net 9.0.0 primary ->
# Handle.Net 9.0.0 mirror on this machine.
#   * dump throughput: hdl-dumpfromprimary of N1 then N2 bulk-loaded handles (3 values each);
#     the marginal rate (N2-N1)/(t2-t1) leaves out the JVM start and connection set-up;
#   * mirror lag at the default replication_interval (no key: 30 000 ms in the code): a create
#     on the primary, then the mirror polled every 20 ms until it answers with it; samples
#     spread over the interval by random pauses.
#
#   sudo tests/replication/bench-hn.sh         (BENCH_N1=10000 BENCH_N2=50000 LAG_SAMPLES=6)
. "$(dirname "$0")/lib.sh"
require_handle_net
make_work
trap cleanup_all EXIT
N1=${BENCH_N1:-10000}
N2=${BENCH_N2:-50000}
SAMPLES=${LAG_SAMPLES:-6}

hn_setup primary 2641 8000
hn_setup_mirror mirror 2642 8002 TEST/REPL-MIRROR
hn_config primary replication_admins '( "300:TEST/ADMIN" "301:TEST/ADMIN" "300:TEST/REPL-MIRROR" )'
hn_make_mirror mirror "$(hn_svr primary)/siteinfo.json" "${REPL_INTERVAL_MS:-}"
ADMIN="pubkey:300:TEST/ADMIN:$(hn_svr primary)/admpriv.bin"
java_tools

# bulk N handles (offline, primary stopped) starting at FIRST; then time a full dump.
dump_timed() {
  local n=$1 first=$2
  hn_stop primary
  java -cp "$WORK/classes:$CP" BulkLoad "$(hn_svr primary)" TEST "$n" 300:TEST/ADMIN "$first" >&2
  hn_start primary > /dev/null
  [ -f "$WORK/identity.done" ] || { hn_identity_command mirror 300:TEST/ADMIN | { echo "server 127.0.0.1:2641"; echo "auth $ADMIN"; cat; } | hs_tool; touch "$WORK/identity.done"; }
  local t0 t1; t0=$(date +%s%N); hn_dump_from_primary mirror; t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000000 ))
}
log "dump of $N1 handles"
t1=$(dump_timed "$N1" 1)
log "dump of $N2 handles"
t2=$(dump_timed $((N2 - N1)) $((N1 + 1)))
rate=$(python3 -c "print(round(($N2-$N1)/(($t2-$t1)/1000)))")
echo "RESULT dump: $N1 handles in $t1 ms, $N2 handles in $t2 ms (hdl-dumpfromprimary wall time); marginal $rate handles/s"

log "mirror lag at replication_interval ${REPL_INTERVAL_MS:-default}, $SAMPLES samples"
hn_start mirror > /dev/null
lags=()
for i in $(seq "$SAMPLES"); do
  ms=$({ echo "server 127.0.0.1:2641"; echo "auth $ADMIN"; echo "sleep $((RANDOM % 30000))"
         echo "create TEST/LAG-$i 100:HS_ADMIN:300:TEST/ADMIN 1:URL:lag-$i"
         echo "server 127.0.0.1:2642"; echo "await TEST/LAG-$i 1 lag-$i 120000"; } | hs_tool) || die "lag sample $i"
  echo "sample $i: $ms ms"; lags+=("$ms")
done
python3 - "${lags[@]}" <<'PY'
import statistics, sys
v = sorted(int(x) for x in sys.argv[1:])
print(f"RESULT lag: min {v[0]} ms, median {statistics.median(v):.0f} ms, max {v[-1]} ms over {len(v)} samples")
PY
hn_mirror_healthy mirror
