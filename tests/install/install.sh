#!/usr/bin/env bash
# make install DESTDIR=... PREFIX=/usr, as a user of the install would check it:
#   - every file where it belongs, and nothing else;
#   - libfloe.so.0 (soname) exporting floe.h's floe_* functions and nothing else;
#   - man pages made from the --help texts;
#   - programs built with nothing but `pkg-config --cflags --libs libfloe`, and with
#     `pkg-config --static` into a static program, talking to the installed floed;
#   - the systemd unit with the installed paths, accepted by `systemd-analyze verify`;
#   - a changed floed.conf kept on reinstall and uninstall; make uninstall leaving nothing.
# Run by `make test-install` (part of `make test`) after `make all man`.
set -euo pipefail
cd "$(dirname "$0")/../.."
MAKE=${MAKE:-make}
CC=${CC:-cc}
VERSION=$($MAKE --no-print-directory -s print-VERSION) # the Makefile's, from proto/floe_wire.h
[ -n "$VERSION" ] || { echo "test-install: FAIL: make print-VERSION says nothing" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/floe-install.XXXXXX")
root=$tmp/root
floed_pid=
cleanup() {
    if [ -n "$floed_pid" ]; then
        kill "$floed_pid" 2>/dev/null || true
        wait "$floed_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
say() { echo "test-install: $*"; }
fail() {
    echo "test-install: FAIL: $*" >&2
    exit 1
}
mk() { $MAKE --no-print-directory "$@" DESTDIR="$root" PREFIX=/usr; }
installed() { (cd "$root" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort); }

# ---- make install ------------------------------------------------------------------------
say "make install DESTDIR=$root PREFIX=/usr"
mk install > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; fail "make install"; }
unit=$(cd "$root" && find . -name floed.service | sed 's|^\./||')
case "$unit" in
lib/systemd/system/floed.service | usr/lib/systemd/system/floed.service) ;;
*) fail "the unit is at '$unit', not in lib/systemd/system or usr/lib/systemd/system" ;;
esac
sort > "$tmp/want" <<EOF
etc/floe/floed.conf
$unit
usr/bin/floe
usr/bin/floe-bench
usr/bin/floe-mc
usr/include/floe/floe.h
usr/include/floe/floe_mc_model.h
usr/include/floe/floe_wire.h
usr/lib/libfloe.a
usr/lib/libfloe.so
usr/lib/libfloe.so.0
usr/lib/libfloe.so.$VERSION
usr/lib/pkgconfig/libfloe.pc
usr/sbin/floed
usr/share/man/man1/floe-bench.1
usr/share/man/man1/floe-mc.1
usr/share/man/man1/floe.1
usr/share/man/man8/floed.8
EOF
installed > "$tmp/got"
diff -u "$tmp/want" "$tmp/got" >&2 || fail "installed files differ from the list (- expected, + installed)"
say "files: $(wc -l < "$tmp/got") in place (floed in /usr/sbin, config in /etc/floe, unit in /$unit)"

lib=$root/usr/lib
[ "$(readlink "$lib/libfloe.so")" = libfloe.so.0 ] || fail "libfloe.so -> $(readlink "$lib/libfloe.so"), not libfloe.so.0"
[ "$(readlink "$lib/libfloe.so.0")" = "libfloe.so.$VERSION" ] || fail "libfloe.so.0 -> $(readlink "$lib/libfloe.so.0")"
[ -f "$lib/libfloe.so.$VERSION" ] && [ ! -L "$lib/libfloe.so.$VERSION" ] || fail "libfloe.so.$VERSION is not a file"
soname=$(readelf -d "$lib/libfloe.so.$VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libfloe.so.0 ] || fail "soname '$soname', not libfloe.so.0"
nm -D --defined-only "$lib/libfloe.so.$VERSION" | awk '{ print $NF }' > "$tmp/exports"
grep -v '^floe_[a-z0-9]' "$tmp/exports" > "$tmp/foreign" || true
[ ! -s "$tmp/foreign" ] || { head "$tmp/foreign" >&2; fail "libfloe.so exports $(wc -l < "$tmp/foreign") symbols besides floe_*"; }
for f in floe_connect floe_insert floe_find floe_close floe_batcher_add; do
    grep -qx "$f" "$tmp/exports" || fail "libfloe.so does not export $f"
done
# every export is declared in floe.h
while read -r f; do
    grep -q "\b$f\b" "$root/usr/include/floe/floe.h" || fail "libfloe.so exports $f, which floe.h does not declare"
done < "$tmp/exports"
say "libfloe.so.$VERSION: soname $soname, exports $(wc -l < "$tmp/exports") symbols, all floe_* of floe.h"

grep -q "^ExecStart=/usr/sbin/floed --config /etc/floe/floed.conf " "$root/$unit" ||
    fail "the unit's ExecStart is not /usr/sbin/floed --config /etc/floe/floed.conf: $(grep ExecStart= "$root/$unit")"
cmp -s config/floed.conf "$root/etc/floe/floed.conf" || fail "etc/floe/floed.conf is not config/floed.conf"

for m in man8/floed.8:FLOED:8 man1/floe.1:FLOE:1 man1/floe-bench.1:FLOE-BENCH:1 man1/floe-mc.1:FLOE-MC:1; do
    IFS=: read -r page title sec <<< "$m"
    f=$root/usr/share/man/$page
    grep -q "^\.TH \"\?$title\"\? \"\?$sec\"\?" "$f" || fail "$page: no .TH $title $sec line"
    grep -q "$VERSION" "$f" || fail "$page does not name version $VERSION"
    [ "$(grep -c '^\.SH' "$f")" -ge 3 ] || fail "$page has fewer than 3 sections"
done
grep -q 'data\\-dir' "$root/usr/share/man/man8/floed.8" || fail "floed.8 does not list --data-dir (help text missing?)"
say "man pages: floed(8), floe(1), floe-bench(1), floe-mc(1)"

# ---- programs built with pkg-config alone -----------------------------------------------------
# pkg-config looks into the DESTDIR: its .pc files, with the DESTDIR before every path
pc() {
    PKG_CONFIG_PATH=$root/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root \
        PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 pkg-config "$@"
}
[ "$(pc --modversion libfloe)" = "$VERSION" ] || fail "pkg-config --modversion libfloe: $(pc --modversion libfloe)"
cflags=$(pc --cflags libfloe)
libs=$(pc --libs libfloe)
slibs=$(pc --static --libs libfloe)
say "pkg-config --cflags --libs libfloe: $cflags $libs; --static --libs: $slibs"
for needed in -lprotobuf-c -lssl -lcrypto; do
    case " $slibs " in *" $needed "*) ;; *) fail "pkg-config --static --libs libfloe lacks $needed" ;; esac
done
# shellcheck disable=SC2086 # word splitting of the flags is meant
build() { # OUT SOURCE FLAGS...
    local out=$1 src=$2
    shift 2
    $CC -std=gnu11 -Wall -Wextra -Werror "$src" "$@" -o "$tmp/$out" 2> "$tmp/$out.log" ||
        { cat "$tmp/$out.log" >&2; fail "$CC $src $* -o $out"; }
}
# shellcheck disable=SC2086
{
    build client tests/install/client.c $cflags $libs
    build client-static tests/install/client.c -static $cflags $slibs
    build hello examples/hello.c $cflags $libs
    build hello-static examples/hello.c -static $cflags $slibs
}
# (ldd's output in a variable: `ldd | grep -q` fails under pipefail when grep stops reading first)
deps=$(LD_LIBRARY_PATH=$lib ldd "$tmp/client")
grep -q "libfloe.so.0 => $lib/libfloe.so.0" <<< "$deps" ||
    fail "the client does not load libfloe.so.0 from the install: $deps"
if grep -q NEEDED <<< "$(readelf -d "$tmp/client-static")"; then fail "client-static needs shared libraries"; fi
say "built client and hello against the install, shared (libfloe.so.0) and -static"

say "starting the installed floed on a free port"
"$root/usr/sbin/floed" --port 0 --port-file "$tmp/port" --log-level warn > "$tmp/floed.log" 2>&1 &
floed_pid=$!
for _ in $(seq 100); do
    [ -s "$tmp/port" ] && break
    kill -0 "$floed_pid" 2>/dev/null || { cat "$tmp/floed.log" >&2; fail "floed exited at start"; }
    sleep 0.1
done
[ -s "$tmp/port" ] || fail "floed wrote no port file in 10 s"
port=$(cat "$tmp/port")
uri=floe://127.0.0.1:$port
LD_LIBRARY_PATH=$lib "$tmp/client" "$uri" shared || fail "the client built with pkg-config --libs failed"
"$tmp/client-static" "$uri" static || fail "the client built with pkg-config --static failed"
"$root/usr/bin/floe" -H "127.0.0.1:$port" ping > /dev/null || fail "the installed floe ping"
say "floe ping with the installed CLI: ok"
# examples/hello.c talks to 127.0.0.1:7450; run it in a network namespace of its own where
# this machine allows one (unshare), so that it cannot meet another floed on the host.
if command -v unshare > /dev/null && command -v ip > /dev/null && unshare -rn true 2> /dev/null; then
    # shellcheck disable=SC2016
    out=$(unshare -rn env LD_LIBRARY_PATH="$lib" FLOED="$root/usr/sbin/floed" T="$tmp" sh -ec '
        ip link set lo up
        "$FLOED" --port 7450 --port-file "$T/port7450" --log-level warn 2> "$T/floed7450.log" &
        i=0; while [ ! -s "$T/port7450" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        "$T/hello"; "$T/hello-static"
        kill $!; wait $! || true') || fail "hello in a network namespace: $out"
    [ "$(echo "$out" | grep -c 'seen before')" = 5 ] || fail "hello's answers: $out"
    say "examples/hello.c (shared, then static) against a floed on 7450 in a network namespace: ok"
else
    say "examples/hello.c built but not run: it needs port 7450, and this machine gives no network namespace (unshare -rn, ip)"
fi
kill "$floed_pid"
wait "$floed_pid" || fail "floed exited $? on SIGTERM"
floed_pid=

# ---- the systemd unit --------------------------------------------------------------------------
if command -v systemd-analyze > /dev/null; then
    mkdir -p "$tmp/unit"
    # verify wants ExecStart's program to exist: point it at the DESTDIR's floed
    sed "s|^ExecStart=/usr/sbin/floed|ExecStart=$root/usr/sbin/floed|" "$root/$unit" > "$tmp/unit/floed.service"
    out=$(systemd-analyze verify --man=no "$tmp/unit/floed.service" 2>&1) || fail "systemd-analyze verify: $out"
    [ -z "$out" ] || fail "systemd-analyze verify complains: $out"
    say "systemd-analyze verify floed.service: no complaint"
else
    say "systemd-analyze not found: unit not verified (apt-get install systemd, or make deps)"
fi

# ---- uninstall, reinstall over a changed config -----------------------------------------------
mk uninstall > "$tmp/uninstall.log" 2>&1 || { cat "$tmp/uninstall.log" >&2; fail "make uninstall"; }
left=$(installed)
[ -z "$left" ] || fail "make uninstall left: $left"
say "make uninstall: no file left"

mk install > "$tmp/install2.log" 2>&1 || { cat "$tmp/install2.log" >&2; fail "make install (second)"; }
echo "log-level debug # mine" >> "$root/etc/floe/floed.conf"
mk install > "$tmp/install3.log" 2>&1 || { cat "$tmp/install3.log" >&2; fail "make install (over a changed config)"; }
grep -q '# mine' "$root/etc/floe/floed.conf" || fail "reinstall overwrote a changed floed.conf"
cmp -s config/floed.conf "$root/etc/floe/floed.conf.default" || fail "reinstall did not put the new config beside it as floed.conf.default"
grep -q 'kept .*floed.conf' "$tmp/install3.log" || fail "reinstall did not say it kept floed.conf"
mk uninstall > "$tmp/uninstall2.log" 2>&1 || { cat "$tmp/uninstall2.log" >&2; fail "make uninstall (second)"; }
[ "$(installed)" = etc/floe/floed.conf ] || fail "uninstall after a config change left: $(installed)"
grep -q '# mine' "$root/etc/floe/floed.conf" || fail "uninstall changed the user's floed.conf"
say "reinstall kept a changed floed.conf (new one as floed.conf.default); uninstall kept it too, and nothing else"
say "ok"
