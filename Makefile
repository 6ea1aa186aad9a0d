# floe - one entry point: deps, all, run, test, bench, device-bundle, install, clean
#
#   make run      install deps, build, and start floed in the foreground (RUN_ARGS="--port 7451")
#   make deps     install the Debian packages floe builds and tests with (root or sudo);
#                 make deps-build only those the build needs
#   make          build the release libraries and tools into build/rel (make -j$(nproc) is faster)
#   make test     build with AddressSanitizer + UBSan and run every test that
#                 needs no GPU (the pipelines run of the integration suite against a
#                 floed under ThreadSanitizer), then the large capacity test in the release build,
#                 floe-bench runs, the Python package's tests (test-python), a 15 s smoke
#                 run of each fuzzer (test-fuzz),
#                 and the install test (test-install)
#   make install  PREFIX=/usr/local DESTDIR= SYSCONFDIR=...: floed, the tools, libfloe
#                 (.so, .a, headers, pkg-config), floed.conf, the systemd unit, man pages;
#                 make uninstall removes them again (see "Building and testing" in README.md)
#   make man      the man pages (help2man, from the --help texts) into build/man
#   make test-image  build the Dockerfile's CPU-only image with buildah and try it (opt-in, root)
#   make test-tsan  the unit and integration tests under ThreadSanitizer (slow; not in `make test`)
#   make fuzz     build the libFuzzer targets (clang, ASan + UBSan) into build/fuzz and run each
#                 FUZZ_SECONDS (default 300); docs/FUZZING.md; make fuzz-corpus regenerates the
#                 seeds in tests/fuzz/corpus
#   make bench    start a CPU floed on a free port and run floe-bench against it (E1-, E2-like)
#   make bench-kernel  the CPU kernel benchmark (K1 scaled to this machine)
#   make GPU=0    build without CUDA, even where nvcc is present
#   make device-bundle  self-contained binaries in bundle/ (static libevent, protobuf-c,
#                 OpenSSL, Check, CUDA runtime) for a GPU host with only the driver

# What the build needs, and what `make test` needs besides (help2man: the man pages of
# `make install`; systemd: `systemd-analyze verify` of the unit; prometheus-client: the
# /metrics parser of the tests; clang and libclang-rt-14-dev: libFuzzer, for test-fuzz;
# libedit: the CLI's session (floe with no command);
# OpenMPI: floe-mc under mpirun, and its tests; python3-redis and redis-tools: the independent
# clients of the Redis protocol port's tests, libhiredis-dev its parser in floe-tests, which
# `make` builds).
BUILD_PKGS := make gcc libc6-dev libevent-dev libprotobuf-c-dev protobuf-c-compiler libssl-dev check pkg-config \
              libsystemd-dev libcap-dev libedit-dev libhiredis-dev
TEST_PKGS  := help2man python3-prometheus-client prometheus python3-cffi python3-numpy python3-pytest python3-venv systemd clang libclang-rt-14-dev openmpi-bin libopenmpi-dev \
              python3-redis redis-tools
DEPS_PKGS  := $(BUILD_PKGS) $(TEST_PKGS)
# the release (proto/floe_wire.h); libfloe.so.$(VERSION) has the soname libfloe.so.$(SOVERSION)
VERSION   := $(shell sed -n 's/^\#define FLOE_VERSION *"\(.*\)".*/\1/p' proto/floe_wire.h)
SOVERSION := 0

CC      ?= gcc
NVCC    ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
GPU     ?= $(if $(NVCC),1,0)
ifeq ($(GPU),1)
ifeq ($(NVCC),)
$(error GPU=1 but nvcc is not in /usr/local/cuda/bin or PATH: install the CUDA toolkit, pass NVCC=/path/to/nvcc, or build without CUDA with GPU=0)
endif
endif

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
GEN     := build/gen
CSTD    := -std=gnu11 -pthread -MMD -MP -Iproto -Itables -I$(GEN) -Idaemon -Iclient -Igpu
OPT_rel := -O2 -g
# FLOE_DEBUG: the engines' asserts that cost a pass over a batch (tables/spec.h); assert() itself is on everywhere
OPT_san := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -DFLOE_DEBUG
LDSAN   := -fsanitize=address,undefined
OPT_tsan := -O1 -g -fsanitize=thread -DFLOE_DEBUG
# the load generator's key loops must vectorise to keep up with floed (-O2 leaves them scalar)
build/rel/bench/workload.o: OPT_rel := -O3 -g

PKG_CRYPTO := $(shell pkg-config --libs libcrypto 2>/dev/null || echo -lcrypto)
PKG_SSL    := $(shell pkg-config --libs libssl libcrypto 2>/dev/null || echo -lssl -lcrypto)
PKG_EVENT  := $(shell pkg-config --libs libevent_pthreads libevent_openssl 2>/dev/null || \
                echo -levent_openssl -levent_core -levent_pthreads)
PKG_PROTO  := $(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)
# what a program linking libfloe.a needs besides (TLS: OpenSSL)
LIBFLOE_LIBS := $(PKG_PROTO) $(PKG_SSL)
CLI_LIBS     := -ledit # the session's line editing, history and completion (libedit-dev: BSD licence)
PKG_CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
PKG_CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)
# sd_notify (Type=notify under systemd)
PKG_SYSTEMD := $(shell pkg-config --libs libsystemd 2>/dev/null || echo -lsystemd)
# floe-mc under mpirun and srun: built with MPI where mpicc is (`make deps` installs Debian's
# OpenMPI); MPI=0 builds it without (its ranks then meet through the table; floe-mc --help says
# which).  The device bundle is always without: its hosts have no MPI.
MPICC      ?= $(shell command -v mpicc 2>/dev/null)
MPI        ?= $(if $(MPICC),1,0)
ifeq ($(MPI),1)
MPI_CFLAGS := -DFLOE_MC_MPI $(shell $(MPICC) --showme:compile 2>/dev/null || $(MPICC) -compile-info | cut -d' ' -f2-)
MPI_LIBS   := $(shell $(MPICC) --showme:link 2>/dev/null || $(MPICC) -link-info | cut -d' ' -f2-)
endif

TABLES_SRC := tables/alloc.c tables/status.c tables/spec.c tables/pool.c tables/dedup.c tables/explore.c tables/iceberg.c tables/iceberg_file.c tables/tree.c \
              tables/tablefile.c tables/backend.c tables/backend_cpu.c tables/partition.c tables/group.c tables/ordered.c \
              tables/hostmem.c tables/cuckoo.c
TEST_SRC   := $(wildcard tests/unit/*.c)
DAEMON_SRC := $(wildcard daemon/*.c daemon/ops/*.c)
PROTO_SRC  := $(GEN)/floe.pb-c.c
CLIENT_SRC := client/conn.c client/transport.c client/calls.c client/config.c client/explore.c client/options.c client/batcher.c \
              client/shards.c \
              client/dial.c \
              client/connect.c
CLI_SRC    := client/cli.c client/cli_json.c client/cli_input.c client/cli_report.c client/cli_keys.c client/cli_parse.c \
              client/cli_shell.c
ITEST_SRC  := $(wildcard tests/integration/*.c)
BENCH_SRC  := bench/floe_bench.c bench/histogram.c bench/workload.c
MC_SRC     := $(filter-out examples/mc/launch.c,$(wildcard examples/mc/*.c))

tables_objs = $(patsubst %.c,build/$(1)/%.o,$(TABLES_SRC))
# The GPU backend: CUDA objects (one build, shared by every variant) or the stub.
ifeq ($(GPU),1)
CUDA_LIB := $(dir $(NVCC))../lib64
gpu_objs  = build/gpu/libfloegpu.a
GPU_LINK := -L$(CUDA_LIB) -Wl,-Bstatic -lcudart_static -Wl,-Bdynamic -ldl -lrt -lstdc++
else
gpu_objs  = build/$(1)/gpu/backend_gpu_none.o
GPU_LINK :=
endif
daemon_objs = $(patsubst %.c,build/$(1)/%.o,$(DAEMON_SRC))
proto_obj   = build/$(1)/proto/floe.pb-c.o build/$(1)/proto/keymsg.o
client_objs = $(patsubst %.c,build/$(1)/%.o,$(CLIENT_SRC))
cli_objs    = $(patsubst %.c,build/$(1)/%.o,$(CLI_SRC))
itest_objs  = $(patsubst %.c,build/$(1)/%.o,$(ITEST_SRC))
test_objs   = $(patsubst %.c,build/$(1)/%.o,$(TEST_SRC))
bench_objs  = $(patsubst %.c,build/$(1)/%.o,$(BENCH_SRC))
# floe-mc's launcher code with MPI (launch-mpi1.o) where mpicc is, else without (launch-mpi0.o)
mc_objs     = $(patsubst %.c,build/$(1)/%.o,$(MC_SRC)) build/$(1)/examples/mc/launch-mpi$(if $(2),$(2),$(MPI)).o
mcmodel_objs = $(patsubst %.c,build/$(1)/%.o,$(wildcard examples/mc/model*.c))

.PHONY: all run install uninstall man deps deps-build test test-unit test-integration test-integration-tls test-integration-parts test-integration-pipelines test-big test-bench test-python test-tsan \
        test-install test-image bench bench-kernel clean check-cuda format service-bundle fuzz test-fuzz fuzz-corpus
.DEFAULT_GOAL := all
.SECONDEXPANSION:
# Keep every object: none is an intermediate file to delete after the link, so a second
# `make` with nothing changed runs nothing (tests/install/no-rebuild.sh checks it).
.SECONDARY:
# A recipe that fails leaves no half-written target behind.
.DELETE_ON_ERROR:

LIBFLOE_SO := build/rel/libfloe.so.$(VERSION)
all: build/rel/floed build/rel/floe build/rel/floe-hello build/rel/libfloe.a $(LIBFLOE_SO) build/rel/libfloe.so.$(SOVERSION) build/rel/libfloe.so build/rel/libfloetables.a build/rel/floe-kbench build/rel/floe-e1-local build/rel/floe-bench build/rel/floe-membw build/rel/floe-mc build/rel/libmc_peterson.so build/rel/floe-tests check-cuda

deps: DEPS_LIST = $(DEPS_PKGS)
deps-build: DEPS_LIST = $(BUILD_PKGS)
deps deps-build:
	@if dpkg -s $(DEPS_LIST) >/dev/null 2>&1; then \
	  echo "deps: $(DEPS_LIST) already installed"; \
	else \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEPS_LIST); \
	fi

# Said once, before the first thing a build in a fresh tree compiles (not on every `make`,
# so that `make -q` and `make -n` stay silent once everything is built): whether CUDA is
# built and how to skip it, and -j.
HINT := build/.hint-gpu$(GPU)
$(HINT):
	@mkdir -p $(dir $@)
	@case " $$MAKEFLAGS" in *" -j"*) ;; *) echo "floe: tip: make -j$$(nproc 2>/dev/null || echo 4) builds in parallel";; esac
ifeq ($(GPU),1)
	@echo "floe: building the CUDA backend with $(NVCC) (fat binaries for sm_80 to sm_90: minutes);" \
	  "make GPU=0 builds without it$(if $(wildcard /dev/nvidia0),, (this machine has no GPU: floed runs on the CPU here))"
else
	@echo "floe: building without CUDA (GPU=0$(if $(NVCC),,: no nvcc in /usr/local/cuda/bin or PATH)): floed runs on the CPU engine"
endif
	@touch $@

# The protocol's C code is generated at build time from proto/floe.proto.
$(GEN)/floe.pb-c.c $(GEN)/floe.pb-c.h &: proto/floe.proto | $(HINT)
	@mkdir -p $(GEN)
	protoc-c --c_out=$(GEN) --proto_path=proto proto/floe.proto
build/%/proto/floe.pb-c.o: $(GEN)/floe.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -g $(if $(filter san,$*),$(OPT_san),) $(if $(filter tsan,$*),$(OPT_tsan),) $(if $(filter pic,$*),-fPIC,) -c $< -o $@

build/rel/%.o: %.c | $(GEN)/floe.pb-c.h $(HINT)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_rel) $(PKG_CHECK_CFLAGS) -c $< -o $@
build/san/%.o: %.c | $(GEN)/floe.pb-c.h $(HINT)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_san) $(PKG_CHECK_CFLAGS) -c $< -o $@
build/pic/%.o: %.c | $(GEN)/floe.pb-c.h $(HINT)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_rel) -fPIC -c $< -o $@
build/tsan/%.o: %.c | $(GEN)/floe.pb-c.h $(HINT)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_tsan) $(PKG_CHECK_CFLAGS) -c $< -o $@

build/rel/libfloetables.a: $(call tables_objs,rel)
	rm -f $@ && ar rcs $@ $^
build/san/libfloetables.a: $(call tables_objs,san)
	rm -f $@ && ar rcs $@ $^
build/tsan/libfloetables.a: $(call tables_objs,tsan)
	rm -f $@ && ar rcs $@ $^

build/rel/floed: $(call daemon_objs,rel) $(call proto_obj,rel) $(call gpu_objs,rel) build/rel/libfloetables.a
	$(CC) -pthread $^ $(PKG_EVENT) $(PKG_PROTO) $(PKG_SSL) $(PKG_SYSTEMD) $(GPU_LINK) -lm -o $@
build/tsan/floed: $(call daemon_objs,tsan) $(call proto_obj,tsan) $(call gpu_objs,tsan) build/tsan/libfloetables.a
	$(CC) -pthread -fsanitize=thread $^ $(PKG_EVENT) $(PKG_PROTO) $(PKG_SSL) $(PKG_SYSTEMD) $(GPU_LINK) -lm -o $@
build/san/floed: $(call daemon_objs,san) $(call proto_obj,san) $(call gpu_objs,san) build/san/libfloetables.a
	$(CC) -pthread $(LDSAN) $^ $(PKG_EVENT) $(PKG_PROTO) $(PKG_SSL) $(PKG_SYSTEMD) $(GPU_LINK) -lm -o $@

# libfloe: static and shared; the floe CLI links the static one.
# (Each archive is made anew: `ar r` would keep the members of sources since removed.)
build/%/libfloe.a: $$(call client_objs,$$*) $$(call proto_obj,$$*)
	rm -f $@ && ar rcs $@ $^
# The shared library exports floe.h's API and nothing else (client/libfloe.map: the
# protobuf-c code generated from floe.proto and the internals stay inside).
$(LIBFLOE_SO): $(call client_objs,pic) $(call proto_obj,pic) client/libfloe.map
	$(CC) -shared -Wl,-soname,libfloe.so.$(SOVERSION) -Wl,--version-script=client/libfloe.map -Wl,-z,defs \
	  $(filter %.o,$^) $(LIBFLOE_LIBS) -o $@
build/rel/libfloe.so.$(SOVERSION) build/rel/libfloe.so: $(LIBFLOE_SO)
	ln -sf $(notdir $<) $@
build/rel/floe: $(call cli_objs,rel) build/rel/libfloe.a
	$(CC) $^ $(LIBFLOE_LIBS) $(CLI_LIBS) -o $@
build/rel/floe-hello: build/rel/examples/hello.o build/rel/libfloe.a
	$(CC) $^ $(LIBFLOE_LIBS) -o $@
build/san/floe: $(call cli_objs,san) build/san/libfloe.a
	$(CC) $(LDSAN) $^ $(LIBFLOE_LIBS) $(CLI_LIBS) -o $@

build/san/floe-itests: $(call itest_objs,san) build/san/libfloe.a
	$(CC) -pthread $(LDSAN) $^ $(PKG_CHECK_LIBS) $(LIBFLOE_LIBS) -lm -o $@

build/rel/floe-e1-local: build/rel/bench/e1_local.o $(call gpu_objs,rel) build/rel/libfloetables.a
	$(CC) -pthread $^ $(PKG_CRYPTO) $(GPU_LINK) -lm -o $@

build/rel/floe-kbench: build/rel/bench/kbench.o build/rel/libfloetables.a
	$(CC) -pthread $^ $(PKG_CRYPTO) -lm -o $@
build/rel/floe-bench: $(call bench_objs,rel) build/rel/libfloe.a
	$(CC) -pthread $^ $(LIBFLOE_LIBS) -lm -o $@
build/rel/floe-membw: build/rel/bench/membw.o
	$(CC) -pthread $^ -o $@
build/rel/floe-mc: $(call mc_objs,rel) build/rel/libfloe.a
	$(CC) $^ $(LIBFLOE_LIBS) $(MPI_LIBS) -o $@
build/san/floe-mc: $(call mc_objs,san) build/san/libfloe.a
	$(CC) $(LDSAN) $^ $(LIBFLOE_LIBS) $(MPI_LIBS) -o $@
# floe-mc's example of a model written as a plugin (examples/mc/floe_mc_model.h)
build/rel/libmc_peterson.so: examples/mc/models/peterson.c examples/mc/floe_mc_model.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -shared -fPIC -Iexamples/mc $< -o $@
# static pattern rules: a plain pattern would also offer to build included .d files
build/rel/examples/mc/launch-mpi0.o build/rel/examples/mc/launch-mpi1.o: build/rel/examples/mc/launch-mpi%.o: \
		examples/mc/launch.c | $(GEN)/floe.pb-c.h $(HINT)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_rel) $(if $(filter 1,$*),$(MPI_CFLAGS)) -c $< -o $@
build/san/examples/mc/launch-mpi0.o build/san/examples/mc/launch-mpi1.o: build/san/examples/mc/launch-mpi%.o: \
		examples/mc/launch.c | $(GEN)/floe.pb-c.h $(HINT)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_san) $(if $(filter 1,$*),$(MPI_CFLAGS)) -c $< -o $@

build/rel/floe-tests: $(call test_objs,rel) build/rel/bench/histogram.o build/rel/bench/workload.o $(call mcmodel_objs,rel) build/rel/daemon/config.o build/rel/daemon/log.o build/rel/daemon/envelope.o \
		build/rel/daemon/resp_wire.o $(call proto_obj,rel) build/rel/libfloetables.a
	$(CC) -pthread $^ $(PKG_CHECK_LIBS) $(PKG_CRYPTO) $(PKG_PROTO) -lhiredis -lm -o $@
build/san/floe-tests: $(call test_objs,san) build/san/bench/histogram.o build/san/bench/workload.o $(call mcmodel_objs,san) build/san/daemon/config.o build/san/daemon/log.o build/san/daemon/envelope.o \
		build/san/daemon/resp_wire.o $(call proto_obj,san) build/san/libfloetables.a
	$(CC) -pthread $(LDSAN) $^ $(PKG_CHECK_LIBS) $(PKG_CRYPTO) $(PKG_PROTO) -lhiredis -lm -o $@
build/tsan/floe-tests: $(call test_objs,tsan) build/tsan/bench/histogram.o build/tsan/bench/workload.o $(call mcmodel_objs,tsan) build/tsan/daemon/config.o build/tsan/daemon/log.o build/tsan/daemon/envelope.o \
		build/tsan/daemon/resp_wire.o $(call proto_obj,tsan) build/tsan/libfloetables.a
	$(CC) -pthread -fsanitize=thread $^ $(PKG_CHECK_LIBS) $(PKG_CRYPTO) $(PKG_PROTO) -lhiredis -lm -o $@

# CUDA: the GPU engine (gpu/), its tests (tests/gpu/) and benchmarks (bench/*_gpu.cu): fat
# binaries, static cudart.
ifeq ($(GPU),1)
NVFLAGS := -std=c++17 -O3 -Iproto -Itables -Igpu -cudart static \
  -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 \
  -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90,code=sm_90 \
  -Xcompiler -Wall,-Wextra,-Werror
GPU_BINS := build/gpu/layout_selftest build/gpu/floe-gpu-tests build/gpu/floe-k1-gpu build/gpu/floe-t1-gpu \
  build/gpu/floe-o1-gpu build/gpu/floe-links-gpu
check-cuda: $(GPU_BINS)
NV_DEPS := $(wildcard gpu/*.h) $(wildcard gpu/*.cuh) $(wildcard tables/*.h) proto/floe_wire.h
build/gpu/%.o: gpu/%.cu $(NV_DEPS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@
build/gpu/tests/%.o: tests/gpu/%.cu $(NV_DEPS) tests/gpu/backend_test.h tests/unit/data/layout1_map.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@
build/gpu/bench/%.o: bench/%.cu $(NV_DEPS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@
# libcrypto linked in, so that the GPU programs run on hosts without it
NV_CRYPTO := -Xlinker -Bstatic -lcrypto -Xlinker -Bdynamic -ldl
build/gpu/libfloegpu.a: build/gpu/iceberg_gpu.o build/gpu/iceberg_table.o build/gpu/dedup_gpu.o \
                        build/gpu/tree_gpu.o build/gpu/tree_table.o \
                        build/gpu/ordered_gpu.o build/gpu/ordered_search.o build/gpu/backend_gpu.o build/gpu/run_keys.o \
                        build/gpu/run_tree.o build/gpu/run_ordered.o build/gpu/run_group.o build/gpu/devices.o \
                        build/gpu/cuckoo_gpu.o build/gpu/run_static.o build/gpu/staging.o build/gpu/side_store.o \
                        build/gpu/vmem.o
	rm -f $@ && ar rcs $@ $^
build/gpu/layout_selftest: build/gpu/tests/layout_selftest.o
	$(NVCC) $(NVFLAGS) $^ -o $@
build/gpu/floe-gpu-tests: build/gpu/tests/gpu_test.o build/gpu/tests/backend_test.o build/gpu/tests/tree_test.o \
                          build/gpu/tests/ordered_test.o build/gpu/tests/cycles_test.o build/gpu/tests/fault_test.o \
                          build/gpu/tests/static_test.o \
                          build/gpu/libfloegpu.a build/rel/libfloetables.a
	$(NVCC) $(NVFLAGS) $^ $(NV_CRYPTO) -lpthread -o $@
build/gpu/floe-k1-gpu: build/gpu/bench/k1_gpu.o build/gpu/libfloegpu.a build/rel/libfloetables.a
	$(NVCC) $(NVFLAGS) $^ $(NV_CRYPTO) -lpthread -o $@
build/gpu/floe-t1-gpu: build/gpu/bench/t1_gpu.o build/gpu/libfloegpu.a build/rel/libfloetables.a
	$(NVCC) $(NVFLAGS) $^ $(NV_CRYPTO) -lpthread -o $@
build/gpu/floe-o1-gpu: build/gpu/bench/o1_gpu.o build/gpu/libfloegpu.a build/rel/libfloetables.a
	$(NVCC) $(NVFLAGS) $^ $(NV_CRYPTO) -lpthread -o $@
build/gpu/floe-links-gpu: build/gpu/bench/links_gpu.o
	$(NVCC) $(NVFLAGS) $^ -o $@
# S1's anchors (bench/s1_anchors.cu), built against checkouts of cuCollections and the seed
# library, which floe does not carry (docs/PERFORMANCE.md, "S1 with its anchors"):
#   make s1-anchors CUCO_DIR=path/to/cuCollections CPHT_DIR=path/to/compact-parallel-hash-tables
comma := ,
S1_NVFLAGS := $(filter-out -std=c++17 -Xcompiler -Wall$(comma)-Wextra$(comma)-Werror,$(NVFLAGS)) -std=c++20 \
  --expt-relaxed-constexpr --expt-extended-lambda -Ibench
build/gpu/floe-s1-anchors: bench/s1_anchors.cu $(NV_DEPS) build/gpu/libfloegpu.a build/rel/libfloetables.a
	@test -n "$(CUCO_DIR)" -a -n "$(CPHT_DIR)" || { echo "make s1-anchors needs CUCO_DIR and CPHT_DIR (checkouts of NVIDIA/cuCollections and System-Verification-Lab/compact-parallel-hash-tables)" >&2; exit 2; }
	$(NVCC) $(S1_NVFLAGS) -I$(CUCO_DIR)/include -I$(CPHT_DIR)/include $< build/gpu/libfloegpu.a \
	  build/rel/libfloetables.a $(NV_CRYPTO) -lpthread -o $@
s1-anchors: build/gpu/floe-s1-anchors
.PHONY: s1-anchors
else
# GPU=0: nothing to build (the hint above says so once)
check-cuda:
endif

# device-bundle: the same programs with every library but glibc, libstdc++ and
# the NVIDIA driver linked in, for GPU hosts that have nothing installed
# (built on Debian 12, run on Ubuntu 24.04).  See docs/OPERATIONS.md.
BUNDLE_STATIC := -Wl,-Bstatic -levent_openssl -levent_pthreads -levent_extra -levent_core -lprotobuf-c -lssl -lcrypto \
  -Wl,-Bdynamic -ldl -lrt -lm -pthread
BUNDLE_CHECK := -Wl,-Bstatic -lcheck_pic -lsubunit -Wl,-Bdynamic
# libsystemd: static where the distribution ships libsystemd.a (Ubuntu 24.04 does; it needs
# libcap.a besides, from libcap-dev), else libsystemd.so.0 (Debian 12 has no libsystemd.a; the
# package libsystemd0 is in every Debian and Ubuntu base system).
have_static = $(filter /%,$(shell $(CC) -print-file-name=$(1)))
SYSTEMD_STATIC := -Wl,-Bstatic -lsystemd -lcap -Wl,-Bdynamic
BUNDLE_SYSTEMD = $(if $(and $(call have_static,libsystemd.a),$(call have_static,libcap.a)),$(SYSTEMD_STATIC),$(PKG_SYSTEMD))
BUNDLE_BINS := bundle/floed bundle/floe bundle/floe-itests bundle/floe-kbench bundle/floe-e1-local bundle/floe-bench bundle/floe-membw bundle/floe-mc bundle/floe-gpu-tests \
  bundle/floe-k1-gpu bundle/floe-t1-gpu bundle/floe-o1-gpu bundle/floe-links-gpu bundle/layout_selftest \
  bundle/libmc_peterson.so
# The service's programs alone, with or without CUDA (GPU=0): what the Dockerfile installs.
SERVICE_BINS := bundle/floed bundle/floe bundle/floe-bench bundle/floe-mc
.PHONY: device-bundle
service-bundle: $(SERVICE_BINS)
bundle/floed: $(call daemon_objs,rel) $(call proto_obj,rel) $(call gpu_objs,rel) build/rel/libfloetables.a
	@mkdir -p bundle
	$(CC) $^ $(GPU_LINK) $(BUNDLE_SYSTEMD) $(BUNDLE_STATIC) -o $@
bundle/floe: $(call cli_objs,rel) build/rel/libfloe.a
	@mkdir -p bundle
	$(CC) $^ $(BUNDLE_STATIC) -Wl,-Bstatic -ledit -ltinfo -lbsd -lmd -Wl,-Bdynamic -o $@
bundle/floe-bench: $(call bench_objs,rel) build/rel/libfloe.a
	@mkdir -p bundle
	$(CC) $^ $(BUNDLE_STATIC) -o $@
bundle/floe-mc: $(call mc_objs,rel,0) build/rel/libfloe.a
	@mkdir -p bundle
	$(CC) $^ $(BUNDLE_STATIC) -o $@
# the example model the integration suite loads with --model-lib (FLOE_MC_PETERSON)
bundle/libmc_peterson.so: build/rel/libmc_peterson.so
	@mkdir -p bundle
	cp $< $@
ifeq ($(GPU),1)
device-bundle: $(BUNDLE_BINS)
	@echo "device-bundle: $(BUNDLE_BINS)"
bundle/floe-itests: $(call itest_objs,rel) build/rel/libfloe.a
	@mkdir -p bundle
	$(CC) $^ $(BUNDLE_CHECK) $(BUNDLE_STATIC) -o $@
bundle/floe-e1-local: build/rel/bench/e1_local.o build/gpu/libfloegpu.a build/rel/libfloetables.a
	@mkdir -p bundle
	$(CC) $^ $(GPU_LINK) $(BUNDLE_STATIC) -o $@
bundle/floe-kbench: build/rel/bench/kbench.o build/rel/libfloetables.a
	@mkdir -p bundle
	$(CC) $^ $(BUNDLE_STATIC) -o $@
bundle/floe-membw: build/rel/floe-membw
	@mkdir -p bundle
	cp $< $@
bundle/floe-gpu-tests bundle/floe-k1-gpu bundle/floe-t1-gpu bundle/floe-o1-gpu bundle/floe-links-gpu bundle/layout_selftest: bundle/%: build/gpu/%
	@mkdir -p bundle
	cp $< $@
else
device-bundle:
	@echo "device-bundle needs nvcc (GPU=1)"; exit 1
endif

run: deps all
	./build/rel/floed $(RUN_ARGS)

# Man pages from the --help texts (help2man), with the sections of docs/man/*.h2m added.
MAN_PAGES := build/man/floed.8 build/man/floe.1 build/man/floe-bench.1 build/man/floe-mc.1
man: $(MAN_PAGES)
HELP2MAN = @command -v help2man >/dev/null || { echo "help2man is missing: make deps (or apt-get install help2man)" >&2; exit 1; }; \
  mkdir -p $(dir $@); help2man --no-info --no-discard-stderr --version-string=$(VERSION) --section=$(subst .,,$(suffix $@)) \
  --include=$(word 2,$^) --output=$@
build/man/floed.8: build/rel/floed docs/man/floed.h2m
	$(HELP2MAN) --name="the floe server: exact sets and dictionaries on the GPU, over TCP" $<
build/man/floe.1: build/rel/floe docs/man/floe.h2m
	$(HELP2MAN) --name="command-line client of floed" $<
build/man/floe-bench.1: build/rel/floe-bench docs/man/floe-bench.h2m
	$(HELP2MAN) --name="load generator for floed" $<
build/man/floe-mc.1: build/rel/floe-mc docs/man/floe-mc.h2m
	$(HELP2MAN) --name="explicit-state model checker that deduplicates states through floed" $<

# make install PREFIX=/usr/local DESTDIR= (every directory below can be set on its own).
# floed goes to sbin (a daemon, floed(8)); the config to /etc/floe for PREFIX=/usr and
# /usr/local, else PREFIX/etc/floe. An existing floed.conf is never overwritten: when it
# differs from config/floed.conf the new one is installed beside it as floed.conf.default.
# The pkg-config file and the unit are written with these paths at install time.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
SBINDIR     ?= $(PREFIX)/sbin
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
MANDIR      ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
SYSCONFDIR  ?= $(if $(filter /usr /usr/ /usr/local /usr/local/,$(PREFIX)),/etc,$(PREFIX)/etc)
# /usr: where this system's systemd keeps its units (/lib/systemd/system on Debian 12);
# /usr/local: /usr/local/lib/systemd/system, also on systemd's search path; other prefixes:
# PREFIX/lib/systemd/system (then `systemctl link` the unit).
SYSTEMDUNITDIR ?= $(if $(filter /usr /usr/,$(PREFIX)),$(or $(shell pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null),/lib/systemd/system),$(PREFIX)/lib/systemd/system)
INSTALL     ?= install
CONF        := $(DESTDIR)$(SYSCONFDIR)/floe/floed.conf
SUBST_PATHS = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
  -e 's|@VERSION@|$(VERSION)|g' -e 's|/usr/sbin/floed|$(SBINDIR)/floed|g' -e 's|/etc/floe/|$(SYSCONFDIR)/floe/|g'

install: build/rel/floed build/rel/floe build/rel/floe-bench build/rel/floe-mc build/rel/libfloe.a $(LIBFLOE_SO) \
         $(MAN_PAGES) client/libfloe.pc.in systemd/floed.service
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) \
	  $(DESTDIR)$(INCLUDEDIR)/floe $(DESTDIR)$(SYSCONFDIR)/floe $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 \
	  $(DESTDIR)$(SYSTEMDUNITDIR)
	$(INSTALL) -m 755 build/rel/floed $(DESTDIR)$(SBINDIR)/
	$(INSTALL) -m 755 build/rel/floe build/rel/floe-bench build/rel/floe-mc $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 644 build/rel/libfloe.a $(DESTDIR)$(LIBDIR)/
	$(INSTALL) -m 755 $(LIBFLOE_SO) $(DESTDIR)$(LIBDIR)/
	ln -sfn libfloe.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libfloe.so.$(SOVERSION)
	ln -sfn libfloe.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libfloe.so
	$(INSTALL) -m 644 client/floe.h proto/floe_wire.h examples/mc/floe_mc_model.h $(DESTDIR)$(INCLUDEDIR)/floe/
	$(SUBST_PATHS) client/libfloe.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/libfloe.pc
	$(INSTALL) -m 644 build/man/floed.8 $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 644 build/man/floe.1 build/man/floe-bench.1 build/man/floe-mc.1 $(DESTDIR)$(MANDIR)/man1/
	$(SUBST_PATHS) systemd/floed.service > $(DESTDIR)$(SYSTEMDUNITDIR)/floed.service
	@if [ -e $(CONF) ] && ! cmp -s config/floed.conf $(CONF); then \
	  $(INSTALL) -m 644 config/floed.conf $(CONF).default; \
	  echo "install: kept $(CONF) (yours); the shipped one is $(CONF).default"; \
	else \
	  echo "$(INSTALL) -m 644 config/floed.conf $(CONF)"; $(INSTALL) -m 644 config/floed.conf $(CONF); \
	fi
	@if [ -z "$(DESTDIR)" ]; then \
	  if [ "$$(id -u)" = 0 ]; then ldconfig; fi; \
	  echo "install: done; under systemd: systemctl daemon-reload && systemctl enable --now floed (docs/OPERATIONS.md)"; \
	fi

# Removes what install put there; floed.conf only when it is still the shipped one.
uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/floed $(DESTDIR)$(BINDIR)/floe $(DESTDIR)$(BINDIR)/floe-bench $(DESTDIR)$(BINDIR)/floe-mc
	rm -f $(DESTDIR)$(LIBDIR)/libfloe.a $(DESTDIR)$(LIBDIR)/libfloe.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libfloe.so.$(SOVERSION) \
	  $(DESTDIR)$(LIBDIR)/libfloe.so $(DESTDIR)$(PKGCONFIGDIR)/libfloe.pc
	rm -f $(DESTDIR)$(INCLUDEDIR)/floe/floe.h $(DESTDIR)$(INCLUDEDIR)/floe/floe_wire.h \
	  $(DESTDIR)$(INCLUDEDIR)/floe/floe_mc_model.h
	rm -f $(DESTDIR)$(MANDIR)/man8/floed.8 $(DESTDIR)$(MANDIR)/man1/floe.1 $(DESTDIR)$(MANDIR)/man1/floe-bench.1 \
	  $(DESTDIR)$(MANDIR)/man1/floe-mc.1
	rm -f $(DESTDIR)$(SYSTEMDUNITDIR)/floed.service $(CONF).default
	@if [ -e $(CONF) ] && ! cmp -s config/floed.conf $(CONF); then \
	  echo "uninstall: kept $(CONF) (changed since install)"; \
	else \
	  echo "rm -f $(CONF)"; rm -f $(CONF); \
	fi
	-rmdir $(DESTDIR)$(INCLUDEDIR)/floe $(DESTDIR)$(SYSCONFDIR)/floe 2>/dev/null

# Everything the tests run is built first, in parallel (test-builds, below: -j as many as the
# cores unless make was given a -j; the CUDA fat binaries alone are minutes on one core); then
# the tests, one at a time (they time things, start servers and share the machine).
test:
	+$(MAKE) $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 2)) test-builds
	+$(MAKE) test-unit test-integration test-integration-tls test-integration-parts test-integration-pipelines \
	  test-big test-bench test-python test-fuzz test-install

# The Python package (python/, cffi over libfloe, numpy) under pytest, against a floed it
# starts, with Debian's python3 (python3-cffi, python3-numpy, python3-pytest; `pip install
# ./python` offline into a venv is one of the tests).
test-python: build/rel/floed $(LIBFLOE_SO)
	FLOE_LIB=$(CURDIR)/build/rel/libfloe.so.$(SOVERSION) FLOED=$(CURDIR)/build/rel/floed PYTHONPATH=$(CURDIR)/python \
	  /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests

# The build and the install: nothing rebuilt by a second make, README's hello.c listing,
# make install DESTDIR=... PREFIX=/usr and programs built against it with pkg-config only,
# the systemd unit (systemd-analyze verify), make uninstall.
test-install: all $(MAN_PAGES)
	MAKE="$(MAKE)" tests/install/no-rebuild.sh
	tests/install/readme-hello.sh
	+MAKE="$(MAKE)" tests/install/install.sh

# make print-VERSION and the like: a variable's value, for scripts
print-%:
	@echo '$($*)'

# The Dockerfile's CPU-only image, built with buildah on a debootstrapped Debian (cached in
# build/image) and tried: floed started from it, the image's CLI inserting and finding keys,
# /metrics, the HEALTHCHECK, a restart on saved data with a token secret (root; minutes).
test-image:
	tests/image/test-image.sh

# floed, libfloe and the CLI end to end (sanitizer builds), on ephemeral ports.
test-integration: build/san/floe-itests build/san/floed build/san/floe build/san/floe-mc build/rel/floe-bench build/rel/libmc_peterson.so
	FLOED=build/san/floed FLOE_CLI=build/san/floe FLOE_MC=build/san/floe-mc FLOE_BENCH=build/rel/floe-bench ./build/san/floe-itests

# The same, with every client on TLS (certificates made by the openssl command at the start).
test-integration-tls: build/san/floe-itests build/san/floed build/san/floe build/san/floe-mc build/rel/floe-bench build/rel/libmc_peterson.so
	FLOE_TLS=1 FLOED=build/san/floed FLOE_CLI=build/san/floe FLOE_MC=build/san/floe-mc FLOE_BENCH=build/rel/floe-bench ./build/san/floe-itests

# The same, with every table in 3 parts (tables/partition.h; CPU tables here, GPU ones on a GPU host).
test-integration-parts: build/san/floe-itests build/san/floed build/san/floe build/san/floe-mc build/rel/floe-bench build/rel/libmc_peterson.so
	FLOE_PARTITIONS=3 FLOED=build/san/floed FLOE_CLI=build/san/floe FLOE_MC=build/san/floe-mc FLOE_BENCH=build/rel/floe-bench ./build/san/floe-itests

# The same, with every table in 2 pipelines (floed's pipelines: a batcher lane per io thread),
# against floed under ThreadSanitizer: the most concurrent floed of the runs, and a race stops
# it (halt_on_error), which fails the suite (tests/tsan.supp: the reports that are not ours, and
# why).  setarch -R: see test-tsan.
test-integration-pipelines: build/san/floe-itests build/tsan/floed build/san/floe build/san/floe-mc build/rel/floe-bench build/rel/libmc_peterson.so
	FLOE_PIPELINES=2 FLOED=build/tsan/floed FLOE_CLI=build/san/floe FLOE_MC=build/san/floe-mc FLOE_BENCH=build/rel/floe-bench \
	    TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan.supp" setarch -R ./build/san/floe-itests

# Every suite but the large one, under AddressSanitizer and UBSan.
test-unit: build/san/floe-tests
	CK_EXCLUDE_TAGS=big ./build/san/floe-tests

# 2^30 primary slots of 40-bit keys filled to 0.95: too big for the sanitizers.
test-big: build/rel/floe-tests
	CK_INCLUDE_TAGS=big ./build/rel/floe-tests

# floe-bench against a release floed that it starts: short checked SET, MAP and TREE runs.
test-bench: build/rel/floed build/rel/floe-bench
	bench/run-local.sh test

# The lock-free engine under ThreadSanitizer, and the integration suite against a TSan floed
# (not part of `make test`, which runs floed under TSan in its pipelines run only).
# setarch -R: TSan needs the address layout that ASLR on newer kernels breaks.
test-tsan: build/tsan/floe-tests build/tsan/floed build/san/floe-itests build/san/floe build/san/floe-mc build/rel/floe-bench build/rel/libmc_peterson.so
	CK_FORK=no CK_EXCLUDE_TAGS=big setarch -R ./build/tsan/floe-tests
	FLOED=build/tsan/floed FLOE_CLI=build/san/floe FLOE_MC=build/san/floe-mc FLOE_BENCH=build/rel/floe-bench \
	    TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan.supp" setarch -R ./build/san/floe-itests

# Fuzzing with clang's libFuzzer under ASan + UBSan (docs/FUZZING.md): one program per target
# in build/fuzz, instrumented objects of their own (the CPU stub stands in for CUDA).  make fuzz
# runs each FUZZ_SECONDS over the checked-in seeds, keeping what it finds in build/fuzz/corpus;
# make test-fuzz (in make test) runs each FUZZ_SMOKE_SECONDS from the seeds alone.  Both fail on
# any crash, leak, timeout or out-of-memory (the input lands in build/fuzz/artifacts).
FUZZ_CC            ?= clang
FUZZ_SECONDS       ?= 300
FUZZ_SMOKE_SECONDS ?= 15
FUZZ_TARGETS := daemon tablefile cli response
FUZZ_BINS    := $(patsubst %,build/fuzz/fuzz-%,$(FUZZ_TARGETS))
OPT_fuzz := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
            -DFLOE_DEBUG
LDFUZZ   := -fsanitize=fuzzer,address,undefined
build/fuzz/%.o: %.c | $(GEN)/floe.pb-c.h $(HINT)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CSTD) $(WARN) $(OPT_fuzz) -c $< -o $@
build/fuzz/proto/floe.pb-c.o: $(GEN)/floe.pb-c.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CSTD) $(OPT_fuzz) -c $< -o $@
build/fuzz/fuzz-daemon: build/fuzz/tests/fuzz/fuzz_daemon.o $(filter-out %/main.o,$(call daemon_objs,fuzz)) \
                        $(call proto_obj,fuzz) build/fuzz/gpu/backend_gpu_none.o $(call tables_objs,fuzz)
	$(FUZZ_CC) -pthread $(LDFUZZ) $^ $(PKG_EVENT) $(PKG_PROTO) $(PKG_SSL) $(PKG_SYSTEMD) -lm -o $@
build/fuzz/fuzz-tablefile: build/fuzz/tests/fuzz/fuzz_tablefile.o $(call tables_objs,fuzz)
	$(FUZZ_CC) -pthread $(LDFUZZ) $^ $(PKG_CRYPTO) -lm -o $@
build/fuzz/fuzz-cli: build/fuzz/tests/fuzz/fuzz_cli.o build/fuzz/client/cli_parse.o $(call client_objs,fuzz) \
                     $(call proto_obj,fuzz)
	$(FUZZ_CC) $(LDFUZZ) $^ $(LIBFLOE_LIBS) -o $@
build/fuzz/fuzz-response: build/fuzz/tests/fuzz/fuzz_response.o $(call client_objs,fuzz) $(call proto_obj,fuzz)
	$(FUZZ_CC) $(LDFUZZ) $^ $(LIBFLOE_LIBS) -o $@
fuzz: $(FUZZ_BINS)
	tests/fuzz/run.sh fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)
test-fuzz: $(FUZZ_BINS)
	tests/fuzz/run.sh smoke $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)
# The generated seeds (tests/fuzz/gen_corpus.c; the crash-* regression seeds are kept).
build/rel/fuzz-gen-corpus: build/rel/tests/fuzz/gen_corpus.o build/rel/proto/floe.pb-c.o build/rel/libfloetables.a
	$(CC) -pthread $^ $(PKG_PROTO) $(PKG_CRYPTO) -lm -o $@
fuzz-corpus: build/rel/fuzz-gen-corpus
	./build/rel/fuzz-gen-corpus tests/fuzz/corpus

# E1- and E2-like floe-bench runs against a CPU floed on a free port (bench/run-local.sh).
bench: build/rel/floed build/rel/floe-bench
	bench/run-local.sh bench

bench-kernel: build/rel/floe-kbench
	./build/rel/floe-kbench

format:
	clang-format -i tables/*.[ch] daemon/*.[ch] daemon/ops/*.[ch] client/*.[ch] proto/*.h bench/*.[ch] examples/*.c examples/mc/*.[ch] examples/mc/models/*.c \
	  tests/unit/*.[ch] tests/integration/*.[ch] tests/fuzz/*.c gpu/*.cu gpu/*.cuh tests/gpu/*.cu bench/*.cu

clean:
	rm -rf build

-include $(shell find build -path build/image -prune -o -name '*.d' -type f -print 2>/dev/null)

# What `make test` runs, built before it runs any (after every variable it names is set).
TEST_BUILDS := all build/san/floe-tests build/san/floe-itests build/san/floed build/san/floe build/san/floe-mc \
  build/tsan/floed build/rel/floe-tests build/rel/floe-bench build/rel/libmc_peterson.so $(FUZZ_BINS) $(MAN_PAGES)
.PHONY: test-builds
test-builds: $(TEST_BUILDS)
