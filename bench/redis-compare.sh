#!/bin/bash
# redis-compare.sh - E1 and E2 of docs/PERFORMANCE.md done by Redis 7 on this machine,
# for docs/PERFORMANCE.md: the same work as floe-bench's runs, with
# redis-benchmark's pipelined SADD (find-or-put: 1 added, 0 present) and
# SISMEMBER (find) over 16 connections.
#
#   bench/redis-compare.sh [RUNS]    (default 3; logs to $OUT, default /tmp/redis-compare)
#
# Redis: $REDIS/bin/redis-server and redis-benchmark (bench/redis-bundle.sh
# makes that folder), or the installed ones when $REDIS is unset.
#   E1: members from a keyspace of 2^24; the set is first filled to half of
#       it (0.69 x 2^24 random SADDs), so about half of E1's SADDs find their
#       member present; 16 connections x 64 commands in flight (-P 64),
#       redis-benchmark with 4 client threads.
#   E2: one SADD per request, one in flight, 16 connections: latency.
set -u
RUNS=${1:-3}
O=${OUT:-/tmp/redis-compare}
mkdir -p "$O"
if [ -n "${REDIS:-}" ]; then
    export LD_LIBRARY_PATH=$REDIS/lib
    SRV=$REDIS/bin/redis-server BENCH=$REDIS/bin/redis-benchmark CLI=$REDIS/bin/redis-cli
else
    SRV=redis-server BENCH=redis-benchmark CLI=redis-cli
fi
PORT=${REDIS_PORT:-7499}
KEYSPACE=16777216
$SRV --port $PORT --save '' --appendonly no --io-threads 1 >"$O/redis-server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
for _ in $(seq 50); do $CLI -p $PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
"$SRV" --version | tee "$O/version.txt"
B() { $BENCH -p $PORT --threads 4 "$@" 2>&1 | tr '\r' '\n' | grep -v "rps=" ; }
B -c 16 -P 64 -n 11600000 -r $KEYSPACE -q sadd e1 __rand_int__ >"$O/preload.log"
echo "preloaded: $($CLI -p $PORT scard e1) of $KEYSPACE members"
for run in $(seq "$RUNS"); do
    echo "E1 SADD run $run: $(B -c 16 -P 64 -n 10000000 -r $KEYSPACE -q sadd e1 __rand_int__ | tail -1)"
    echo "E1 SISMEMBER run $run: $(B -c 16 -P 64 -n 10000000 -r $KEYSPACE -q sismember e1 __rand_int__ | tail -1)"
    echo "E2 SADD run $run: $(B -c 16 -P 1 -n 400000 -r $KEYSPACE --csv sadd e2 __rand_int__ | tail -1)"
done | tee "$O/runs.log"
echo "E2 columns: test, rps, avg, min, p50, p95, p99, max (ms)"
