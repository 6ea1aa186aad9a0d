#!/usr/bin/env bash
# shards-compare.sh - E1 against a table partitioned over 1, 2 and 3 floed on
# this host (docs/PERFORMANCE.md, "E1 over several floed"): floed processes on
# free ports, then the same floe-bench run against their list; the counts
# alternate (1, 2, 3, 1, 2, 3, ...) so that drift on a noisy machine falls on
# all of them.  Prints each run's keys/s and the median of each count.
#
#   bench/shards-compare.sh [RUNS] [COUNTS]     e.g. bench/shards-compare.sh 3 "1 2 3"
#
# Environment: FLOED, FLOE_BENCH (binaries), BACKEND (cpu), BENCH_ARGS (the
# floe-bench run; default E1 on the 2-core machine's scale).  Run from the
# repository root.
set -euo pipefail
runs=${1:-3}
counts=${2:-"1 2 3"}
floed=${FLOED:-build/rel/floed}
bench=${FLOE_BENCH:-build/rel/floe-bench}
backend=${BACKEND:-cpu}
args=${BENCH_ARGS:-"-t 2 -c 8 -P 4 -k 64K --dup-ratio 0.5 --key-bits 40 -n 60"}
dir=$(mktemp -d /tmp/floe-shards-XXXXXX)
pids=()

stop_all() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
}
cleanup() {
    stop_all
    rm -rf "$dir"
}
trap cleanup EXIT

# Starts n floed; sets list to their floe:// list.
start() {
    local n=$1 i
    list=
    for i in $(seq "$n"); do
        rm -f "$dir/port$i"
        "$floed" --port 0 --port-file "$dir/port$i" --backend "$backend" --log-level warn &
        pids+=($!)
    done
    for i in $(seq "$n"); do
        for _ in $(seq 400); do # up to 20 s
            grep -qE '^[1-9][0-9]*$' "$dir/port$i" 2>/dev/null && break
            sleep 0.05
        done
        grep -qE '^[1-9][0-9]*$' "$dir/port$i" 2>/dev/null || { echo "shards-compare.sh: floed $i did not start" >&2; exit 1; }
        list="$list${list:+,}127.0.0.1:$(cat "$dir/port$i")"
    done
    list="floe://$list"
}

declare -A got
for r in $(seq "$runs"); do
    for n in $counts; do
        start "$n"
        # shellcheck disable=SC2086 # BENCH_ARGS is words
        out=$("$bench" -s "$list" --create --backend "$backend" --quiet $args)
        echo "$out" | grep -q '^check    ok' || { echo "$out"; echo "shards-compare.sh: a run failed" >&2; exit 1; }
        rate=$(echo "$out" | awk '$1 == "insert" { print $5; exit }')
        echo "run $r, $n floed: $rate keys/s"
        got[$n]="${got[$n]:-} $rate"
        stop_all
    done
done
for n in $counts; do
    # shellcheck disable=SC2086
    median=$(printf '%s\n' ${got[$n]} | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    echo "$n floed: median $median keys/s (runs:${got[$n]})"
done
