# floe - one entry point: deps, all, run, test, bench, device-bundle, install, clean
#
#   make run      install deps, build, and start floed in the foreground (RUN_ARGS="--port 7451")
#   make deps     install the Debian packages floe builds with (root or sudo)
#   make          build the release libraries and tools into build/rel
#   make test     build with AddressSanitizer + UBSan and run every test that
#                 needs no GPU, then the large capacity test in the release build
#   make test-tsan  the unit tests under ThreadSanitizer (slow; not in `make test`)
#   make bench    start a CPU floed on a free port and run floe-bench against it (E1-, E2-like)
#   make bench-kernel  the CPU kernel benchmark (K1 scaled to this machine)
#   make GPU=0    build without CUDA, even where nvcc is present
#   make device-bundle  self-contained binaries in bundle/ (static libevent, protobuf-c,
#                 OpenSSL, Check, CUDA runtime) for a GPU host with only the driver

DEPS_PKGS := libevent-dev libprotobuf-c-dev protobuf-c-compiler libssl-dev check pkg-config

CC      ?= gcc
NVCC    ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
GPU     ?= $(if $(NVCC),1,0)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
GEN     := build/gen
CSTD    := -std=gnu11 -pthread -MMD -MP -Iproto -Itables -I$(GEN) -Idaemon -Iclient -Igpu
OPT_rel := -O2 -g
OPT_san := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
LDSAN   := -fsanitize=address,undefined
OPT_tsan := -O1 -g -fsanitize=thread
# the load generator's key loops must vectorise to keep up with floed (-O2 leaves them scalar)
build/rel/bench/workload.o: OPT_rel := -O3 -g

PKG_CRYPTO := $(shell pkg-config --libs libcrypto 2>/dev/null || echo -lcrypto)
PKG_EVENT  := $(shell pkg-config --libs libevent_pthreads 2>/dev/null || echo -levent_core -levent_pthreads)
PKG_PROTO  := $(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)
PKG_CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
PKG_CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)

TABLES_SRC := tables/status.c tables/spec.c tables/pool.c tables/dedup.c tables/iceberg.c tables/tree.c \
              tables/tablefile.c tables/backend.c tables/backend_cpu.c
TEST_SRC   := $(wildcard tests/unit/*.c)
DAEMON_SRC := $(wildcard daemon/*.c)
PROTO_SRC  := $(GEN)/floe.pb-c.c
CLIENT_SRC := client/floe.c client/batcher.c
ITEST_SRC  := $(wildcard tests/integration/*.c)
BENCH_SRC  := bench/floe_bench.c bench/histogram.c bench/workload.c
MC_SRC     := $(wildcard examples/mc/*.c)

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
proto_obj   = build/$(1)/proto/floe.pb-c.o
client_objs = $(patsubst %.c,build/$(1)/%.o,$(CLIENT_SRC))
itest_objs  = $(patsubst %.c,build/$(1)/%.o,$(ITEST_SRC))
test_objs   = $(patsubst %.c,build/$(1)/%.o,$(TEST_SRC))
bench_objs  = $(patsubst %.c,build/$(1)/%.o,$(BENCH_SRC))
mc_objs     = $(patsubst %.c,build/$(1)/%.o,$(MC_SRC))
mcmodel_objs = $(patsubst %.c,build/$(1)/%.o,$(wildcard examples/mc/model*.c))

.PHONY: all run install deps test test-unit test-integration test-big test-bench test-tsan bench bench-kernel clean check-cuda format
.DEFAULT_GOAL := all
.SECONDEXPANSION:

all: build/rel/floed build/rel/floe build/rel/floe-hello build/rel/libfloe.a build/rel/libfloe.so build/rel/libfloetables.a build/rel/floe-kbench build/rel/floe-e1-local build/rel/floe-bench build/rel/floe-membw build/rel/floe-mc build/rel/floe-tests check-cuda

deps:
	@if dpkg -s $(DEPS_PKGS) >/dev/null 2>&1; then \
	  echo "deps: $(DEPS_PKGS) already installed"; \
	else \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEPS_PKGS); \
	fi

# The protocol's C code is generated at build time from proto/floe.proto.
$(GEN)/floe.pb-c.c $(GEN)/floe.pb-c.h: proto/floe.proto
	@mkdir -p $(GEN)
	protoc-c --c_out=$(GEN) --proto_path=proto proto/floe.proto
build/%/proto/floe.pb-c.o: $(GEN)/floe.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -g $(if $(filter san,$*),$(OPT_san),) $(if $(filter tsan,$*),$(OPT_tsan),) $(if $(filter pic,$*),-fPIC,) -c $< -o $@

build/rel/%.o: %.c | $(GEN)/floe.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_rel) $(PKG_CHECK_CFLAGS) -c $< -o $@
build/san/%.o: %.c | $(GEN)/floe.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_san) $(PKG_CHECK_CFLAGS) -c $< -o $@
build/pic/%.o: %.c | $(GEN)/floe.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_rel) -fPIC -c $< -o $@
build/tsan/%.o: %.c | $(GEN)/floe.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_tsan) $(PKG_CHECK_CFLAGS) -c $< -o $@

build/rel/libfloetables.a: $(call tables_objs,rel)
	ar rcs $@ $^
build/san/libfloetables.a: $(call tables_objs,san)
	ar rcs $@ $^
build/tsan/libfloetables.a: $(call tables_objs,tsan)
	ar rcs $@ $^

build/rel/floed: $(call daemon_objs,rel) $(call proto_obj,rel) $(call gpu_objs,rel) build/rel/libfloetables.a
	$(CC) -pthread $^ $(PKG_EVENT) $(PKG_PROTO) $(PKG_CRYPTO) $(GPU_LINK) -lm -o $@
build/tsan/floed: $(call daemon_objs,tsan) $(call proto_obj,tsan) $(call gpu_objs,tsan) build/tsan/libfloetables.a
	$(CC) -pthread -fsanitize=thread $^ $(PKG_EVENT) $(PKG_PROTO) $(PKG_CRYPTO) $(GPU_LINK) -lm -o $@
build/san/floed: $(call daemon_objs,san) $(call proto_obj,san) $(call gpu_objs,san) build/san/libfloetables.a
	$(CC) -pthread $(LDSAN) $^ $(PKG_EVENT) $(PKG_PROTO) $(PKG_CRYPTO) $(GPU_LINK) -lm -o $@

# libfloe: static and shared; the floe CLI links the static one.
build/%/libfloe.a: $$(call client_objs,$$*) $$(call proto_obj,$$*)
	ar rcs $@ $^
build/rel/libfloe.so: $(call client_objs,pic) $(call proto_obj,pic)
	$(CC) -shared -Wl,-soname,libfloe.so.0 $^ $(PKG_PROTO) -o $@
build/rel/floe: build/rel/client/cli.o build/rel/libfloe.a
	$(CC) $^ $(PKG_PROTO) -o $@
build/rel/floe-hello: build/rel/examples/hello.o build/rel/libfloe.a
	$(CC) $^ $(PKG_PROTO) -o $@
build/san/floe: build/san/client/cli.o build/san/libfloe.a
	$(CC) $(LDSAN) $^ $(PKG_PROTO) -o $@

build/san/floe-itests: $(call itest_objs,san) build/san/libfloe.a
	$(CC) -pthread $(LDSAN) $^ $(PKG_CHECK_LIBS) $(PKG_PROTO) -lm -o $@

build/rel/floe-e1-local: build/rel/bench/e1_local.o $(call gpu_objs,rel) build/rel/libfloetables.a
	$(CC) -pthread $^ $(PKG_CRYPTO) $(GPU_LINK) -lm -o $@

build/rel/floe-kbench: build/rel/bench/kbench.o build/rel/libfloetables.a
	$(CC) -pthread $^ $(PKG_CRYPTO) -lm -o $@
build/rel/floe-bench: $(call bench_objs,rel) build/rel/libfloe.a
	$(CC) -pthread $^ $(PKG_PROTO) -lm -o $@
build/rel/floe-membw: build/rel/bench/membw.o
	$(CC) -pthread $^ -o $@
build/rel/floe-mc: $(call mc_objs,rel) build/rel/libfloe.a
	$(CC) $^ $(PKG_PROTO) -o $@
build/san/floe-mc: $(call mc_objs,san) build/san/libfloe.a
	$(CC) $(LDSAN) $^ $(PKG_PROTO) -o $@

build/rel/floe-tests: $(call test_objs,rel) build/rel/bench/histogram.o build/rel/bench/workload.o $(call mcmodel_objs,rel) build/rel/daemon/config.o build/rel/daemon/log.o build/rel/libfloetables.a
	$(CC) -pthread $^ $(PKG_CHECK_LIBS) $(PKG_CRYPTO) -lm -o $@
build/san/floe-tests: $(call test_objs,san) build/san/bench/histogram.o build/san/bench/workload.o $(call mcmodel_objs,san) build/san/daemon/config.o build/san/daemon/log.o build/san/libfloetables.a
	$(CC) -pthread $(LDSAN) $^ $(PKG_CHECK_LIBS) $(PKG_CRYPTO) -lm -o $@
build/tsan/floe-tests: $(call test_objs,tsan) build/tsan/bench/histogram.o build/tsan/bench/workload.o $(call mcmodel_objs,tsan) build/tsan/daemon/config.o build/tsan/daemon/log.o build/tsan/libfloetables.a
	$(CC) -pthread -fsanitize=thread $^ $(PKG_CHECK_LIBS) $(PKG_CRYPTO) -lm -o $@

# CUDA: the GPU engine, its tests and the K1 benchmark (fat binaries, static cudart).
ifeq ($(GPU),1)
NVFLAGS := -std=c++17 -O3 -Iproto -Itables -Igpu -cudart static \
  -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 \
  -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90,code=sm_90 \
  -Xcompiler -Wall,-Wextra,-Werror
GPU_BINS := build/gpu/layout_selftest build/gpu/floe-gpu-tests build/gpu/floe-k1-gpu build/gpu/floe-t1-gpu
check-cuda: $(GPU_BINS)
build/gpu/%.o: gpu/%.cu $(wildcard gpu/*.h) $(wildcard tables/*.h) proto/floe_wire.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@
# libcrypto linked in, so that the GPU programs run on hosts without it
NV_CRYPTO := -Xlinker -Bstatic -lcrypto -Xlinker -Bdynamic -ldl
build/gpu/libfloegpu.a: build/gpu/iceberg_gpu.o build/gpu/tree_gpu.o build/gpu/backend_gpu.o
	ar rcs $@ $^
build/gpu/layout_selftest: build/gpu/layout_selftest.o
	$(NVCC) $(NVFLAGS) $^ -o $@
build/gpu/floe-gpu-tests: build/gpu/gpu_test.o build/gpu/backend_test.o build/gpu/tree_test.o build/gpu/libfloegpu.a build/rel/libfloetables.a
	$(NVCC) $(NVFLAGS) $^ $(NV_CRYPTO) -lpthread -o $@
build/gpu/floe-k1-gpu: build/gpu/k1_bench.o build/gpu/libfloegpu.a build/rel/libfloetables.a
	$(NVCC) $(NVFLAGS) $^ $(NV_CRYPTO) -lpthread -o $@
build/gpu/floe-t1-gpu: build/gpu/t1_bench.o build/gpu/libfloegpu.a build/rel/libfloetables.a
	$(NVCC) $(NVFLAGS) $^ $(NV_CRYPTO) -lpthread -o $@
else
check-cuda:
	@echo "GPU=0: CUDA code not built"
endif

# device-bundle: the same programs with every library but glibc, libstdc++ and
# the NVIDIA driver linked in, for GPU hosts that have nothing installed
# (built on Debian 12, run on Ubuntu 24.04).  See docs/OPERATIONS.md.
BUNDLE_STATIC := -Wl,-Bstatic -levent_pthreads -levent_core -lprotobuf-c -lcheck_pic -lsubunit -lcrypto \
  -Wl,-Bdynamic -ldl -lrt -lm -pthread
BUNDLE_BINS := bundle/floed bundle/floe bundle/floe-itests bundle/floe-kbench bundle/floe-e1-local bundle/floe-bench bundle/floe-membw bundle/floe-mc bundle/floe-gpu-tests \
  bundle/floe-k1-gpu bundle/floe-t1-gpu bundle/layout_selftest
.PHONY: device-bundle
ifeq ($(GPU),1)
device-bundle: $(BUNDLE_BINS)
	@echo "device-bundle: $(BUNDLE_BINS)"
bundle/floed: $(call daemon_objs,rel) $(call proto_obj,rel) build/gpu/libfloegpu.a build/rel/libfloetables.a
	@mkdir -p bundle
	$(CC) $^ $(GPU_LINK) $(BUNDLE_STATIC) -o $@
bundle/floe: build/rel/client/cli.o build/rel/libfloe.a
	@mkdir -p bundle
	$(CC) $^ $(BUNDLE_STATIC) -o $@
bundle/floe-itests: $(call itest_objs,rel) build/rel/libfloe.a
	@mkdir -p bundle
	$(CC) $^ $(BUNDLE_STATIC) -o $@
bundle/floe-e1-local: build/rel/bench/e1_local.o build/gpu/libfloegpu.a build/rel/libfloetables.a
	@mkdir -p bundle
	$(CC) $^ $(GPU_LINK) $(BUNDLE_STATIC) -o $@
bundle/floe-kbench: build/rel/bench/kbench.o build/rel/libfloetables.a
	@mkdir -p bundle
	$(CC) $^ $(BUNDLE_STATIC) -o $@
bundle/floe-bench: $(call bench_objs,rel) build/rel/libfloe.a
	@mkdir -p bundle
	$(CC) $^ $(BUNDLE_STATIC) -o $@
bundle/floe-membw: build/rel/floe-membw
	@mkdir -p bundle
	cp $< $@
bundle/floe-mc: $(call mc_objs,rel) build/rel/libfloe.a
	@mkdir -p bundle
	$(CC) $^ $(BUNDLE_STATIC) -o $@
bundle/floe-gpu-tests bundle/floe-k1-gpu bundle/floe-t1-gpu bundle/layout_selftest: bundle/%: build/gpu/%
	@mkdir -p bundle
	cp $< $@
else
device-bundle:
	@echo "device-bundle needs nvcc (GPU=1)"; exit 1
endif

run: deps all
	./build/rel/floed $(RUN_ARGS)

PREFIX ?= /usr/local
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/etc/floe
	install -m 755 build/rel/floed build/rel/floe build/rel/floe-bench build/rel/floe-mc $(DESTDIR)$(PREFIX)/bin/
	install -m 644 build/rel/libfloe.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 build/rel/libfloe.so $(DESTDIR)$(PREFIX)/lib/libfloe.so.0
	ln -sf libfloe.so.0 $(DESTDIR)$(PREFIX)/lib/libfloe.so
	install -m 644 client/floe.h proto/floe_wire.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 config/floed.conf $(DESTDIR)$(PREFIX)/etc/floe/

test: all test-unit test-integration test-big test-bench

# floed, libfloe and the CLI end to end (sanitizer builds), on ephemeral ports.
test-integration: build/san/floe-itests build/san/floed build/san/floe build/san/floe-mc
	FLOED=build/san/floed FLOE_CLI=build/san/floe FLOE_MC=build/san/floe-mc ./build/san/floe-itests

# Every suite but the large one, under AddressSanitizer and UBSan.
test-unit: build/san/floe-tests
	CK_EXCLUDE_TAGS=big ./build/san/floe-tests

# 2^30 primary slots of 40-bit keys filled to 0.95: too big for the sanitizers.
test-big: build/rel/floe-tests
	CK_INCLUDE_TAGS=big ./build/rel/floe-tests

# floe-bench against a release floed that it starts: short checked SET, MAP and TREE runs.
test-bench: build/rel/floed build/rel/floe-bench
	bench/run-local.sh test

# The lock-free engine under ThreadSanitizer (not part of `make test`: slow).
# setarch -R: TSan needs the address layout that ASLR on newer kernels breaks.
test-tsan: build/tsan/floe-tests build/tsan/floed build/san/floe-itests build/san/floe build/san/floe-mc
	CK_FORK=no CK_EXCLUDE_TAGS=big setarch -R ./build/tsan/floe-tests
	FLOED=build/tsan/floed FLOE_CLI=build/san/floe FLOE_MC=build/san/floe-mc TSAN_OPTIONS=halt_on_error=1 setarch -R ./build/san/floe-itests

# E1- and E2-like floe-bench runs against a CPU floed on a free port (bench/run-local.sh).
bench: build/rel/floed build/rel/floe-bench
	bench/run-local.sh bench

bench-kernel: build/rel/floe-kbench
	./build/rel/floe-kbench

format:
	clang-format -i tables/*.[ch] daemon/*.[ch] client/*.[ch] proto/*.h bench/*.[ch] examples/*.c examples/mc/*.[ch] \
	  tests/unit/*.[ch] tests/integration/*.[ch] gpu/*.cu

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
