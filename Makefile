# floe - one entry point: deps, all, test, bench, clean (run, device-bundle and
# install arrive with the daemon and the GPU engine).
#
#   make deps     install the Debian packages floe builds with (root or sudo)
#   make          build the release libraries and tools into build/rel
#   make test     build with AddressSanitizer + UBSan and run every test that
#                 needs no GPU, then the large capacity test in the release build
#   make test-tsan  the unit tests under ThreadSanitizer (slow; not in `make test`)
#   make bench    run the CPU kernel benchmark (K1 scaled to this machine)
#   make GPU=0    build without CUDA, even where nvcc is present

DEPS_PKGS := libevent-dev libprotobuf-c-dev protobuf-c-compiler libssl-dev check pkg-config

CC      ?= gcc
NVCC    ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
GPU     ?= $(if $(NVCC),1,0)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
CSTD    := -std=gnu11 -pthread -MMD -MP -Itables
OPT_rel := -O2 -g
OPT_san := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
LDSAN   := -fsanitize=address,undefined
OPT_tsan := -O1 -g -fsanitize=thread

PKG_CRYPTO := $(shell pkg-config --libs libcrypto 2>/dev/null || echo -lcrypto)
PKG_CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
PKG_CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)

TABLES_SRC := tables/status.c tables/spec.c tables/pool.c tables/dedup.c tables/iceberg.c \
              tables/tablefile.c tables/backend.c tables/backend_cpu.c
TEST_SRC   := $(wildcard tests/unit/*.c)

tables_objs = $(patsubst %.c,build/$(1)/%.o,$(TABLES_SRC))
test_objs   = $(patsubst %.c,build/$(1)/%.o,$(TEST_SRC))

.PHONY: all deps test test-unit test-big test-tsan bench clean check-cuda format
.DEFAULT_GOAL := all

all: build/rel/libfloetables.a build/rel/floe-kbench build/rel/floe-tests check-cuda

deps:
	@if dpkg -s $(DEPS_PKGS) >/dev/null 2>&1; then \
	  echo "deps: $(DEPS_PKGS) already installed"; \
	else \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEPS_PKGS); \
	fi

build/rel/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_rel) $(PKG_CHECK_CFLAGS) -c $< -o $@
build/san/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_san) $(PKG_CHECK_CFLAGS) -c $< -o $@
build/tsan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT_tsan) $(PKG_CHECK_CFLAGS) -c $< -o $@

build/rel/libfloetables.a: $(call tables_objs,rel)
	ar rcs $@ $^
build/san/libfloetables.a: $(call tables_objs,san)
	ar rcs $@ $^
build/tsan/libfloetables.a: $(call tables_objs,tsan)
	ar rcs $@ $^

build/rel/floe-kbench: build/rel/bench/kbench.o build/rel/libfloetables.a
	$(CC) -pthread $^ $(PKG_CRYPTO) -lm -o $@

build/rel/floe-tests: $(call test_objs,rel) build/rel/libfloetables.a
	$(CC) -pthread $^ $(PKG_CHECK_LIBS) $(PKG_CRYPTO) -lm -o $@
build/san/floe-tests: $(call test_objs,san) build/san/libfloetables.a
	$(CC) -pthread $(LDSAN) $^ $(PKG_CHECK_LIBS) $(PKG_CRYPTO) -lm -o $@
build/tsan/floe-tests: $(call test_objs,tsan) build/tsan/libfloetables.a
	$(CC) -pthread -fsanitize=thread $^ $(PKG_CHECK_LIBS) $(PKG_CRYPTO) -lm -o $@

# The layout header is shared with CUDA: make sure nvcc compiles it.
ifeq ($(GPU),1)
check-cuda: build/gpu/layout_selftest
build/gpu/layout_selftest: gpu/layout_selftest.cu tables/layout.h
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O2 -Itables -cudart static \
	  -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 \
	  -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90,code=sm_90 \
	  -Xcompiler -Wall,-Wextra,-Werror $< -o $@
else
check-cuda:
	@echo "GPU=0: CUDA code not built"
endif

test: all test-unit test-big

# Every suite but the large one, under AddressSanitizer and UBSan.
test-unit: build/san/floe-tests
	CK_EXCLUDE_TAGS=big ./build/san/floe-tests

# 2^30 primary slots of 40-bit keys filled to 0.95: too big for the sanitizers.
test-big: build/rel/floe-tests
	CK_INCLUDE_TAGS=big ./build/rel/floe-tests

# The lock-free engine under ThreadSanitizer (not part of `make test`: slow).
# setarch -R: TSan needs the address layout that ASLR on newer kernels breaks.
test-tsan: build/tsan/floe-tests
	CK_FORK=no CK_EXCLUDE_TAGS=big setarch -R ./build/tsan/floe-tests

bench: build/rel/floe-kbench
	./build/rel/floe-kbench

format:
	clang-format -i tables/*.c tables/*.h bench/*.c tests/unit/*.c tests/unit/*.h gpu/*.cu

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
