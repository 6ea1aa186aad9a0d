#!/usr/bin/env bash
# make test-image: build the Dockerfile's CPU-only variant (GPU=0) and try the image, with
# no image registry: a Debian bookworm rootfs made by debootstrap (cached in build/image/)
# is imported as the local image localhost/floe-debian:bookworm and serves as both base
# images; `buildah bud --isolation chroot` builds; containers of the built image run with
# `buildah run --isolation chroot` on the host's network:
#   - the image's metadata: non-root user, ports, volume, entrypoint, health check;
#   - floed refusing to start on 0.0.0.0 with no token (protected mode);
#   - floed started with the image's entrypoint (--protected-mode no), the image's floe CLI creating a table,
#     inserting and finding keys over loopback, the HEALTHCHECK command passing (and
#     failing once floed is gone);
#   - a data dir on the host: keys saved by `floe snapshot` are there after a restart;
#   - a token secret at /run/secrets/floe_token: floed started with --token-file, the
#     CLI refused without it, the HEALTHCHECK passing with it.
# BASE_IMAGE=NAME uses a local image of that name instead (e.g. an Ubuntu 24.04 rootfs
# imported the same way), IMAGE=NAME names the result.
# Needs root (debootstrap, buildah's chroot isolation) and Debian's mirror; installs
# buildah and debootstrap with apt if missing. Minutes the first time (debootstrap, apt in
# the builder stage), about one after. Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/../.."
MIRROR=${MIRROR:-http://deb.debian.org/debian}
# BASE_IMAGE=NAME: build on that local image (Debian or Ubuntu) instead of the debootstrapped one
BASE=${BASE_IMAGE:-localhost/floe-debian:bookworm}
IMAGE=${IMAGE:-localhost/floe:test}
cache=build/image
t0=$(date +%s)
say() { echo "test-image [$(($(date +%s) - t0))s]: $*"; }
fail() {
    echo "test-image: FAIL: $*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, buildah --isolation chroot); run it as root"
missing=
command -v buildah > /dev/null || missing="$missing buildah"
command -v debootstrap > /dev/null || missing="$missing debootstrap"
command -v python3 > /dev/null || missing="$missing python3"
if [ -n "$missing" ]; then
    say "installing$missing"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing > /dev/null
fi

# ---- the base image: Debian bookworm minbase, debootstrapped once ---------------------------
mkdir -p "$cache"
if [ -n "${BASE_IMAGE:-}" ]; then
    buildah inspect --type image "$BASE" > /dev/null 2>&1 || fail "BASE_IMAGE=$BASE: no such local image"
elif [ ! -s "$cache/bookworm-minbase.tar" ]; then
    rootfs=$cache/rootfs.$$
    say "debootstrap --variant=minbase bookworm into $rootfs ($MIRROR; a few minutes)"
    debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" > "$cache/debootstrap.log" 2>&1 ||
        { tail -20 "$cache/debootstrap.log" >&2; fail "debootstrap (log: $cache/debootstrap.log)"; }
    rm -rf "${rootfs:?}/var/cache/apt/archives/"*.deb "${rootfs:?}/var/lib/apt/lists/"*_Packages
    tar -C "$rootfs" --numeric-owner -cf "$cache/bookworm-minbase.tar.tmp" .
    mv "$cache/bookworm-minbase.tar.tmp" "$cache/bookworm-minbase.tar"
    rm -rf "${rootfs:?}"
fi
if [ -z "${BASE_IMAGE:-}" ] && { ! buildah inspect --type image "$BASE" > /dev/null 2>&1 ||
    [ "$cache/bookworm-minbase.tar" -nt "$cache/imported" ]; }; then
    say "importing $cache/bookworm-minbase.tar as $BASE"
    ctr=$(buildah from scratch)
    buildah add --quiet "$ctr" "$cache/bookworm-minbase.tar" / > /dev/null
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash "$ctr"
    buildah commit --quiet --rm "$ctr" "$BASE" > /dev/null
    touch "$cache/imported"
fi
say "base image: $BASE ($(buildah inspect --type image --format '{{.FromImageID}}' "$BASE" | cut -c1-12))"

# ---- build the GPU=0 variant -------------------------------------------------------------
say "buildah bud --isolation chroot --format docker --build-arg GPU=0 (BUILDER_IMAGE=RUNTIME_IMAGE=$BASE) -t $IMAGE"
buildah bud --isolation chroot --format docker --layers --pull-never \
    --build-arg GPU=0 --build-arg BUILDER_IMAGE="$BASE" --build-arg RUNTIME_IMAGE="$BASE" \
    -t "$IMAGE" -f Dockerfile . > "$cache/bud.log" 2>&1 ||
    { tail -30 "$cache/bud.log" >&2; fail "buildah bud (log: $cache/bud.log)"; }
grep -E 'STEP [0-9]+/[0-9]+: (FROM|RUN make|COPY --from)' "$cache/bud.log" | sed 's/^/    /' | cut -c1-110 || true
say "built $IMAGE: $(buildah images --format '{{.Size}}' "$IMAGE" | head -1)"

# ---- the image's metadata ----------------------------------------------------------------
buildah inspect --type image "$IMAGE" > "$cache/inspect.json"
meta() { python3 -c "import json,sys; c=json.load(open('$cache/inspect.json'))['Docker']['config']; print(json.dumps(eval(sys.argv[1])))" "$1"; }
[ "$(meta "c['User']")" = '"7450:7450"' ] || fail "image user $(meta "c['User']"), not 7450:7450"
[ "$(meta "sorted(c['ExposedPorts'])")" = '["7450/tcp", "9450/tcp"]' ] || fail "exposed ports $(meta "sorted(c['ExposedPorts'])")"
[ "$(meta "sorted(c['Volumes'])")" = '["/var/lib/floe"]' ] || fail "volumes $(meta "sorted(c['Volumes'])")"
[ "$(meta "c['Entrypoint']")" = '["floed", "--config", "/etc/floe/floed.conf"]' ] || fail "entrypoint $(meta "c['Entrypoint']")"
[ "$(meta "c['Healthcheck']['Test'][0]")" = '"CMD"' ] || fail "no HEALTHCHECK CMD in the image"
mapfile -t entrypoint < <(python3 -c "import json; [print(a) for a in json.load(open('$cache/inspect.json'))['Docker']['config']['Entrypoint']]")
mapfile -t health < <(python3 -c "import json; [print(a) for a in json.load(open('$cache/inspect.json'))['Docker']['config']['Healthcheck']['Test'][1:]]")
say "metadata: user 7450:7450, ports 7450 9450, volume /var/lib/floe, entrypoint ${entrypoint[*]}, healthcheck"

# ---- run it ------------------------------------------------------------------------------
tmp=$(mktemp -d /tmp/floe-image.XXXXXX)
ctrs=()
run_pid=
descendants() { # every process below $1 (read from /proc, where processes come and go)
    local f line pid
    local -a fields
    for f in /proc/[0-9]*/stat; do
        read -r line < "$f" 2> /dev/null || continue
        read -r -a fields <<< "${line##*) }" # after "PID (COMM) ": STATE PPID ...; COMM may hold spaces
        [ "${fields[1]:-}" = "$1" ] || continue
        pid=${f#/proc/}
        pid=${pid%/stat}
        echo "$pid"
        descendants "$pid"
    done
}
stop_floed() { # SIGTERM to the floed under our buildah run, as `docker stop` would send it
    [ -n "$run_pid" ] || return 0
    local p sent=
    for p in $(descendants "$run_pid"); do
        if [ "$(cat "/proc/$p/comm" 2> /dev/null)" = floed ]; then kill -TERM "$p" 2> /dev/null && sent=1; fi
    done
    [ -n "$sent" ] || kill -TERM "$run_pid" 2> /dev/null || true
    for _ in $(seq 300); do
        kill -0 "$run_pid" 2> /dev/null || break
        sleep 0.1
    done
    if kill -0 "$run_pid" 2> /dev/null; then
        echo "test-image: floed did not stop within 30 s of SIGTERM; killing buildah run" >&2
        kill -KILL "$run_pid" 2> /dev/null || true
    fi
    wait "$run_pid" 2> /dev/null || true
    run_pid=
}
cleanup() {
    stop_floed
    for c in "${ctrs[@]}"; do buildah rm "$c" > /dev/null 2>&1 || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -m 0755 "$tmp/data" "$tmp/secrets"
chown 7450:7450 "$tmp/data"
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/secrets/floe_token"
chmod 0444 "$tmp/secrets/floe_token"
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(freeport)
mport=$(freeport)
server=$(buildah from --pull-never "$IMAGE")
client=$(buildah from --pull-never "$IMAGE")
ctrs=("$server" "$client")
# Commands in a container write their output into a mounted folder, read from here after:
# buildah run's own copy of a short-lived command's stdout sometimes comes back cut.
mkdir -m 0777 "$tmp/out"
in_ctr() { # CONTAINER [buildah run options] -- COMMAND...: its stdout, stderr and status
    local ctr=$1 opts=()
    shift
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    rm -f "$tmp/out/stdout" "$tmp/out/stderr"
    local st=0
    buildah run --isolation chroot -v "$tmp/out:/out" "${opts[@]}" "$ctr" -- \
        /bin/sh -c '"$@" > /out/stdout 2> /out/stderr' sh "$@" > /dev/null 2>&1 || st=$?
    cat "$tmp/out/stdout" 2> /dev/null
    cat "$tmp/out/stderr" >&2 2> /dev/null
    return $st
}
# in the client container, as the image's user, with FLOE_SERVER pointing at this run's port
cli() { in_ctr "$client" --env FLOE_SERVER="127.0.0.1:$port" -- "$@"; }
starts=0
# The data dir: a folder of this host, as `docker run -v` would give. Not mounted over the
# image's VOLUME /var/lib/floe itself: buildah run mounts its own volume there as well, and
# which of the two wins changes from run to run.
start_floed() { # extra floed flags; the secrets folder mounted
    starts=$((starts + 1))
    log=$cache/floed-$starts.log
    buildah run --isolation chroot -v "$tmp/data:/srv/floe-data" -v "$tmp/secrets:/run/secrets:ro" \
        "$server" -- "${entrypoint[@]}" --port "$port" --metrics-port "$mport" --data-dir /srv/floe-data "$@" \
        > "$log" 2>&1 &
    run_pid=$!
    for _ in $(seq 150); do
        if grep -q 'listening on' "$log"; then return 0; fi
        kill -0 "$run_pid" 2> /dev/null || { cat "$log" >&2; fail "floed exited at start"; }
        sleep 0.2
    done
    cat "$log" >&2
    fail "floed did not listen within 30 s"
}
health() { in_ctr "$client" --env FLOE_SERVER="127.0.0.1:$port" "$@" -- "${health[@]}"; }

uid=$(in_ctr "$server" -- id -u) || fail "buildah run id -u"
[ "$uid" = 7450 ] || fail "containers run as uid '$uid', not 7450"
# The image listens on every interface: with no token, protected mode refuses to start.
log=$cache/floed-refused.log
st=0
buildah run --isolation chroot "$server" -- "${entrypoint[@]}" --port "$port" > "$log" 2>&1 || st=$?
[ "$st" = 2 ] && grep -q 'protected mode' "$log" ||
    { cat "$log" >&2; fail "floed in the image started on 0.0.0.0 with no token (exit $st)"; }
say "with no token, floed in the image refuses to serve every interface (protected mode, exit 2)"
say "starting floed from the image: ${entrypoint[*]} --port $port --metrics-port $mport --data-dir /srv/floe-data --protected-mode no (bind 0.0.0.0 from its floed.conf)"
start_floed --protected-mode no
grep 'listening on' "$log" | sed 's/^/    /'
grep -q 'listening on 0.0.0.0' "$log" || fail "floed in the image does not listen on 0.0.0.0"
cli floe create states --key-bits 40 > /dev/null || fail "floe create"
out=$(cli floe insert states 1 2 3 2 2> /dev/null) || fail "floe insert: $out"
[ "$out" = "$(printf '1 INSERTED\n2 INSERTED\n3 INSERTED\n2 PRESENT')" ] || fail "floe insert answered: $out"
out=$(cli floe find states 2 99 2> /dev/null) || fail "floe find: $out"
[ "$out" = "$(printf '2 PRESENT\n99 ABSENT')" ] || fail "floe find answered: $out"
say "the image's floe CLI over loopback: insert 1 2 3 2 -> INSERTED x3, PRESENT; find 2 99 -> PRESENT, ABSENT"
out=$(health) || fail "the HEALTHCHECK command failed against a running floed: $out"
metrics=$(python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$mport/metrics', timeout=10).read().decode())") ||
    fail "GET /metrics on the metrics port"
grep -q '^floe_' <<< "$metrics" || fail "/metrics has no floe_ series: $(head -5 <<< "$metrics")"
say "/metrics on the metrics port (metrics-bind 0.0.0.0 from the image's floed.conf): $(grep -c '^floe_' <<< "$metrics") floe_ samples"
say "HEALTHCHECK (${health[*]:0:2} ...): passes: $out"
cli floe snapshot states > /dev/null || fail "floe snapshot"
stop_floed
grep -q 'states' <(ls "$tmp/data") || fail "no saved table in the data dir: $(ls "$tmp/data")"
if out=$(health 2>&1); then fail "the HEALTHCHECK passes with floed stopped: $out"; fi
say "floed stopped (SIGTERM): the HEALTHCHECK fails, as it should; the data dir holds $(ls "$tmp/data" | tr '\n' ' ')"

say "restarting floed with --token-file /run/secrets/floe_token (a secret)"
start_floed --token-file /run/secrets/floe_token
if cli floe find states 2 > /dev/null 2>&1; then fail "floed with a token answered a client without one"; fi
out=$(cli env FLOE_TOKEN="$(cat "$tmp/secrets/floe_token")" floe find states 1 2 3 99 2> "$tmp/err") ||
    { cat "$log" >&2; fail "floe find with the token after the restart: $out $(cat "$tmp/err")"; }
[ "$out" = "$(printf '1 PRESENT\n2 PRESENT\n3 PRESENT\n99 ABSENT')" ] || fail "after the restart, floe find answered: $out"
say "after the restart: the saved keys are back (1 2 3 PRESENT, 99 ABSENT); without the token the CLI is refused"
out=$(health -v "$tmp/secrets:/run/secrets:ro") || fail "the HEALTHCHECK with the token secret failed: $out"
if health > /dev/null 2>&1; then fail "the HEALTHCHECK passes without the token"; fi
say "HEALTHCHECK reads /run/secrets/floe_token: passes with the secret mounted, fails without"
stop_floed
say "ok: $IMAGE (GPU=0) builds and serves; $(($(date +%s) - t0)) s"
