#!/usr/bin/env bash
# run-local.sh - floe-bench against a floed of its own: the CPU engine on a free
# port (--port 0 --port-file, as the integration tests start it), stopped at the
# end.  Fails when a floe-bench run fails (a wrong answer, FULL, an error).
#
#   bench/run-local.sh bench   `make bench`: an E1-like and an E2-like run, reports printed
#   bench/run-local.sh test    `make test-bench`: short checked runs of SET, MAP and TREE
#                              tables, and the exit codes of a failing and a mistyped run
#
# Run from the repository root; FLOED and FLOE_BENCH name other binaries.
set -euo pipefail
mode=${1:-bench}
floed=${FLOED:-build/rel/floed}
bench=${FLOE_BENCH:-build/rel/floe-bench}
dir=$(mktemp -d /tmp/floe-bench-XXXXXX)
pid=

cleanup() {
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT

"$floed" --port 0 --port-file "$dir/port" --backend cpu --log-level warn &
pid=$!
for _ in $(seq 400); do # up to 20 s
    grep -qE '^[1-9][0-9]*$' "$dir/port" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { echo "run-local.sh: floed exited before listening" >&2; exit 1; }
    sleep 0.05
done
grep -qE '^[1-9][0-9]*$' "$dir/port" 2>/dev/null || { echo "run-local.sh: floed did not start listening" >&2; exit 1; }
server=floe://127.0.0.1:$(cat "$dir/port")

run() {
    echo "+ floe-bench $*"
    "$bench" -s "$server" "$@"
    echo
}

# Runs floe-bench and requires exit code $1 (its output is not shown).
expect_exit() {
    local want=$1 got=0
    shift
    "$bench" -s "$server" "$@" >"$dir/out" 2>&1 || got=$?
    if [ "$got" != "$want" ]; then
        echo "run-local.sh: floe-bench $* exited $got, expected $want:" >&2
        cat "$dir/out" >&2
        exit 1
    fi
    echo "ok: floe-bench $* exits $want"
}

case $mode in
bench)
    # E1-like: find-or-put of 64 Ki 40-bit keys per request, half of them already present,
    # 4 in flight per connection (E1 in docs/PERFORMANCE.md has 16 connections; this machine has few cores)
    run --create --table e1 --key-bits 40 --connections 4 --keys-per-request 64K --pipeline 4 \
        --dup-ratio 0.5 --capacity 64M --duration 3 --quiet
    # E2-like: one key per request, one in flight, 16 connections
    run --create --table e2 --key-bits 40 --threads 2 --connections 8 --keys-per-request 1 \
        --pipeline 1 --dup-ratio 0.5 --duration 3 --quiet
    ;;
test)
    run --create --table t_set --key-bits 40 --threads 2 --connections 2 --keys-per-request 1000 \
        --pipeline 4 --ratio 4:1:0 --dup-ratio 0.5 --duration 1 --quiet
    run --create --table t_hot --distribution hotset --hotset-keys 64 --connections 4 \
        --keys-per-request 50 --pipeline 2 --ratio 3:1:0 --requests 300 --quiet
    run --create --table t_map --kind map --value-bytes 4 --connections 4 --keys-per-request 10 \
        --rate 2000 --duration 0.5 --dup-ratio 0.3 --distribution sequential --quiet
    run --create --table t_tree --kind tree --words 16 --connections 4 --keys-per-request 2048 \
        --pipeline 2 --ratio 3:1:0 --dup-ratio 0.5 --capacity 4M --duration 1 --quiet
    run --create --table t_ordered --kind ordered --key-bits 40 --connections 4 --keys-per-request 32 \
        --pipeline 4 --ratio 2:1:0:1:1 --dup-ratio 0.5 --duration 1 --quiet
    run --create --table t_ordered_keys --kind ordered --value-bytes 0 --connections 2 --keys-per-request 100 \
        --ratio 2:0:1:1:1 --requests 100 --quiet
    expect_exit 2 --create --table t_set_succ --ratio 1:0:0:1 --quiet
    "$bench" -s "$server" --create --table t_json --connections 2 --keys-per-request 100 \
        --ratio 2:1:1 --requests 50 --json --quiet >"$dir/json"
    grep -q '"ok": true}$' "$dir/json" || { echo "run-local.sh: --json run:" >&2; cat "$dir/json" >&2; exit 1; }
    echo "ok: floe-bench --json with erases reports ok"
    expect_exit 1 --create --table t_full --capacity 1024 --no-grow --keys-per-request 1000 --requests 5 --quiet
    expect_exit 1 --table t_absent --duration 1 --quiet
    expect_exit 2 --create --ratio 1:1 --quiet
    ;;
*)
    echo "usage: bench/run-local.sh bench|test" >&2
    exit 2
    ;;
esac
