#!/usr/bin/env bash
# Runs libFuzzer targets one after another (make fuzz, make test-fuzz; docs/FUZZING.md).
#
#   tests/fuzz/run.sh fuzz|smoke SECONDS TARGET...
#
# Each reads its seeds in tests/fuzz/corpus/TARGET and never writes there: new inputs go to
# build/fuzz/corpus/TARGET (fuzz: kept from run to run) or build/fuzz/smoke/TARGET (smoke:
# emptied first, so a smoke run starts from the checked-in seeds alone).  One line per target
# says execs, execs/s and coverage; any crash, leak, timeout or out-of-memory fails the run with
# the end of the log and the input that did it (build/fuzz/artifacts/TARGET/).  FUZZ_ARGS adds
# libFuzzer flags.
#
# A target runs in processes of at most FUZZ_CHUNK_SECONDS (600) each, one after another on the
# same corpus: ASan's thread registry keeps a context for every thread that ever started, in
# small mappings it never frees, and every table has a thread, so one daemon process reached
# vm.max_map_count after 48 minutes and failed inside the sanitizer (built without sanitizers,
# the same inputs leave the process's memory and mappings flat).
set -uo pipefail
cd "$(dirname "$0")/../.."
mode=$1 secs=$2
shift 2
status=0
for t in "$@"; do
    bin=build/fuzz/fuzz-$t seeds=tests/fuzz/corpus/$t
    if [ "$mode" = smoke ]; then
        corpus=build/fuzz/smoke/$t log=build/fuzz/logs/smoke-$t.log
        rm -rf "$corpus"
    else
        corpus=build/fuzz/corpus/$t log=build/fuzz/logs/$t.log
    fi
    mkdir -p "$corpus" build/fuzz/artifacts/"$t" build/fuzz/logs
    : >"$log"
    left=$secs rc=0 execs=0
    while [ "$left" -gt 0 ] && [ "$rc" -eq 0 ]; do
        run=$((left < ${FUZZ_CHUNK_SECONDS:-600} ? left : ${FUZZ_CHUNK_SECONDS:-600}))
        # -timeout: one input; -rss_limit_mb: libFuzzer's default, said here
        # shellcheck disable=SC2086
        "$bin" -max_total_time="$run" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix=build/fuzz/artifacts/"$t"/ ${FUZZ_ARGS:-} "$corpus" "$seeds" >>"$log" 2>&1
        rc=$?
        left=$((left - run))
    done
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{n += $1} END {print n + 0}')
    rate=$((execs / secs))
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
    if [ "$rc" -ne 0 ]; then
        echo "fuzz-$t: FAILED (libFuzzer exit $rc) after $execs execs; log $log:" >&2
        tail -40 "$log" >&2
        status=1
        continue
    fi
    echo "fuzz-$t: ok: $execs execs in $secs s ($rate/s), cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?} (units/bytes)"
done
exit $status
