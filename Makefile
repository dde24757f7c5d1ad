# Thin wrapper around CMake + ctest. `make test` is the README's test command.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all build test asan demo bench fuzz oracle clean install install-only

all: build

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Installs the oracle (npm, cached outside the repo) for the differential tests, then runs ctest.
oracle:
	@bash scripts/install-oracle.sh

test: build oracle
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer, except the three long
# CI-only differentials that run in `make test` under CI=true: the full-shape quantize comparison
# (1 GB of model through the oracle), the whole kjv-3m ladder against llama.cpp's figures, and the
# 22 hfref conversions against convert_hf_to_gguf.py's files (test_convert covers the converter's
# code under the sanitizers).
asan: oracle
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DIQF_SANITIZE=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 IQF_SANITIZED=1 ctest --output-on-failure -j $(JOBS) -E '^(test_quantize_oracle_full|cli_ladder_reference|cli_convert_hfref|cli_quality_guard)$$'

demo: build
	@bash scripts/demo.sh $(BUILD)/iqforge

bench: build oracle
	@bash scripts/bench.sh $(BUILD)

fuzz:
	@bash scripts/fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz

# Installs the binary, libiqforge (static and shared), iqforge.h and iqforge.pc under PREFIX.
PREFIX ?= /usr/local
install: build install-only
install-only:
	@cmake --install $(BUILD) --prefix "$(PREFIX)"
