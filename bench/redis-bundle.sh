#!/bin/bash
# redis-bundle.sh - Debian's Redis 7 (redis-server, redis-benchmark, redis-cli)
# as plain files, for GPU hosts where nothing can be installed: the
# comparison runs of docs/PERFORMANCE.md use the same Redis on both machines.
#
#   bench/redis-bundle.sh [DIR]     (default DIR: redis-bundle; run on Debian 12)
#
# DIR/bin holds the programs, DIR/lib the libraries Ubuntu 24.04 lacks
# (jemalloc, lzf, libatomic); run them as
#   LD_LIBRARY_PATH=DIR/lib DIR/bin/redis-server --port 7499 --save '' --appendonly no
set -eu
dir=${1:-redis-bundle}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download redis-server redis-tools libjemalloc2 liblzf1 libatomic1 >/dev/null)
mkdir -p "$dir/bin" "$dir/lib"
for deb in "$work"/*.deb; do
    dpkg-deb -x "$deb" "$work/root"
done
cp "$work/root/usr/bin/redis-check-rdb" "$dir/bin/redis-server" # one binary: it acts as the server by its name
cp "$work/root/usr/bin/redis-benchmark" "$work/root/usr/bin/redis-cli" "$dir/bin/"
cp -L "$work"/root/usr/lib/x86_64-linux-gnu/{libjemalloc.so.2,liblzf.so.1,libatomic.so.1} "$dir/lib/"
LD_LIBRARY_PATH="$dir/lib" "$dir/bin/redis-server" --version
