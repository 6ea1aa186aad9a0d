#!/usr/bin/env bash
# README.md shows examples/hello.c: the listing must be the file, byte for byte.
set -euo pipefail
cd "$(dirname "$0")/../.."
listing=$(mktemp)
trap 'rm -f "$listing"' EXIT
# the first ```c block after the line that names examples/hello.c
awk '/examples\/hello\.c/ { named = 1 }
     named && !inside && /^```c$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside' README.md > "$listing"
if [ ! -s "$listing" ]; then
    echo "readme-hello: FAIL: no \`\`\`c block after a mention of examples/hello.c in README.md" >&2
    exit 1
fi
if ! diff -u examples/hello.c "$listing" >&2; then
    echo "readme-hello: FAIL: README.md's listing differs from examples/hello.c (diff above: - file, + README)" >&2
    exit 1
fi
echo "readme-hello: ok: README.md's listing is examples/hello.c ($(wc -l < examples/hello.c) lines)"
