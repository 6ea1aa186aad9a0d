# floe: floed, the floe CLI, floe-bench and floe-mc in a small non-root image.
#
#   docker build -t floe .                                   # GPU image (CUDA 12.6, Ubuntu 24.04)
#   docker build -t floe:cpu --build-arg GPU=0 \
#       --build-arg BUILDER_IMAGE=debian:bookworm --build-arg RUNTIME_IMAGE=debian:bookworm-slim .
#   docker run --gpus all -p 7450:7450 -p 9450:9450 -v floe-data:/var/lib/floe floe
#
# docs/OPERATIONS.md ("Containers") has the details: ports, the data volume, the token
# secret, configuration, the health check. `make test-image` builds the GPU=0 variant with
# buildah on a debootstrapped Debian and tries it.
#
# Build arguments, and how they go together:
#   GPU=1 (default)  floed with the CUDA backend (fat binary for sm_80..sm_90, the CUDA
#                    runtime linked in): BUILDER_IMAGE must have nvcc (/usr/local/cuda/bin or
#                    PATH) and the build fails without it; RUNTIME_IMAGE needs nothing of CUDA
#                    but the driver, which the NVIDIA container toolkit mounts (--gpus).
#   GPU=0            CPU engine only: no nvcc needed, any Debian or Ubuntu builder works.
#   BUILDER_IMAGE    Debian or Ubuntu (apt) with, for GPU=1, the CUDA toolkit.
#   RUNTIME_IMAGE    Debian or Ubuntu with a glibc at least as new as BUILDER_IMAGE's: the
#                    binaries link every library statically but glibc, libstdc++ (GPU=1) and,
#                    where the builder has no libsystemd.a (Debian), libsystemd (installed
#                    here if missing). Use the same distribution
#                    release for both, as the defaults do: the CUDA images for GPU=1, e.g.
#                    debian:bookworm and debian:bookworm-slim for GPU=0 (the CUDA defaults
#                    also work with GPU=0, only larger).

ARG BUILDER_IMAGE=nvidia/cuda:12.6.2-devel-ubuntu24.04
ARG RUNTIME_IMAGE=nvidia/cuda:12.6.2-base-ubuntu24.04
ARG GPU=1

# ---- builder: the device-bundle style binaries (make service-bundle) ----------------------
FROM ${BUILDER_IMAGE} AS builder
ARG GPU
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
# the build's Debian packages first (make deps-build), in a layer of their own
RUN apt-get update && apt-get install -y --no-install-recommends make && rm -rf /var/lib/apt/lists/*
COPY Makefile ./
RUN make deps-build && rm -rf /var/lib/apt/lists/*
COPY . .
RUN make GPU=${GPU} -j"$(nproc)" service-bundle && strip bundle/floed bundle/floe bundle/floe-bench bundle/floe-mc
# The container's floed.conf: config/floed.conf (every setting with its default) with what a
# container needs: listen on every interface, data in the volume, /metrics on 9450.
RUN sed -e 's/^bind .*/bind 0.0.0.0/' \
        -e 's|^data-dir.*|data-dir /var/lib/floe|' \
        -e 's/^metrics-port .*/metrics-port 9450/' \
        -e 's/^metrics-bind .*/metrics-bind 0.0.0.0/' \
        -e '1i # floed.conf of the floe container image: config/floed.conf with bind 0.0.0.0,\n# data-dir /var/lib/floe (the volume) and metrics on 0.0.0.0:9450. Mount your own\n# over /etc/floe/floed.conf, or give flags after the image name (they override it).' \
        config/floed.conf > bundle/floed.conf

# ---- runtime: the binaries, a user, a volume ------------------------------------------------
FROM ${RUNTIME_IMAGE}
RUN set -eu; \
    groupadd --gid 7450 floe; \
    useradd --no-log-init --uid 7450 --gid 7450 --home-dir /var/lib/floe --no-create-home --shell /usr/sbin/nologin floe; \
    install -d -o floe -g floe -m 0750 /var/lib/floe; \
    install -d -m 0755 /etc/floe
COPY --from=builder /src/bundle/floed /usr/local/sbin/floed
COPY --from=builder /src/bundle/floe /src/bundle/floe-bench /src/bundle/floe-mc /usr/local/bin/
COPY --from=builder /src/bundle/floed.conf /etc/floe/floed.conf
# floed links libsystemd.so.0 (sd_notify) where the builder has no static libsystemd (Debian):
# it is in every Debian and Ubuntu base image, installed here where not. Then fail the build
# here, not at the first start, if a library is missing.
RUN set -eu; \
    if ldd /usr/local/sbin/floed | grep -q 'libsystemd\.so\.0 => not found'; then \
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libsystemd0 && \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    if ldd /usr/local/sbin/floed /usr/local/bin/floe | grep 'not found'; then exit 1; fi; \
    floed --version && floe --help > /dev/null
LABEL org.opencontainers.image.title="floe" \
      org.opencontainers.image.description="floed: exact sets and dictionaries on the GPU, served over TCP"
# the CLI's default server (the health check uses it; set it when you change --port)
ENV FLOE_SERVER=127.0.0.1:7450
USER 7450:7450
WORKDIR /var/lib/floe
# 7450: the floe protocol; 9450: Prometheus /metrics (metrics-port)
EXPOSE 7450 9450
VOLUME ["/var/lib/floe"]
# `floe ping`, with the token from the secret file when floed runs with one (--token-file
# /run/secrets/floe_token) and FLOE_TOKEN is not set. The start period covers the loading of
# large saved tables.
HEALTHCHECK --interval=30s --timeout=10s --start-period=5m --retries=3 \
    CMD ["/bin/sh", "-c", "if [ -z \"${FLOE_TOKEN:-}\" ] && [ -r /run/secrets/floe_token ]; then FLOE_TOKEN=$(cat /run/secrets/floe_token); export FLOE_TOKEN; fi; exec floe ping"]
# Flags after the image name are floed flags and override the config file, e.g.
#   docker run ... floe --token-file /run/secrets/floe_token --log-level debug
ENTRYPOINT ["floed", "--config", "/etc/floe/floed.conf"]
CMD []
