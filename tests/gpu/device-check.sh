#!/bin/bash
# device-check.sh - the GPU checks, run on a GPU host from the repository
# root after `make device-bundle` (the bundle/ folder travels with it):
#
#   tests/gpu/device-check.sh [tests|sanitize|itests|service|load|k1|s1|g1|t1|membw|e1|e1tls|mc|redis|gpus]...
#   (default: all but gpus, which wants a host of several GPUs)
#
# FLOED_ARGS adds flags to the e1 and mc steps' floed (e.g. --io-threads 8); MC_MODEL,
# MC_WORKERS and MC_ARGS change the mc step's floe-mc runs; SANITIZE_SEED is the seed of the
# sanitize step's runs (default: the time).
# Logs go to $OUT (default /tmp/floe-device), one file per step; a summary
# line per step goes to stdout.  Exit 1 if any step failed.
set -u
B=${BUNDLE:-bundle}
O=${OUT:-/tmp/floe-device}
mkdir -p "$O"
steps=${*:-tests sanitize itests service load k1 s1 g1 t1 membw e1 e1tls mc redis}
rc=0
step() { # name, then the command
    local name=$1; shift
    local t0=$(date +%s.%N)
    "$@" >"$O/$name.log" 2>&1
    local r=$?
    printf '%-10s rc=%d  %.1fs  %s\n' "$name" $r "$(awk "BEGIN{print $(date +%s.%N) - $t0}")" "$(tail -1 "$O/$name.log")"
    [ $r -eq 0 ] || rc=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$O/gpu.txt"
lscpu >"$O/cpu.txt" 2>&1
for s in $steps; do
    case $s in
    tests)
        step selftest "$B/layout_selftest"
        step gpu-tests "$B/floe-gpu-tests" ;;
    sanitize) # line-buffered, so that a caller's time limit leaves the log so far; SANITIZE_SEED
        # repeats a run (racecheck takes 2 minutes on some seeds, more than 5 on others).  The tests
        # ask for arrays no device has on purpose (a growth that must answer FULL): the sanitizers
        # would count those cudaMalloc failures as errors, while the code checks every CUDA call's
        # status and the tests check what it answers, so API errors are not reported here.
        seed=${SANITIZE_SEED:-$(date +%s)}
        step memcheck stdbuf -oL compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
            "$B/floe-gpu-tests" --small --seed "$seed"
        step racecheck stdbuf -oL compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 1 \
            "$B/floe-gpu-tests" --small --seed "$seed" ;;
    itests) # the daemon's integration tests against a floed whose tables run on the GPU
        # (the fault-injection walk starts floed hundreds of times: it runs in make test, on the CPU)
        step itests env FLOE_BACKEND=gpu CK_EXCLUDE_TAGS=faults FLOED="$B/floed" FLOE_CLI="$B/floe" \
            FLOE_MC="$B/floe-mc" FLOE_BENCH="$B/floe-bench" FLOE_MC_PETERSON="$B/libmc_peterson.so" "$B/floe-itests" ;;
    service) # floed on the GPU as a service: info and /metrics name the GPU, periodic snapshots
        # of GPU tables (a COPY while serving), kill -9, and every key back after the restart
        step service bash tests/gpu/service-check.sh "$B" ;;
    load) # the CLI loads 10^8 random 64-bit keys into a GPU table through floed, 3 times
        head -c 800000000 /dev/urandom >/tmp/floe-keys.bin
        rm -f /tmp/floe-port
        "$B/floed" --port 0 --port-file /tmp/floe-port --log-level info >"$O/floed.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do [ -s /tmp/floe-port ] && break; sleep 0.1; done
        S=127.0.0.1:$(cat /tmp/floe-port)
        for run in 1 2 3; do
            "$B/floe" -H $S create big --capacity 100000000 --backend gpu >/dev/null
            step load$run "$B/floe" -H $S load big /tmp/floe-keys.bin --binary --batch ${LOAD_BATCH:-1048576}
            "$B/floe" -H $S stats big >"$O/stats$run.log" 2>&1
            "$B/floe" -H $S drop big >/dev/null
        done
        # the same load on the CPU engine of this host, for comparison
        "$B/floe" -H $S create bigcpu --capacity 100000000 --backend cpu >/dev/null
        step load-cpu "$B/floe" -H $S load bigcpu /tmp/floe-keys.bin --binary --batch ${LOAD_BATCH:-1048576}
        "$B/floe" -H $S drop bigcpu >/dev/null
        kill -TERM $pid; wait $pid
        rm -f /tmp/floe-keys.bin ;;
    k1)
        step k1 "$B/floe-k1-gpu" --runs 3 ;;
    s1) # K1 with S1: its keys in a static table beside it (docs/PERFORMANCE.md)
        step s1 "$B/floe-k1-gpu" --static --runs 3 ;;
    g1) # G1: 2^30 keys into growing and sized SET and MAP tables through the GPU backend
        step g1 "$B/floe-k1-gpu" --grow --runs 3 ;;
    membw) # how fast the host copies memory, by threads (E1's copies share it)
        step membw "$B/floe-membw" ;;
    e1) # E1 and E2 (docs/PERFORMANCE.md) through a GPU floed (floe-bench), and E1 in process (floe-e1-local)
        rm -f /tmp/floe-port
        "$B/floed" --port 0 --port-file /tmp/floe-port --log-level warn ${FLOED_ARGS:-} >"$O/floed-e1.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do [ -s /tmp/floe-port ] && break; sleep 0.1; done
        S=floe://127.0.0.1:$(cat /tmp/floe-port)
        # E1: 16 connections (T client threads x C each), 4 x 64 Ki keys in flight on each, half
        # present; --requests sizes the table for every key sent, so no rebuild lands in a run
        E1="-P 4 -k 64K --dup-ratio 0.5 --key-bits 40 --create --backend gpu -n ${E1_REQUESTS:-500} -q"
        for run in 1 2 3; do
            step e1-$run bash -c "time $B/floe-bench -s $S -t ${E1_THREADS:-8} -c ${E1_CONNS:-2} $E1"
        done
        ps -L -o tid,comm,time -p $pid >"$O/e1-floed-threads.log"
        step e1-t16 bash -c "time $B/floe-bench -s $S -t 16 -c 1 $E1"
        step e1-t4 bash -c "time $B/floe-bench -s $S -t 4 -c 4 $E1"
        step e1-cpu bash -c "time $B/floe-bench -s $S -t 8 -c 2 ${E1/--backend gpu/--backend cpu}"
        # E2: one key per request, one in flight, 16 connections
        for run in 1 2 3; do
            step e2-$run "$B/floe-bench" -s $S -t 4 -c 4 -P 1 -k 1 --dup-ratio 0.5 --key-bits 40 --create \
                --backend gpu --capacity 64M --warmup 2 -d ${E2_SECONDS:-8} -q
        done
        kill -TERM $pid; wait $pid
        step e1-local "$B/floe-e1-local" --backend gpu --runs 3
        # the same with batches of the size floed's merging makes of E1's requests
        step e1-local-1m "$B/floe-e1-local" --backend gpu --runs 3 --keys 1048576 --batches 250
        # and with the keys and answers in the backend's pinned memory: no staging copy on the host
        step e1-local-pinned "$B/floe-e1-local" --backend gpu --runs 3 --keys 1048576 --batches 250 --pinned ;;
    e1tls) # E1 over TLS 1.3 next to plain E1, on one GPU floed with both ports (runs alternate)
        C=/tmp/floe-tls-certs; rm -rf $C; mkdir -p $C
        (cd $C && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt \
            -days 2 -subj /CN=ca && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout s.key \
            -out s.csr -subj /CN=localhost && printf 'subjectAltName=IP:127.0.0.1\n' >san && openssl x509 -req \
            -in s.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out s.crt -days 2 -extfile san) >"$O/certs.log" 2>&1
        rm -f /tmp/floe-port /tmp/floe-tlsport
        "$B/floed" --port 0 --port-file /tmp/floe-port --tls-port 0 --tls-port-file /tmp/floe-tlsport \
            --tls-cert-file $C/s.crt --tls-key-file $C/s.key --log-level warn ${FLOED_ARGS:-} >"$O/floed-e1tls.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do [ -s /tmp/floe-tlsport ] && break; sleep 0.1; done
        E1="-t ${E1_THREADS:-8} -c ${E1_CONNS:-2} -P 4 -k 64K --dup-ratio 0.5 --key-bits 40 --create --backend gpu -n ${E1_REQUESTS:-500} -q"
        for run in 1 2 3; do
            step e1plain-$run bash -c "time $B/floe-bench -s floe://127.0.0.1:$(cat /tmp/floe-port) $E1"
            step e1tls-$run bash -c "time $B/floe-bench -s floes://127.0.0.1:$(cat /tmp/floe-tlsport) --tls-ca-file $C/ca.crt $E1"
        done
        E2="-t 4 -c 4 -P 1 -k 1 --dup-ratio 0.5 --key-bits 40 --create --backend gpu --capacity 64M --warmup 2 -d ${E2_SECONDS:-8} -q"
        for run in 1 2 3; do
            step e2plain-$run "$B/floe-bench" -s floe://127.0.0.1:$(cat /tmp/floe-port) $E2
            step e2tls-$run "$B/floe-bench" -s floes://127.0.0.1:$(cat /tmp/floe-tlsport) --tls-ca-file $C/ca.crt $E2
        done
        ps -L -o tid,comm,time -p $pid >"$O/e1tls-floed-threads.log"
        kill -TERM $pid; wait $pid ;;
    mc) # floe-mc on a GPU floed: puzzle:3x4 (239,500,800 states) with MC_WORKERS workers, 3 runs
        rm -f /tmp/floe-port
        "$B/floed" --port 0 --port-file /tmp/floe-port --log-level warn ${FLOED_ARGS:-} >"$O/floed-mc.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do [ -s /tmp/floe-port ] && break; sleep 0.1; done
        S=floe://127.0.0.1:$(cat /tmp/floe-port)
        for run in 1 2 3; do
            step mc-$run bash -c "time $B/floe-mc --model ${MC_MODEL:-puzzle:3x4} --server $S --workers ${MC_WORKERS:-16} --backend gpu ${MC_ARGS:-}"
        done
        kill -TERM $pid; wait $pid ;;
    gpus) # scaling over the host's GPUs (docs/PERFORMANCE.md, "Several GPUs"): the links' rates, K1 on one device, then one
        # K1 process per device at once; E1 in process (a table in g parts over g devices, its batches
        # split on the devices: keys in pinned memory) and through floed with 1, 2, ... devices: the
        # default (each table whole on one device) and, past one, every table in g parts
        # (--partitions g); floe-mc likewise; then, on the default floed of all devices, as many
        # clients as devices at once, each with a table of its own (placed one a device)
        N=$(nvidia-smi -L | wc -l)
        step links "$B/floe-links-gpu" # what the host's links carry, one device and all at once
        step k1-one env CUDA_VISIBLE_DEVICES=0 "$B/floe-k1-gpu" --runs 3
        t0=$(date +%s.%N)
        for d in $(seq 0 $((N - 1))); do
            (CUDA_VISIBLE_DEVICES=$d "$B/floe-k1-gpu" --runs 3 >"$O/k1-dev$d.log" 2>&1
             echo "device $d: $(awk "BEGIN{print $(date +%s.%N) - $t0}") s after the start" >>"$O/k1-dev$d.log") &
        done
        wait
        tail -n 4 "$O"/k1-dev*.log
        g=1
        while [ $g -le $N ]; do
            step e1-local-g$g "$B/floe-e1-local" --backend gpu --gpus $g --runs 3 --keys 1048576 --batches 1000 --pinned
            g=$((g * 2))
        done
        E1="-P 4 -k 64K --dup-ratio 0.5 --key-bits 40 --create --backend gpu -n ${E1_REQUESTS:-500} -q"
        g=1
        while [ $g -le $N ]; do
            for how in whole parts; do
                [ $how = parts ] && [ $g = 1 ] && continue
                L=g$g-$how
                rm -f /tmp/floe-port
                "$B/floed" --port 0 --port-file /tmp/floe-port --log-level info --gpus $(seq -s, 0 $((g - 1))) \
                    $([ $how = parts ] && echo --partitions $g) ${FLOED_ARGS:-} >"$O/floed-$L.log" 2>&1 &
                pid=$!
                for _ in $(seq 100); do [ -s /tmp/floe-port ] && break; sleep 0.1; done
                S=floe://127.0.0.1:$(cat /tmp/floe-port)
                for run in 1 2 3; do
                    step e1-$L-$run bash -c "time $B/floe-bench -s $S -t ${E1_THREADS:-8} -c ${E1_CONNS:-2} $E1"
                done
                for run in 1 2 3; do
                    step mc-$L-$run bash -c "time $B/floe-mc --model ${MC_MODEL:-puzzle:3x4} --server $S --workers ${MC_WORKERS:-16} --backend gpu"
                done
                "$B/floe" -H $S create parts --capacity 1000000 >/dev/null && "$B/floe" -H $S stats parts >"$O/stats-$L.log" 2>&1
                ps -L -o tid,comm,time -p $pid >"$O/e1-$L-threads.log"
                if [ $how = whole ] && [ $g = $N ] && [ $N -gt 1 ]; then # N clients at once, a table each
                    for run in 1 2 3; do
                        for i in $(seq 0 $((N - 1))); do
                            "$B/floe" -H $S create spread$i --capacity 600M --backend gpu >/dev/null
                        done
                        "$B/floe" -H $S info >"$O/spread-$run-info.log" 2>&1
                        ps=
                        for i in $(seq 0 $((N - 1))); do
                            "$B/floe-bench" -s $S -t 4 -c 2 ${E1/--create --backend gpu/} --table spread$i \
                                >"$O/spread-$run-$i.log" 2>&1 &
                            ps="$ps $!"
                        done
                        wait $ps
                        for i in $(seq 0 $((N - 1))); do "$B/floe" -H $S drop spread$i >/dev/null; done
                        echo "spread-$run: $N clients at once, $(awk '/^insert/ {s += $5} END {printf "%.1f M keys/s", s / 1e6}' \
                            "$O"/spread-$run-*.log) together"
                    done
                fi
                kill -TERM $pid; wait $pid
            done
            g=$((g * 2))
        done ;;
    redis) # the same work done by Redis 7 (bench/redis-bundle.sh's files, carried as redis-bundle/)
        step redis env REDIS=${REDIS:-redis-bundle} OUT="$O/redis" bash bench/redis-compare.sh 3 ;;
    t1) # the tree benchmark, growing tables (the default) for 4, 8, 16 values per word, from the
        # run's size and from 1 Mi; then a fixed table under a tight memory budget
        for d in 4 8 16; do
            step t1-d$d "$B/floe-t1-gpu" --runs 3 --domain $d
            step t1-d$d-1m "$B/floe-t1-gpu" --runs 3 --domain $d --capacity 1M
        done
        step t1-d4-fixed "$B/floe-t1-gpu" --runs 3 --no-grow --memory 160M ;;
    esac
done
exit $rc
