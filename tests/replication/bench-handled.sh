#!/usr/bin/env bash
# Figures for BENCHMARKS.md "Replication with Handle.Net", handled legs, measured as
# bench-hn.sh measures Handle.Net -> Handle.Net:
#   handled-to-hn: handled primary holding N1, then N2 handles (--import of 3-value records)
#                  -> hdl-dumpfromprimary of a Handle.Net mirror (wall time; marginal rate);
#                  then the mirror's lag at its default interval (30 000 ms);
#   hn-to-handled: Handle.Net primary holding N1, then N2 handles (BulkLoad) -> a fresh handled
#                  mirror: time from its start to the last handle readable on it; then its lag
#                  at ITS default interval (replication_interval_ms unset).
#
#   sudo tests/replication/bench-handled.sh handled-to-hn|hn-to-handled path/to/handled
#        (BENCH_N1=10000 BENCH_N2=50000 LAG_SAMPLES=6)
. "$(dirname "$0")/lib.sh"
require_handle_net
DIRECTION=${1:-}
handled_bin "${2:-}"
make_work
trap cleanup_all EXIT
N1=${BENCH_N1:-10000}
N2=${BENCH_N2:-50000}
SAMPLES=${LAG_SAMPLES:-6}
java_tools

# lag_samples PRIMARY_ADDR MIRROR_ADDR AUTH: SAMPLES creates on the primary, each awaited on the
# mirror, with random pauses of up to 30 s between them.
lag_samples() {
  local lags=() i ms
  for i in $(seq "$SAMPLES"); do
    ms=$({ echo "server $1"; echo "auth $3"; echo "sleep $((RANDOM % 30000))"
           echo "create TEST/LAG-$i 100:HS_ADMIN:300:TEST/ADMIN 1:URL:lag-$i"
           echo "server $2"; echo "await TEST/LAG-$i 1 lag-$i 120000"; } | hs_tool) || die "lag sample $i"
    echo "sample $i: $ms ms"; lags+=("$ms")
  done
  python3 - "${lags[@]}" <<'PY'
import statistics, sys
v = sorted(int(x) for x in sys.argv[1:])
print(f"RESULT lag: min {v[0]} ms, median {statistics.median(v):.0f} ms, max {v[-1]} ms over {len(v)} samples")
PY
}
rate() { python3 -c "print(round(($N2-$N1)/(($2-$1)/1000)))"; }

case "$DIRECTION" in
handled-to-hn)
  hn_setup_mirror mirror 2642 8002 TEST/REPL-MIRROR
  printf 'replication_admins = ["300:TEST/REPL-MIRROR"]\nserver_admins = ["300:TEST/ADMIN"]\n' > "$WORK/primary.toml"
  times=()
  for n in "$N1" "$N2"; do
    handled_stop primary; rm -rf "$WORK/primary" "$WORK/admin-TEST.json"
    python3 - "$n" > "$WORK/bulk.jsonl" <<'PY'
import json, sys
for i in range(1, int(sys.argv[1]) + 1):
    s = f"BULK-{i:07d}"
    print(json.dumps({"handle": f"TEST/{s}", "values": [
        {"index": 100, "type": "HS_ADMIN", "data": {"format": "admin", "value": {"handle": "TEST/ADMIN", "index": 300, "permissions": "111111111111"}}},
        {"index": 1, "type": "URL", "data": {"format": "string", "value": f"https://example.org/landing/{s.lower()}"}},
        {"index": 2, "type": "EMAIL", "data": {"format": "string", "value": f"owner-{i}@example.org"}}]}))
PY
    handled_start primary "$HANDLED" 2651 8051 "$WORK/primary.toml" --prefix TEST \
      --admin-credentials "$WORK/admin-TEST.json" --import "$WORK/bulk.jsonl" > /dev/null
    ADMIN="handled:$WORK/admin-TEST.json"
    { echo "server 127.0.0.1:2651"; echo "auth $ADMIN"; hn_identity_command mirror 300:TEST/ADMIN
      echo "siteinfo $WORK/handled-site.json"; } | hs_tool
    hn_make_mirror mirror "$WORK/handled-site.json" ""
    t0=$(date +%s%N); hn_dump_from_primary mirror; t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  echo "RESULT dump: $N1 handles in ${times[0]} ms, $N2 handles in ${times[1]} ms (hdl-dumpfromprimary from handled); marginal $(rate "${times[@]}") handles/s"
  hn_start mirror > /dev/null
  lag_samples 127.0.0.1:2651 127.0.0.1:2642 "$ADMIN"
  hn_mirror_healthy mirror
  ;;
hn-to-handled)
  hn_setup primary 2641 8000
  hn_config primary replication_admins '( "300:TEST/ADMIN" "300:TEST/REPL-HANDLED" )'
  ADMIN="pubkey:300:TEST/ADMIN:$(hn_svr primary)/admpriv.bin"
  times=(); first=1
  for n in "$N1" "$N2"; do
    hn_stop primary
    java -cp "$WORK/classes:$CP" BulkLoad "$(hn_svr primary)" TEST $((n - first + 1)) 300:TEST/ADMIN "$first" >&2
    first=$((n + 1))
    hn_start primary > /dev/null
    [ -f "$WORK/handled-repl.pk8" ] || { echo "server 127.0.0.1:2641"; echo "auth $ADMIN"
      echo "keygen $WORK/handled-repl.pk8 $WORK/handled-repl.pub"
      echo "create TEST/REPL-HANDLED 100:HS_ADMIN:300:TEST/ADMIN 300:HS_PUBKEY:@$WORK/handled-repl.pub"; } | hs_tool
    handled_stop mirror; rm -rf "$WORK/mirror"
    cat > "$WORK/mirror.toml" <<TOML
replication_source = "$(hn_svr primary)/siteinfo.json"
replication_authentication = "privatekey:300:TEST/REPL-HANDLED"
replication_private_key = "$WORK/handled-repl.pk8"
TOML
    t0=$(date +%s%N)
    handled_start mirror "$HANDLED" 2651 8051 "$WORK/mirror.toml" > /dev/null
    last=$(printf 'BULK-%07d' "$n")
    { echo "server 127.0.0.1:2651"; echo "await TEST/$last 1 https://example.org/landing/${last,,} 1800000"; } | hs_tool > /dev/null \
      || { tail "$WORK/mirror.err" >&2; die "dump into handled"; }
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  echo "RESULT dump: $N1 handles in ${times[0]} ms, $N2 handles in ${times[1]} ms (handled mirror start to last handle readable); marginal $(rate "${times[@]}") handles/s"
  lag_samples 127.0.0.1:2641 127.0.0.1:2651 "$ADMIN"
  ;;
*) die "usage: $0 handled-to-hn|hn-to-handled path/to/handled" ;;
esac
