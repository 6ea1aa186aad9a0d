#!/usr/bin/env bash
# A second `make` with nothing changed runs nothing: no object deleted as an intermediate
# file and rebuilt, no phony step that always prints. Run after `make all`, as
# `make test-install` does.
set -euo pipefail
cd "$(dirname "$0")/../.."
MAKE=${MAKE:-make}
out=$($MAKE --no-print-directory -n all 2>&1 | grep -v "Nothing to be done for 'all'") || true
if [ -n "$out" ]; then
    echo "no-rebuild: FAIL: after a build, make -n all would still run:" >&2
    echo "$out" | head -20 >&2
    exit 1
fi
if ! $MAKE --no-print-directory -q all; then
    echo "no-rebuild: FAIL: make -q all says something is out of date" >&2
    exit 1
fi
echo "no-rebuild: ok: after a build, make -n all has nothing to run and make -q all exits 0"
