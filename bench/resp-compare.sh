#!/bin/bash
# resp-compare.sh - floed's Redis protocol port against Redis 7, the same
# redis-benchmark commands on both, runs taking turns (docs/PERFORMANCE.md,
# "The Redis protocol port"):
#
#   bench/resp-compare.sh [RUNS]    (default 3; logs to $OUT, default /tmp/resp-compare)
#
# floed: $FLOED (default bundle/floed) started with --resp-port and
# $FLOED_ARGS; Redis: $REDIS/bin (bench/redis-bundle.sh makes that folder),
# or the installed programs when $REDIS is unset.  The commands:
#   R1: redis-benchmark -P 64 -c 16 -r 1000000000 -n 10000000 sadd s __rand_int__
#       (one client thread: issue 45's command); the same with 512 commands in flight on
#       each connection (-P 512); and PING with -P 64, which no table answers: the
#       ceiling of the client and the protocol's round trips
#   R2: one SADD per request, one in flight, 16 connections (-P 1 -c 16): latency
# A fresh set for each run (DEL s first).
set -u
RUNS=${1:-3}
O=${OUT:-/tmp/resp-compare}
mkdir -p "$O"
if [ -n "${REDIS:-}" ]; then
    export LD_LIBRARY_PATH=$REDIS/lib
    SRV=$REDIS/bin/redis-server BENCH=$REDIS/bin/redis-benchmark CLI=$REDIS/bin/redis-cli
else
    SRV=redis-server BENCH=redis-benchmark CLI=redis-cli
fi
FLOED=${FLOED:-bundle/floed}
RPORT=${REDIS_PORT:-7499}
$SRV --port $RPORT --save '' --appendonly no --io-threads 1 >"$O/redis-server.log" 2>&1 &
rpid=$!
rm -f "$O/resp-port"
$FLOED --port 0 --resp-port 0 --resp-port-file "$O/resp-port" --log-level warn ${FLOED_ARGS:-} >"$O/floed.log" 2>&1 &
fpid=$!
trap 'kill $rpid $fpid 2>/dev/null; wait $rpid $fpid 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$O/resp-port" ] && $CLI -p $RPORT ping >/dev/null 2>&1 && break; sleep 0.1; done
FPORT=$(cat "$O/resp-port")
"$SRV" --version | tee "$O/version.txt"
echo "floed's RESP port $FPORT: $($CLI -p $FPORT info server | tr -d '\r' | grep -E 'floe_version|backend|gpu:' | tr '\n' ' ')" |
    tee -a "$O/version.txt"
# the summary line of a -q run, or the csv line of a --csv run
B() { $BENCH "$@" 2>&1 | tr '\r' '\n' | grep -v "rps=" | tail -1; }
for run in $(seq "$RUNS"); do
    for who in redis floed; do
        P=$RPORT
        [ $who = floed ] && P=$FPORT
        $CLI -p $P del s >/dev/null
        echo "R1 $who run $run: $(B -p $P -P 64 -c 16 -r 1000000000 -n 10000000 -q sadd s __rand_int__) (scard $($CLI -p $P scard s))"
        $CLI -p $P del s >/dev/null
        echo "R1 -P 512 $who run $run: $(B -p $P -P 512 -c 16 -r 1000000000 -n 10000000 -q sadd s __rand_int__)"
        echo "R1 ping $who run $run: $(B -p $P -P 64 -c 16 -n 10000000 -q ping)"
        $CLI -p $P del s >/dev/null
        echo "R2 $who run $run: $(B -p $P -P 1 -c 16 -r 1000000000 -n 400000 --csv sadd s __rand_int__)"
    done
done | tee "$O/runs.log"
echo "R2 columns: test, rps, avg, min, p50, p95, p99, max (ms)"
