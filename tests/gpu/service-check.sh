#!/bin/bash
# service-check.sh BUNDLE - the service part of device-check.sh on a GPU host: a floed whose
# tables live on the GPU, with a data dir, snapshot rules and /metrics:
#   - `floe info` and /metrics name the GPU and its memory;
#   - SET and TREE tables on the GPU are saved by save-every while floed serves (the COPY of
#     a GPU table), then floed is killed with SIGKILL;
#   - after the restart every key and vector is back (counts and lookups), no other is present,
#     and the tables are on the GPU again.
# Prints what it checked; exit 1 at the first difference.  BACKEND=cpu tries the script on a
# host without a GPU (the GPU checks are then skipped).  PARTS=N makes the SET in N parts
# (floe create --parts N: over the host's GPUs) and checks that it comes back in N parts.
set -u
B=${1:-bundle}
BACKEND=${BACKEND:-gpu}
D=$(mktemp -d /tmp/floe-svc.XXXXXX)
fail() { echo "service-check: FAIL: $*"; [ -f "$D/floed.log" ] && tail -20 "$D/floed.log"; exit 1; }
N=10000000
start() {
    rm -f "$D/port"
    "$B/floed" --port 0 --port-file "$D/port" --data-dir "$D/data" --save-every 1 --metrics-port "$MPORT" \
        --backend $BACKEND >>"$D/floed.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do [ -s "$D/port" ] && break; kill -0 $pid 2>/dev/null || fail "floed exited at start"; sleep 0.1; done
    [ -s "$D/port" ] || fail "floed did not start"
    export FLOE_SERVER=127.0.0.1:$(cat "$D/port")
}
MPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start
"$B/floe" create keys --key-bits 40 --capacity 16M ${PARTS:+--parts $PARTS} >/dev/null || fail "create keys"
seq 1 $N >"$D/keys.txt"
"$B/floe" load keys "$D/keys.txt" >/dev/null 2>&1 || fail "load keys"
"$B/floe" create vec --kind tree --words 8 --capacity 1M >/dev/null || fail "create vec"
for i in $(seq 1 200); do echo "$i,2,3,4,5,6,7,$((i * 3))"; done >"$D/vec.txt"
"$B/floe" load vec "$D/vec.txt" >/dev/null 2>&1 || fail "load vec"
"$B/floe" info >"$D/info.txt" || fail "floe info"
[ "$BACKEND" != gpu ] || grep -q '^gpu: .*H[12]00' "$D/info.txt" || fail "floe info names no GPU: $(grep '^gpu' "$D/info.txt")"
grep -E '^(backend|gpu|gpu-memory)' "$D/info.txt"
python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$MPORT/metrics', timeout=10).read().decode())" \
    >"$D/metrics.txt" || fail "GET /metrics"
[ "$BACKEND" != gpu ] || grep -q 'floe_gpu_memory_total_bytes' "$D/metrics.txt" || fail "/metrics has no floe_gpu_memory_total_bytes"
grep -E '^floe_(gpu_memory_[a-z]*_bytes|table_keys)' "$D/metrics.txt"
saved() { # both tables saved by save-every since their last change (info: changes=0)
    [ "$("$B/floe" info | grep -cE '^  (keys|vec) .* changes=0 ')" = 2 ]
}
for _ in $(seq 300); do saved && break; sleep 0.1; done
saved || fail "no snapshots by save-every: $("$B/floe" info | grep changes=)"
grep 'snapshot of table' "$D/floed.log" | sed 's/^/    /'
kill -KILL $pid; wait $pid 2>/dev/null # no save at shutdown: the rules' snapshots are all there is
start
"$B/floe" stats keys >"$D/stats.txt" || fail "stats after restart"
grep -q "^keys: $N\$" "$D/stats.txt" || fail "after the restart: $(grep '^keys' "$D/stats.txt"), not $N"
grep -q "^backend: $BACKEND" "$D/stats.txt" || fail "after the restart the table is not on $BACKEND"
[ -z "${PARTS:-}" ] || grep -q "^parts: $PARTS\$" "$D/stats.txt" || fail "after the restart: $(grep '^parts' "$D/stats.txt"), not $PARTS"
[ -z "${PARTS:-}" ] || grep -E '^part ' "$D/stats.txt" | sed 's/^/    /'
out=$("$B/floe" find keys 1 $((N / 2)) $N $((N + 1)) 1099511627775 | head -5 | tr '\n' ' ')
[ "$out" = "1 PRESENT $((N / 2)) PRESENT $N PRESENT $((N + 1)) ABSENT 1099511627775 ABSENT " ] || fail "find after restart: $out"
"$B/floe" find vec 1,2,3,4,5,6,7,3 200,2,3,4,5,6,7,600 201,2,3,4,5,6,7,603 >"$D/vfind.txt" || fail "find vec"
[ "$(grep -c ' PRESENT' "$D/vfind.txt")" = 2 ] && grep -q '^201,.* ABSENT' "$D/vfind.txt" || fail "vectors after restart: $(cat "$D/vfind.txt")"
"$B/floe" stats vec | grep -q '^vectors: 200$' || fail "vec has not 200 vectors after the restart"
kill -TERM $pid; wait $pid || fail "floed exit $? on SIGTERM"
grep -E 'loaded table' "$D/floed.log" | sed 's/^/    /'
rm -rf "$D"
echo "service-check: ok: GPU tables saved by save-every while serving, killed with SIGKILL, all $N keys and 200 vectors back ($BACKEND${PARTS:+, the SET in $PARTS parts})"
